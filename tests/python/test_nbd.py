"""`heterarchy serve` as an NBD server, driven by the NBD tools people use (nbdinfo, nbdcopy,
qemu-img, qemu-io, fio) and by a minimal hand-written client for what those tools never send:
malformed requests, refused options, and a write stream cut short by SIGKILL."""

import hashlib
import itertools
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest

from helpers import READY_SECONDS, free_port, run, run_json
from nbd_support import (
    BLOCK, CMD_FLAG_FUA, CMD_FLUSH, CMD_READ, CMD_WRITE, EINVAL, EXPORT, FLAG_FIXED_NEWSTYLE,
    IMAGE_BYTES, IO_SECONDS, MISSING, REP_ACK, REP_ERR_UNKNOWN, REP_ERR_UNSUP, REPLY_TYPE_ERROR,
    REPLY_TYPE_OFFSET_DATA, TRANSMISSION_SEND_FLUSH, TRANSMISSION_SEND_FUA, VOLUME_BYTES, NbdClient,
    Server, connect, qemu_io, tool, volume_stats,
)

if MISSING:
    pytest.skip(
        f"the NBD tests need {', '.join(MISSING)} (Debian packages libnbd-bin, qemu-utils, fio)",
        allow_module_level=True,
    )

@pytest.fixture(scope="module")
def image(tmp_path_factory) -> tuple[Path, bytes]:
    """A 32 MiB file of seeded random bytes and its contents."""
    data = random.Random(5).randbytes(IMAGE_BYTES)
    path = tmp_path_factory.mktemp("image") / "in.bin"
    path.write_bytes(data)
    return path, data


def test_nbdinfo_shows_the_export_its_size_and_what_it_can_do(volume):
    [export] = json.loads(tool("nbdinfo", "--no-content", "--json", volume().uri()).stdout)["exports"]
    assert export["export-name"] == EXPORT
    assert export["export-size"] == VOLUME_BYTES
    assert not export["is_read_only"]
    # Multi-conn: nbdcopy then opens 4 connections, as the copy tests below do.
    for can in ("can_multi_conn", "can_flush", "can_fua", "can_trim", "can_zero"):
        assert export[can] is True, can


def test_unix_socket(volume, tmp_path):
    server = volume(listen=tmp_path / "nbd.sock")
    [export] = json.loads(tool("nbdinfo", "--no-content", "--json", server.uri()).stdout)["exports"]
    assert export["export-size"] == VOLUME_BYTES


def test_config_file_serves_every_export(serve, tmp_path):
    port, metrics = free_port(), free_port()
    config = tmp_path / "volumes.toml"
    config.write_text(f"""\
[server]
listen = "127.0.0.1:{port}"
metrics = "127.0.0.1:{metrics}"
[[export]]
name = "a"
backing = "file:{tmp_path / 'a.img'}:64m"
cache = "ram:16m"
cache_line = "64k"
[export.caching]
mode = "wb"
[[export]]
name = "b"
backing = "file:{tmp_path / 'b.img'}:32m"
cache = "pmem:{tmp_path / 'b.pm'}:8m"
""")
    server = serve("--config", config, nbd=port, metrics=metrics)
    listed = json.loads(tool("nbdinfo", "--list", "--json", f"nbd://127.0.0.1:{port}").stdout)["exports"]
    assert {export["export-name"]: export["export-size"] for export in listed} == {"a": 64 << 20, "b": 32 << 20}
    stats = {entry["name"]: entry for entry in json.loads(server.http("/stats"))["exports"]}
    assert (stats["a"]["mode"], stats["b"]["mode"]) == ("wb", "wt")


@pytest.mark.parametrize("mode", ["wt", "wb", "wa", "wi", "wo", "pt"])
def test_nbdcopy_round_trip(volume, image, tmp_path, mode):
    path, data = image
    server = volume(mode)
    out = tmp_path / "out.bin"
    tool("nbdcopy", path, server.uri())
    tool("nbdcopy", server.uri(), out)
    copied = out.read_bytes()
    assert len(copied) == VOLUME_BYTES
    assert hashlib.sha256(copied[:IMAGE_BYTES]).digest() == hashlib.sha256(data).digest()
    assert copied[IMAGE_BYTES:] == bytes(VOLUME_BYTES - IMAGE_BYTES)


