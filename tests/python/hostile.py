"""Hostile NBD clients (docs/reliability.md, "Limits on what a client can make a server hold"),
for the tests and the soak: each flood is what one client can do to a server, from its own
loopback address (127.0.0.2) so that the server counts it as another peer, in a thread that
stops by itself after a bounded time or when told. A probe beside them times a well-behaved
client's 4 KiB reads and samples the server's resident memory."""

import random
import socket
import struct
import threading
import time
from pathlib import Path

from nbd_support import BLOCK, CMD_READ, CMD_WRITE, EXPORT, REP_ACK, REQUEST_MAGIC, NbdClient

HOSTILE_SOURCE = "127.0.0.2"
CMD_TRIM = 4
CMD_WRITE_ZEROES = 6
MAX_PAYLOAD_BYTES = 32 << 20
# The longest TRIM or WRITE ZEROES a request's 32-bit length holds, in whole blocks.
LONGEST_BYTES = (1 << 32) - BLOCK
KIB, MIB = 1 << 10, 1 << 20
# Floods keep off the first MiB of a volume: the probe's blocks are there.
FLOOD_FROM_BYTES = MIB
# A WRITE flood's payload, made once: making or joining 32 MiB in a flood's thread would hold
# Python's interpreter lock for tens of milliseconds and delay the probe, not the server.
PAYLOAD = memoryview(b"\xa5" * MAX_PAYLOAD_BYTES)


def rss_bytes(pid: int) -> int:
    """The resident memory of process `pid`."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * KIB
    raise AssertionError(f"no VmRSS for pid {pid}")


def header(command: int, handle: int, offset: int, length: int) -> bytes:
    return struct.pack(">IHHQQI", REQUEST_MAGIC, 0, command, handle, offset, length)


def reset(sock: socket.socket):
    """Closes with a reset, as a client that vanishes does: the server learns at once."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class Flood(threading.Thread):
    """`connections` hostile clients of `export` at `port`, each doing `kind` and never reading
    an answer, closed with a reset and opened again every `cycle_seconds`, until `stop()` or
    `seconds` have passed:

    - "reads": 64 READs of 32 MiB each;
    - "writes": WRITEs of 32 MiB, their payloads sent as fast as the socket takes them;
    - "trims": 512 TRIMs and WRITE ZEROES of up to 4 GiB each;
    - "idle": connections that never finish their handshake (the server may close them).
    """

    def __init__(self, port: int, kind: str, *, volume_bytes: int, connections=1, cycle_seconds=1.0,
                 seconds=60.0, export=EXPORT):
        super().__init__(daemon=True)
        assert kind in ("reads", "writes", "trims", "idle"), kind
        self.port, self.kind, self.volume_bytes, self.export = port, kind, volume_bytes, export
        self.connections, self.cycle_seconds, self.seconds = connections, cycle_seconds, seconds
        self.stopping = threading.Event()
        self.rounds = 0
        self.failure: BaseException | None = None

    def stop(self):
        self.stopping.set()
        self.join(timeout=30)
        assert not self.is_alive(), f"the {self.kind} flood did not stop"
        if self.failure:
            raise self.failure

    def run(self):
        deadline = time.monotonic() + self.seconds
        try:
            while not self.stopping.is_set() and time.monotonic() < deadline:
                sockets = [self.open() for _ in range(self.connections)]
                self.flood([sock for sock in sockets if sock is not None])
                for sock in sockets:
                    if sock is not None:
                        reset(sock)
                self.rounds += 1
        except BaseException as error:  # noqa: BLE001 - reported by stop()
            self.failure = error

    def open(self) -> socket.socket | None:
        """A hostile connection; None when the server refused it (over a limit)."""
        if self.kind == "idle":
            return socket.create_connection(("127.0.0.1", self.port), timeout=5,
                                            source_address=(HOSTILE_SOURCE, 0))
        try:
            client = NbdClient(self.port, source=HOSTILE_SOURCE)
            if client.go(self.export) != REP_ACK:
                client.sock.close()
                return None
        except (EOFError, ConnectionError):
            return None
        return client.sock

    def flood(self, sockets: list[socket.socket]):
        until = time.monotonic() + self.cycle_seconds
        requests = {"reads": self.reads, "trims": self.trims}.get(self.kind)
        for handle_base, sock in enumerate(sockets):
            sock.settimeout(0.05)
            if requests:
                send_some(sock, requests(handle_base << 16), until)
        if self.kind == "writes":
            self.writes(sockets, until)
        self.stopping.wait(max(0.0, until - time.monotonic()))

    def offset(self) -> int:
        """Where a 32 MiB request may start, off the probe's blocks."""
        blocks = (self.volume_bytes - MAX_PAYLOAD_BYTES - FLOOD_FROM_BYTES) // BLOCK
        assert blocks > 0, f"a {self.volume_bytes}-byte volume is too small to flood"
        return FLOOD_FROM_BYTES + random.randrange(blocks) * BLOCK

    def reads(self, base: int) -> bytes:
        return b"".join(header(CMD_READ, base + index, self.offset(), MAX_PAYLOAD_BYTES) for index in range(64))

    def trims(self, base: int) -> bytes:
        length = min(LONGEST_BYTES, self.volume_bytes - FLOOD_FROM_BYTES)
        return b"".join(header(CMD_TRIM if index % 2 else CMD_WRITE_ZEROES, base + index, FLOOD_FROM_BYTES, length)
                        for index in range(512))

    def writes(self, sockets: list[socket.socket], until: float):
        handle = 0
        while time.monotonic() < until and not self.stopping.is_set():
            sent_any = False
            for sock in sockets:
                handle += 1
                head = header(CMD_WRITE, handle, self.offset(), MAX_PAYLOAD_BYTES)
                if send_some(sock, head, until) < len(head):
                    continue
                sent_any = True
                if send_some(sock, PAYLOAD, until) < len(PAYLOAD):
                    # The server stopped reading mid-payload: this socket is done this round.
                    return
            if not sent_any:
                return


