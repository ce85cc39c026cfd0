"""The command line's jobs as Python functions (docs/architecture.md, "Python API").

Each function runs the same Rust code as its command, in this process, and returns what that
command prints with ``--format json`` (``report=PATH`` also writes the command's HTML report): tables as pandas DataFrames, documents as dicts. Keyword
arguments are the command's flags with ``_`` for ``-`` (``ignore_obj_size=True`` is
``--ignore-obj-size``); ``None`` leaves a flag at the command's default. A failed command raises
:class:`HeterarchyError` (a ``ValueError``) carrying the command line's one-line message.
"""

from __future__ import annotations

import json
import os
import tempfile
from functools import lru_cache
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

import pandas as pd

from . import _native
from ._native import HeterarchyError, TraceIter

PathArg = Union[str, "os.PathLike[str]"]
#: A policy by name with its parameters (``"s3fifo:small-size-ratio=0.2"``), or as a dict
#: (``{"name": "s3fifo", "small-size-ratio": 0.2}``).
PolicyArg = Union[str, Mapping[str, Any]]


def run(*args: Any) -> list:
    """Runs ``heterarchy ARGS...`` in this process and returns the JSON documents it prints
    (a command run with ``--format json`` prints one)."""
    return json.loads(_native.run([_text("args", arg) for arg in args]))


@lru_cache(maxsize=None)
def _options(path: tuple) -> dict:
    """The flags of the subcommand at ``path``: id -> (positional, takes a value)."""
    return {name: (positional, takes) for name, positional, takes in _native.command_options(list(path))}


def _text(name: str, value: Any) -> str:
    """One flag's value as the command line writes it."""
    if isinstance(value, bool):
        raise TypeError(f"{name}: expected a value, got {value!r}")
    if isinstance(value, (str, int, float)):
        return str(value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, Mapping):
        return _policy_text(name, value)
    if isinstance(value, Iterable):
        return ",".join(_text(name, item) for item in value)
    raise TypeError(f"{name}: expected a string, number, path or list, got {type(value).__name__}")


def _policy_text(name: str, policy: Mapping[str, Any]) -> str:
    """``{"name": "s3fifo", "small_size_ratio": 0.2}`` as ``s3fifo:small-size-ratio=0.2``."""
    params = dict(policy)
    label = params.pop("name", None)
    if not isinstance(label, str):
        raise TypeError(f"{name}: a policy given as a dict needs its \"name\" as a string")
    if not params:
        return label
    pairs = ",".join(f"{key.replace('_', '-')}={_text(name, value)}" for key, value in params.items())
    return f"{label}:{pairs}"


def command(path: Sequence[str], *positionals: Any, **options: Any) -> Any:
    """Runs the subcommand at ``path`` with these positional arguments and flags and returns
    its one JSON document; every function of this module is this with a signature."""
    path = tuple(path)
    known = _options(path)
    argv = list(path)
    argv.extend(_text(path[-1], value) for value in positionals)
    for name, value in options.items():
        if name not in known or known[name][0]:
            raise TypeError(f"{' '.join(path)}: unexpected keyword argument '{name}'")
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        if known[name][1]:
            argv += [flag, _text(name, value)]
        elif value is True:
            argv.append(flag)
        else:
            raise TypeError(f"{name}: expected True or False, got {value!r}")
    if "format" in known:
        argv += ["--format", "json"]
    documents = run(*argv)
    if len(documents) != 1:
        raise HeterarchyError(f"{' '.join(path)} printed {len(documents)} results, expected one")
    return documents[0]


def _frame(rows: list, **attrs: Any) -> pd.DataFrame:
    frame = pd.DataFrame.from_records(rows)
    frame.attrs.update(attrs)
    return frame


def read_trace(
    path: PathArg,
    *,
    trace_format: Optional[str] = None,
    block_size: str = "4k",
    no_split: bool = False,
    trace_type_params: Optional[str] = None,
) -> TraceIter:
    """The requests of a trace file, as an iterator of :class:`TraceRequest`; any format the
    command line reads (compressed too), with the same options."""
    if not isinstance(no_split, bool):
        raise TypeError(f"no_split: expected True or False, got {no_split!r}")
    return TraceIter(os.fspath(path), trace_format, block_size, no_split, trace_type_params)


