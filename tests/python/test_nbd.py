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
import urllib.request
from pathlib import Path

import pytest

from helpers import READY_SECONDS, free_port, run, run_json, wait_ready

TOOLS = ("nbdinfo", "nbdcopy", "qemu-img", "qemu-io", "fio")
MISSING = [tool for tool in TOOLS if shutil.which(tool) is None]
if MISSING:
    pytest.skip(
        f"the NBD tests need {', '.join(MISSING)} (Debian packages libnbd-bin, qemu-utils, fio)",
        allow_module_level=True,
    )

EXPORT = "vol"
VOLUME_BYTES = 64 << 20
IMAGE_BYTES = 32 << 20
BLOCK = 4096
IO_SECONDS = 10

# The NBD protocol (NetworkBlockDevice/nbd doc/proto.md); every field is big-endian.
NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
OPTION_REPLY_MAGIC = 0x0003E889045565A9
REQUEST_MAGIC = 0x25609513
SIMPLE_REPLY_MAGIC = 0x67446698
STRUCTURED_REPLY_MAGIC = 0x668E33EF
REPLY_FLAG_DONE = 1
REPLY_TYPE_OFFSET_DATA = 1
REPLY_TYPE_ERROR = (1 << 15) | 1
FLAG_FIXED_NEWSTYLE = 1
FLAG_NO_ZEROES = 2
OPT_LIST = 3
OPT_GO = 7
OPT_STRUCTURED_REPLY = 8
REP_ACK = 1
REP_SERVER = 2
REP_INFO = 3
REP_FLAG_ERROR = 1 << 31
REP_ERR_UNSUP = REP_FLAG_ERROR | 1
REP_ERR_UNKNOWN = REP_FLAG_ERROR | 6
INFO_EXPORT = 0
INFO_BLOCK_SIZE = 3
TRANSMISSION_SEND_FLUSH = 1 << 2
TRANSMISSION_SEND_FUA = 1 << 3
CMD_READ = 0
CMD_WRITE = 1
CMD_FLUSH = 3
CMD_FLAG_FUA = 1
# NBD's error numbers are Linux's.
EINVAL = 22


