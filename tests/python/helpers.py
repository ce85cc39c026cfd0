"""Paths and a runner for the heterarchy binary, shared by the tests and their fixtures."""

import json
import os
import socket
import subprocess
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


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


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
