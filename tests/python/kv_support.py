"""Servers, clients and a raw-protocol connection for test_kv.py: the memcached-compatible
`heterarchy serve kv` and the real memcached are started the same way (127.0.0.1, one thread,
a given memory) so that one test checks both against the same expected bytes."""

import os
import re
import shutil
import socket
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pymemcache.client.base import Client

from helpers import BINARY, LoggedProcess, free_port

KINDS = ("heterarchy", "memcached")
IO_SECONDS = 10
# The key length limit of the text protocol, in bytes.
KEY_MAX = 250


def kv_kinds() -> list[str]:
    """The server kinds named by KV_SERVERS (a comma list, default both)."""
    named = [kind.strip() for kind in os.environ.get("KV_SERVERS", ",".join(KINDS)).split(",") if kind.strip()]
    unknown = sorted(set(named) - set(KINDS))
    if unknown:
        raise pytest.UsageError(f"KV_SERVERS names unknown server kinds {unknown}; known: {', '.join(KINDS)}")
    return named


def tool_path(name: str, package: str, *fallbacks: str) -> str:
    """The path of an external tool (also looked for in `fallbacks`, e.g. /usr/sbin, which a
    user's PATH may lack); skips the test naming the Debian package when it is not installed."""
    found = shutil.which(name) or next((path for path in fallbacks if os.access(path, os.X_OK)), None)
    if found is None:
        pytest.skip(f"{name} is not installed (Debian package {package})")
    return found


class KvServer(LoggedProcess):
    """A started server process (memcached, heterarchy or a proxy), its addresses and its log."""

    def __init__(self, kind: str, argv, log: Path, addresses, port: int | None = None, unix: Path | None = None):
        super().__init__(argv, log)
        self.kind, self.addresses = kind, list(addresses)
        self.port, self.unix = port, unix

    def wait_until_ready(self):
        self.wait_for(self.addresses)

    def client(self, port: int | None = None, unix=False, **options) -> Client:
        """A pymemcache client (on the server's port, on `port`, a tenant's, or with `unix` on
        its Unix socket) that waits for every reply (pymemcache's default is noreply)."""
        server = str(self.unix) if unix or not (port or self.port) else ("127.0.0.1", port or self.port)
        options.setdefault("default_noreply", False)
        return Client(server, connect_timeout=IO_SECONDS, timeout=IO_SECONDS, **options)

    def raw(self) -> "Raw":
        return Raw(self.port if self.port is not None else self.unix)

    def stats(self, port: int | None = None) -> dict[str, str]:
        """`stats` on the server's port (or on `port`, a tenant's), as strings."""
        with Raw(port or self.port) as conn:
            return conn.stats()



