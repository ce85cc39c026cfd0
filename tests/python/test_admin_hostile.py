"""The HTTP admin port under hostile clients (docs/reliability.md, "Limits on what a client can
make a server hold", "The admin port"): a flood of clients that never finish a request costs
bounded memory and delays no normal request, and the NBD side goes on serving; a request head
over its limit, a bad request line, a body over its limit and too many connections are answered
and closed; POST needs the configured token (docs/block-volumes.md, "The admin endpoint"); a
Host header that is not an IP literal, localhost or an allowed name is refused (DNS rebinding).

Every test starts its own server on 127.0.0.1 with free ports and ends only what it started."""

import json
import random
import socket
import statistics
import threading
import time
from pathlib import Path

import pytest

from helpers import BINARY, LoggedProcess, free_port
from nbd_support import BLOCK, EXPORT, IO_SECONDS, NbdClient, REP_ACK

KIB, MIB = 1 << 10, 1 << 20
# The admin port's limits (crates/server/src/admin/http.rs, docs/reliability.md).
MAX_HEAD_BYTES = 8 * KIB
MAX_BODY_BYTES = 8 * KIB
MAX_CONNECTIONS = 256
HEAD_SECONDS = 5
# The flood: clients, how long, and what it may cost.
FLOOD_CLIENTS = 200
FLOOD_SECONDS = 8
FLOOD_GROWTH_BYTES = 16 * MIB
# A normal request beside the flood is answered within this.
ANSWER_SECONDS = 0.100
TOKEN = "s3cret-token-for-the-admin-port"


def rss_bytes(pid: int) -> int:
    """The resident memory of process `pid` (VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * KIB
    raise AssertionError(f"no VmRSS for pid {pid}")


class AdminServer(LoggedProcess):
    """`heterarchy serve nbd` (or `serve --config`) with an admin port, on free ports."""

    def __init__(self, argv, log: Path, nbd: int, admin: int):
        super().__init__(argv, log)
        self.nbd, self.admin = nbd, admin
        self.wait_for([nbd, admin])

    @property
    def pid(self) -> int:
        return self.process.pid


@pytest.fixture
def admin_server(tmp_path):
    """`admin_server(*flags, token=False, config=None)` starts one server: `serve nbd` with
    `flags` (and `--admin-token-file` holding TOKEN when `token`), or `serve --config` with
    `config`'s text (`{nbd}`, `{admin}` and `{token_file}` filled in). Every server it started
    is killed at teardown."""
    started: list[AdminServer] = []

    def start(*flags, token=False, config=None) -> AdminServer:
        nbd, admin = free_port(), free_port()
        token_file = tmp_path / f"admin-{len(started)}.token"
        token_file.write_text(TOKEN + "\n")
        log = tmp_path / f"server-{len(started)}.log"
        if config is not None:
            path = tmp_path / f"server-{len(started)}.toml"
            path.write_text(config.format(nbd=nbd, admin=admin, token_file=token_file, tmp=tmp_path))
            argv = [BINARY, "serve", "--config", path]
        else:
            argv = [
                BINARY, "serve", "nbd", "--listen", f"127.0.0.1:{nbd}", "--export", EXPORT,
                "--backing", "ram:64m", "--cache", "ram:16m", "--mode", "wb",
                "--metrics", f"127.0.0.1:{admin}", *flags,
            ]
            if token:
                argv += ["--admin-token-file", token_file]
        server = AdminServer(argv, log, nbd, admin)
        started.append(server)
        return server

    yield start
    for server in started:
        server.kill()


def exchange(port: int, data: bytes, timeout=IO_SECONDS) -> tuple[int, dict[str, str], bytes]:
    """Sends `data` on a new connection and reads the answer until the server closes: its
    status, headers (lower-case names) and body."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0].startswith("HTTP/1.1 "), answer[:200]
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, body


def request(port: int, method="GET", path="/metrics", host=None, token=None, extra=b"") -> tuple[int, dict, bytes]:
    """One request with a Host header (127.0.0.1:PORT unless `host`) and, given a `token`, an
    Authorization header."""
    head = f"{method} {path} HTTP/1.1\r\nHost: {f'127.0.0.1:{port}' if host is None else host}\r\nConnection: close\r\n"
    if token is not None:
        head += f"Authorization: Bearer {token}\r\n"
    return exchange(port, head.encode() + extra + b"Content-Length: 0\r\n\r\n")