def test_qemu_img_compare(volume, image):
    path, _ = image
    server = volume("wb")
    tool("nbdcopy", path, server.uri())
    done = tool("qemu-img", "compare", "-f", "raw", "-F", "raw", path, server.uri())
    assert "Images are identical" in done.stdout


@pytest.fixture
def loop_device(tmp_path):
    """A 64 MiB loop device over a file in tmp_path, detached at teardown; skips where loop
    devices cannot be set up (not root, no loop module, a container without them)."""
    if os.geteuid() != 0 or not shutil.which("losetup"):
        pytest.skip("a loop device needs root and losetup")
    backing = tmp_path / "loop.img"
    backing.write_bytes(bytes(VOLUME_BYTES))
    attached = subprocess.run(["losetup", "--find", "--show", str(backing)], capture_output=True, text=True, timeout=30)
    if attached.returncode != 0:
        pytest.skip(f"losetup cannot attach a loop device here: {attached.stderr.strip()}")
    device = attached.stdout.strip()
    try:
        yield Path(device)
    finally:
        subprocess.run(["losetup", "--detach", device], capture_output=True, timeout=30)


def test_block_device_backing_with_o_direct(volume, image, loop_device, tmp_path):
    path, data = image
    server = volume("wb", backing=f"blockdev:{loop_device}:direct", cache="ram:8m")
    [export] = json.loads(tool("nbdinfo", "--no-content", "--json", server.uri()).stdout)["exports"]
    assert export["export-size"] == VOLUME_BYTES
    tool("nbdcopy", path, server.uri())
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(timeout=30) == 0
    with open(loop_device, "rb") as device:
        assert hashlib.sha256(device.read(len(data))).digest() == hashlib.sha256(data).digest()


@pytest.mark.parametrize("mode, flags", [("wt", []), ("wb", ["--cache-line", "4k", "--nhc"])], ids=["wt", "wb-4k-nhc"])
def test_qemu_io_patterns(volume, mode, flags):
    server = volume(mode, *flags)
    qemu_io(
        server,
        "write -P 0xab 0 64k", "write -P 0xcd 1m 4k", "read -P 0xab 0 64k", "read -P 0xcd 1m 4k",
        # Unaligned: the bytes around it keep the pattern beneath.
        "write -P 0x11 1000 3000", "read -P 0x11 1000 3000",
        "read -P 0xab 0 1000", "read -P 0xab 4000 61536",
        "write -P 0x22 2m 64k", "write -z 2m 64k", "read -P 0 2m 64k",
        "write -P 0x33 4m 64k", "discard 4m 64k", "flush",
    )
    # A second connection sees what the first wrote.
    qemu_io(server, "read -P 0x11 1000 3000", "read -P 0xab 4000 61536", "read -P 0 2m 64k", "read -P 0xcd 1m 4k")


def test_fio_verifies_random_writes_through_evictions(volume, tmp_path):
    server = volume("wb", cache="ram:8m")
    report = tmp_path / "fio.json"
    tool(
        "fio", "--name=integrity", "--ioengine=nbd", f"--uri={server.uri()}", "--rw=randwrite",
        "--bs=4k", "--size=32m", "--iodepth=16", "--verify=crc32c", "--do_verify=1",
        "--verify_fatal=1", "--output-format=json", f"--output={report}",
        timeout=120, cwd=tmp_path,
    )
    [job] = json.loads(report.read_text())["jobs"]
    assert job["error"] == 0
    assert job["write"]["io_bytes"] == job["read"]["io_bytes"] == 32 << 20


def test_write_back_data_reaches_the_backing_file_at_sigterm(volume, image, tmp_path):
    path, data = image
    backing = tmp_path / "wb.img"
    server = volume("wb", backing=f"file:{backing}:64m", metrics=True)
    tool("nbdcopy", path, server.uri())
    assert volume_stats(server)["dirty_lines"] > 0, "nothing dirty: the test would prove nothing"
    assert server.stop() == 0, server.log.read_text()
    assert hashlib.sha256(backing.read_bytes()[:IMAGE_BYTES]).digest() == hashlib.sha256(data).digest()


