"""Sweeps on Dask (docs/python.md): every (trace, config) pair runs as a task on a LocalCluster
of two workers and lands in the Parquet dataset once, with the inputs and every output field; a
second call resumes (runs only the pairs missing); a worker killed mid-sweep costs nothing; a
spec with an unreadable trace fails before any task runs, naming the file; the command line
`heterarchy sweep` does the same from a TOML spec."""

import os
import signal
import sys
import threading
import time

import pandas as pd
import pytest

from helpers import run

heterarchy_py = pytest.importorskip("heterarchy", reason="the Python package is not installed: pip install ./python (scripts/test does)")
distributed = pytest.importorskip("dask.distributed")

SIM_CONFIGS = [
    {"kind": "sim", "policy": policy, "size": size}
    for policy in ("lru", "s3fifo", "arc")
    for size in ("0.01", "0.1")
]


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
    with distributed.Client(cluster) as client:
        yield client
    cluster.close()


@pytest.fixture(scope="module")
def traces(zipf_trace):
    return [zipf_trace(0.8, keys=4_000, requests=40_000, seed=s) for s in (1, 2)]


def parts(output):
    return sorted(output.glob("part-*.parquet"))


def test_every_pair_lands_once_with_inputs_and_outputs(client, traces, tmp_path):
    output = tmp_path / "results.parquet"
    frame = heterarchy_py.sweep(traces, SIM_CONFIGS, client=client, output=output, progress=False)
    assert len(frame) == len(traces) * len(SIM_CONFIGS)
    assert frame["pair_id"].is_unique
    assert {"trace", "kind", "config.policy", "config.size", "policy", "cache_size", "miss_ratio",
            "byte_miss_ratio"} <= set(frame.columns)
    # Each row is what the call alone gives.
    direct = heterarchy_py.sim(traces[1], "s3fifo", "0.1")
    row = frame[(frame["trace"] == str(traces[1])) & (frame["config.policy"] == "s3fifo")
                & (frame["config.size"] == "0.1")]
    assert len(row) == 1
    for field in direct.columns:
        assert row.iloc[0][field] == direct.iloc[0][field], field
    assert pd.read_parquet(output).equals(frame)


def test_a_sweep_resumes_from_the_rows_already_written(client, traces, tmp_path):
    output = tmp_path / "results.parquet"
    first = heterarchy_py.sweep(traces[:1], SIM_CONFIGS[:3], client=client, output=output, progress=False)
    assert len(first) == 3
    written = parts(output)
    whole = heterarchy_py.sweep(traces, SIM_CONFIGS, client=client, output=output, progress=False)
    assert len(whole) == 12 and whole["pair_id"].is_unique
    assert set(written) <= set(parts(output))
    again = parts(output)
    assert len(heterarchy_py.sweep(traces, SIM_CONFIGS, client=client, output=output, progress=False)) == 12
    assert parts(output) == again, "a finished sweep runs nothing and writes nothing"


def test_a_killed_worker_costs_no_row(zipf_trace, tmp_path):
    trace = zipf_trace(0.9, keys=100_000, requests=600_000, seed=11)
    configs = [{"kind": "sim", "policy": p, "size": s}
               for p in ("lru", "fifo", "clock", "s3fifo", "arc", "sieve")
               for s in ("0.001", "0.01", "0.1")]
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0")
    with distributed.Client(cluster) as client:
        pids = client.run(os.getpid)
        output = tmp_path / "results.parquet"
        result = {}
        sweeping = threading.Thread(target=lambda: result.update(
            frame=heterarchy_py.sweep([trace], configs, client=client, output=output, progress=False)))
        sweeping.start()
        # Kill one worker while tasks are running on it (its nanny starts a new one).
        deadline = time.monotonic() + 30
        while not any(client.processing().values()) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        victim = next(iter(pids.values()))
        assert sweeping.is_alive(), "the sweep ended before a worker could be killed"
        os.kill(victim, signal.SIGKILL)
        sweeping.join(timeout=300)
        assert not sweeping.is_alive()
        assert victim not in client.run(os.getpid).values()
    cluster.close()
    frame = result["frame"]
    assert len(frame) == len(configs)
    assert frame["pair_id"].is_unique
    assert set(frame["config.policy"] + "@" + frame["config.size"]) == {f"{c['policy']}@{c['size']}" for c in configs}


