"""Key-value tenants over TLS (docs/reliability.md, "Key-value over TLS"), checked against the
real memcached 1.6 started with `-Z -o ssl_chain_cert=...,ssl_key=...`: the same pymemcache
code (Client(tls_context=...)) and the same raw exchanges get the same answers from both;
`refresh_certs` and a changed file put a new certificate in force without a restart; a
plaintext client on a TLS port is refused and the server goes on; TLS 1.2 without forward
secrecy and older versions are refused; peers are verified when asked; a stalled handshake is
closed at the tenant's request_timeout. Certificates are made by openssl in each test's
temporary directory; every server is started on free ports of 127.0.0.1 and killed by pid."""

import os
import shutil
import socket
import ssl
import statistics
import time
import warnings
from pathlib import Path

import pytest

from kv_support import IO_SECONDS, KvServer, Servers, free_port, tool_path, wait_until
from pki_support import make_ca, sign

MIB = 1 << 20


class Pki:
    """An authority and what it signed, in `work`: `certificates(name)` is a directory in the
    server layout (server-cert.pem, server-key.pem, ca-cert.pem) for server certificate
    `name` ("server" or "renewed", both for 127.0.0.1); `client` holds client-cert.pem and
    client-key.pem."""

    def __init__(self, root: Path):
        if shutil.which("openssl") is None:
            pytest.skip("openssl is not installed (Debian package openssl)")
        self.work = root / "work"
        ca = make_ca(self.work, "ca")
        self.ca = ca[0]
        for name in ("server", "renewed"):
            sign(self.work, ca, name, "serverAuth", "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        sign(self.work, ca, "client", "clientAuth")
        self.client = root / "client"
        self.client.mkdir()
        shutil.copy(self.work / "client-cert.pem", self.client / "client-cert.pem")
        shutil.copy(self.work / "client-key.pem", self.client / "client-key.pem")

    def install(self, name: str, directory: Path) -> Path:
        """Writes server certificate `name` into `directory` (made if need be), in the layout."""
        directory.mkdir(exist_ok=True)
        for source, target in ((f"{name}-cert.pem", "server-cert.pem"), (f"{name}-key.pem", "server-key.pem"),
                               ("ca-cert.pem", "ca-cert.pem")):
            data = (self.work / source).read_bytes()
            # Written and renamed, so a watcher never reads half a file.
            (directory / f".{target}.new").write_bytes(data)
            os.replace(directory / f".{target}.new", directory / target)
        return directory

    def context(self, with_certificate=False) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca))
        if with_certificate:
            context.load_cert_chain(self.client / "client-cert.pem", self.client / "client-key.pem")
        return context


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("kv-pki"))


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"' if isinstance(value, (str, Path)) else str(value)


def start_heterarchy(servers: Servers, tmp_path: Path, certificates: Path, **keys) -> KvServer:
    port = free_port()
    lines = ["[server]", "threads = 1", "[[tenant]]", 'name = "tls"', f'listen = "127.0.0.1:{port}"',
             f'tls_certificates = "{certificates}"']
    lines += [f"{key} = {toml_value(value)}" for key, value in keys.items()]
    config = tmp_path / "tls.toml"
    config.write_text("\n".join(lines) + "\n")
    return servers.start_config(config, [port])


def start_memcached(servers: Servers, certificates: Path) -> KvServer:
    port = free_port()
    argv = [tool_path("memcached", "memcached"), "-U", "0", "-t", "1", "-l", "127.0.0.1", "-p", port, "-Z",
            "-o", f"ssl_chain_cert={certificates / 'server-cert.pem'},ssl_key={certificates / 'server-key.pem'}"]
    if os.geteuid() == 0:
        argv += ["-u", "root"]
    return servers._launch("memcached", argv, [port], port=port)


@pytest.fixture
def both(request, servers, tmp_path, pki) -> dict[str, KvServer]:
    """heterarchy and memcached over TLS, each with its own copy of the "server" certificate."""
    request.getfixturevalue("heterarchy")
    return {
        "heterarchy": start_heterarchy(servers, tmp_path, pki.install("server", tmp_path / "h-certs")),
        "memcached": start_memcached(servers, pki.install("server", tmp_path / "m-certs")),
    }