def test_metrics_stats_and_flush(volume, heterarchy, tmp_path):
    token = tmp_path / "admin.token"
    token.write_text("flush-token\n")
    server = volume("wb", "--admin-token-file", token, metrics=True)
    address = f"127.0.0.1:{server.metrics}"
    with connect(server) as client:
        blocks = [random.Random(7).randbytes(BLOCK) for _ in range(16)]
        for index, block in enumerate(blocks):
            client.write(index << 20, block)
        for index, block in enumerate(blocks):
            assert client.read(index << 20, BLOCK) == block
            client.read((index << 20) + (32 << 20), BLOCK)

        metrics = server.http("/metrics")
        # Prometheus names counters with _total.
        hits = rf'^heterarchy_volume_hits(_total)?\{{[^}}]*export="{EXPORT}"[^}}]*\}} [1-9]'
        assert re.search(hits, metrics, re.M), metrics
        [stats] = [entry for entry in run_json(heterarchy, "volume", "stats", "--server", address) if entry["name"] == EXPORT]
        for key in ("name", "mode", "size_bytes", "hits", "misses", "dirty_lines", "resident_lines", "devices", "admission"):
            assert key in stats, key
        assert (stats["mode"], stats["size_bytes"]) == ("wb", VOLUME_BYTES)
        assert stats["hits"] + stats["misses"] > 0
        assert stats["dirty_lines"] > 0

        run(heterarchy, "volume", "flush", "--server", address, "--export", EXPORT, "--token-file", token)
        assert volume_stats(server)["dirty_lines"] == 0

        client.write(0, bytes(BLOCK))
        assert volume_stats(server)["dirty_lines"] > 0
        server.http(f"/flush?export={EXPORT}", method="POST", token="flush-token")
        assert volume_stats(server)["dirty_lines"] == 0


def closes(sock: socket.socket) -> bool:
    """Whether the peer closes `sock` within IO_SECONDS, whatever it sends first."""
    sock.settimeout(IO_SECONDS)
    for _ in range(1000):
        try:
            if not sock.recv(65536):
                return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
    return False


@pytest.mark.parametrize(
    "garbage",
    [
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        # Valid client flags, then an option whose magic is wrong.
        struct.pack(">I", FLAG_FIXED_NEWSTYLE) + bytes(range(256)),
    ],
    ids=["http", "bad-option-magic"],
)
def test_garbage_handshake_closes_only_that_connection(volume, garbage):
    server = volume()
    with socket.create_connection(("127.0.0.1", server.port), timeout=IO_SECONDS) as raw:
        raw.sendall(garbage)
        assert closes(raw), "the server kept a connection open after garbage"
    tool("nbdinfo", "--no-content", server.uri())


def test_negotiation_errors_and_the_export_list(volume):
    with NbdClient(volume().port) as client:
        [(kind, _)] = client.option(0x7FFF, b"what is this")
        assert kind == REP_ERR_UNSUP
        assert client.list_exports() == [EXPORT]
        assert client.go("no-such-export") == REP_ERR_UNKNOWN
        assert client.go(EXPORT) == REP_ACK
        assert client.size == VOLUME_BYTES
        assert client.flags & TRANSMISSION_SEND_FLUSH and client.flags & TRANSMISSION_SEND_FUA
        assert client.read(0, BLOCK) == bytes(BLOCK)


def test_bad_requests_get_einval_and_the_connection_goes_on(volume):
    with connect(volume()) as client:
        minimum, _, maximum = client.block_sizes
        assert minimum <= BLOCK and maximum < 40 << 20, client.block_sizes
        block = random.Random(3).randbytes(BLOCK)
        client.write(0, block)
        bad = {
            "read across the end": (CMD_READ, VOLUME_BYTES - BLOCK, 2 * BLOCK, b""),
            "read past the end": (CMD_READ, VOLUME_BYTES, BLOCK, b""),
            "64 MiB read": (CMD_READ, 0, 64 << 20, b""),
            "40 MiB write": (CMD_WRITE, 0, 40 << 20, bytes(40 << 20)),
        }
        for case, (command, offset, length, payload) in bad.items():
            error, _ = client.request(command, offset, length, payload)
            assert error == EINVAL, f"{case}: error {error}"
            assert client.read(0, BLOCK) == block, f"after the {case}"