def test_bad_specs_fail_before_any_task_naming_the_culprit(client, traces, tmp_path):
    output = tmp_path / "results.parquet"
    missing = tmp_path / "no-such-trace.bin"
    with pytest.raises(ValueError, match="no-such-trace.bin"):
        heterarchy_py.sweep([traces[0], missing], SIM_CONFIGS, client=client, output=output)
    with pytest.raises(ValueError, match="kind"):
        heterarchy_py.sweep(traces, [{"kind": "mrc"}], client=client, output=output)
    with pytest.raises(ValueError, match="polcy"):
        heterarchy_py.sweep(traces, [{"kind": "sim", "polcy": "lru"}], client=client, output=output)
    with pytest.raises(ValueError, match="workload"):
        heterarchy_py.sweep(traces, [{"kind": "simulate", "config": "h.toml", "workload": "x"}], client=client, output=output)
    with pytest.raises(TypeError, match="config 0"):
        heterarchy_py.sweep(traces, ["lru"], client=client, output=output)
    assert not output.exists()


def test_sizing_and_simulate_pairs(client, heterarchy, tmp_path):
    block = tmp_path / "block.csv"
    run(heterarchy, "trace", "generate", "block-io:requests=20000,write=0.3,seed=5", "-o", block)
    hierarchy = {"seed": 1, "cache": {"mode": "wt", "policy": "lru"},
                 "tier": [{"device": "flashsim-50", "size": "8MiB"}, {"device": "flashsim-25"}],
                 "load": {"outstanding": 8, "requests": 5000}}
    configs = [{"kind": "sizing", "budget": "1", "config": "FastDRAM/FastSSD/SlowHDD", "search": "cydonia"},
               {"kind": "simulate", "config": hierarchy}]
    frame = heterarchy_py.sweep([block], configs, client=client, output=tmp_path / "r.parquet", progress=False)
    assert sorted(frame["kind"]) == ["simulate", "sizing"]
    sized = frame[frame["kind"] == "sizing"].iloc[0]
    alone = heterarchy_py.sizing(block, budget="1", config="FastDRAM/FastSSD/SlowHDD", search="cydonia").iloc[0]
    assert sized["mean_latency_us"] == alone["mean_latency_us"]
    simulated = frame[frame["kind"] == "simulate"].iloc[0]
    assert simulated["throughput_ops"] == heterarchy_py.simulate(hierarchy, block)["throughput_ops"]


def test_the_command_line_runs_a_toml_spec(heterarchy, traces, tmp_path):
    spec = tmp_path / "spec.toml"
    names = [os.path.relpath(t, tmp_path) for t in traces]
    spec.write_text(f"traces = {names!r}\n[[grid]]\nkind = \"sim\"\npolicy = [\"lru\", \"sieve\"]\nsize = [\"0.01\", \"0.1\"]\n")
    env = {**os.environ, "HETERARCHY_PYTHON": sys.executable}
    import subprocess

    done = subprocess.run([str(heterarchy), "sweep", str(spec), "-o", str(tmp_path / "out.parquet")],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith("8 rows")
    assert len(pd.read_parquet(tmp_path / "out.parquet")) == 8
    spec.write_text("traces = [\"missing.bin\"]\n[[config]]\nkind = \"sim\"\n")
    done = subprocess.run([str(heterarchy), "sweep", str(spec)], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 1
    assert "missing.bin" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "results.parquet").exists()