class Server:
    """A `heterarchy serve` process, the addresses it listens on and its log."""

    def __init__(self, binary: Path, args, log: Path, nbd, metrics: int | None):
        self.nbd, self.metrics, self.log = nbd, metrics, log
        with open(log, "wb") as output:
            self.process = subprocess.Popen(
                [str(binary), *map(str, args)], stdout=output, stderr=subprocess.STDOUT
            )

    def wait_until_ready(self):
        addresses = [address for address in (self.nbd, self.metrics) if address is not None]
        if failure := wait_ready(self.process, addresses):
            pytest.fail(f"the server {failure}: {self.log.read_text()}")

    @property
    def port(self) -> int:
        return self.nbd

    def uri(self) -> str:
        if isinstance(self.nbd, Path):
            return f"nbd+unix:///{EXPORT}?socket={self.nbd}"
        return f"nbd://127.0.0.1:{self.nbd}/{EXPORT}"

    def http(self, path, method="GET") -> str:
        request = urllib.request.Request(f"http://127.0.0.1:{self.metrics}{path}", method=method)
        with urllib.request.urlopen(request, timeout=IO_SECONDS) as response:
            return response.read().decode()

    def stop(self) -> int:
        """SIGTERM, then the exit code of the graceful shutdown."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the server was still running 30 s after SIGTERM: {self.log.read_text()}")

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=IO_SECONDS)


@pytest.fixture
def serve(heterarchy, tmp_path):
    """`serve(*args, nbd=, metrics=)` starts `heterarchy serve *args` and waits until it accepts
    connections on `nbd` (a port or a Unix socket path) and `metrics` (a port); every server
    still running at teardown is killed."""
    servers = []

    def start(*args, nbd, metrics=None) -> Server:
        server = Server(heterarchy, ["serve", *args], tmp_path / f"server-{len(servers)}.log", nbd, metrics)
        servers.append(server)
        server.wait_until_ready()
        return server

    yield start
    for server in servers:
        server.kill()


@pytest.fixture
def volume(serve, tmp_path):
    """`volume(mode, *flags, backing=, cache=, metrics=, listen=)` serves one export, EXPORT, by
    default a 64 MiB file in tmp_path over a 16 MiB RAM cache, on a free TCP port (on a Unix
    socket if `listen` is its path), with an HTTP metrics port if `metrics`."""

    def start(mode="wt", *flags, backing=None, cache="ram:16m", metrics=False, listen=None) -> Server:
        nbd = listen or free_port()
        address = f"unix:{nbd}" if isinstance(nbd, Path) else f"127.0.0.1:{nbd}"
        metrics_port = free_port() if metrics else None
        args = [
            "nbd", "--listen", address, "--export", EXPORT,
            "--backing", backing or f"file:{tmp_path / 'backing.img'}:{VOLUME_BYTES}",
            "--cache", cache, "--mode", mode, *flags,
        ]
        if metrics_port:
            args += ["--metrics", f"127.0.0.1:{metrics_port}"]
        return serve(*args, nbd=nbd, metrics=metrics_port)

    return start


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> tuple[Path, bytes]:
    """A 32 MiB file of seeded random bytes and its contents."""
    data = random.Random(5).randbytes(IMAGE_BYTES)
    path = tmp_path_factory.mktemp("image") / "in.bin"
    path.write_bytes(data)
    return path, data


def tool(*args, timeout=60, cwd=None) -> subprocess.CompletedProcess:
    """Runs an NBD client tool; fails the test with its output unless it exits 0."""
    done = subprocess.run(list(map(str, args)), capture_output=True, text=True, timeout=timeout, cwd=cwd)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(map(str, args))} exited {done.returncode}: {done.stdout}{done.stderr}")
    return done


def volume_stats(server: Server) -> dict:
    [stats] = [entry for entry in json.loads(server.http("/stats"))["exports"] if entry["name"] == EXPORT]
    return stats


class NbdClient:
    """A minimal fixed-newstyle NBD client on 127.0.0.1: options, then requests, and simple
    replies or, once asked for with `structured_replies`, structured reply chunks."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=IO_SECONDS)
        magic, option_magic, flags = struct.unpack(">QQH", self.recv(18))
        assert (magic, option_magic) == (NBDMAGIC, IHAVEOPT), "not a newstyle NBD greeting"
        assert flags & FLAG_FIXED_NEWSTYLE, f"handshake flags {flags:#x} lack FIXED_NEWSTYLE"
        self.sock.sendall(struct.pack(">I", FLAG_FIXED_NEWSTYLE | flags & FLAG_NO_ZEROES))
        self.handles = itertools.count(1)

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.sock.close()

    def recv(self, length: int) -> bytes:
        data = bytearray(length)
        view, got = memoryview(data), 0
        while got < length:
            received = self.sock.recv_into(view[got:])
            if received == 0:
                raise EOFError(f"the server closed the connection after {got} of {length} bytes")
            got += received
        return bytes(data)

    def option(self, option: int, data=b"") -> list[tuple[int, bytes]]:
        """Sends an option; returns its replies (type, data) up to the ACK or the first error."""
        self.sock.sendall(struct.pack(">QII", IHAVEOPT, option, len(data)) + data)
        replies = []
        for _ in range(64):
            magic, echoed, kind, length = struct.unpack(">QIII", self.recv(20))
            assert (magic, echoed) == (OPTION_REPLY_MAGIC, option), f"bad option reply {magic:#x} {echoed}"
            replies.append((kind, self.recv(length)))
            if kind == REP_ACK or kind & REP_FLAG_ERROR:
                return replies
        raise AssertionError(f"option {option}: no ACK or error in 64 replies")

    def list_exports(self) -> list[str]:
        *servers, (last, _) = self.option(OPT_LIST)
        assert last == REP_ACK, f"NBD_OPT_LIST ended with reply {last:#x}"
        names = []
        for kind, data in servers:
            assert kind == REP_SERVER
            (length,) = struct.unpack_from(">I", data)
            names.append(data[4 : 4 + length].decode())
        return names

    def go(self, name: str) -> int:
        """NBD_OPT_GO asking for block sizes; returns the last reply's type (REP_ACK: the
        connection is in transmission) and keeps the export's size, transmission flags and
        (minimum, preferred, maximum) block sizes."""
        encoded = name.encode()
        data = struct.pack(">I", len(encoded)) + encoded + struct.pack(">HH", 1, INFO_BLOCK_SIZE)
        replies = self.option(OPT_GO, data)
        for kind, payload in replies:
            if kind == REP_INFO:
                (info,) = struct.unpack_from(">H", payload)
                if info == INFO_EXPORT:
                    self.size, self.flags = struct.unpack_from(">QH", payload, 2)
                elif info == INFO_BLOCK_SIZE:
                    self.block_sizes = struct.unpack_from(">III", payload, 2)
        return replies[-1][0]

    def structured_replies(self) -> int:
        """Asks for structured replies (NBD_OPT_STRUCTURED_REPLY); returns the reply's type."""
        [(kind, _)] = self.option(OPT_STRUCTURED_REPLY)
        return kind

    def receive_chunks(self) -> tuple[int, list[tuple[int, bytes]]]:
        """The next structured reply: its handle and its chunks (type, payload), up to the one
        flagged DONE; fails on a simple reply or chunks of two requests mixed."""
        chunks, handles = [], set()
        while True:
            magic, flags, kind, handle, length = struct.unpack(">IHHQI", self.recv(20))
            assert magic == STRUCTURED_REPLY_MAGIC, f"expected a structured reply chunk, magic {magic:#x}"
            handles.add(handle)
            chunks.append((kind, self.recv(length)))
            if flags & REPLY_FLAG_DONE:
                assert len(handles) == 1, f"chunks of several requests: {handles}"
                return handle, chunks

    def send(self, handle: int, command: int, offset: int, length: int, payload=b"", flags=0):
        self.sock.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, flags, command, handle, offset, length))
        if payload:
            self.sock.sendall(payload)

    def receive(self, read_length=0) -> tuple[int, int, bytes]:
        """The next simple reply: (handle, error, data); a failed read carries no data."""
        magic, error, handle = struct.unpack(">IIQ", self.recv(16))
        assert magic == SIMPLE_REPLY_MAGIC, f"bad reply magic {magic:#x}"
        return handle, error, self.recv(read_length) if error == 0 else b""

    def request(self, command: int, offset: int, length: int, payload=b"", flags=0) -> tuple[int, bytes]:
        handle = next(self.handles)
        self.send(handle, command, offset, length, payload, flags)
        echoed, error, data = self.receive(length if command == CMD_READ else 0)
        assert echoed == handle, f"reply to handle {echoed}, expected {handle}"
        return error, data

    def read(self, offset: int, length: int) -> bytes:
        error, data = self.request(CMD_READ, offset, length)
        assert error == 0, f"read of {length} bytes at {offset}: error {error}"
        return data

    def write(self, offset: int, data: bytes):
        error, _ = self.request(CMD_WRITE, offset, len(data), data)
        assert error == 0, f"write of {len(data)} bytes at {offset}: error {error}"

    def flush(self):
        error, _ = self.request(CMD_FLUSH, 0, 0)
        assert error == 0, f"flush: error {error}"