def test_structured_replies_carry_reads_and_errors(volume):
    """With NBD_OPT_STRUCTURED_REPLY, a READ is answered by one OFFSET_DATA chunk flagged DONE
    and a failure by one ERROR chunk with its errno and a message; successes without data stay
    simple replies, which proto.md allows."""
    with NbdClient(volume().port) as client:
        assert client.structured_replies() == REP_ACK
        assert client.go(EXPORT) == REP_ACK
        block = random.Random(9).randbytes(BLOCK)
        client.write(BLOCK, block)
        client.send(1000, CMD_READ, BLOCK, BLOCK)
        handle, [(kind, payload)] = client.receive_chunks()
        assert (handle, kind) == (1000, REPLY_TYPE_OFFSET_DATA)
        assert struct.unpack_from(">Q", payload) == (BLOCK,) and payload[8:] == block
        failing = {
            "read past the end": (CMD_READ, VOLUME_BYTES, BLOCK, b""),
            "64 MiB read": (CMD_READ, 0, 64 << 20, b""),
            "write past the end": (CMD_WRITE, VOLUME_BYTES, BLOCK, bytes(BLOCK)),
        }
        for handle, (case, (command, offset, length, data)) in enumerate(failing.items(), 2000):
            client.send(handle, command, offset, length, data)
            echoed, [(kind, payload)] = client.receive_chunks()
            assert (echoed, kind) == (handle, REPLY_TYPE_ERROR), case
            error, message_length = struct.unpack_from(">IH", payload)
            assert error == EINVAL, f"{case}: error {error}"
            assert 0 < message_length == len(payload) - 6, f"{case}: no message for people"
            client.send(handle + 1000, CMD_READ, BLOCK, BLOCK)
            _, [(_, payload)] = client.receive_chunks()
            assert payload[8:] == block, f"after the {case}"


def test_nbdinfo_negotiates_structured_replies(volume):
    info = json.loads(tool("nbdinfo", "--no-content", "--json", volume().uri()).stdout)
    assert info["structured"] is True


def test_connection_errors_are_logged_with_the_peer_but_a_closed_socket_is_not(volume):
    server = volume()
    tool("nbdinfo", "--no-content", server.uri())
    with NbdClient(server.port):
        pass  # closes in the middle of the handshake: the client left, nothing to log
    with socket.create_connection(("127.0.0.1", server.port), timeout=IO_SECONDS) as raw:
        port = raw.getsockname()[1]
        raw.sendall(b"GET / HTTP/1.1\r\n\r\n")
        assert closes(raw)
    for _ in range(100):
        logged = [line for line in server.log.read_text().splitlines() if "connection from" in line]
        if logged:
            break
        time.sleep(0.05)
    assert len(logged) == 1, server.log.read_text()
    assert f"127.0.0.1:{port}" in logged[0] and "client flags" in logged[0], logged[0]


@pytest.mark.parametrize(
    "setting, named",
    [
        ('[server]\nfrobnicate = true', "frobnicate"),
        ('[[export]]\ncolour = "blue"', "colour"),
        ('[[export]]\ncache = "ram:12q"', "cache"),
    ],
    ids=["unknown-server-key", "unknown-export-key", "bad-cache-size"],
)
def test_invalid_config_is_one_line_error(heterarchy, tmp_path, setting, named):
    table, line = setting.split("\n")
    tables = {
        "[server]": [f'listen = "127.0.0.1:{free_port()}"'],
        "[[export]]": ['name = "a"', f'backing = "file:{tmp_path / "a.img"}:8m"', 'cache = "ram:4m"'],
    }
    key = line.split(" = ")[0]
    tables[table] = [entry for entry in tables[table] if not entry.startswith(f"{key} =")] + [line]
    config = tmp_path / "volumes.toml"
    config.write_text("".join(f"{name}\n" + "\n".join(entries) + "\n" for name, entries in tables.items()))
    try:
        done = subprocess.run(
            [str(heterarchy), "serve", "--config", str(config)], capture_output=True, text=True, timeout=READY_SECONDS
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the server started on a config with {line!r}")
    assert done.returncode > 0, f"exit code {done.returncode}"
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], f"expected a one-line error naming {named}: {done.stderr!r}"


def test_unknown_mode_is_refused(heterarchy, tmp_path):
    args = [
        "serve", "nbd", "--listen", f"127.0.0.1:{free_port()}", "--export", EXPORT,
        "--backing", "ram:8m", "--cache", "ram:4m", "--mode", "xx",
    ]
    try:
        done = subprocess.run([str(heterarchy), *args], capture_output=True, text=True, timeout=READY_SECONDS)
    except subprocess.TimeoutExpired:
        pytest.fail("the server started with --mode xx")
    assert done.returncode > 0 and "panicked" not in done.stderr, done.stderr


