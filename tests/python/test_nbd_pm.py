"""The PM block device served over NBD (docs/pm-block-device.md, "The BTT and Caiti's transit
cache"): a BTT on a file in /dev/shm (or the test's temporary folder) under each staging cache,
driven by qemu-io, fio (verifying, with a flush every few writes) and nbdcopy, started as
`heterarchy serve nbd --staging` and as an `[[export]]` table; `loadgen block` against it; and
the one-line errors of bad staging flags; and SIGTERM in mid-stream, after which every write
the server acknowledged is on the BTT."""

import json
import random
import signal
import struct
import threading

import pytest

from helpers import free_port, run
from nbd_support import BLOCK, CMD_WRITE, EXPORT, MISSING, REP_ACK, NbdClient, qemu_io, tool

if MISSING:
    pytest.skip(
        f"the NBD tests need {', '.join(MISSING)} (Debian packages libnbd-bin, qemu-utils, fio)",
        allow_module_level=True,
    )

DEVICE_BYTES = 64 << 20


def pm_device(serve, tmp_path, staging, *flags):
    port = free_port()
    backing = f"btt:{tmp_path / f'pm-{staging}.img'}:{DEVICE_BYTES}"
    return serve(
        "nbd", "--listen", f"127.0.0.1:{port}", "--export", EXPORT, "--backing", backing,
        "--staging", staging, "--staging-size", "4m", *flags, nbd=port,
    )


@pytest.mark.parametrize("staging", ["caiti", "pmbd", "pmbd70", "lru", "coactive", "none"])
def test_qemu_io_patterns_through_every_staging(serve, tmp_path, staging):
    server = pm_device(serve, tmp_path, staging, "--evictors", "1")
    qemu_io(
        server,
        "write -P 0xab 0 64k", "write -P 0xcd 1m 4k", "read -P 0xab 0 64k", "read -P 0xcd 1m 4k",
        # Unaligned: the BTT's sectors are 4 KiB; the bytes around keep the pattern beneath.
        "write -P 0x11 1000 3000", "read -P 0x11 1000 3000", "read -P 0xab 0 1000",
        "read -P 0xab 4000 61536",
        "write -P 0x22 2m 64k", "write -z 2m 64k", "read -P 0 2m 64k", "flush",
        "write -P 0x33 4m 64k", "discard 4m 64k", "flush",
    )
    qemu_io(server, "read -P 0x11 1000 3000", "read -P 0xcd 1m 4k", "read -P 0 2m 64k")
    info = json.loads(tool("nbdinfo", "--no-content", "--json", server.uri()).stdout)["exports"][0]
    # The BTT keeps a few percent for its map and flog.
    assert 0.95 * DEVICE_BYTES < info["export-size"] < DEVICE_BYTES
    for can in ("can_flush", "can_fua", "can_trim", "can_zero"):
        assert info[can] is True, can


def test_fio_verifies_random_writes_through_caiti_with_flushes(serve, tmp_path):
    # A 4 MiB cache under 32 MiB of writes: hits, fills and bypasses all happen.
    server = pm_device(serve, tmp_path, "caiti", "--evictors", "2")
    report = tmp_path / "fio.json"
    tool(
        "fio", "--name=pm", "--ioengine=nbd", f"--uri={server.uri()}", "--rw=randwrite",
        "--bs=4k", "--size=32m", "--iodepth=32", "--fsync=64", "--verify=crc32c",
        "--do_verify=1", "--verify_fatal=1", "--output-format=json", f"--output={report}",
        timeout=180, cwd=tmp_path,
    )
    [job] = json.loads(report.read_text())["jobs"]
    assert job["error"] == 0
    assert job["write"]["io_bytes"] == 32 << 20


