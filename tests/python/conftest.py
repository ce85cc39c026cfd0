"""Fixtures shared by the Python tests: the release binary, the shared traces, Zipf traces."""

from pathlib import Path

import pytest

from helpers import BINARY, TRACES
from kv_support import Servers
from zipf_trace import write_zipf_trace


@pytest.fixture(scope="session")
def heterarchy() -> Path:
    """The release binary that scripts/test builds (`cargo build --release`)."""
    if not BINARY.is_file():
        pytest.fail(f"{BINARY} is missing: run `cargo build --release` (scripts/test does)")
    return BINARY


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    """The shared real traces (../shared/traces beside the repository)."""
    if not TRACES.is_dir():
        pytest.skip(f"real traces not found at {TRACES}: tests that need them are skipped")
    return TRACES


@pytest.fixture(scope="session")
def zipf_trace(tmp_path_factory):
    """`zipf_trace(theta, keys=, requests=, seed=, object_size=)` writes, once per session, a
    seeded Zipf oracleGeneral trace; object sizes vary unless `object_size` fixes them."""
    made: dict[tuple, Path] = {}

    def make(theta, keys=20_000, requests=200_000, seed=1, object_size=None) -> Path:
        spec = (theta, keys, requests, seed, object_size)
        if spec not in made:
            name = f"zipf-{theta}-{keys}-{requests}-{seed}-{object_size or 'var'}.oracleGeneral.bin"
            path = tmp_path_factory.getbasetemp() / name
            made[spec] = write_zipf_trace(path, theta, keys, requests, seed, object_size)
        return made[spec]

    return make


@pytest.fixture
def servers(tmp_path):
    """Starts key-value servers for one test (`servers.start(kind, ...)`); kills every one at
    teardown."""
    started = Servers(tmp_path)
    yield started
    started.kill_all()