def trace_stats(
    trace: PathArg,
    *,
    trace_format: Optional[str] = None,
    block_size: Optional[str] = None,
    no_split: bool = False,
    trace_type_params: Optional[str] = None,
    report: Optional[PathArg] = None,
) -> dict:
    """``heterarchy trace stats``: counts, working set, sizes, reuse and, for a block trace,
    its I/Os' measures; ``report`` also writes the HTML report there."""
    return command(
        ["trace", "stats"], trace, trace_format=trace_format, block_size=block_size,
        no_split=no_split, trace_type_params=trace_type_params, report=report,
    )


def sim(
    trace: PathArg,
    policies: Union[PolicyArg, Sequence[PolicyArg]] = "lru",
    sizes: Union[str, float, int, Sequence[Union[str, float, int]]] = "auto",
    *,
    admission: Optional[PolicyArg] = None,
    ignore_obj_size: bool = False,
    warmup: Optional[int] = None,
    threads: Optional[int] = None,
    inline_decode: bool = False,
    trace_format: Optional[str] = None,
    block_size: Optional[str] = None,
    no_split: bool = False,
    trace_type_params: Optional[str] = None,
    report: Optional[PathArg] = None,
) -> pd.DataFrame:
    """``heterarchy sim``: one row per (policy, size) with ``sim --format json``'s fields.

    ``policies``: names with parameters (``"lru"``, ``"s3fifo:small-size-ratio=0.2"``,
    ``{"name": "lru-k", "k": 2}``) or ``"all"``. ``sizes``: bytes with a unit (``"64mb"``),
    fractions of the working set (``0.01``), or ``"auto"``."""
    rows = command(
        ["sim"], trace, policy=policies, size=sizes, admission=admission,
        ignore_obj_size=ignore_obj_size, warmup=warmup, threads=threads,
        inline_decode=inline_decode, trace_format=trace_format, block_size=block_size, no_split=no_split,
        trace_type_params=trace_type_params, report=report,
    )
    return _frame(rows)


def mrc(
    trace: PathArg,
    *,
    method: Optional[str] = None,
    rate: Optional[float] = None,
    max_keys: Optional[int] = None,
    policy: Optional[PolicyArg] = None,
    admission: Optional[PolicyArg] = None,
    points: Optional[int] = None,
    size: Optional[Union[str, int, Sequence[Union[str, int]]]] = None,
    ignore_obj_size: bool = False,
    trace_format: Optional[str] = None,
    block_size: Optional[str] = None,
    no_split: bool = False,
    trace_type_params: Optional[str] = None,
    report: Optional[PathArg] = None,
) -> pd.DataFrame:
    """``heterarchy mrc``: the miss-ratio curve, one row per point; ``method`` is ``exact``
    or ``shards`` (LRU's curve in one pass), ``policy`` simulates any other policy's. The
    frame's ``attrs`` hold the rest of the command's JSON (method, sampling rate, reuse
    histogram)."""
    document = command(
        ["mrc"], trace, method=method, rate=rate, max_keys=max_keys, policy=policy,
        admission=admission, points=points, size=size, ignore_obj_size=ignore_obj_size,
        trace_format=trace_format, block_size=block_size, no_split=no_split,
        trace_type_params=trace_type_params, report=report,
    )
    points_found = document.pop("points")
    return _frame(points_found, **document)


def policies() -> dict:
    """Every eviction policy and admission filter: ``{"policy": {name: entry}, "admission":
    {name: entry}}`` (a policy and a filter may share a name, as ``size`` does), each entry with
    its aliases, whether it takes an admission filter, its source, and its parameters as a dict
    of name -> ``{"default", "range", "doc"}``."""
    found: dict = {"policy": {}, "admission": {}}
    for entry in command(["policies"]):
        params = {p["name"]: {k: v for k, v in p.items() if k != "name"} for p in entry["params"]}
        found[entry["kind"]][entry["name"]] = {**entry, "params": params}
    return found