def send_some(sock: socket.socket, data, until: float) -> int:
    """Sends what the socket takes of `data` before `until`; the bytes sent. A server that
    stopped reading just makes the socket full, which is the point."""
    view, sent = memoryview(data), 0
    while sent < len(data) and time.monotonic() < until:
        try:
            sent += sock.send(view[sent:])
        except (socket.timeout, BlockingIOError):
            continue
        except (BrokenPipeError, ConnectionResetError):
            break
    return sent


class Probe(threading.Thread):
    """A well-behaved client at `port`: writes `blocks` blocks of 4 KiB once, then reads one
    back every 20 ms, each read timed and checked, and samples the server's resident memory
    meanwhile, until stopped."""

    def __init__(self, port: int, pid: int, export=EXPORT, blocks=64):
        super().__init__(daemon=True)
        self.port, self.pid, self.export, self.blocks = port, pid, export, blocks
        self.stopping, self.ready = threading.Event(), threading.Event()
        self.latencies: list[float] = []
        self.rss_peak = 0
        self.failure: BaseException | None = None

    def run(self):
        try:
            with NbdClient(self.port) as client:
                assert client.go(self.export) == REP_ACK
                blocks = [random.Random(index).randbytes(BLOCK) for index in range(self.blocks)]
                for index, block in enumerate(blocks):
                    client.write(index * BLOCK, block)
                self.ready.set()
                round_ = 0
                while not self.stopping.is_set():
                    index = round_ % self.blocks
                    started = time.monotonic()
                    read = client.read(index * BLOCK, BLOCK)
                    assert read == blocks[index], f"round {round_}: block {index} read back other data"
                    self.latencies.append(time.monotonic() - started)
                    self.rss_peak = max(self.rss_peak, rss_bytes(self.pid))
                    round_ += 1
                    self.stopping.wait(0.02)
        except BaseException as error:  # noqa: BLE001 - reported by stop()
            self.failure = error
            self.ready.set()

    def wait_ready(self):
        """Waits until the probe's blocks are written, so floods start against a warm cache."""
        assert self.ready.wait(30), "the probe's blocks were not written in 30 s"
        if self.failure:
            raise self.failure

    def stop(self) -> tuple[int, float]:
        """Stops; returns the rounds served and the slowest round's seconds."""
        self.stopping.set()
        self.join(timeout=30)
        assert not self.is_alive(), "the probe did not stop"
        if self.failure:
            raise self.failure
        return len(self.latencies), max(self.latencies, default=float("inf"))


