"""The floor (crates/floor, `heterarchy-floor`) under the benchmarks' own clients: fio's nbd
engine and nbdinfo against its NBD export, `heterarchy loadgen kv` against its memcached side,
which scripts/bench-floor, bench-nbd and bench-kv run unchanged; and `loadgen kv --verify`
failing against it, since its values name no key."""

import json
import subprocess

import pytest

from helpers import BINARY, free_port
from kv_support import tool_path

FLOOR = BINARY.with_name("heterarchy-floor")
EXPORT_BYTES = 64 << 20
RUN_SECONDS = 60


@pytest.fixture
def floor(servers):
    """`floor(protocol, *flags)` starts heterarchy-floor on a free port, killed at teardown."""
    if not FLOOR.is_file():
        pytest.fail(f"{FLOOR} is missing: run `cargo build --release` or scripts/test")

    def start(protocol: str, *flags):
        port = free_port()
        return servers.start_process(
            f"floor-{protocol}", [FLOOR, protocol, "--listen", f"127.0.0.1:{port}", *flags], [port])

    return start


def test_fio_reads_zeros_from_the_floor_at_depth(floor, tmp_path):
    server = floor("nbd", "--size-bytes", EXPORT_BYTES)
    report = tmp_path / "fio.json"
    done = subprocess.run([
        tool_path("fio", "fio"), "--ioengine=nbd", f"--uri=nbd://127.0.0.1:{server.port}/", "--rw=randread",
        "--bs=4k", "--iodepth=16", "--time_based", "--runtime=1", "--name=floor", "--verify=pattern",
        "--verify_pattern=0x00", "--verify_only", "--output-format=json", f"--output={report}",
    ], capture_output=True, text=True, timeout=RUN_SECONDS, cwd=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    [job] = json.loads(report.read_text())["jobs"]
    assert job["error"] == 0
    assert job["read"]["total_ios"] > 100, job["read"]


def test_nbdinfo_sees_one_read_only_export_of_the_size_asked(floor):
    server = floor("nbd", "--size-bytes", EXPORT_BYTES)
    done = subprocess.run([tool_path("nbdinfo", "libnbd-bin"), "--json", f"nbd://127.0.0.1:{server.port}/floor"],
                          capture_output=True, text=True, timeout=RUN_SECONDS)
    assert done.returncode == 0, done.stderr
    [export] = json.loads(done.stdout)["exports"]
    assert export["export-size"] == EXPORT_BYTES
    assert export["is_read_only"] is True


def loadgen(port: int, *flags) -> subprocess.CompletedProcess:
    return subprocess.run([
        BINARY, "loadgen", "kv", "--server", f"127.0.0.1:{port}", "--connections", "16", "--keys", "2000",
        "--duration", "1s", "--warmup", "0s", "--format", "json", *map(str, flags),
    ], capture_output=True, text=True, timeout=RUN_SECONDS)


@pytest.mark.parametrize("value_bytes", [100, 4096])
def test_bench_kvs_client_gets_a_hit_for_every_get(floor, value_bytes):
    server = floor("memcached", "--value-bytes", value_bytes)
    done = loadgen(server.port, "--value-bytes", value_bytes, "--get-ratio", "0.9")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["errors"] == 0
    assert report["get_misses"] == 0
    assert report["get_hits"] == report["gets"] > 100
    assert report["sets"] > 0


def test_verification_fails_against_a_server_that_keeps_nothing(floor):
    server = floor("memcached", "--value-bytes", 100)
    done = loadgen(server.port, "--value-bytes", 100, "--verify")
    assert done.returncode != 0
    assert "bytes the run never wrote" in done.stderr, done.stderr