def simulate(
    config: Union[PathArg, Mapping[str, Any]],
    workload: PathArg,
    *,
    trace_format: Optional[str] = None,
    trace_type_params: Optional[str] = None,
    outstanding: Optional[int] = None,
    speedup: Optional[float] = None,
    requests: Optional[int] = None,
    warmup: Optional[int] = None,
    seed: Optional[int] = None,
    split: Optional[str] = None,
    threads: Optional[int] = None,
    report: Optional[PathArg] = None,
) -> dict:
    """``heterarchy simulate``: a timed simulation of a hierarchy on device models.
    ``config`` is a TOML file's path, TOML text (anything with ``=`` or a newline), or the
    same as a dict; ``workload`` a trace file or a generator spec (``zipf:theta=0.9,...``)."""
    options = dict(
        workload=workload, trace_format=trace_format, trace_type_params=trace_type_params,
        outstanding=outstanding, speedup=speedup, requests=requests, warmup=warmup, seed=seed,
        split=split, threads=threads, report=report,
    )
    if isinstance(config, Mapping):
        text = _native.toml_from_json(json.dumps(config))
    elif isinstance(config, str) and ("=" in config or "\n" in config):
        text = config
    else:
        return command(["simulate"], config=config, **options)
    # Written beside the working directory's files, so that relative paths in it resolve as
    # they would for a file there.
    with tempfile.NamedTemporaryFile("w", suffix=".toml", prefix=".heterarchy-", dir=".", delete=False) as file:
        file.write(text)
    try:
        return command(["simulate"], config=file.name, **options)
    finally:
        os.unlink(file.name)


def experiments() -> pd.DataFrame:
    """The seed papers' figures that :func:`experiment` reproduces: name, figure, description."""
    return _frame(command(["experiment"], "list"))


def experiment(
    name: str,
    *,
    scale: Optional[float] = None,
    threads: Optional[int] = None,
    codec_costs: Optional[str] = None,
    report: Optional[PathArg] = None,
) -> pd.DataFrame:
    """``heterarchy experiment NAME``: one seed paper's figure reproduced on device models,
    one row per simulated point."""
    return _frame(command(["experiment"], name, scale=scale, threads=threads, codec_costs=codec_costs, report=report))


def device_probe(
    device: str,
    *,
    op: Optional[str] = None,
    size: Optional[str] = None,
    qd: Optional[Union[str, int, Sequence[int]]] = None,
    offset: Optional[str] = None,
    sequential: bool = False,
    preconditioned: Optional[str] = None,
    seed: Optional[int] = None,
    report: Optional[PathArg] = None,
) -> pd.DataFrame:
    """``heterarchy device probe``: what a device model (a preset or a ``.toml`` file) does at
    each queue depth, one row per depth; ``attrs`` hold what was probed."""
    document = command(
        ["device", "probe"], device, op=op, size=size, qd=qd, offset=offset,
        sequential=sequential, preconditioned=preconditioned, seed=seed, report=report,
    )
    return _frame(document.pop("results"), **document)


def sizing(
    trace: PathArg,
    *more_traces: PathArg,
    budget: Union[str, Sequence[str]],
    config: Optional[str] = None,
    devices: Optional[str] = None,
    policy: Optional[str] = None,
    search: Optional[str] = None,
    threads: Optional[int] = None,
    report: Optional[PathArg] = None,
    trace_format: Optional[str] = None,
    block_size: Optional[str] = None,
    no_split: bool = False,
    trace_type_params: Optional[str] = None,
) -> pd.DataFrame:
    """``heterarchy sizing``: which tier sizes each budget buys for block traces, one row per
    (trace, configuration, budget)."""
    return _frame(command(
        ["sizing"], trace, *more_traces, budget=budget, config=config, devices=devices,
        policy=policy, search=search, threads=threads, report=report,
        trace_format=trace_format, block_size=block_size, no_split=no_split,
        trace_type_params=trace_type_params,
    ))


def trace_sample(
    trace: PathArg,
    output: PathArg,
    *,
    rate: float,
    method: Optional[str] = None,
    bits: Optional[int] = None,
    seed: Optional[int] = None,
    iterations: Optional[int] = None,
    output_format: Optional[str] = None,
    trace_format: Optional[str] = None,
    block_size: Optional[str] = None,
    no_split: bool = False,
    trace_type_params: Optional[str] = None,
) -> dict:
    """``heterarchy trace sample``: writes a spatial or BlkSample sample of a block trace to
    ``output`` and returns its report and feature errors."""
    return command(
        ["trace", "sample"], trace, output=output, rate=rate, method=method, bits=bits,
        seed=seed, iterations=iterations, output_format=output_format,
        trace_format=trace_format, block_size=block_size, no_split=no_split,
        trace_type_params=trace_type_params,
    )


def trace_compare(full: PathArg, sample: PathArg, *, rate: float, report: Optional[PathArg] = None) -> dict:
    """``heterarchy trace compare``: a sample's features and hit rates against its full
    trace."""
    return command(["trace", "compare"], full, sample, rate=rate, report=report)