# --- A flood of clients that never finish --------------------------------------------------------


class Flood:
    """FLOOD_CLIENTS connections to `port`, in a thread: a third send an endless header line a
    byte at a time, a third an endless header line as fast as the socket takes it, a third
    header lines a byte at a time that never end in the blank line. A connection the server
    closes is opened again, so that the flood keeps its size; `closed` counts them, `statuses`
    the answers they got."""

    PREFIX = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Endless: "
    SLOW_LINE = b"X-Slow: 1\r\n"

    def __init__(self, port: int):
        self.port = port
        self.stop = threading.Event()
        self.closed = 0
        self.statuses: dict[bytes, int] = {}
        self.sockets: list[socket.socket | None] = [None] * FLOOD_CLIENTS
        self.sent = [0] * FLOOD_CLIENTS
        self.thread = threading.Thread(target=self.run, daemon=True)

    def open(self, index: int):
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=IO_SECONDS)
        sock.setblocking(False)
        self.sockets[index], self.sent[index] = sock, 0
        self.send(index, self.PREFIX if index % 3 != 2 else b"GET /metrics HTTP/1.1\r\n")

    def send(self, index: int, data: bytes):
        sock = self.sockets[index]
        try:
            sock.send(data)
        except BlockingIOError:
            pass
        except OSError:
            self.lost(index)

    def lost(self, index: int):
        """The server closed connection `index`: note its answer, open another."""
        sock = self.sockets[index]
        try:
            answer = sock.recv(64)
            status = answer.split(b" ")[1] if answer.startswith(b"HTTP/") else b"none"
        except OSError:
            status = b"reset"
        self.statuses[status] = self.statuses.get(status, 0) + 1
        sock.close()
        self.closed += 1
        self.open(index)

    def run(self):
        for index in range(FLOOD_CLIENTS):
            self.open(index)
        while not self.stop.is_set():
            for index, sock in enumerate(self.sockets):
                try:
                    if sock.recv(1, socket.MSG_PEEK) == b"":
                        self.lost(index)
                        continue
                except BlockingIOError:
                    pass
                except OSError:
                    self.lost(index)
                    continue
                if index % 3 == 0:
                    self.send(index, b"a")
                elif index % 3 == 1:
                    self.send(index, b"b" * 1024)
                else:
                    at = self.sent[index]
                    self.sent[index] += 1
                    self.send(index, self.SLOW_LINE[at % len(self.SLOW_LINE) :][:1])
            self.stop.wait(0.01)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *_):
        self.stop.set()
        self.thread.join(timeout=30)
        for sock in self.sockets:
            if sock is not None:
                sock.close()


def timed_get(port: int) -> float:
    """Seconds a GET /metrics takes on a new connection, to the last byte of the answer."""
    started = time.monotonic()
    status, _, body = request(port)
    assert status == 200 and b"heterarchy_volume_hits_total" in body, (status, body[:200])
    return time.monotonic() - started


def flood_measurements(server, seconds=FLOOD_SECONDS) -> dict:
    """Floods `server`'s admin port for `seconds` while a normal client GETs /metrics and an NBD
    client writes and reads back a block every 20 ms: the answers' times, the RSS before and
    at its peak, the NBD rounds and what the flood saw."""
    before = rss_bytes(server.pid)
    latencies, peak, rounds = [], before, 0
    with NbdClient(server.nbd) as nbd:
        assert nbd.go(EXPORT) == REP_ACK
        with Flood(server.admin) as flood:
            time.sleep(0.5)  # every flooding connection open
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                latencies.append(timed_get(server.admin))
                block = random.Random(rounds).randbytes(BLOCK)
                nbd.write((rounds % 64) * BLOCK, block)
                assert nbd.read((rounds % 64) * BLOCK, BLOCK) == block
                rounds += 1
                peak = max(peak, rss_bytes(server.pid))
                time.sleep(0.02)
            closed, statuses = flood.closed, dict(flood.statuses)
    return {
        "before": before, "peak": peak, "latencies": latencies, "rounds": rounds,
        "closed": closed, "statuses": statuses,
    }


