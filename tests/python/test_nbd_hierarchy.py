"""Live volumes as hierarchies (docs/block-volumes.md): several cache tiers per volume (RAM over
persistent memory over a file), per-tier stats and metrics, persistent tiers found again after
kill -9 and refused in another order, tier lists that make no sense refused naming the flag; and
many clients: a thousand idle connections each greeted at once, requests in flight on a
connection that goes away."""

import random
import resource
import socket
import struct
import subprocess
import time

import pytest

from helpers import READY_SECONDS, free_port
from nbd_support import (
    BLOCK, CMD_WRITE, EXPORT, IO_SECONDS, MISSING, NBDMAGIC, VOLUME_BYTES, connect, tool,
    volume_stats,
)

if MISSING:
    pytest.skip(
        f"the NBD tests need {', '.join(MISSING)} (Debian packages libnbd-bin, qemu-utils, fio)",
        allow_module_level=True,
    )


def tiers(tmp_path, *kinds) -> list[str]:
    """Cache tier flags, fastest first: ram, pmem and file tiers of growing sizes."""
    sizes = {"ram": "4m", "pmem": "8m", "file": "16m"}
    flags = []
    for index, kind in enumerate(kinds):
        spec = f"ram:{sizes[kind]}" if kind == "ram" else f"{kind}:{tmp_path / f'tier{index}.{kind}'}:{sizes[kind]}"
        flags += ["--cache", spec]
    return flags


def served_tiers(volume, tmp_path, mode, *kinds, layout="inclusive", metrics=True):
    """A volume over the tiers `kinds` (the default single --cache is replaced)."""
    flags = tiers(tmp_path, *kinds)
    return volume(mode, *flags[2:], "--layout", layout, cache=flags[1], metrics=metrics)


@pytest.mark.parametrize("layout", ["inclusive", "exclusive"])
def test_three_tiers_hold_what_was_written_and_report_each_tier(volume, tmp_path, layout):
    data = random.Random(3).randbytes(32 << 20)
    source = tmp_path / "in.bin"
    source.write_bytes(data)
    server = served_tiers(volume, tmp_path, "wb", "ram", "pmem", "file", layout=layout)
    tool("nbdcopy", source, server.uri())
    out = tmp_path / "out.bin"
    tool("nbdcopy", server.uri(), out)
    assert out.read_bytes()[: len(data)] == data
    stats = volume_stats(server)
    assert stats["layout"] == layout
    assert [tier["tier"] for tier in stats["tiers"]] == [0, 1, 2]
    assert [tier["persistent"] for tier in stats["tiers"]] == [False, True, True]
    # 32 MiB through tiers of 4, 8 and 16 MiB: every tier filled and evicted.
    for tier in stats["tiers"]:
        assert tier["resident_lines"] > 0 and tier["installs"] > 0 and tier["evictions"] > 0, tier
    assert stats["resident_lines"] == sum(tier["resident_lines"] for tier in stats["tiers"])
    assert [device["role"] for device in stats["devices"]] == ["tier0", "tier1", "tier2", "backing"]
    metrics = server.http("/metrics")
    for role in ("tier0", "tier1", "tier2", "backing"):
        assert f'device="{role}"' in metrics


def test_persistent_tiers_survive_kill_and_refuse_another_order(volume, heterarchy, tmp_path):
    pmem, file = tiers(tmp_path, "pmem", "file")[1], tiers(tmp_path, "pmem", "file")[3]
    server = volume("wb", "--cache", file, cache=pmem, metrics=True)
    data = random.Random(9).randbytes(12 << 20)
    source = tmp_path / "in.bin"
    source.write_bytes(data)
    tool("nbdcopy", "--flush", source, server.uri())
    stats = volume_stats(server)
    assert sum(tier["dirty_lines"] for tier in stats["tiers"]) > 0, "the copy must leave dirty lines"
    server.kill()
    restarted = volume("wb", "--cache", file, cache=pmem, metrics=True)
    assert volume_stats(restarted)["restored_lines"] > 0
    out = tmp_path / "out.bin"
    tool("nbdcopy", restarted.uri(), out)
    assert out.read_bytes()[: len(data)] == data
    restarted.kill()
    # The same tiers the other way round: refused, naming the tier, until forced.
    args = [
        "serve", "nbd", "--listen", f"127.0.0.1:{free_port()}", "--export", EXPORT,
        "--backing", f"file:{tmp_path / 'backing.img'}:{VOLUME_BYTES}", "--mode", "wb",
        "--cache", file, "--cache", pmem,
    ]
    done = subprocess.run([str(heterarchy), *args], capture_output=True, text=True, timeout=READY_SECONDS)
    assert done.returncode != 0, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "cache[0]" in line and "another hierarchy" in line and "force" in line, line


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--cache", "file:{tmp}/same.img:4m", "--cache", "file:{tmp}/same.img:4m"], "cache[1]"),
        (["--cache", "ram:128m"], "cache: 134217728 bytes is larger than the backing store"),
        (["--cache", "tape:4m"], "--cache"),
        (["--cache", "ram:4m", "--cache-throttle", "optane-pm", "--cache-throttle", "none",
          "--cache-throttle", "hdd"], "cache_throttle"),
        (["--cache", "ram:4m", "--layout", "diagonal"], "--layout"),
    ],
    ids=["same-file-twice", "larger-than-backing", "unknown-kind", "throttles-per-tier", "layout"],
)
def test_tier_lists_that_make_no_sense_are_refused_naming_the_flag(heterarchy, tmp_path, flags, named):
    args = [
        "serve", "nbd", "--listen", f"127.0.0.1:{free_port()}", "--export", EXPORT,
        "--backing", f"file:{tmp_path / 'backing.img'}:64m",
        *[flag.replace("{tmp}", str(tmp_path)) for flag in flags],
    ]
    done = subprocess.run([str(heterarchy), *args], capture_output=True, text=True, timeout=READY_SECONDS)
    assert done.returncode != 0, f"started with {flags}"
    first = done.stderr.strip().splitlines()[0]
    assert named in first and "panicked" not in done.stderr, done.stderr


