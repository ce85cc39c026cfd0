"""What the key-value benchmarks share (scripts/bench-kv, scripts/bench-floor): the load
generator's settings and runs, the cores the generator and the server are pinned to, and the
servers' command lines."""

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "python"))
from needs import fail  # noqa: E402
from helpers import cpu_seconds, free_port  # noqa: E402

# name -> (value bytes, keys): the keyspace fits both servers' 1 GiB with room to spare.
WORKLOADS = {"100 B": (100, 200_000), "4 KiB": (4096, 50_000)}
KEY_BYTES = 32
GET_RATIO = 0.9
CONNECTIONS = 64
MEMORY = "1024"  # MiB, for memcached's -m and our --memory
MAX_CONNECTIONS = 4096
FIGURES = ("ops_per_sec", "latency_us_p99", "cpu_us_per_op")


def distinct_ports(count: int) -> list:
    """`count` different free ports (two probes in a row may be given the same one)."""
    ports = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def cores() -> tuple:
    """(the load generator's core, the server's): 0 and 1 on a machine of two or more cores
    with taskset, so that each runs on a core of its own; no pinning otherwise."""
    if (os.cpu_count() or 1) >= 2 and shutil.which("taskset"):
        return 0, 1
    return None, None


def pinned(command: list, core: int | None) -> list:
    return ["taskset", "-c", str(core), *command] if core is not None else command


def heterarchy_command(binary: Path, port: int) -> list:
    """`heterarchy serve kv` as the benchmarks run it: one worker thread, values in DRAM."""
    return [binary, "serve", "kv", "--listen", f"127.0.0.1:{port}", "--threads", 1,
            "--memory", f"{MEMORY}m", "--max-connections", MAX_CONNECTIONS]


def loadgen(binary: Path, port: int, core: int | None, value_bytes: int, keys: int, seconds: float,
            prefill: bool, get_ratio: float = GET_RATIO) -> dict:
    """One run of our load generator against 127.0.0.1:`port`; its JSON report."""
    command = [
        binary, "loadgen", "kv", "--server", f"127.0.0.1:{port}", "--connections", CONNECTIONS,
        "--pipeline", 1, "--keys", keys, "--key-bytes", KEY_BYTES, "--value-bytes", value_bytes,
        "--get-ratio", get_ratio, "--warmup", "0s", "--duration", f"{seconds}s", "--format", "json",
    ]
    if not prefill:
        command.append("--no-prefill")
    command = pinned(list(map(str, command)), core)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 120)
    except subprocess.TimeoutExpired:
        fail(f"{' '.join(command)} ran for more than {seconds + 120} s")
    if done.returncode != 0:
        fail(f"{' '.join(command)} failed: {done.stderr.strip()}")
    report = json.loads(done.stdout)
    if report["errors"]:
        fail(f"{report['errors']} errors from {' '.join(command)}, the first: {report['first_error']}")
    return report


def measure(binary: Path, server, core: int | None, value_bytes: int, keys: int, seconds: float,
            get_ratio: float = GET_RATIO) -> dict:
    """A measured run: throughput, p99 and the server's CPU time per operation."""
    before = cpu_seconds(server.pid)
    report = loadgen(binary, server.port, core, value_bytes, keys, seconds, prefill=False, get_ratio=get_ratio)
    cpu = cpu_seconds(server.pid) - before
    if report["ops"] == 0 or report["get_misses"]:
        fail(f"{report['ops']} operations, {report['get_misses']} get misses over a full keyspace: {report}")
    return {
        "ops_per_sec": report["ops_per_sec"],
        "latency_us_p99": report["latency_us_p99"],
        "cpu_us_per_op": cpu / report["ops"] * 1e6,
    }


def median_run(runs: list) -> dict:
    """Each figure's median over the runs."""
    return {name: statistics.median(run[name] for run in runs) for name in FIGURES}


def paired_ratios(runs: list, baselines: list) -> list:
    """Each figure's median over the pairs (runs[i], baselines[i]) of runs[i] / baselines[i]."""
    return [statistics.median(run[name] / base[name] for run, base in zip(runs, baselines)) for name in FIGURES]
