"""What the NBD benchmarks share (scripts/bench-nbd, scripts/bench-floor): fio against a server,
the servers, and the hot-set configuration whose reads the floor is measured under."""

import json
import os
import subprocess
import sys
import urllib.request
from contextlib import ExitStack, contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "python"))
from needs import fail  # noqa: E402
from helpers import READY_SECONDS, cpu_seconds, free_port, serving  # noqa: E402

BACKING_BYTES = 256 << 20
# bench-nbd's "hot set": write-back, so that the RAM cache absorbs writes as it serves reads,
# warmed by one pass over the whole file.
HOT_SET_FLAGS = ["--mode", "wb", "--cache", "ram:256m"]
# The hot set's reads: 4 KiB random reads at these queue depths, one fio job.
HOT_SET_READS = [("randread", 16), ("randread", 64)]


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def write_backing(scratch: Path) -> Path:
    """A BACKING_BYTES file of random bytes in `scratch`."""
    backing = scratch / "backing.img"
    with open(backing, "wb") as out:
        for _ in range(BACKING_BYTES >> 24):
            out.write(os.urandom(1 << 24))
    return backing


class Server:
    def __init__(self, started, metrics: int | None):
        self.pid, self.port, self.metrics = started.pid, started.port, metrics

    def uri(self) -> str:
        # The empty export name: nbdkit's and the floor's only export, heterarchy's first.
        return f"nbd://127.0.0.1:{self.port}/"

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def stats(self) -> dict:
        """The volume's counters and state, from the metrics endpoint's /stats."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics}/stats", timeout=READY_SECONDS) as response:
            [stats] = json.loads(response.read())["exports"]
        return stats


@contextmanager
def nbd_server(name: str, command: list, log: Path, port: int, metrics: int | None = None):
    """Runs an NBD server until the block ends (see helpers.serving)."""
    with serving(name, command, log, [port] + ([metrics] if metrics else [])) as started:
        yield Server(started, metrics)


def drop_page_cache(path: Path):
    """Makes the kernel forget a file's cached pages, so reads go to the disk."""
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())
        os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


def fio(server: Server, scratch: Path, rw: str, bs: str, iodepth: int, size=None, runtime=None,
        extra=(), jobs=None, ramp=0) -> dict:
    """One fio job against `server`; returns IOPS, MB/s and the server's CPU time per request
    fio completed. Time-based when `runtime` is given, one pass over `size` otherwise, after
    `ramp` seconds of the same load that do not count. `jobs` (a list of per-job option lists)
    runs several jobs at once instead; `per_job` then holds each one's IOPS."""
    report = scratch / "fio.json"
    command = [
        "fio", "--ioengine=nbd", f"--uri={server.uri()}", f"--rw={rw}", f"--bs={bs}",
        f"--iodepth={iodepth}", "--randrepeat=0", "--norandommap", "--output-format=json", f"--output={report}",
        *extra,
    ]
    if size:
        command.append(f"--size={size}")
    if runtime:
        command += ["--time_based", f"--runtime={runtime}"]
    if ramp:
        command.append(f"--ramp_time={ramp}")
    for index, options in enumerate(jobs or [[]]):
        command += [f"--name=job{index}", *options]
    cpu_before = server.cpu_seconds()
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=scratch, timeout=(runtime or 0) + ramp + 120)
    except subprocess.TimeoutExpired:
        fail(f"{' '.join(command)} ran for more than {(runtime or 0) + ramp + 120} s")
    cpu = server.cpu_seconds() - cpu_before
    if done.returncode != 0:
        fail(f"{' '.join(command)} failed: {done.stdout.strip()} {done.stderr.strip()}")
    done_jobs = json.loads(report.read_text())["jobs"]
    ios = sum(job["read"]["total_ios"] + job["write"]["total_ios"] for job in done_jobs)
    if ios == 0:
        fail(f"fio completed no I/O: {' '.join(command)}")
    return {
        "iops": sum(job["read"]["iops"] + job["write"]["iops"] for job in done_jobs),
        "mb_per_s": sum(job["read"]["bw_bytes"] + job["write"]["bw_bytes"] for job in done_jobs) / 1e6,
        "cpu_us_per_io": cpu / ios * 1e6,
        "per_job": [job["read"]["iops"] + job["write"]["iops"] for job in done_jobs],
        "latency_us_mean": max(job[side]["lat_ns"]["mean"] for job in done_jobs for side in ("read", "write")) / 1e3,
    }


def heterarchy_volume(servers: ExitStack, binary: Path, scratch: Path, name: str, flags: list) -> Server:
    """Starts `heterarchy serve nbd` with `flags` until `servers` closes."""
    port, metrics = free_port(), free_port()
    command = [
        binary, "serve", "nbd", "--listen", f"127.0.0.1:{port}", "--export", "bench",
        "--metrics", f"127.0.0.1:{metrics}", *flags,
    ]
    return servers.enter_context(nbd_server(f"heterarchy ({name})", command, scratch / f"{name}.log", port, metrics))


def warm(server: Server, scratch: Path):
    """One pass of 64 KiB reads over the whole export: the hot set's warm-up."""
    fio(server, scratch, "read", "64k", 16, size=BACKING_BYTES)


def hot_set_volume(servers: ExitStack, binary: Path, scratch: Path, backing: Path) -> Server:
    """bench-nbd's hot set, warmed, until `servers` closes."""
    server = heterarchy_volume(servers, binary, scratch, "hot-set", ["--backing", f"file:{backing}", *HOT_SET_FLAGS])
    warm(server, scratch)
    return server