def test_a_flood_of_unfinished_requests_costs_bounded_memory_and_delays_no_one(admin_server):
    server = admin_server(token=True)
    measured = flood_measurements(server)
    growth = measured["peak"] - measured["before"]
    latencies = sorted(measured["latencies"])
    print(
        f"admin flood: RSS {measured['before'] >> 10} KiB before, {measured['peak'] >> 10} KiB at "
        f"peak (+{growth >> 10} KiB); GET /metrics median {statistics.median(latencies) * 1000:.1f} ms, "
        f"max {latencies[-1] * 1000:.1f} ms over {len(latencies)}; {measured['rounds']} NBD rounds; "
        f"the flood's connections closed {measured['closed']} times: {measured['statuses']}"
    )
    assert growth < FLOOD_GROWTH_BYTES, f"RSS grew {growth >> 20} MiB under the flood"
    assert measured["rounds"] > 50, f"only {measured['rounds']} NBD rounds beside the flood"
    # A busy two-core machine may hold any one answer up: all but one in twenty within 100 ms.
    late = [latency for latency in latencies if latency > ANSWER_SECONDS]
    assert len(late) <= len(latencies) // 20, f"{len(late)} of {len(latencies)} GETs took over 100 ms: {late}"
    assert statistics.median(latencies) < ANSWER_SECONDS / 4
    # Endless header lines were answered 431, requests that never end timed out with 408.
    statuses = measured["statuses"]
    assert statuses.get(b"431", 0) > 0 and statuses.get(b"408", 0) > 0, statuses
    assert b"503" not in statuses, statuses
    assert server.process.poll() is None, server.log.read_text()


def test_connections_over_the_limit_are_answered_503_and_others_go_on(admin_server):
    server = admin_server()
    held = []
    try:
        for _ in range(MAX_CONNECTIONS):
            held.append(socket.create_connection(("127.0.0.1", server.admin), timeout=IO_SECONDS))
        time.sleep(0.2)
        status, headers, body = exchange(server.admin, b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert status == 503 and headers["connection"] == "close", body
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.2)
    assert request(server.admin)[0] == 200
    assert server.process.poll() is None