def process_status(pid: int, field: str) -> int:
    """A number of /proc/PID/status: `VmRSS` in KiB, `Threads`."""
    with open(f"/proc/{pid}/status") as status:
        [line] = [line for line in status if line.startswith(f"{field}:")]
    return int(line.split()[1])


def test_a_thousand_idle_clients_are_greeted_and_a_fresh_one_is_served(volume):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    server = volume("wb", metrics=True)
    pid = server.process.pid
    # The listener is bound before the event loops and I/O workers are started: one client
    # served first makes the baseline the started server's, not a server still spawning.
    with connect(server) as client:
        client.read(0, BLOCK)
    before = process_status(pid, "VmRSS"), process_status(pid, "Threads")
    idle = []
    try:
        for _ in range(1000):
            idle.append(socket.create_connection(("127.0.0.1", server.port), timeout=IO_SECONDS))
        # Each gets its 18-byte greeting within a second of connecting, all of them together.
        deadline = time.monotonic() + 1.0
        greeted = 0
        for sock in idle:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            data = b""
            try:
                while len(data) < 18:
                    chunk = sock.recv(18 - len(data))
                    if not chunk:
                        break
                    data += chunk
            except TimeoutError:
                break
            if len(data) == 18 and struct.unpack(">Q", data[:8])[0] == NBDMAGIC:
                greeted += 1
        assert greeted == 1000, f"{greeted} of 1000 idle clients were greeted within a second"
        # A fresh client is served at once, while the others stay open.
        started = time.monotonic()
        with connect(server) as client:
            client.write(0, b"x" * BLOCK)
            assert client.read(0, BLOCK) == b"x" * BLOCK
        assert time.monotonic() - started < 1.0
        grown = process_status(pid, "VmRSS") - before[0]
        assert grown < 64 * 1024, f"1000 idle clients cost {grown} KiB of resident memory"
        # No thread per client: what a client holds is a little memory in an event loop.
        threads = process_status(pid, "Threads") - before[1]
        assert threads < 8, f"1000 idle clients took {threads} more threads"
    finally:
        for sock in idle:
            sock.close()


def test_a_client_gone_with_requests_in_flight_leaves_the_volume_whole(volume):
    """A client sends hundreds of writes and leaves without reading an answer; another client
    finds every block either as it was or as written, never torn, and the server goes on."""
    server = volume("wb", "--cache-line", "4k", cache="ram:1m", metrics=True)
    blocks = 512
    with connect(server) as client:
        for block in range(blocks):
            client.write(block * BLOCK, bytes([1]) * BLOCK)
    for round_ in range(3):
        with connect(server) as leaving:
            for block in range(blocks):
                leaving.send(block + 1, CMD_WRITE, block * BLOCK, BLOCK, bytes([2 + round_]) * BLOCK)
            # Gone at once: a reset, nothing read.
            leaving.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with connect(server) as checker:
        data = checker.read(0, blocks * BLOCK)
    for block in range(blocks):
        content = set(data[block * BLOCK : (block + 1) * BLOCK])
        assert len(content) == 1 and content <= {1, 2, 3, 4}, f"block {block} is torn: {sorted(content)}"
    volume_stats(server)  # the metrics endpoint still answers
    log = server.log.read_text()
    assert "panicked" not in log, log
