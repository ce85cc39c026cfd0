"""Sweeps: every (trace, config) pair as a task on a Dask cluster, results streamed into
Parquet, resumable (docs/architecture.md, "Python API").

A config is a dict with ``kind`` (``sim``, ``simulate`` or ``sizing``) and that command's
options as keyword arguments of the Python function of the same name (``{"kind": "sim",
"policy": "lru", "size": "16mb"}``). Pairs run in groups, each group a Dask task; each pair is
one row: the inputs (``trace``, ``kind``, each option as ``config.NAME``, a ``pair_id``) and
every output field, nested ones flattened with dots and lists kept as JSON text. ``output`` is a Parquet dataset, a folder of
part files that ``pandas.read_parquet`` reads whole; a part is written whole and renamed into
place, so a sweep stopped at any moment resumes from the rows already there.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import sys
import time
import tomllib
import uuid
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

import pandas as pd

#: The commands a config may run.
KINDS = ("sim", "simulate", "sizing")
#: Rows gathered before a part file is written, and the longest a finished row waits.
PART_ROWS = 32
PART_SECONDS = 2.0
#: Tasks per worker thread when the pairs are grouped into tasks by themselves: enough that the
#: last tasks leave little idle time, few enough that the scheduler's cost per task (a few
#: milliseconds of CPU, taken from the same cores) stays small beside the work.
TASKS_PER_THREAD = 16


def pair_id(trace: str, config: Mapping[str, Any]) -> str:
    """A pair's identity across runs: a hash of the trace's path and the config."""
    text = json.dumps([trace, dict(config)], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def check(traces: Sequence[Any], configs: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[dict]]:
    """Checks every trace and config before anything runs: each trace opens and yields a
    request, each config names a known kind and only that command's options. Raises
    ``ValueError`` (``TypeError`` for a config that is no dict) naming the culprit."""
    from . import _api

    checked_traces = []
    for trace in traces:
        path = os.fspath(trace)
        try:
            next(iter(_api.read_trace(path)), None)
        except (OSError, ValueError) as error:
            raise ValueError(f"sweep: trace {path}: {error}") from None
        checked_traces.append(path)
    checked_configs = []
    for index, config in enumerate(configs):
        if not isinstance(config, Mapping):
            raise TypeError(f"sweep: config {index} is a {type(config).__name__}, expected a dict")
        kind = config.get("kind")
        if kind not in KINDS:
            raise ValueError(f"sweep: config {index}: kind {kind!r}, expected one of {', '.join(KINDS)}")
        known = _api._options((kind,))
        for name in config:
            if name != "kind" and (name not in known or known[name][0]):
                raise ValueError(f"sweep: config {index} ({kind}): unknown option {name!r}")
        if kind == "simulate" and ("config" not in config or "workload" in config):
            raise ValueError(f"sweep: config {index} (simulate): needs a hierarchy as \"config\", and takes the trace as its workload")
        checked_configs.append(dict(config))
    return checked_traces, checked_configs


def run_pairs(pairs: Sequence[tuple[str, Mapping[str, Any]]]) -> list[dict]:
    """Runs a group of pairs one after another (one task of a sweep) and returns their rows."""
    return [run_pair(trace, config) for trace, config in pairs]


def run_pair(trace: str, config: Mapping[str, Any]) -> dict:
    """Runs one pair in this process and returns its row."""
    from . import _api

    options = {name: value for name, value in config.items() if name != "kind"}
    kind = config["kind"]
    # One core per task: the cluster spreads the tasks over the cores.
    if kind == "sim":
        options.setdefault("threads", 1)
        options.setdefault("inline_decode", True)
        rows = _api.command(["sim"], trace, **options)
    elif kind == "sizing":
        options.setdefault("threads", 1)
        rows = _api.command(["sizing"], trace, **options)
    else:
        rows = [_api.simulate(options.pop("config"), trace, **options)]
    if len(rows) != 1:
        raise ValueError(
            f"{kind} on {trace} gave {len(rows)} rows; a sweep config names one policy, size or "
            "budget (list the grid as several configs)"
        )
    row = {"pair_id": pair_id(trace, config), "trace": trace, "kind": kind}
    row.update({f"config.{name}": _cell(value) for name, value in config.items() if name != "kind"})
    row.update(_flatten(rows[0]))
    return row


def _cell(value: Any) -> Any:
    """A value as one Parquet cell: scalars as they are, anything else as JSON text."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return json.dumps(value, default=str)


def _flatten(document: Mapping[str, Any], prefix: str = "") -> dict:
    flat = {}
    for name, value in document.items():
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = _cell(value)
    return flat


def done_pairs(output: Path) -> set[str]:
    """The pair ids already in the dataset at ``output`` (none if there is none)."""
    if not output.is_dir():
        return set()
    done: set[str] = set()
    for part in sorted(output.glob("part-*.parquet")):
        done.update(pd.read_parquet(part, columns=["pair_id"])["pair_id"])
    return done


def _write_part(output: Path, rows: list[dict]) -> None:
    output.mkdir(parents=True, exist_ok=True)
    name = f"part-{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
    temporary = output / f".{name}.tmp"
    pd.DataFrame.from_records(rows).to_parquet(temporary, index=False)
    os.replace(temporary, output / name)