def test_a_head_over_the_limit_is_431_and_a_silent_client_408(admin_server):
    server = admin_server()
    long_header = b"X-Long: " + b"a" * MAX_HEAD_BYTES + b"\r\n"
    status, headers, _ = exchange(server.admin, b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n" + long_header + b"\r\n")
    assert (status, headers["connection"]) == (431, "close")
    status, _, _ = exchange(server.admin, b"GET /" + b"a" * MAX_HEAD_BYTES + b" HTTP/1.1\r\n\r\n")
    assert status == 431
    # Just under the limit is served.
    filler = b"X-Fill: " + b"f" * (MAX_HEAD_BYTES - 200) + b"\r\n"
    status, _, _ = exchange(server.admin, b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n" + filler + b"\r\n")
    assert status == 200
    started = time.monotonic()
    status, _, _ = exchange(server.admin, b"GET /metrics HTTP/1.1\r\n", timeout=HEAD_SECONDS + IO_SECONDS)
    waited = time.monotonic() - started
    assert status == 408 and HEAD_SECONDS - 0.5 < waited < HEAD_SECONDS + 2, (status, waited)


@pytest.mark.parametrize("line, expected", [
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET /metrics\r\n\r\n", 400),
    (b"GET /metrics HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n", 505),
    (b"GET http://evil.example/metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400),
    (b"GET /metrics HTTP/1.1\r\n\r\n", 400),  # no Host
    (b"GET /metrics HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    (b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n folded\r\n\r\n", 400),
    (b"GET /metrics HTTP/1.1\r\nHost : 127.0.0.1\r\n\r\n", 400),
    (b"\x00\xff\xfe\r\n\r\n", 400),
    (b"POST /flush HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501),
    (b"POST /flush HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: nine\r\n\r\n", 400),
    (b"POST /flush HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY_BYTES + 1), 413),
])
def test_bad_requests_are_answered_and_closed_and_the_server_goes_on(admin_server, line, expected):
    server = admin_server()
    status, headers, _ = exchange(server.admin, line)
    assert (status, headers.get("connection")) == (expected, "close")
    assert request(server.admin)[0] == 200


# --- POST needs the token -----------------------------------------------------------------------


def test_post_without_a_configured_token_is_refused_and_gets_stay_open(admin_server):
    server = admin_server()
    status, _, body = request(server.admin, "POST", f"/flush?export={EXPORT}")
    assert status == 403
    assert "admin_token_file" in json.loads(body)["error"], body
    status, _, body = request(server.admin, "POST", f"/flush?export={EXPORT}", token=TOKEN)
    assert status == 403, body
    for path in ("/metrics", "/stats", "/", "/index.html"):
        assert request(server.admin, path=path)[0] == 200, path


def test_post_needs_the_right_bearer_token(admin_server):
    server = admin_server(token=True)
    with NbdClient(server.nbd) as nbd:
        assert nbd.go(EXPORT) == REP_ACK
        nbd.write(0, bytes([7]) * BLOCK)
    dirty = lambda: json.loads(request(server.admin, path="/stats")[2])["exports"][0]["dirty_lines"]  # noqa: E731
    assert dirty() > 0
    for token in (None, "", "wrong", TOKEN[:-1], TOKEN + "x", TOKEN.upper()):
        status, headers, body = request(server.admin, "POST", f"/flush?export={EXPORT}", token=token)
        assert status == 401, (token, body)
        assert headers.get("www-authenticate", "").startswith("Bearer"), headers
    status, _, body = exchange(
        server.admin,
        f"POST /flush?export={EXPORT} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Basic {TOKEN}\r\n\r\n".encode(),
    )
    assert status == 401, body
    assert dirty() > 0, "a refused POST flushed"
    status, _, body = request(server.admin, "POST", f"/flush?export={EXPORT}", token=TOKEN)
    assert status == 200, body
    assert json.loads(body)["export"] == EXPORT and json.loads(body)["lines_written_back"] > 0
    assert dirty() == 0
    status, _, body = request(server.admin, "POST", "/flush?export=nope", token=TOKEN)
    assert status == 404 and "no export named" in body.decode()
    # The CLI reads the same file.
    token_file = Path(server.argv[server.argv.index("--admin-token-file") + 1])
    address = f"127.0.0.1:{server.admin}"
    flushed = LoggedProcess(
        [BINARY, "volume", "flush", "--server", address, "--export", EXPORT, "--token-file", token_file],
        token_file.with_suffix(".flush.log"),
    )
    assert flushed.process.wait(timeout=60) == 0, flushed.log.read_text()
    refused = LoggedProcess(
        [BINARY, "volume", "flush", "--server", address, "--export", EXPORT], token_file.with_suffix(".refused.log"),
    )
    assert refused.process.wait(timeout=60) != 0
    assert "401" in refused.log.read_text()


# --- The Host header ----------------------------------------------------------------------------


def test_a_host_that_is_not_an_ip_or_localhost_is_refused(admin_server):
    server = admin_server(token=True)
    port = server.admin
    for host in ("127.0.0.1", f"127.0.0.1:{port}", "localhost", f"localhost:{port}", "LOCALHOST",
                 "[::1]", f"[::1]:{port}", "10.1.2.3:80", "[2001:db8::1]:9109"):
        assert request(port, host=host)[0] == 200, host
    for host in ("evil.example", f"evil.example:{port}", "localhost.evil.example", "127.0.0.1.nip.io",
                 "::1", "[::1", "127.0.0.1:port", "", "[::1]x"):
        status, _, body = request(port, host=host)
        assert status in (400, 421), (host, status, body)
    status, _, body = request(port, path="/stats", host="rebound.example")
    assert status == 421 and b"exports" not in body, body
    assert "admin_allowed_hosts" in json.loads(body)["error"]
    # A refused Host is refused before the token is looked at, and never flushes.
    status, _, _ = request(port, "POST", f"/flush?export={EXPORT}", host="rebound.example", token=TOKEN)
    assert status == 421


def test_admin_allowed_hosts_and_the_token_from_a_config_file(admin_server):
    config = """\
[server]
listen = "127.0.0.1:{nbd}"
metrics = "127.0.0.1:{admin}"
admin_token_file = "{token_file}"
admin_allowed_hosts = ["metrics.internal", "Admin.Example"]

[[export]]
name = "vol"
backing = "ram:16m"
cache = "ram:4m"
"""
    server = admin_server(config=config)
    port = server.admin
    for host in ("metrics.internal", f"metrics.internal:{port}", "admin.example", "127.0.0.1"):
        assert request(port, host=host)[0] == 200, host
    assert request(port, host="other.internal")[0] == 421
    assert request(port, "POST", f"/flush?export={EXPORT}", host="metrics.internal")[0] == 401
    status, _, body = request(port, "POST", f"/flush?export={EXPORT}", host="metrics.internal", token=TOKEN)
    assert status == 200, body