def tls_socket(port: int, context: ssl.SSLContext) -> ssl.SSLSocket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=IO_SECONDS)
    return context.wrap_socket(sock, server_hostname="127.0.0.1")


def exchange(sock: ssl.SSLSocket, request: bytes, length: int) -> bytes:
    """Sends `request`, returns the next `length` bytes."""
    sock.sendall(request)
    answer = b""
    while len(answer) < length:
        chunk = sock.recv(length - len(answer))
        assert chunk, f"closed after {answer!r}"
        answer += chunk
    return answer


def serial_of(port: int, context: ssl.SSLContext) -> str:
    """The common name of the certificate a new connection is shown."""
    with tls_socket(port, context) as sock:
        subject = dict(item for pair in sock.getpeercert()["subject"] for item in pair)
        return subject["commonName"]


# Raw exchanges over TLS whose answers memcached 1.6.18 sends byte for byte.
RAW_EXCHANGES = [
    (b"set k 0 0 5\r\nhello\r\n", b"STORED\r\n"),
    (b"get k missing\r\n", b"VALUE k 0 5\r\nhello\r\nEND\r\n"),
    (b"append k 0 0 1\r\n!\r\n", b"STORED\r\n"),
    (b"mg k v s f\r\n", b"VA 6 s6 f0\r\nhello!\r\n"),
    (b"ms n 2 T0\r\n10\r\n", b"HD\r\n"),
    (b"ma n D5 v\r\n", b"VA 2\r\n15\r\n"),
    (b"incr n 3\r\n", b"18\r\n"),
    (b"md k q\r\nmn\r\n", b"MN\r\n"),
    (b"get k\r\n", b"END\r\n"),
    (b"bogus\r\n", b"ERROR\r\n"),
]


