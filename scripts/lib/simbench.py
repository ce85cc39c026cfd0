"""What the simulation benchmarks share (scripts/bench-sim, scripts/bench-timed): their Zipf
trace, heterarchy run and timed, and the verdicts' wording."""

import resource
import subprocess
import time
from pathlib import Path

from needs import fail

OBJECT_SIZE = 4096


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def heterarchy(binary: Path, *args) -> tuple[subprocess.CompletedProcess, float, float]:
    """Runs `binary` with `args`; returns the finished process, its wall-clock and its CPU seconds."""
    cpu_before = children_cpu_seconds()
    start = time.perf_counter()
    done = subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        fail(f"heterarchy {' '.join(map(str, args))} failed: {done.stderr.strip()}")
    return done, seconds, children_cpu_seconds() - cpu_before


def generate(binary: Path, path: Path, requests: int, keys: int) -> str:
    """Writes the Zipf(0.9) trace with heterarchy's generator, or numpy's where that fails; says which."""
    spec = f"zipf:theta=0.9,keys={keys},requests={requests},size={OBJECT_SIZE},seed=1"
    command = [str(binary), "trace", "generate", spec, "-o", str(path), "--output-format", "oracleGeneral"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode == 0:
        return "heterarchy trace generate"
    print(f"heterarchy trace generate failed ({done.stderr.strip()}); using numpy instead")
    from zipf_trace import write_zipf_trace  # tests/python, on the scripts' path

    write_zipf_trace(path, 0.9, keys, requests, seed=1, object_size=OBJECT_SIZE)
    return "numpy (tests/python/zipf_trace.py)"


def warm_page_cache(path: Path):
    with open(path, "rb") as trace:
        while trace.read(1 << 24):
            pass


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"