class Rotation(threading.Thread):
    """Hostile clients one kind at a time, each kind for `period_seconds`, until stopped: what
    the soaks run beside their verifying load. A kind's turn is `turn(kind, until)`."""

    KINDS: tuple[str, ...] = ()

    def __init__(self, period_seconds: float):
        super().__init__(daemon=True)
        self.period_seconds = period_seconds
        self.stopping = threading.Event()
        self.floods = 0
        self.failure: BaseException | None = None

    def prepare(self):
        """What the floods need before the first turn."""

    def turn(self, kind: str, until: float):
        raise NotImplementedError

    def run(self):
        try:
            self.prepare()
            while not self.stopping.is_set():
                kind = self.KINDS[self.floods % len(self.KINDS)]
                self.turn(kind, time.monotonic() + self.period_seconds)
                self.floods += 1
        except BaseException as error:  # noqa: BLE001 - reported by stop()
            self.failure = error

    def stop(self):
        self.stopping.set()
        self.join(timeout=60)
        assert not self.is_alive(), "the hostile rotation did not stop"
        if self.failure:
            raise self.failure


class NbdRotation(Rotation):
    """Each kind of `Flood` in turn against `export` at `port`."""

    KINDS = ("reads", "writes", "trims", "idle")

    def __init__(self, port: int, export: str, volume_bytes: int, period_seconds: float):
        super().__init__(period_seconds)
        self.port, self.export, self.volume_bytes = port, export, volume_bytes

    def turn(self, kind: str, until: float):
        flood = Flood(self.port, kind, volume_bytes=self.volume_bytes, export=self.export,
                      connections=2 if kind != "idle" else 64, cycle_seconds=self.period_seconds,
                      seconds=self.period_seconds)
        flood.start()
        self.stopping.wait(max(0.0, until - time.monotonic()))
        flood.stop()


# --- Key-value clients -------------------------------------------------------------------------

HOSTILE_KEYS = [b"hostile:%d" % index for index in range(4)]
HOSTILE_VALUE_BYTES = 512 * KIB


def kv_connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(HOSTILE_SOURCE, 0))


def kv_store_hostile_values(port: int):
    """Stores the few large values the get flood asks for (2 MiB in all, so that a tenant sized
    for its verifying load does not evict for them)."""
    with kv_connect(port) as sock:
        for key in HOSTILE_KEYS:
            sock.sendall(b"set %s 0 0 %d\r\n" % (key, HOSTILE_VALUE_BYTES) + b"h" * HOSTILE_VALUE_BYTES + b"\r\n")
            answer = b""
            while not answer.endswith(b"\r\n"):
                answer += sock.recv(64)
            assert answer == b"STORED\r\n", answer


class KvRotation(Rotation):
    """Hostile clients of a key-value tenant at `port`, from 127.0.0.2: "gets" (two connections
    pipelining gets of 100 large values a line, reading nothing), "partial" (16 connections that
    send a 512 KiB set's command line and half its value, then stall), "idle" (64 connections
    that send nothing); each reset at the end of its turn."""

    KINDS = ("gets", "partial", "idle")

    def __init__(self, port: int, period_seconds: float):
        super().__init__(period_seconds)
        self.port = port

    def prepare(self):
        kv_store_hostile_values(self.port)

    def turn(self, kind: str, until: float):
        sockets = []
        for _ in range({"gets": 2, "partial": 16, "idle": 64}[kind]):
            try:
                sockets.append(kv_connect(self.port))
            except OSError:
                break  # refused over a limit: that is the server's answer
        for sock in sockets:
            sock.settimeout(0.05)
            if kind == "partial":
                send_some(sock, b"set stalled 0 0 %d\r\n" % HOSTILE_VALUE_BYTES + b"p" * (HOSTILE_VALUE_BYTES // 2),
                          until)
        if kind == "gets":
            line = b"get " + b" ".join(HOSTILE_KEYS * 25) + b"\r\n"
            while time.monotonic() < until and not self.stopping.is_set():
                if not any(send_some(sock, line, min(until, time.monotonic() + 0.1)) for sock in sockets):
                    self.stopping.wait(0.05)
        self.stopping.wait(max(0.0, until - time.monotonic()))
        for sock in sockets:
            reset(sock)