# The crash test writes 4 KiB blocks over 32 MiB, twice its 16 MiB persistent cache, so lines
# are evicted and written back while the stream runs; each block's content names its block and
# the write's generation (a number that only grows), so a torn or misplaced block shows.
CRASH_BLOCKS = 8192
CRASH_WRITES = 2000
KILL_AFTER_AT_MOST = 1500
IN_FLIGHT = 16


def pattern(block: int, generation: int) -> bytes:
    return struct.pack(">QQ", block, generation) * (BLOCK // 16) if generation else bytes(BLOCK)


def generation_of(block: int, data: bytes) -> int | None:
    """The generation whose pattern `data` is (0: never written), None if it is none's."""
    _, generation = struct.unpack_from(">QQ", data)
    return generation if data == pattern(block, generation) else None


class History:
    """Per block, the generation that must have survived (its last write covered by a completed
    FLUSH, or FUA; or what was read back after a restart, then FLUSHed: a block must not change
    without a write) and how it became durable, and the generations written since, any of
    which may have survived instead."""

    def __init__(self):
        self.durable: dict[int, int] = {}
        self.how: dict[int, str] = {}
        self.since: dict[int, list[int]] = {}
        self.ever: dict[int, set[int]] = {}
        self.generations = itertools.count(1)

    def written(self, block: int) -> int:
        generation = next(self.generations)
        self.since.setdefault(block, []).append(generation)
        self.ever.setdefault(block, set()).add(generation)
        return generation

    def made_durable(self, block: int, generation: int, how: str):
        if generation > self.durable.get(block, 0):
            self.durable[block], self.how[block] = generation, how
            self.since[block] = [later for later in self.since[block] if later > generation]

    def describe(self, block: int) -> str:
        durable = self.durable.get(block, 0)
        how = f" ({self.how[block]})" if durable else ""
        return f"durable generation {durable}{how}, written since {self.since.get(block, [])}"

    def allowed(self, block: int) -> set[int]:
        return {self.durable.get(block, 0), *self.since.get(block, [])}


def write_until_killed(clients: list[NbdClient], server: Server, rng: random.Random, history: History, iteration: int):
    """Streams writes with FLUSHes (and some FUA writes) between them on every client at once,
    IN_FLIGHT at a time on each and never two to one block at once anywhere, then SIGKILLs the
    server once a random number of writes are acknowledged, with more still on the wire. A
    FLUSH on one connection covers the writes acknowledged on all of them before it was sent
    (the server offers multi-conn). Updates `history` as replies come."""
    kill_after = rng.randint(1, KILL_AFTER_AT_MOST)
    state = threading.Condition()
    in_flight: list[dict[int, tuple]] = [{} for _ in clients]
    acknowledged: list[tuple[int, int]] = []
    covered = [0]
    stopped, killed = [False], [False]
    # What went wrong on a receiving thread, for the test's own thread to fail on (an assert
    # in a thread only warns).
    broken: list[str] = []

    def writing(block):
        return any(entry[0] == "write" and entry[1] == block for flight in in_flight for entry in flight.values())

    def sender(index: int, seed: int):
        client, flight, local = clients[index], in_flight[index], random.Random(seed)
        flush_every = local.randint(2, 16)
        try:
            for count in range(1, CRASH_WRITES // len(clients) + 1):
                block, fua = local.randrange(CRASH_BLOCKS), local.random() < 0.1
                with state:
                    ready = lambda: stopped[0] or (len(flight) < IN_FLIGHT and not writing(block))  # noqa: E731
                    if not state.wait_for(ready, timeout=IO_SECONDS) or stopped[0]:
                        return
                    generation, handle = history.written(block), next(client.handles)
                    flight[handle] = ("write", block, generation, fua)
                client.send(handle, CMD_WRITE, block * BLOCK, BLOCK, pattern(block, generation), CMD_FLAG_FUA if fua else 0)
                if count % flush_every == 0:
                    with state:
                        if not state.wait_for(lambda: stopped[0] or len(flight) < IN_FLIGHT, timeout=IO_SECONDS) or stopped[0]:
                            return
                        handle = next(client.handles)
                        # A FLUSH covers the writes acknowledged before it was sent.
                        flight[handle] = ("flush", len(acknowledged))
                    client.send(handle, CMD_FLUSH, 0, 0)
        except OSError:
            pass  # the server is gone

    def receiver(index: int):
        client, flight = clients[index], in_flight[index]
        for _ in range(2 * CRASH_WRITES):
            try:
                handle, error, _ = client.receive()
            except (EOFError, OSError):
                return
            with state:
                entry = flight.pop(handle, None)
                if entry is None or error != 0:
                    broken.append(f"client {index}: handle {handle} answered with error {error}: "
                                  + ("no such request" if entry is None else f"{entry[0]} failed"))
                    stopped[0] = True
                    state.notify_all()
                    return
                if entry[0] == "write":
                    _, block, generation, fua = entry
                    acknowledged.append((block, generation))
                    if fua:
                        history.made_durable(block, generation, f"FUA write acknowledged in iteration {iteration}")
                else:
                    for block, generation in acknowledged[covered[0] : entry[1]]:
                        history.made_durable(block, generation, f"FLUSH completed in iteration {iteration}")
                    covered[0] = max(covered[0], entry[1])
                if not killed[0] and len(acknowledged) >= kill_after:
                    server.kill()
                    killed[0] = True
                state.notify_all()

    threads = [threading.Thread(target=sender, args=(index, rng.random())) for index in range(len(clients))]
    threads += [threading.Thread(target=receiver, args=(index,)) for index in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads[len(clients):]:
        thread.join(timeout=4 * IO_SECONDS)
    with state:
        stopped[0] = True
        state.notify_all()
    for thread in threads:
        thread.join(timeout=IO_SECONDS)
    assert not broken, broken
    assert killed[0], f"the server closed the connections after {len(acknowledged)} of {kill_after} writes: {server.log.read_text()}"
    assert server.process.returncode == -signal.SIGKILL


def damage(block: int, generation: int | None, history: History) -> str:
    """What a block read back after a kill that breaks the rules is, in the crash campaign's
    words: torn (or another block's), lost (another generation of the block than the durable
    one or those written since: the durable one is gone) or phantom (a generation never
    written to it)."""
    if generation is None:
        return "torn"
    return "lost" if generation == 0 or generation in history.ever.get(block, ()) else "phantom"


def check_and_settle(client: NbdClient, history: History, iteration: int) -> list[tuple[str, str]]:
    """Reads every block after the restart that follows `iteration`'s kill and returns what
    breaks the rules, each with its damage; then rewrites the broken blocks and FLUSHes, so
    that what is there now is the durable state the next iteration starts from."""
    failures, found = [], {}
    chunk = 1 << 20
    for offset in range(0, CRASH_BLOCKS * BLOCK, chunk):
        data = client.read(offset, chunk)
        for index in range(chunk // BLOCK):
            block = offset // BLOCK + index
            generation = generation_of(block, data[index * BLOCK : (index + 1) * BLOCK])
            if generation not in history.allowed(block):
                seen = "torn or foreign data" if generation is None else f"generation {generation}"
                failures.append(
                    (damage(block, generation, history), f"iteration {iteration}, block {block}: {seen}; {history.describe(block)}")
                )
                generation = history.written(block)
                client.write(block * BLOCK, pattern(block, generation))
            found[block] = generation
    client.flush()
    for block, generation in found.items():
        history.durable[block], history.since[block] = generation, []
        history.how[block] = f"read back after the restart that followed iteration {iteration}'s kill, then FLUSHed"
    return failures


# The hierarchies killed: a persistent cache in each mode that holds dirty data, two persistent
# tiers exclusive, and DRAM over two persistent tiers inclusive (whose DRAM a FLUSH empties of
# dirty lines). Each is a list of caches, fastest first, and flags.
KILL_SETTINGS = {
    "pmem-wb": (["pmem:{dir}/t0.pm:16m"], ["--mode", "wb"]),
    "pmem-wo": (["pmem:{dir}/t0.pm:16m"], ["--mode", "wo"]),
    "pmem-pmem-exclusive-wb": (["pmem:{dir}/t0.pm:8m", "pmem:{dir}/t1.pm:16m"], ["--mode", "wb", "--layout", "exclusive"]),
    "ram-pmem-pmem-inclusive-wb": (
        ["ram:4m", "pmem:{dir}/t1.pm:8m", "pmem:{dir}/t2.pm:16m"],
        ["--mode", "wb", "--layout", "inclusive"],
    ),
}


# Found by the crash campaign (docs/reliability.md, "Crash campaigns") and fixed in the volume:
# with RAM over PM over PM and several connections, FLUSHes answered before write-backs planned
# earlier (now every FLUSH waits for all of those); with PM over PM exclusive, a restart's
# partly valid lines made a 1 MiB read fail with EIO (a later piece tried at once needed the
# backing store).
@pytest.mark.parametrize("setting", list(KILL_SETTINGS))
def test_sigkill_mid_stream_loses_no_flushed_write_and_tears_no_block(volume, tmp_path, setting):
    """Iterations of writes killed mid-stream and checked after the restart (5 per setting here;
    `HETERARCHY_CRASH_ITERATIONS`, and `HETERARCHY_CRASH_SEED` for the writes' seed, which
    `scripts/crash-campaign --store nbd-kill` sets). Prints the crash campaign's line."""
    iterations = int(os.environ.get("HETERARCHY_CRASH_ITERATIONS", 5))
    seed = int(os.environ.get("HETERARCHY_CRASH_SEED", 11))
    caches, flags = KILL_SETTINGS[setting]
    caches = [cache.format(dir=tmp_path) for cache in caches]
    extra = [flag for cache in caches[1:] for flag in ("--cache", cache)]
    started = time.monotonic()

    def start() -> Server:
        return volume(flags[1], *flags[2:], *extra, backing=f"file:{tmp_path / 'crash.img'}:{VOLUME_BYTES}", cache=caches[0])

    rng, history, failures = random.Random(seed), History(), []
    done = 0
    try:
        server = start()
        for iteration in range(iterations):
            # One to four connections at once, each with requests in flight.
            clients = [connect(server) for _ in range(1 + iteration % 4)]
            try:
                write_until_killed(clients, server, rng, history, iteration)
            finally:
                for client in clients:
                    client.sock.close()
            server = start()
            with connect(server) as client:
                failures += [(kind, why, iteration) for kind, why in check_and_settle(client, history, iteration)]
            done += 1
    except (AssertionError, OSError, EOFError) as error:
        # A restart that fails or a read answered with an error ends the run: an other failure,
        # with what the server said last.
        said = "\n".join(server.log.read_text().splitlines()[-8:])
        failures.append(("other", f"iteration {done}: {error}; the server's log ends:\n{said}", done))
        done += 1
    count = lambda kind: sum(1 for failure in failures if failure[0] == kind)  # noqa: E731
    failed = sorted({iteration for _, _, iteration in failures})
    print(
        f"\ncrash campaign: store=nbd-kill-{setting} trials={done} crashes={done} "
        f"lost_flushed={count('lost')} torn={count('torn')} phantom={count('phantom')} other={count('other')} "
        f"failed_seeds={','.join(f'{seed}:{i}' for i in failed) or '-'} seconds={time.monotonic() - started:.1f}"
    )
    assert not failures, f"{len(failures)} blocks broke the rules:\n" + "\n".join(why for _, why, _ in failures[:20])


def test_volume_create_then_offline_flush_after_kill(volume, heterarchy, image, tmp_path):
    """`volume create` makes the files; after kill -9 the persistent cache still holds the dirty
    lines, and `volume flush` without a server writes them to the backing file."""
    path, data = image
    backing, cache = f"file:{tmp_path / 'made.img'}:{VOLUME_BYTES}", f"pmem:{tmp_path / 'made.pm'}:16m"
    created = run(heterarchy, "volume", "create", "--backing", backing, "--cache", cache)
    assert "volume of 64 MiB" in created.stdout, created.stdout
    server = volume("wb", backing=backing, cache=cache, metrics=True)
    tool("nbdcopy", "--flush", path, server.uri())
    dirty = volume_stats(server)["dirty_lines"]
    assert dirty > 0, "the copy must leave dirty lines for the test to mean anything"
    server.kill()
    assert (tmp_path / "made.img").read_bytes()[: len(data)] != data
    flushed = run(heterarchy, "volume", "flush", "--backing", backing, "--cache", cache)
    assert f"{dirty} dirty lines written back" in flushed.stdout, flushed.stdout
    assert (tmp_path / "made.img").read_bytes()[: len(data)] == data