def connect(server: Server) -> NbdClient:
    client = NbdClient(server.port)
    assert client.go(EXPORT) == REP_ACK
    return client


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


def qemu_io(server: Server, *commands) -> str:
    args = [arg for command in commands for arg in ("-c", command)]
    done = tool("qemu-io", "-f", "raw", server.uri(), *args)
    output = done.stdout + done.stderr
    # qemu-io reports "Pattern verification failed", "write failed: ..." and carries on.
    assert "failed" not in output, output
    return output


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


def test_metrics_stats_and_flush(volume, heterarchy):
    server = volume("wb", metrics=True)
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

        run(heterarchy, "volume", "flush", "--server", address, "--export", EXPORT)
        assert volume_stats(server)["dirty_lines"] == 0

        client.write(0, bytes(BLOCK))
        assert volume_stats(server)["dirty_lines"] > 0
        server.http(f"/flush?export={EXPORT}", method="POST")
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
        self.generations = itertools.count(1)

    def written(self, block: int) -> int:
        generation = next(self.generations)
        self.since.setdefault(block, []).append(generation)
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
                entry = flight.pop(handle)
                assert error == 0, f"{entry[0]} failed with error {error}"
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
    assert killed[0], f"the server closed the connections after {len(acknowledged)} of {kill_after} writes: {server.log.read_text()}"
    assert server.process.returncode == -signal.SIGKILL


def check_and_settle(client: NbdClient, history: History, iteration: int) -> list[str]:
    """Reads every block after the restart that follows `iteration`'s kill and returns what
    breaks the rules; then rewrites the broken blocks and FLUSHes, so that what is there now is
    the durable state the next iteration starts from."""
    failures, found = [], {}
    chunk = 1 << 20
    for offset in range(0, CRASH_BLOCKS * BLOCK, chunk):
        data = client.read(offset, chunk)
        for index in range(chunk // BLOCK):
            block = offset // BLOCK + index
            generation = generation_of(block, data[index * BLOCK : (index + 1) * BLOCK])
            if generation not in history.allowed(block):
                seen = "torn or foreign data" if generation is None else f"generation {generation}"
                failures.append(f"iteration {iteration}, block {block}: {seen}; {history.describe(block)}")
                generation = history.written(block)
                client.write(block * BLOCK, pattern(block, generation))
            found[block] = generation
    client.flush()
    for block, generation in found.items():
        history.durable[block], history.since[block] = generation, []
        history.how[block] = f"read back after the restart that followed iteration {iteration}'s kill, then FLUSHed"
    return failures


def test_sigkill_mid_stream_loses_no_flushed_write_and_tears_no_block(volume, tmp_path):
    iterations = int(os.environ.get("HETERARCHY_CRASH_ITERATIONS", 20))
    files = {"backing": f"file:{tmp_path / 'crash.img'}:{VOLUME_BYTES}", "cache": f"pmem:{tmp_path / 'crash.pm'}:16m"}
    rng, history, failures = random.Random(11), History(), []
    server = volume("wb", **files)
    for iteration in range(iterations):
        # One to four connections at once, each with requests in flight.
        clients = [connect(server) for _ in range(1 + iteration % 4)]
        try:
            write_until_killed(clients, server, rng, history, iteration)
        finally:
            for client in clients:
                client.sock.close()
        server = volume("wb", **files)
        with connect(server) as client:
            failures += check_and_settle(client, history, iteration)
    assert not failures, f"{len(failures)} blocks broke the rules:\n" + "\n".join(failures[:20])


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