class Servers:
    """Starts servers of either kind for one test; `kill_all` (the fixture's teardown) kills
    every one still running."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.started: list[KvServer] = []

    def _launch(self, kind, argv, addresses, port=None, unix=None) -> KvServer:
        log = self.tmp_path / f"{kind}-{len(self.started)}.log"
        server = KvServer(kind, argv, log, addresses, port=port, unix=unix)
        self.started.append(server)
        server.wait_until_ready()
        return server

    def start(self, kind: str, memory_mb=64, item_max: str | None = None, unix: Path | None = None,
              pmem: str | None = None, metrics: int | None = None, port: int | None = None,
              index_memory: str | None = None) -> KvServer:
        """One server of `kind` with one thread and `memory_mb` MiB for values (heterarchy:
        `pmem`, PATH:SIZE, instead when given, with `index_memory` of DRAM for its index),
        listening on a free port on 127.0.0.1 and on `unix` if given (memcached then listens
        on the Unix socket only: its -s turns TCP off)."""
        if kind == "memcached":
            assert pmem is None and metrics is None, "memcached has no persistent memory or metrics port"
            argv = [tool_path("memcached", "memcached"), "-U", "0", "-t", "1", "-m", memory_mb]
            if os.geteuid() == 0:
                argv += ["-u", "root"]  # memcached refuses to run as root without -u
            if item_max:
                argv += ["-I", item_max]
            if unix:
                return self._launch(kind, argv + ["-s", unix], [unix], unix=unix)
            port = port or free_port()
            return self._launch(kind, argv + ["-l", "127.0.0.1", "-p", port], [port], port=port)
        port = port or free_port()
        argv = [BINARY, "serve", "kv", "--listen", f"127.0.0.1:{port}", "--threads", "1"]
        argv += ["--pmem", pmem] if pmem else ["--memory", f"{memory_mb}m"]
        if index_memory:
            argv += ["--memory", index_memory]
        if item_max:
            argv += ["--item-max", item_max]
        if unix:
            argv += ["--unix", unix]
        if metrics:
            argv += ["--metrics", f"127.0.0.1:{metrics}"]
        addresses = [port] + ([unix] if unix else []) + ([metrics] if metrics else [])
        return self._launch(kind, argv, addresses, port=port, unix=unix)

    def start_config(self, config: Path, addresses) -> KvServer:
        """`heterarchy serve --config FILE`, ready when every address (tenant ports, Unix
        sockets, the metrics port) takes connections."""
        ports = [address for address in addresses if isinstance(address, int)]
        return self._launch("heterarchy", [BINARY, "serve", "--config", config], addresses, port=ports[0])

    def start_process(self, name: str, argv, addresses) -> KvServer:
        """Any other server process (the proxy), killed at teardown like the rest."""
        return self._launch(name, argv, addresses, port=addresses[0])

    def kill_all(self):
        for server in self.started:
            server.kill()


class Raw:
    """A plain socket to a server, for exact bytes: `exchange` sends and compares the reply
    byte for byte; `reply` reads one whole reply (a line, a VA/VALUE block, a STAT list)."""

    def __init__(self, address):
        if isinstance(address, Path):
            self.sock = socket.socket(socket.AF_UNIX)
            self.sock.settimeout(IO_SECONDS)
            self.sock.connect(str(address))
        else:
            self.sock = socket.create_connection(("127.0.0.1", address), timeout=IO_SECONDS)
        self.buffer = bytearray()

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()

    def close(self):
        self.sock.close()

    def send(self, data: bytes):
        self.sock.sendall(data)

    def _fill(self, what: str):
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            raise AssertionError(f"no {what} within {IO_SECONDS} s; received so far: {bytes(self.buffer)[:300]!r}")
        if not chunk:
            raise EOFError(f"the server closed the connection before {what}; received: {bytes(self.buffer)[:300]!r}")
        self.buffer += chunk

    def exact(self, length: int) -> bytes:
        while len(self.buffer) < length:
            self._fill(f"{length} bytes")
        data = bytes(self.buffer[:length])
        del self.buffer[:length]
        return data

    def line(self) -> bytes:
        """One reply line with its \\r\\n."""
        while (end := self.buffer.find(b"\r\n")) < 0:
            self._fill("a whole line")
        return self.exact(end + 2)

    def reply(self) -> bytes:
        first = line = self.line()
        out = bytearray(line)
        if first.startswith(b"VA "):
            out += self.exact(int(first.split()[1]) + 2)
        elif first.startswith((b"VALUE ", b"STAT ")):
            while line != b"END\r\n":
                if line.startswith(b"VALUE "):
                    out += self.exact(int(line.split()[3]) + 2)
                line = self.line()
                out += line
        return bytes(out)

    def request(self, data: bytes) -> bytes:
        """Sends one command and returns its whole reply."""
        self.send(data)
        return self.reply()

    def exchange(self, data: bytes, expected: bytes):
        """Sends `data` and asserts that the next bytes received are exactly `expected`."""
        self.send(data)
        # Reads no further than the first byte that differs, so a wrong reply fails at once.
        while len(self.buffer) < len(expected) and expected.startswith(self.buffer):
            self._fill(f"the reply {expected[:300]!r} to {data[:200]!r}")
        got = bytes(self.buffer[: len(expected)])
        assert got == expected, f"sent {data[:200]!r}\nexpected {expected[:1000]!r}\nreceived {got[:1000]!r}"
        del self.buffer[: len(expected)]

    def until_closed(self, seconds=IO_SECONDS) -> bytes:
        """Everything received until the server closes the connection (fails if it does not
        within `seconds`)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                return bytes(self.buffer)
            if not chunk:
                return bytes(self.buffer)
            self.buffer += chunk
        raise AssertionError(f"the connection was still open after {seconds} s; received {bytes(self.buffer)[:300]!r}")

    def stats(self, *args: str) -> dict[str, str]:
        reply = self.request(" ".join(["stats", *args]).encode() + b"\r\n")
        lines = reply.decode().split("\r\n")
        assert lines[-2:] == ["END", ""], reply
        return {name: value for _, name, value in (entry.split(" ", 2) for entry in lines[:-2])}


@dataclass
class Meta:
    """A meta reply: its code, its size (VA only), its flags (first character -> the rest, in
    the order sent) and its value (VA only)."""

    code: str
    size: int | None = None
    flags: dict[str, str] = field(default_factory=dict)
    value: bytes | None = None

    @property
    def order(self) -> list[str]:
        return list(self.flags)


def parse_meta(reply: bytes) -> Meta:
    head, _, rest = reply.partition(b"\r\n")
    words = head.decode().split(" ")
    meta = Meta(words[0])
    if meta.code == "VA":
        meta.size = int(words[1])
        words = words[1:]
        meta.value = rest[: meta.size]
        assert rest[meta.size :] == b"\r\n", reply
    for word in words[1:]:
        assert word[0] not in meta.flags, f"flag {word[0]} twice in {reply!r}"
        meta.flags[word[0]] = word[1:]
    return meta


def cas_of(conn: Raw, key: bytes) -> int:
    """The key's CAS value, read with `mg <key> c`."""
    meta = parse_meta(conn.request(b"mg " + key + b" c\r\n"))
    assert meta.code == "HD", meta
    return int(meta.flags["c"])


def wait_until(predicate, seconds: float, step=0.05) -> bool:
    """Polls `predicate` until it holds or `seconds` pass; returns whether it held."""
    deadline = time.monotonic() + seconds
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(step)


def http_get(port: int, path: str) -> str:
    """The body of GET http://127.0.0.1:<port><path>."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=IO_SECONDS) as response:
        return response.read().decode()


def prometheus_value(text: str, name: str, **labels) -> float | None:
    """The value of the one sample of `name` whose labels include `labels` (None if none)."""
    found = []
    for line in text.splitlines():
        match = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)(\s+\d+)?", line.strip())
        if not match or match.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(2) or ""))
        if all(have.get(key) == value for key, value in labels.items()):
            found.append(float(match.group(3)))
    assert len(found) <= 1, f"{len(found)} samples of {name}{labels} in /metrics"
    return found[0] if found else None