def pymemcache_session(server: KvServer, context: ssl.SSLContext) -> list:
    """What one pymemcache session over TLS gets back, CAS tokens checked and left out."""
    client = server.client(tls_context=context)
    results = [client.set("a", b"1"), client.get("a"), client.add("a", b"2"), client.replace("a", b"3"),
               client.get_many(["a", "missing"]), client.incr("a", 5), client.decr("a", 10),
               client.prepend("a", b"x"), client.get("a"), client.delete("a"), client.get("a"),
               client.set_many({"m1": b"one", "m2": b"two"}), client.get_many(["m1", "m2", "m3"]),
               client.touch("m1", 100), client.touch("nope", 1)]
    value, cas = client.gets("m1")
    results += [value, client.cas("m1", b"uno", cas), client.cas("m1", b"dos", cas), client.get("m1")]
    big = os.urandom(MIB // 2)
    results += [client.set("big", big), client.get("big") == big]
    client.close()
    return results


def test_pymemcache_and_raw_exchanges_get_the_same_answers_over_tls(both, pki):
    context = pki.context()
    answers = {kind: pymemcache_session(server, context) for kind, server in both.items()}
    assert answers["heterarchy"] == answers["memcached"]
    for kind, server in both.items():
        with tls_socket(server.port, context) as sock:
            print(f"{kind}: {sock.version()} {sock.cipher()[0]}")
            for request, expected in RAW_EXCHANGES:
                assert exchange(sock, request, len(expected)) == expected, (kind, request)


def test_tls_get_latency_beside_memcached(both, pki):
    """2,000 gets of a 100-byte value on one TLS connection to each server, one at a time."""
    context = pki.context()
    figures = {}
    for kind, server in both.items():
        client = server.client(tls_context=context)
        client.set("k", b"v" * 100)
        for _ in range(200):
            client.get("k")
        latencies = []
        for _ in range(2000):
            started = time.perf_counter()
            assert client.get("k") == b"v" * 100
            latencies.append(time.perf_counter() - started)
        client.close()
        latencies.sort()
        figures[kind] = (statistics.median(latencies), latencies[len(latencies) * 99 // 100])
    print("; ".join(f"{kind}: TLS get p50 {p50 * 1e6:.0f} us, p99 {p99 * 1e6:.0f} us"
                    for kind, (p50, p99) in figures.items()))
    # The same client does the same work against both: heterarchy is not slower by a multiple.
    assert figures["heterarchy"][0] < 3 * figures["memcached"][0] + 200e-6, figures


def test_refresh_certs_puts_a_new_certificate_in_force_without_a_restart(both, pki, tmp_path):
    context = pki.context()
    directories = {"heterarchy": tmp_path / "h-certs", "memcached": tmp_path / "m-certs"}
    for kind, server in both.items():
        assert serial_of(server.port, context) == "server"
        with tls_socket(server.port, context) as old:
            assert exchange(old, b"set k 0 0 1\r\nx\r\n", 8) == b"STORED\r\n"
            pki.install("renewed", directories[kind])
            assert exchange(old, b"refresh_certs\r\n", 4) == b"OK\r\n", kind
            # The session already up goes on with what it began with.
            expected = b"VALUE k 0 1\r\nx\r\nEND\r\n"
            assert exchange(old, b"get k\r\n", len(expected)) == expected
        assert serial_of(server.port, context) == "renewed", kind
    server = both["heterarchy"]
    # Files that do not load leave the certificate in force, and the answer names the file.
    (directories["heterarchy"] / "server-cert.pem").write_text("not a certificate\n")
    with tls_socket(server.port, context) as sock:
        sock.sendall(b"refresh_certs\r\n")
        line = sock.recv(512)
        assert line.startswith(b"SERVER_ERROR ") and b"server-cert.pem" in line and line.endswith(b"\r\n"), line
        assert exchange(sock, b"refresh_certs noreply\r\nmn\r\n", 4) == b"MN\r\n"
    assert serial_of(server.port, context) == "renewed"


def test_a_changed_certificate_file_is_read_again_within_seconds(request, servers, tmp_path, pki):
    request.getfixturevalue("heterarchy")
    directory = pki.install("server", tmp_path / "certs")
    server = start_heterarchy(servers, tmp_path, directory)
    context = pki.context()
    assert serial_of(server.port, context) == "server"
    time.sleep(0.05)  # a new modification time, even on a coarse clock
    pki.install("renewed", directory)
    assert wait_until(lambda: serial_of(server.port, context) == "renewed", 5)
    assert "certificates read again" in server.log.read_text()


def test_a_plaintext_client_on_a_tls_port_is_refused_and_the_server_goes_on(both, pki):
    context = pki.context()
    for kind, server in both.items():
        with socket.create_connection(("127.0.0.1", server.port), timeout=IO_SECONDS) as plain:
            plain.sendall(b"set k 0 0 1\r\nx\r\nget k\r\n")
            received = b""
            try:
                while chunk := plain.recv(4096):
                    received += chunk
            except ConnectionResetError:
                pass
            # memcached resets the connection; heterarchy sends a TLS alert (content type 21)
            # and closes: no memcached answer either way.
            assert received in (b"",) or received.startswith(b"\x15\x03"), (kind, received)
        client = server.client(tls_context=context)
        assert client.set("after", b"ok") and client.get("after") == b"ok"
        client.close()
    stats = both["heterarchy"].client(tls_context=context).stats()
    assert int(stats[b"ssl_handshake_errors"]) >= 1, stats
    with tls_socket(both["heterarchy"].port, context) as sock:
        sock.sendall(b"stats settings\r\n")
        settings = b""
        while not settings.endswith(b"END\r\n"):
            settings += sock.recv(4096)
    assert b"STAT ssl_enabled yes\r\n" in settings and b"STAT maxconns_per_peer 256\r\n" in settings, settings


def test_only_tls_1_2_and_later_with_forward_secrecy_is_spoken(request, servers, tmp_path, pki):
    request.getfixturevalue("heterarchy")
    server = start_heterarchy(servers, tmp_path, pki.install("server", tmp_path / "certs"))
    tls12 = pki.context()
    tls12.maximum_version = ssl.TLSVersion.TLSv1_2
    with tls_socket(server.port, tls12) as sock:
        assert sock.version() == "TLSv1.2" and sock.cipher()[0].startswith("ECDHE-"), sock.cipher()
        assert exchange(sock, b"mn\r\n", 4) == b"MN\r\n"
    # A TLS 1.2 client that offers only suites without an ephemeral key exchange, and one that
    # speaks TLS 1.1 at most, fail their handshakes.
    static = pki.context()
    static.maximum_version = ssl.TLSVersion.TLSv1_2
    static.set_ciphers("AES128-GCM-SHA256:AES256-GCM-SHA384")
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.load_verify_locations(pki.ca)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            old.minimum_version = ssl.TLSVersion.TLSv1
            old.maximum_version = ssl.TLSVersion.TLSv1_1
        old.set_ciphers("ALL:@SECLEVEL=0")
    except (ValueError, ssl.SSLError):
        old = None  # this OpenSSL cannot even offer them
    for context in filter(None, (static, old)):
        with pytest.raises((ssl.SSLError, ConnectionResetError)):
            tls_socket(server.port, context)
    with tls_socket(server.port, pki.context()) as sock:
        assert sock.version() == "TLSv1.3"


def test_verify_peer_wants_a_client_certificate_the_authority_signed(request, servers, tmp_path, pki):
    request.getfixturevalue("heterarchy")
    server = start_heterarchy(servers, tmp_path, pki.install("server", tmp_path / "certs"), tls_verify_peer=True)
    with pytest.raises((ssl.SSLError, ConnectionResetError, EOFError, BrokenPipeError)):
        # In TLS 1.3 the client learns of the refusal on its first read.
        with tls_socket(server.port, pki.context()) as sock:
            exchange(sock, b"mn\r\n", 4)
    with tls_socket(server.port, pki.context(with_certificate=True)) as sock:
        assert exchange(sock, b"mn\r\n", 4) == b"MN\r\n"


def test_a_stalled_handshake_is_closed_at_request_timeout_and_holds_up_no_one(request, servers, tmp_path, pki):
    request.getfixturevalue("heterarchy")
    server = start_heterarchy(servers, tmp_path, pki.install("server", tmp_path / "certs"), request_timeout=1)
    stalled = socket.create_connection(("127.0.0.1", server.port), timeout=IO_SECONDS)
    stalled.sendall(b"\x16\x03\x01\x02\x00")  # a record header promising 512 bytes of ClientHello
    started = time.monotonic()
    with tls_socket(server.port, pki.context()) as other:
        assert exchange(other, b"mn\r\n", 4) == b"MN\r\n"
        stalled.settimeout(5)
        try:
            while stalled.recv(64):
                pass
        except ConnectionResetError:
            pass
        assert 0.9 < time.monotonic() - started < 4
        # The one that finished its handshake in time stays.
        assert exchange(other, b"mn\r\n", 4) == b"MN\r\n"
    stalled.close()


def test_authentication_over_tls_and_the_unix_socket_stays_plain(request, servers, tmp_path, pki):
    request.getfixturevalue("heterarchy")
    auth = tmp_path / "auth"
    auth.write_text("alice:secret\n")
    path = tmp_path / "kv.sock"
    port = free_port()
    config = tmp_path / "tls.toml"
    config.write_text(f'[[tenant]]\nname = "t"\nlisten = "127.0.0.1:{port}"\nunix = "{path}"\n'
                      f'tls_certificates = "{pki.install("server", tmp_path / "certs")}"\nauth_file = "{auth}"\n')
    server = servers.start_config(config, [port, path])
    client = server.client(tls_context=pki.context())
    assert client.set("auth", b"alice secret") is True
    assert client.set("k", b"v") and client.get("k") == b"v"
    client.close()
    with socket.socket(socket.AF_UNIX) as plain:
        plain.settimeout(IO_SECONDS)
        plain.connect(str(path))
        plain.sendall(b"set auth 0 0 12\r\nalice secret\r\nget k\r\n")
        expected = b"STORED\r\nVALUE k 0 1\r\nv\r\nEND\r\n"
        received = b""
        while len(received) < len(expected):
            received += plain.recv(256)
        assert received == expected