def test_nbdcopy_round_trip_and_a_config_table(serve, heterarchy, tmp_path):
    data = random.Random(17).randbytes(16 << 20)
    source = tmp_path / "in.bin"
    source.write_bytes(data)
    port = free_port()
    config = tmp_path / "serve.toml"
    config.write_text(
        f'[server]\nlisten = "127.0.0.1:{port}"\n'
        f'[[export]]\nname = "{EXPORT}"\nbacking = "btt:{tmp_path / "pm.img"}:{DEVICE_BYTES}"\n'
        'staging = "caiti"\nstaging_size = "2m"\nevictors = 1\n'
    )
    server = serve("--config", str(config), nbd=port)
    tool("nbdcopy", str(source), server.uri())
    back = tmp_path / "out.bin"
    tool("nbdcopy", server.uri(), str(back))
    assert back.read_bytes()[: len(data)] == data
    # The load generator drives the same export over NBD and counts what it measured.
    done = run(heterarchy, "loadgen", "block", "--target", f"nbd://127.0.0.1:{port}/{EXPORT}",
               "--iodepth", "8", "--duration", "1s", "--read-percent", "30", "--format", "json")
    report = json.loads(done.stdout)
    assert report["requests"] > 100 and report["reads"] > 0 and report["writes"] > 0


@pytest.mark.parametrize("flags, named", [
    (["--staging", "writeback"], "--staging"),
    (["--staging", "caiti", "--staging-size", "12q"], "--staging-size"),
    (["--staging", "caiti", "--cache", "ram:1m"], "--cache"),
    (["--staging", "caiti", "--evictors", "0"], "evictors"),
])
def test_bad_staging_flags_are_one_line_errors(heterarchy, tmp_path, flags, named):
    done = run(heterarchy, "serve", "nbd", "--backing", f"btt:{tmp_path / 'x.img'}:64m", *flags,
               check=False)
    assert done.returncode != 0
    assert named in done.stderr, done.stderr
    assert "panicked" not in done.stderr


def test_a_btt_too_small_or_of_another_sector_size_is_refused(heterarchy, tmp_path):
    done = run(heterarchy, "serve", "nbd", "--backing", f"btt:{tmp_path / 'tiny.img'}:1m",
               "--staging", "caiti", check=False)
    assert done.returncode != 0 and "arena" in done.stderr, done.stderr
    done = run(heterarchy, "serve", "nbd", "--backing", f"btt:{tmp_path / 'x.img'}:64m:1k",
               "--staging", "caiti", check=False)
    assert done.returncode != 0 and "512" in done.stderr, done.stderr


def test_sigterm_answers_no_write_after_the_last_write_back(serve, tmp_path):
    """A client pipelines writes of distinct blocks to Caiti (its transit cache in DRAM) as
    SIGTERM arrives: the server stops taking requests (ESHUTDOWN), finishes those under way, and
    only then writes back, so every write it acknowledged is on the BTT when it comes back."""
    server = pm_device(serve, tmp_path, "caiti", "--evictors", "1")
    blocks = DEVICE_BYTES // BLOCK

    def pattern(block: int) -> bytes:
        return struct.pack(">Q", block) * (BLOCK // 8)

    client = NbdClient(server.port)
    assert client.go(EXPORT) == REP_ACK

    def send_all():
        try:
            for block in range(blocks):
                client.send(block + 1, CMD_WRITE, block * BLOCK, BLOCK, pattern(block))
        except OSError:
            pass  # the server went away mid-stream

    sender = threading.Thread(target=send_all)
    sender.start()
    acknowledged, refused = [], 0
    try:
        while True:
            handle, error, _ = client.receive()
            if len(acknowledged) + refused == 2000:
                server.process.send_signal(signal.SIGTERM)
            if error == 0:
                acknowledged.append(handle - 1)
            else:
                refused += 1
    except (EOFError, OSError):
        pass
    sender.join()
    client.sock.close()
    assert server.process.wait(timeout=60) == 0, server.log.read_text()
    print(f"{len(acknowledged)} writes acknowledged, {refused} refused after SIGTERM")
    assert len(acknowledged) >= 2000
    again = pm_device(serve, tmp_path, "caiti", "--evictors", "1")
    with NbdClient(again.port) as reader:
        assert reader.go(EXPORT) == REP_ACK
        lost = [block for block in acknowledged if reader.read(block * BLOCK, BLOCK) != pattern(block)]
    assert not lost, f"{len(lost)} acknowledged writes lost across SIGTERM, the first block {lost[0]}"