def sweep(
    traces: Iterable[Any],
    configs: Iterable[Mapping[str, Any]],
    client: Any = None,
    output: Any = "results.parquet",
    *,
    pairs_per_task: Optional[int] = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Runs every (trace, config) pair as a Dask task on ``client`` (a
    ``dask.distributed.Client``; when ``None``, a LocalCluster in this process with one
    single-threaded worker per core), streams the rows into the Parquet dataset ``output``, skips the pairs already
    there, and returns the whole dataset. A task whose worker dies is run again elsewhere; each
    pair is written once. A task runs ``pairs_per_task`` pairs (by default, as many as give
    each worker thread about 16 tasks)."""
    from dask.distributed import Client, LocalCluster

    traces, configs = check(list(traces), list(configs))
    output = Path(output)
    done = done_pairs(output)
    pending = {}
    for trace, config in itertools.product(traces, configs):
        key = pair_id(trace, config)
        if key not in done and key not in pending:
            pending[key] = (trace, config)
    own_cluster = None
    if client is None and pending:
        # Workers as threads of this process: a task spends its time in Rust with the GIL
        # released, and threads spare the cores the per-process costs of worker processes
        # (scripts/bench-python measures both).
        own_cluster = LocalCluster(n_workers=os.cpu_count() or 1, threads_per_worker=1, processes=False)
        client = Client(own_cluster)
    try:
        if pending:
            if pairs_per_task is None:
                threads = sum(client.nthreads().values()) or 1
                pairs_per_task = max(1, len(pending) // (threads * TASKS_PER_THREAD))
            pairs = list(pending.items())
            futures = [
                client.submit(
                    run_pairs,
                    [pair for _, pair in pairs[start:start + pairs_per_task]],
                    key=f"heterarchy-{pairs[start][0]}",
                    pure=False,
                    retries=3,
                )
                for start in range(0, len(pairs), pairs_per_task)
            ]
            _gather(futures, output, len(done), len(pending), progress)
    finally:
        if own_cluster is not None:
            client.close()
            own_cluster.close()
    return pd.read_parquet(output) if output.is_dir() else pd.DataFrame()


def _gather(futures, output: Path, before: int, total: int, progress: bool) -> None:
    """Writes each finished task's rows into `output`, a part at a time."""
    from dask.distributed import as_completed

    rows: list[dict] = []
    finished = 0
    last_write = time.monotonic()
    for future in as_completed(futures):
        found = future.result()
        rows.extend(found)
        finished += len(found)
        if len(rows) >= PART_ROWS or time.monotonic() - last_write >= PART_SECONDS:
            _write_part(output, rows)
            rows, last_write = [], time.monotonic()
        if progress:
            print(f"\rsweep: {finished}/{total} pairs done ({before} from before)", end="", file=sys.stderr, flush=True)
    if rows:
        _write_part(output, rows)
    if progress:
        print(file=sys.stderr)


def expand(spec: Mapping[str, Any], base: Path) -> tuple[list[str], list[dict]]:
    """A sweep spec (TOML, see ``main``) as traces and configs: ``traces`` relative to the
    spec's folder, ``[[config]]`` tables as they are, and ``[[grid]]`` tables expanded into one
    config per combination of their list values."""
    unknown = set(spec) - {"traces", "config", "grid"}
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(sorted(unknown))}; expected traces, [[config]], [[grid]]")
    traces = spec.get("traces")
    if not isinstance(traces, list) or not traces or not all(isinstance(t, str) for t in traces):
        raise ValueError("traces: expected a non-empty list of file names")
    configs = [dict(config) for config in spec.get("config", [])]
    for grid in spec.get("grid", []):
        names = list(grid)
        choices = [value if isinstance(value, list) else [value] for value in grid.values()]
        configs.extend(dict(zip(names, combination)) for combination in itertools.product(*choices))
    if not configs:
        raise ValueError("no [[config]] or [[grid]] table: nothing to run")
    for config in configs:
        hierarchy = config.get("config")
        # A hierarchy file, like a trace, is named relative to the spec.
        if config.get("kind") == "simulate" and isinstance(hierarchy, str) and "=" not in hierarchy and "\n" not in hierarchy:
            config["config"] = str((base / hierarchy).resolve())
    return [str((base / trace).resolve()) for trace in traces], configs


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``heterarchy sweep SPEC.toml [--scheduler tcp://HOST:PORT] [-o results.parquet]``."""
    parser = argparse.ArgumentParser(
        prog="heterarchy sweep",
        description="Run every (trace, config) pair of a sweep spec on a Dask cluster into Parquet.",
    )
    parser.add_argument("spec", type=Path, help="the sweep spec (TOML: traces, [[config]], [[grid]])")
    parser.add_argument("--scheduler", help="a Dask scheduler's address (default: a LocalCluster here)")
    parser.add_argument("-o", "--output", type=Path, default=Path("results.parquet"), help="the Parquet dataset (a folder)")
    args = parser.parse_args(argv)
    try:
        with open(args.spec, "rb") as file:
            spec = tomllib.load(file)
        traces, configs = expand(spec, args.spec.parent)
        client = None
        if args.scheduler:
            from dask.distributed import Client

            client = Client(args.scheduler)
        frame = sweep(traces, configs, client=client, output=args.output, progress=sys.stderr.isatty())
    except (OSError, ValueError, TypeError, tomllib.TOMLDecodeError) as error:
        print(f"error: {args.spec}: {error}".replace("\n", " "), file=sys.stderr)
        return 1
    print(f"{len(frame)} rows in {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
