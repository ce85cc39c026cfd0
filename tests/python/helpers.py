"""Paths and a runner for the heterarchy binary, and servers to start, shared by the tests,
their fixtures and the benchmark scripts."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# The release build in cargo's target directory (CARGO_TARGET_DIR, as cargo reads it, relative to
# the repository root where scripts/test runs cargo), or any binary named by HETERARCHY_BIN.
BINARY = Path(
    os.environ.get("HETERARCHY_BIN")
    or REPO / os.environ.get("CARGO_TARGET_DIR", "target") / "release" / "heterarchy"
)
TRACES = REPO.parent / "shared" / "traces"
# A small timed hierarchy (FlashSim-50 over FlashSim-25, write-through LRU) for tests that need
# any `simulate` run.
SMALL_HIERARCHY = """\
seed = 1
[cache]
mode = "wt"
policy = "lru"
[[tier]]
device = "flashsim-50"
size = "16MiB"
[[tier]]
device = "flashsim-25"
[load]
outstanding = 16
requests = 20000
"""


def run(binary: Path, *args, check=True) -> subprocess.CompletedProcess:
    """Runs heterarchy with `args`; with `check`, fails the test with its stderr on error."""
    done = subprocess.run(
        [str(binary), *map(str, args)], capture_output=True, text=True, timeout=600
    )
    if check and done.returncode != 0:
        command = " ".join(map(str, args))
        pytest.fail(f"heterarchy {command} exited {done.returncode}: {done.stderr.strip()}")
    return done


def run_json(binary: Path, *args):
    """Runs heterarchy with `args --format json` and returns the parsed output."""
    return json.loads(run(binary, *args, "--format", "json").stdout)


# Every port free_port has handed out in this process: the kernel hands a port just closed out
# again at once, so two calls in a row (an NBD port, then its metrics port) could return the same one.
_PORTS_GIVEN: set[int] = set()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now and that no earlier call returned."""
    for _ in range(100):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port not in _PORTS_GIVEN:
            _PORTS_GIVEN.add(port)
            return port
    raise RuntimeError("no fresh TCP port on 127.0.0.1 in 100 tries")


def accepts_connections(address) -> bool:
    """Whether a TCP port on 127.0.0.1 (an int) or a Unix socket (a Path) takes a connection."""
    family = socket.AF_UNIX if isinstance(address, Path) else socket.AF_INET
    target = str(address) if isinstance(address, Path) else ("127.0.0.1", address)
    with socket.socket(family) as probe:
        probe.settimeout(1)
        try:
            probe.connect(target)
        except OSError:
            return False
    return True


READY_SECONDS = 10
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process `pid` so far, summed over its threads."""
    # After the command name (which may hold spaces), field 3 comes first: utime and stime are
    # fields 14 and 15, in clock ticks.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def wait_ready(process: subprocess.Popen, addresses: list) -> str | None:
    """Waits, for at most READY_SECONDS, until every address (a port or a Unix socket path)
    takes connections; None then, else why not. Connecting is the readiness test: it depends on
    no log line's wording or timing."""
    deadline = time.monotonic() + READY_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return f"exited {process.returncode}"
        if all(map(accepts_connections, addresses)):
            return None
        time.sleep(0.02)
    return f"accepted no connection within {READY_SECONDS} s"


class LoggedProcess:
    """A process started for a test, its output in `log`: waited for until it listens, stopped
    gracefully or killed. The servers of the NBD and key-value tests build on it."""

    def __init__(self, argv, log: Path):
        self.argv, self.log = [str(arg) for arg in argv], log
        with open(log, "wb") as output:
            self.process = subprocess.Popen(self.argv, stdout=output, stderr=subprocess.STDOUT)

    def wait_for(self, addresses: list):
        """Fails the test with the log unless every address takes connections in time."""
        if failure := wait_ready(self.process, addresses):
            pytest.fail(f"{' '.join(self.argv)} {failure}: {self.log.read_text()}")

    def stop(self) -> int:
        """SIGTERM, then the exit code of the graceful shutdown."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{self.argv[0]} was still running 30 s after SIGTERM: {self.log.read_text()}")

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=READY_SECONDS)


class Started:
    """A server process started by `serving`: its pid and the first address it listens on."""

    def __init__(self, process: subprocess.Popen, port):
        self.process, self.pid, self.port = process, process.pid, port


@contextmanager
def serving(name: str, command: list, log: Path, addresses: list):
    """Runs a server until the block ends, once every address (a port or a Unix socket path)
    takes connections, for at most READY_SECONDS; exits the script with the server's log if it
    does not start. Kills it however the block ends."""
    with open(log, "wb") as output:
        process = subprocess.Popen(list(map(str, command)), stdout=output, stderr=subprocess.STDOUT)
    try:
        if failure := wait_ready(process, addresses):
            sys.exit(f"{name} did not start ({failure}): {log.read_text().strip()}")
        yield Started(process, addresses[0])
    finally:
        process.kill()
        process.wait(timeout=READY_SECONDS)
