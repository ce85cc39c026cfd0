"""The NBD tests' shared pieces: a `heterarchy serve` process, a minimal hand-written NBD
client for what the NBD tools never send, the protocol's numbers, and small helpers."""

import itertools
import json
import shutil
import socket
import struct
import subprocess
import urllib.request
from pathlib import Path

import pytest

from helpers import LoggedProcess

TOOLS = ("nbdinfo", "nbdcopy", "qemu-img", "qemu-io", "fio")
MISSING = [tool for tool in TOOLS if shutil.which(tool) is None]

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


class Server(LoggedProcess):
    """A `heterarchy serve` process, the addresses it listens on and its log."""

    def __init__(self, binary: Path, args, log: Path, nbd, metrics: int | None):
        super().__init__([binary, *args], log)
        self.nbd, self.metrics = nbd, metrics

    def wait_until_ready(self):
        self.wait_for([address for address in (self.nbd, self.metrics) if address is not None])

    @property
    def port(self) -> int:
        return self.nbd

    def uri(self) -> str:
        if isinstance(self.nbd, Path):
            return f"nbd+unix:///{EXPORT}?socket={self.nbd}"
        return f"nbd://127.0.0.1:{self.nbd}/{EXPORT}"

    def http(self, path, method="GET", token: str | None = None) -> str:
        """The body of `method path` on the metrics port; with `token` as the admin token a POST
        needs (docs/block-volumes.md, "The admin endpoint")."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        request = urllib.request.Request(f"http://127.0.0.1:{self.metrics}{path}", method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=IO_SECONDS) as response:
            return response.read().decode()



def tool(*args, timeout=60, cwd=None) -> subprocess.CompletedProcess:
    """Runs an NBD client tool; fails the test with its output unless it exits 0."""
    done = subprocess.run(list(map(str, args)), capture_output=True, text=True, timeout=timeout, cwd=cwd)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(map(str, args))} exited {done.returncode}: {done.stdout}{done.stderr}")
    return done


def qemu_io(server: Server, *commands) -> str:
    """Runs qemu-io's `commands` against `server`'s export; fails the test if any failed."""
    args = [arg for command in commands for arg in ("-c", command)]
    done = tool("qemu-io", "-f", "raw", server.uri(), *args)
    output = done.stdout + done.stderr
    # qemu-io reports "Pattern verification failed", "write failed: ..." and carries on.
    assert "failed" not in output, output
    return output


def volume_stats(server: Server) -> dict:
    [stats] = [entry for entry in json.loads(server.http("/stats"))["exports"] if entry["name"] == EXPORT]
    return stats


class NbdClient:
    """A minimal fixed-newstyle NBD client on 127.0.0.1: options, then requests, and simple
    replies or, once asked for with `structured_replies`, structured reply chunks."""

    def __init__(self, port: int, source: str | None = None):
        """Connects from `source` (another loopback address, say 127.0.0.2, to be another
        peer) or from where the system chooses."""
        bind = (source, 0) if source else None
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=IO_SECONDS, source_address=bind)
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


