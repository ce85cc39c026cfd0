"""NBD over TLS (docs/reliability.md, "TLS and authentication"; rustls, negotiated with
NBD_OPT_STARTTLS) checked with real clients (nbdinfo, nbdcopy, qemu-img, qemu-io) and a
hand-written one; per-tenant authentication of the key-value server as memcached's -Y auth file
does it, against the real memcached; connection limits; bounded memory under slow and idle
clients; every length and count field bounded, one test per field over a real socket; and the
default listening address.

Certificates are made by openssl in each session's temporary directory; no key is kept in the
repository."""

import os
import random
import re
import resource
import shutil
import socket
import ssl
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest
from pymemcache.exceptions import MemcacheClientError

from helpers import BINARY, LoggedProcess, free_port
from kv_support import Raw, Servers, tool_path
from nbd_support import (
    BLOCK,
    CMD_READ,
    CMD_WRITE,
    EXPORT,
    IHAVEOPT,
    IO_SECONDS,
    MISSING,
    OPT_GO,
    OPT_LIST,
    OPT_STRUCTURED_REPLY,
    REP_ACK,
    REP_ERR_UNSUP,
    REP_FLAG_ERROR,
    REPLY_TYPE_ERROR,
    NbdClient,
    tool,
)
from pki_support import make_ca, sign

# proto.md "Option types" and "Option reply types" beyond what nbd_support names.
OPT_EXPORT_NAME = 1
OPT_ABORT = 2
OPT_STARTTLS = 5
OPT_INFO = 6
REP_ERR_POLICY = REP_FLAG_ERROR | 2
REP_ERR_INVALID = REP_FLAG_ERROR | 3
REP_ERR_TLS_REQD = REP_FLAG_ERROR | 5
REP_ERR_TOO_BIG = REP_FLAG_ERROR | 9
# The server's limits (crates/nbd/src/constants.rs, crates/memcache/src/limits.rs).
MAX_OPTION_BYTES = 64 * 1024
MAX_STRING_BYTES = 4096
MAX_PAYLOAD_BYTES = 32 << 20
MAX_LINE_BYTES = 2048
MAX_GET_LINE_BYTES = 1 << 20
MIB = 1 << 20
KIB = 1 << 10
# How much a server may grow per idle connection, and under slow clients in all.
IDLE_CONNECTION_BYTES = 32 * KIB
SLOW_CLIENTS_BYTES = 32 * MIB
IDLE_CONNECTIONS = 2000
SLOW_SECONDS = 6

needs_nbd_tools = pytest.mark.skipif(bool(MISSING), reason=f"NBD tools missing: {', '.join(MISSING)}")


def rss_bytes(pid: int) -> int:
    """The resident memory of process `pid`."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * KIB
    raise AssertionError(f"no VmRSS for pid {pid}")


class Pki:
    """Directories in nbdkit's and qemu's layout: `server` (server-cert.pem, server-key.pem,
    ca-cert.pem), `client` (the authority only), `client_with_cert` (with client-cert.pem and
    client-key.pem that the authority signed), `wrong_ca` (another authority)."""

    def __init__(self, root: Path):
        if shutil.which("openssl") is None:
            pytest.skip("openssl is not installed (Debian package openssl)")
        work = root / "work"
        ca = make_ca(work, "ca")
        other = make_ca(work, "other")
        server = sign(work, ca, "server", "serverAuth", "subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        client = sign(work, ca, "client", "clientAuth")
        self.server, self.client = root / "server", root / "client"
        self.client_with_cert, self.wrong_ca = root / "client-with-cert", root / "wrong-ca"
        for directory in (self.server, self.client, self.client_with_cert, self.wrong_ca):
            directory.mkdir()
        for directory in (self.server, self.client, self.client_with_cert):
            shutil.copy(ca[0], directory / "ca-cert.pem")
        shutil.copy(other[0], self.wrong_ca / "ca-cert.pem")
        shutil.copy(server[0], self.server / "server-cert.pem")
        shutil.copy(server[1], self.server / "server-key.pem")
        shutil.copy(client[0], self.client_with_cert / "client-cert.pem")
        shutil.copy(client[1], self.client_with_cert / "client-key.pem")


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


def tls_uri(server, certificates: Path) -> str:
    return f"nbds://127.0.0.1:{server.port}/{EXPORT}?tls-certificates={certificates}"


def tls_volume(volume, pki: Pki, mode="require", *flags):
    """A volume served with `--tls MODE` and the session's server certificates."""
    return volume("wt", "--tls", mode, "--tls-certificates", pki.server, *flags)


def start_tls(client: NbdClient, ca_dir: Path, certificate: Path | None = None):
    """NBD_OPT_STARTTLS, then a TLS handshake with Python's ssl module on the client's socket,
    which the client goes on using."""
    [(kind, _)] = client.option(OPT_STARTTLS)
    assert kind == REP_ACK, f"NBD_OPT_STARTTLS answered {kind:#x}"
    context = ssl.create_default_context(cafile=str(ca_dir / "ca-cert.pem"))
    if certificate:
        context.load_cert_chain(certificate / "client-cert.pem", certificate / "client-key.pem")
    client.sock = context.wrap_socket(client.sock, server_hostname="127.0.0.1")


# --- NBD over TLS -------------------------------------------------------------------------------


@needs_nbd_tools
def test_nbdinfo_and_nbdcopy_over_tls_write_and_read_back(volume, pki, tmp_path):
    server = tls_volume(volume, pki)
    uri = tls_uri(server, pki.client)
    info = tool("nbdinfo", "--no-content", uri).stdout
    assert "with TLS" in info, info
    data = random.Random(5).randbytes(4 * MIB)
    (tmp_path / "up.bin").write_bytes(data)
    tool("nbdcopy", tmp_path / "up.bin", uri)
    tool("nbdcopy", uri, tmp_path / "down.bin")
    assert (tmp_path / "down.bin").read_bytes()[: len(data)] == data


def check_qemu_over_tls(server, creds: str):
    """qemu-img sees the volume and qemu-io writes and reads it back, over TLS with CREDS (a
    qemu tls-creds object with id tls0)."""
    image = f"driver=nbd,host=127.0.0.1,port={server.port},export={EXPORT},tls-creds=tls0"
    info = tool("qemu-img", "info", "--object", creds, "--image-opts", image).stdout
    assert "virtual size: 64 MiB" in info, info
    done = tool("qemu-io", "--object", creds, "--image-opts", image,
                "-c", "write -P 0x5a 1M 192k", "-c", "read -P 0x5a 1M 192k", "-c", "read -P 0 2M 64k")
    output = done.stdout + done.stderr
    assert "failed" not in output and output.count("read 196608/196608") == 1, output


@needs_nbd_tools
def test_qemu_img_and_qemu_io_over_tls(volume, pki):
    server = tls_volume(volume, pki)
    check_qemu_over_tls(server, f"tls-creds-x509,id=tls0,dir={pki.client},endpoint=client")


def test_a_plain_client_is_refused_everything_under_require(volume, pki):
    server = tls_volume(volume, pki)
    with NbdClient(server.port) as client:
        for option, data in [(OPT_LIST, b""), (OPT_STRUCTURED_REPLY, b""), (0x7FFF, b"?"),
                             (OPT_GO, struct.pack(">I", 3) + EXPORT.encode() + struct.pack(">H", 0)),
                             (OPT_INFO, struct.pack(">I", 3) + EXPORT.encode() + struct.pack(">H", 0))]:
            [(kind, _)] = client.option(option, data)
            assert kind == REP_ERR_TLS_REQD, f"option {option}: {kind:#x}"
        # NBD_OPT_EXPORT_NAME cannot be refused: the session ends.
        client.sock.sendall(struct.pack(">QII", IHAVEOPT, OPT_EXPORT_NAME, 3) + EXPORT.encode())
        assert client.sock.recv(1) == b""
    if "nbdinfo" not in MISSING:
        plain = subprocess.run(["nbdinfo", "--no-content", server.uri()], capture_output=True, text=True, timeout=30)
        assert plain.returncode != 0, plain.stdout


def test_starttls_then_options_and_data_under_tls_and_a_second_starttls_is_invalid(volume, pki):
    server = tls_volume(volume, pki)
    with NbdClient(server.port) as client:
        start_tls(client, pki.client)
        [(kind, _)] = client.option(OPT_STARTTLS)
        assert kind == REP_ERR_INVALID
        assert client.list_exports() == [EXPORT]
        assert client.go(EXPORT) == REP_ACK
        block = random.Random(8).randbytes(BLOCK)
        client.write(3 * BLOCK, block)
        assert client.read(3 * BLOCK, BLOCK) == block


def test_tls_on_serves_plain_and_tls_clients_alike(volume, pki):
    server = tls_volume(volume, pki, "on")
    block = random.Random(11).randbytes(BLOCK)
    with NbdClient(server.port) as plain:
        assert plain.go(EXPORT) == REP_ACK
        plain.write(0, block)
    with NbdClient(server.port) as secure:
        start_tls(secure, pki.client)
        assert secure.go(EXPORT) == REP_ACK
        assert secure.read(0, BLOCK) == block


def test_tls_off_refuses_starttls_by_policy(volume):
    with NbdClient(volume().port) as client:
        [(kind, _)] = client.option(OPT_STARTTLS)
        assert kind == REP_ERR_POLICY
        assert client.go(EXPORT) == REP_ACK


@needs_nbd_tools
def test_a_client_trusting_another_authority_fails_and_others_go_on(volume, pki):
    server = tls_volume(volume, pki)
    wrong = subprocess.run(["nbdinfo", "--no-content", tls_uri(server, pki.wrong_ca)],
                           capture_output=True, text=True, timeout=30)
    assert wrong.returncode != 0, wrong.stdout
    with NbdClient(server.port) as client:
        with pytest.raises(ssl.SSLCertVerificationError):
            start_tls(client, pki.wrong_ca)
    tool("nbdinfo", "--no-content", tls_uri(server, pki.client))


@needs_nbd_tools
def test_verify_peer_wants_a_client_certificate_the_authority_signed(volume, pki):
    server = tls_volume(volume, pki, "require", "--tls-verify-peer")
    anonymous = subprocess.run(["nbdinfo", "--no-content", tls_uri(server, pki.client)],
                               capture_output=True, text=True, timeout=30)
    assert anonymous.returncode != 0, anonymous.stdout
    info = tool("nbdinfo", "--no-content", tls_uri(server, pki.client_with_cert)).stdout
    assert "with TLS" in info


def test_a_stalled_tls_handshake_holds_up_no_other_client(volume, pki):
    """One event loop: a client that acknowledged STARTTLS and then sends half a ClientHello,
    a byte a second, must not keep another client from being served."""
    server = tls_volume(volume, pki, "require", "--threads", "1")
    with NbdClient(server.port) as stalled:
        [(kind, _)] = stalled.option(OPT_STARTTLS)
        assert kind == REP_ACK
        stalled.sock.sendall(b"\x16\x03\x01\x02\x00")  # a record header promising 512 bytes
        with NbdClient(server.port) as other:
            start_tls(other, pki.client)
            assert other.go(EXPORT) == REP_ACK
            for round_ in range(3):
                started = time.monotonic()
                block = random.Random(round_).randbytes(BLOCK)
                other.write(round_ * BLOCK, block)
                assert other.read(round_ * BLOCK, BLOCK) == block
                assert time.monotonic() - started < 2
                stalled.sock.sendall(b"\x01")
                time.sleep(0.5)


def psk_files(directory: Path, user: str = "alice") -> Path:
    """A PSK directory as qemu's tls-creds-psk reads it: keys.psk with a key for USER drawn from
    the directory's name, the file nbdkit's --tls-psk and libnbd's tls-psk-file take too."""
    directory.mkdir(exist_ok=True)
    keys = directory / "keys.psk"
    keys.write_text(f"{user}:{random.Random(directory.name).randbytes(32).hex()}\n")
    return keys


def psk_uri(server, keys: Path, user: str = "alice") -> str:
    return f"nbds://{user}@127.0.0.1:{server.port}/{EXPORT}?tls-psk-file={keys}"


@needs_nbd_tools
def test_nbdinfo_and_nbdcopy_over_tls_with_a_pre_shared_key(volume, tmp_path):
    keys = psk_files(tmp_path / "psk")
    server = volume("wt", "--tls", "require", "--tls-psk", keys)
    info = tool("nbdinfo", "--no-content", psk_uri(server, keys)).stdout
    assert "with TLS" in info, info
    data = random.Random(6).randbytes(4 * MIB)
    (tmp_path / "up.bin").write_bytes(data)
    tool("nbdcopy", tmp_path / "up.bin", psk_uri(server, keys))
    tool("nbdcopy", psk_uri(server, keys), tmp_path / "down.bin")
    assert (tmp_path / "down.bin").read_bytes()[: len(data)] == data


@needs_nbd_tools
def test_qemu_img_and_qemu_io_over_tls_with_a_pre_shared_key(volume, tmp_path):
    keys = psk_files(tmp_path / "psk")
    server = volume("wt", "--tls", "require", "--tls-psk", keys)
    check_qemu_over_tls(server, f"tls-creds-psk,id=tls0,dir={keys.parent},username=alice,endpoint=client")


@needs_nbd_tools
def test_a_wrong_key_or_an_unknown_user_is_refused_and_others_go_on(volume, tmp_path):
    keys = psk_files(tmp_path / "psk")
    server = volume("wt", "--tls", "require", "--tls-psk", keys)
    other_key = psk_files(tmp_path / "other")  # alice, with another key
    stranger = psk_files(tmp_path / "stranger", "mallory")
    for uri in [psk_uri(server, other_key), psk_uri(server, stranger, "mallory")]:
        refused = subprocess.run(["nbdinfo", "--no-content", uri], capture_output=True, text=True, timeout=30)
        assert refused.returncode != 0, refused.stdout
    # A client in the clear gets nothing either.
    with NbdClient(server.port) as client:
        [(kind, _)] = client.option(OPT_LIST)
        assert kind == REP_ERR_TLS_REQD
    assert "with TLS" in tool("nbdinfo", "--no-content", psk_uri(server, keys)).stdout


@pytest.mark.parametrize("flags, named", [
    (["--tls", "require"], "--tls:"),
    (["--tls", "maybe"], "--tls:"),
    (["--tls-certificates", "."], "--tls-certificates:"),
    (["--tls", "on", "--tls-certificates", "/nonexistent"], "server-cert.pem"),
    (["--tls", "on", "--tls-psk", "/nonexistent.psk"], "tls_psk: /nonexistent.psk: cannot read"),
    (["--tls", "on", "--tls-psk", "/x.psk", "--tls-certificates", "."], "--tls-psk:"),
    (["--tls-psk", "/x.psk"], "--tls-psk:"),
], ids=["no-certificates", "bad-mode", "certificates-without-tls", "missing-files", "missing-psk",
        "psk-and-certificates", "psk-without-tls"])
def test_bad_tls_settings_fail_at_start_with_one_line(heterarchy, flags, named):
    done = subprocess.run([heterarchy, "serve", "nbd", "--listen", f"127.0.0.1:{free_port()}",
                           "--backing", "ram:16m", "--cache", "ram:4m", *flags],
                          capture_output=True, text=True, timeout=30)
    message = done.stderr.strip()
    assert done.returncode != 0 and named in message and message.count("\n") == 0, message


# --- Key-value authentication -------------------------------------------------------------------


AUTH_FILE = "alice:secret\nbob:p4ss:word\n"
# One request at a time (memcached 1.6.18 answers only the first of a pipelined batch before
# authentication), each with the bytes memcached -Y answers.
AUTH_EXCHANGES = [
    (b"get k\r\n", b"CLIENT_ERROR unauthenticated\r\n"),
    (b"version\r\n", b"CLIENT_ERROR unauthenticated\r\n"),
    (b"stats\r\n", b"CLIENT_ERROR unauthenticated\r\n"),
    (b"mg k v\r\n", b"CLIENT_ERROR unauthenticated\r\n"),
    (b"ms k 2\r\nhi\r\n", b"CLIENT_ERROR unauthenticated\r\n"),
    (b"mn\r\n", b"CLIENT_ERROR unauthenticated\r\n"),
    (b"delete k\r\n", b"CLIENT_ERROR unauthenticated\r\n"),
    (b"add k 0 0 12\r\nalice secret\r\n", b"CLIENT_ERROR unauthenticated\r\n"),
    (b"set k 0 0 11\r\nalice wrong\r\n", b"CLIENT_ERROR authentication failure\r\n"),
    (b"set k 0 0 12\r\nalice  secre\r\n", b"CLIENT_ERROR authentication failure\r\n"),
    (b"set k 0 0 12\r\ncarol secret\r\n", b"CLIENT_ERROR authentication failure\r\n"),
    (b"set k 0 0 11\r\nalicesecret\r\n", b"CLIENT_ERROR bad authentication token format\r\n"),
    (b"set k 0 0 5000\r\n" + b"a" * 5000 + b"\r\n", b"CLIENT_ERROR bad authentication token format\r\n"),
    (b"get k\r\n", b"CLIENT_ERROR unauthenticated\r\n"),
    (b"set k 0 0 13\r\nbob p4ss:word\r\n", b"STORED\r\n"),
    (b"get k\r\n", b"END\r\n"),
    (b"set k 0 0 2\r\nhi\r\n", b"STORED\r\n"),
    (b"mg k v\r\n", b"VA 2\r\nhi\r\n"),
]


def start_memcached_with_auth(servers: Servers, auth: Path):
    argv = [tool_path("memcached", "memcached"), "-U", "0", "-t", "1", "-Y", auth]
    if os.geteuid() == 0:
        argv += ["-u", "root"]
    port = free_port()
    return servers._launch("memcached", argv + ["-l", "127.0.0.1", "-p", port], [port], port=port)


def start_heterarchy_kv(servers: Servers, *flags):
    port = free_port()
    argv = [BINARY, "serve", "kv", "--listen", f"127.0.0.1:{port}", "--threads", "1", *flags]
    return servers._launch("heterarchy", argv, [port], port=port)


@pytest.mark.parametrize("kind", ["heterarchy", "memcached"])
def test_kv_auth_refuses_everything_until_a_set_authenticates(servers, heterarchy, tmp_path, kind):
    auth = tmp_path / "auth"
    auth.write_text(AUTH_FILE)
    if kind == "memcached":
        server = start_memcached_with_auth(servers, auth)
    else:
        server = start_heterarchy_kv(servers, "--auth-file", auth)
    with server.raw() as conn:
        for request, reply in AUTH_EXCHANGES:
            conn.exchange(request, reply)
    with server.raw() as other:
        # Authentication is per connection.
        other.exchange(b"get k\r\n", b"CLIENT_ERROR unauthenticated\r\n")


def test_kv_auth_pipelined_requests_each_get_their_answer(servers, heterarchy, tmp_path):
    auth = tmp_path / "auth"
    auth.write_text(AUTH_FILE)
    server = start_heterarchy_kv(servers, "--auth-file", auth)
    with server.raw() as conn:
        conn.exchange(b"get k\r\nmn\r\nset k 0 0 12\r\nalice secret\r\nmn\r\nget k\r\n",
                      b"CLIENT_ERROR unauthenticated\r\nCLIENT_ERROR unauthenticated\r\nSTORED\r\nMN\r\nEND\r\n")
    # stats too is refused until the connection authenticates.
    with server.raw() as conn:
        conn.exchange(b"set x 0 0 12\r\nalice secret\r\n", b"STORED\r\n")
        stats = conn.stats()
    assert int(stats["auth_cmds"]) == 2 and int(stats["auth_errors"]) == 0, stats


def test_kv_auth_with_pymemcache(servers, heterarchy, tmp_path):
    """pymemcache knows no auth file; a set of "user password" is all memcached's -Y asks."""
    auth = tmp_path / "auth"
    auth.write_text(AUTH_FILE)
    server = start_heterarchy_kv(servers, "--auth-file", auth)
    client = server.client()
    with pytest.raises(MemcacheClientError, match="unauthenticated"):
        client.get("k")
    with pytest.raises(MemcacheClientError, match="authentication failure"):
        client.set("auth", b"alice nope")
    assert client.set("auth", b"alice secret") is True
    assert client.set("k", b"value") is True
    assert client.get("k") == b"value"
    # The authenticating set stored nothing.
    assert client.get("auth") is None
    client.close()


def test_kv_auth_is_per_tenant(servers, heterarchy, tmp_path):
    auth = tmp_path / "auth"
    auth.write_text(AUTH_FILE)
    closed_port, open_port = free_port(), free_port()
    config = tmp_path / "serve.toml"
    config.write_text(
        f'[[tenant]]\nname = "closed"\nlisten = "127.0.0.1:{closed_port}"\nauth_file = "{auth}"\n'
        f'[[tenant]]\nname = "open"\nlisten = "127.0.0.1:{open_port}"\n')
    servers.start_config(config, [closed_port, open_port])
    with Raw(closed_port) as closed, Raw(open_port) as open_:
        closed.exchange(b"set k 0 0 1\r\nx\r\n", b"CLIENT_ERROR bad authentication token format\r\n")
        open_.exchange(b"set k 0 0 1\r\nx\r\n", b"STORED\r\n")
        closed.exchange(b"get k\r\n", b"CLIENT_ERROR unauthenticated\r\n")


@pytest.mark.parametrize("content, named", [
    ("alice secret\n", "line 1: no colon"),
    ("", "no username:password line"),
], ids=["no-colon", "empty"])
def test_a_bad_auth_file_fails_at_start_with_its_line(heterarchy, tmp_path, content, named):
    auth = tmp_path / "auth"
    auth.write_text(content)
    auth.chmod(0o600)  # a secret others can read is warned about on a line of its own
    done = subprocess.run([heterarchy, "serve", "kv", "--listen", f"127.0.0.1:{free_port()}", "--auth-file", auth],
                          capture_output=True, text=True, timeout=30)
    message = done.stderr.strip()
    assert done.returncode != 0 and str(auth) in message and named in message, message
    assert message.count("\n") == 0, message


# --- Connection limits ----------------------------------------------------------------------------


def nbd_admitted(port: int) -> NbdClient:
    """A greeted connection, once the readiness probe's has been counted out."""
    deadline = time.monotonic() + IO_SECONDS
    while True:
        try:
            return NbdClient(port)
        except (EOFError, ConnectionError):
            assert time.monotonic() < deadline, "no connection was admitted"
            time.sleep(0.05)


def test_nbd_connections_over_the_limit_are_closed_at_once_and_others_go_on(volume):
    server = volume("wt", "--max-connections", "2")
    first, second = nbd_admitted(server.port), nbd_admitted(server.port)
    with socket.create_connection(("127.0.0.1", server.port), timeout=IO_SECONDS) as third:
        assert third.recv(64) == b"", "a third connection was greeted"
    for client in (first, second):
        assert client.go(EXPORT) == REP_ACK
        assert client.read(0, BLOCK) == bytes(BLOCK)
    first.sock.close()
    # The freed place goes to the next client.
    with nbd_admitted(server.port) as again:
        assert again.go(EXPORT) == REP_ACK
    second.sock.close()


def admitted(server) -> Raw:
    """A connection the server serves, once the readiness probe's has been counted out."""
    deadline = time.monotonic() + IO_SECONDS
    while True:
        conn = server.raw()
        if conn.request(b"mn\r\n") == b"MN\r\n":
            return conn
        conn.close()
        assert time.monotonic() < deadline, "no connection was admitted"
        time.sleep(0.05)


def test_kv_connections_over_the_limit_get_memcached_error_line(servers, heterarchy):
    server = start_heterarchy_kv(servers, "--max-connections", "2")
    with admitted(server) as first, admitted(server) as second, server.raw() as third:
        assert third.until_closed() == b"ERROR Too many open connections\r\n"
        first.exchange(b"set k 0 0 1\r\nx\r\n", b"STORED\r\n")
        second.exchange(b"get k\r\n", b"VALUE k 0 1\r\nx\r\nEND\r\n")


# --- Bounded memory: slow and idle clients --------------------------------------------------------


@pytest.fixture
def many_files():
    """Lets this process (and the servers it starts) hold thousands of sockets."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 2 * IDLE_CONNECTIONS + 256
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"the hard limit on open files is {hard}; {wanted} are needed")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def trickle(sockets: list[socket.socket], payloads: list[bytes], seconds: float, stop: threading.Event):
    """Sends each socket its payload a byte a second, all in step, for `seconds`."""
    deadline = time.monotonic() + seconds
    at = 0
    while time.monotonic() < deadline and not stop.is_set():
        for sock, payload in zip(sockets, payloads):
            if at < len(payload):
                sock.sendall(payload[at : at + 1])
        at += 1
        stop.wait(1.0)


def with_slow_clients(pid: int, slow: list[socket.socket], payloads: list[bytes], serve_one) -> tuple[int, int]:
    """Runs `serve_one(round)` over and over while the slow clients trickle; returns the rounds
    served and the server's RSS growth."""
    before = rss_bytes(pid)
    stop = threading.Event()
    trickler = threading.Thread(target=trickle, args=(slow, payloads, SLOW_SECONDS, stop))
    trickler.start()
    rounds, peak = 0, before
    try:
        while trickler.is_alive():
            started = time.monotonic()
            serve_one(rounds)
            assert time.monotonic() - started < 2, f"round {rounds} waited behind the slow clients"
            rounds += 1
            peak = max(peak, rss_bytes(pid))
    finally:
        stop.set()
        trickler.join()
    return rounds, peak - before


def test_nbd_slow_clients_cost_bounded_memory_and_delay_no_one(volume):
    """50 clients trickle a byte a second (half in the handshake, half a 1 MiB WRITE), on one
    event loop with a normal client."""
    server = volume("wt", "--threads", "1", cache="ram:64m")
    pid = server.process.pid
    slow, payloads = [], []
    for index in range(50):
        client = NbdClient(server.port)
        if index % 2:
            assert client.go(EXPORT) == REP_ACK
            payloads.append(struct.pack(">IHHQQI", 0x25609513, 0, CMD_WRITE, index, 0, MIB) + bytes(64))
        else:
            payloads.append(struct.pack(">QII", IHAVEOPT, OPT_LIST, 0))
        slow.append(client.sock)
    with NbdClient(server.port) as good:
        assert good.go(EXPORT) == REP_ACK

        def one(round_):
            block = random.Random(round_).randbytes(BLOCK)
            good.write((round_ % 64) * BLOCK, block)
            assert good.read((round_ % 64) * BLOCK, BLOCK) == block

        rounds, growth = with_slow_clients(pid, slow, payloads, one)
    print(f"nbd: {rounds} rounds beside 50 slow clients, RSS grew {growth >> 10} KiB")
    assert rounds > 10, f"only {rounds} rounds served"
    assert growth < SLOW_CLIENTS_BYTES, f"RSS grew {growth >> 20} MiB under slow clients"
    for sock in slow:
        sock.close()


def test_kv_slow_clients_cost_bounded_memory_and_delay_no_one(servers, heterarchy):
    server = start_heterarchy_kv(servers, "--item-max", "1m")
    pid = server.process.pid
    slow = [socket.create_connection(("127.0.0.1", server.port), timeout=IO_SECONDS) for _ in range(50)]
    payloads = [b"set slow%d 0 0 1000000\r\n" % index if index % 2 else b"get " + b"k" * 200 for index in range(50)]
    with server.raw() as good:

        def one(round_):
            value = b"%08d" % round_
            good.exchange(b"set g 0 0 8\r\n" + value + b"\r\n", b"STORED\r\n")
            good.exchange(b"get g\r\n", b"VALUE g 0 8\r\n" + value + b"\r\nEND\r\n")

        rounds, growth = with_slow_clients(pid, slow, payloads, one)
    print(f"kv: {rounds} rounds beside 50 slow clients, RSS grew {growth >> 10} KiB")
    assert rounds > 10, f"only {rounds} rounds served"
    assert growth < SLOW_CLIENTS_BYTES, f"RSS grew {growth >> 20} MiB under slow clients"
    for sock in slow:
        sock.close()


def idle_growth(pid: int, port: int, first: bytes) -> int:
    """The server's RSS growth per connection over IDLE_CONNECTIONS clients that each sent
    `first` and then nothing."""
    before = rss_bytes(pid)
    sockets = []
    try:
        for _ in range(IDLE_CONNECTIONS):
            sock = socket.create_connection(("127.0.0.1", port), timeout=IO_SECONDS)
            if first:
                sock.sendall(first)
            sockets.append(sock)
        time.sleep(1)
        return (rss_bytes(pid) - before) // IDLE_CONNECTIONS
    finally:
        for sock in sockets:
            sock.close()


def test_nbd_idle_connections_cost_little(volume, many_files):
    server = volume("wt", "--threads", "1", "--max-connections-per-peer", str(2 * IDLE_CONNECTIONS))
    per_connection = idle_growth(server.process.pid, server.port, struct.pack(">I", 1))
    print(f"nbd: {per_connection} bytes of RSS per idle connection")
    assert per_connection < IDLE_CONNECTION_BYTES, f"{per_connection} bytes per idle connection"
    with NbdClient(server.port) as client:
        assert client.go(EXPORT) == REP_ACK


def test_kv_idle_connections_cost_little(servers, heterarchy, many_files):
    server = start_heterarchy_kv(servers, "--max-connections", str(2 * IDLE_CONNECTIONS),
                                 "--max-connections-per-peer", str(2 * IDLE_CONNECTIONS))
    per_connection = idle_growth(server.process.pid, server.port, b"")
    print(f"kv: {per_connection} bytes of RSS per idle connection")
    assert per_connection < IDLE_CONNECTION_BYTES, f"{per_connection} bytes per idle connection"
    with server.raw() as conn:
        conn.exchange(b"mn\r\n", b"MN\r\n")


# --- Every length and count field bounded: NBD ------------------------------------------------------


def test_nbd_option_length_over_the_limit_is_skipped_and_refused(volume):
    with NbdClient(volume().port) as client:
        [(kind, _)] = client.option(0x7FFF, bytes(MAX_OPTION_BYTES + 1))
        assert kind == REP_ERR_TOO_BIG
        assert client.list_exports() == [EXPORT]


def test_nbd_export_name_over_4096_bytes_is_invalid(volume):
    server = volume()
    with NbdClient(server.port) as client:
        name = b"v" * (MAX_STRING_BYTES + 1)
        [(kind, _)] = client.option(OPT_GO, struct.pack(">I", len(name)) + name + struct.pack(">H", 0))
        assert kind == REP_ERR_INVALID
        assert client.go(EXPORT) == REP_ACK
    with NbdClient(server.port) as client:
        client.sock.sendall(struct.pack(">QII", IHAVEOPT, OPT_EXPORT_NAME, MAX_STRING_BYTES + 1) + name)
        assert client.sock.recv(1) == b""


def test_nbd_info_request_count_must_match_the_option_length(volume):
    with NbdClient(volume().port) as client:
        head = struct.pack(">I", len(EXPORT)) + EXPORT.encode()
        [(kind, _)] = client.option(OPT_INFO, head + struct.pack(">H", 3) + struct.pack(">H", 1))
        assert kind == REP_ERR_INVALID
        # As many requests as the option's limit holds are read and answered once each.
        count = (MAX_OPTION_BYTES - len(head) - 2) // 2
        replies = client.option(OPT_INFO, head + struct.pack(">H", count) + struct.pack(">H", 1) * count)
        assert replies[-1][0] == REP_ACK and len(replies) <= 4, [kind for kind, _ in replies]


def test_nbd_request_lengths_over_the_maximum_block_size_fail_and_the_connection_goes_on(volume):
    with NbdClient(volume().port) as client:
        assert client.structured_replies() == REP_ACK
        assert client.go(EXPORT) == REP_ACK
        for handle, (command, payload) in enumerate([(CMD_READ, b""), (CMD_WRITE, bytes(MAX_PAYLOAD_BYTES + 1))], 1):
            client.send(handle, command, 0, MAX_PAYLOAD_BYTES + 1, payload)
            echoed, [(kind, chunk)] = client.receive_chunks()
            assert (echoed, kind) == (handle, REPLY_TYPE_ERROR)
            error, message_length = struct.unpack_from(">IH", chunk)
            assert error == 22 and 0 < message_length <= MAX_STRING_BYTES
        client.send(9, CMD_READ, 0, BLOCK)
        _, [(_, chunk)] = client.receive_chunks()
        assert len(chunk) == 8 + BLOCK


def test_nbd_requests_in_flight_are_bounded_when_the_client_reads_no_answers(volume):
    """4096 READs of 64 KiB (256 MiB of answers) sent without reading one: the server stops
    reading requests when answers pile up, its memory stays bounded, and every answer comes."""
    server = volume("wt", cache="ram:64m")
    pid = server.process.pid
    with NbdClient(server.port) as client:
        assert client.go(EXPORT) == REP_ACK
        before = rss_bytes(pid)
        count, length = 4096, 64 * KIB
        requests = b"".join(struct.pack(">IHHQQI", 0x25609513, 0, CMD_READ, handle, (handle % 512) * length, length)
                            for handle in range(count))
        sender = threading.Thread(target=client.sock.sendall, args=(requests,))
        sender.start()
        time.sleep(2)
        growth = rss_bytes(pid) - before
        assert growth < 64 * MIB, f"RSS grew {growth >> 20} MiB with answers unread"
        for _ in range(count):
            _, error, data = client.receive(length)
            assert error == 0 and len(data) == length
        sender.join()


# --- Every length and count field bounded: memcached protocols -----------------------------------


@pytest.fixture
def kv_server(servers, heterarchy):
    return start_heterarchy_kv(servers)


def test_kv_key_over_250_bytes_in_text_and_meta(kv_server):
    with kv_server.raw() as conn:
        key = b"k" * 251
        conn.exchange(b"get " + key + b"\r\n", b"CLIENT_ERROR bad command line format\r\n")
        conn.exchange(b"mg " + key + b" v\r\n", b"CLIENT_ERROR bad command line format\r\n")
        # As memcached, the refused line's data is then read as a command line of its own.
        conn.exchange(b"set " + key + b" 0 0 1\r\nx\r\n", b"CLIENT_ERROR bad command line format\r\nERROR\r\n")
        conn.exchange(b"mn\r\n", b"MN\r\n")


def test_kv_value_over_the_item_limit_is_streamed_past(servers, heterarchy):
    server = start_heterarchy_kv(servers, "--item-max", "64k")
    before = rss_bytes(server.process.pid)
    with server.raw() as conn:
        big = bytes(8 * MIB)
        conn.exchange(b"set big 0 0 %d\r\n" % len(big) + big + b"\r\n", b"SERVER_ERROR object too large for cache\r\n")
        conn.exchange(b"ms big %d\r\n" % len(big) + big + b"\r\n", b"SERVER_ERROR object too large for cache\r\n")
        conn.exchange(b"mn\r\n", b"MN\r\n")
    growth = rss_bytes(server.process.pid) - before
    assert growth < 4 * MIB, f"RSS grew {growth >> 20} MiB for values it refused"


def test_kv_get_of_many_keys_within_the_line_limit_and_a_longer_line_closes(kv_server):
    with kv_server.raw() as conn, kv_server.raw() as other:
        conn.exchange(b"set k00007 0 0 1\r\nx\r\n", b"STORED\r\n")
        keys = b" ".join(b"k%05d" % index for index in range(100_000))
        assert len(keys) < MAX_GET_LINE_BYTES
        conn.exchange(b"get " + keys + b"\r\n", b"VALUE k00007 0 1\r\nx\r\nEND\r\n")
        try:
            other.send(b"get " + b"k " * (MAX_GET_LINE_BYTES // 2))
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert other.until_closed() == b""
        conn.exchange(b"mn\r\n", b"MN\r\n")


def test_kv_meta_flags_and_tokens_are_bounded(kv_server):
    with kv_server.raw() as conn:
        conn.exchange(b"ms k 1\r\nx\r\n", b"HD\r\n")
        conn.exchange(b"mg k O" + b"o" * 32 + b" v\r\n", b"CLIENT_ERROR opaque token too long\r\n")
        conn.exchange(b"mg k v v\r\n", b"CLIENT_ERROR duplicate flag\r\n")
        conn.exchange(b"mg k y\r\n", b"CLIENT_ERROR invalid flag\r\n")
        conn.exchange(b"mg k O" + b"o" * 31 + b" v\r\n", b"VA 1 O" + b"o" * 31 + b"\r\nx\r\n")
    with kv_server.raw() as long_line:
        # Every flag letter once still fits; a meta line past 2048 bytes cannot be a request.
        try:
            long_line.send(b"mg k " + b"T1 " * (MAX_LINE_BYTES // 3 + 1))
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert long_line.until_closed() == b""


def test_kv_line_without_newline_closes_at_2048_bytes(kv_server):
    with kv_server.raw() as conn, kv_server.raw() as other:
        conn.send(b"x" * (MAX_LINE_BYTES - 1))
        other.exchange(b"mn\r\n", b"MN\r\n")
        conn.send(b"x")
        assert conn.until_closed() == b""
        other.exchange(b"mn\r\n", b"MN\r\n")


# --- Default listening address ---------------------------------------------------------------------


def listening_addresses(pid: int) -> list[str]:
    """The addresses process `pid` listens on over TCP, from /proc (IPv4 and IPv6)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if match := re.fullmatch(r"socket:\[(\d+)\]", target):
            inodes.add(match.group(1))
    found = []
    for table, width in (("tcp", 8), ("tcp6", 32)):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:
                host, port = local.split(":")
                if width == 8:
                    address = socket.inet_ntop(socket.AF_INET, bytes.fromhex(host)[::-1])
                else:
                    address = "[" + socket.inet_ntop(socket.AF_INET6, b"".join(
                        bytes.fromhex(host[i : i + 8])[::-1] for i in range(0, 32, 8))) + "]"
                found.append(f"{address}:{int(port, 16)}")
    return found


@pytest.mark.parametrize("kind, args, default", [
    ("nbd", ["--backing", "ram:16m", "--cache", "ram:4m"], "127.0.0.1:10809"),
    ("kv", [], "127.0.0.1:11211"),
])
def test_servers_listen_on_loopback_unless_told_otherwise(heterarchy, tmp_path, kind, args, default):
    port = int(default.rsplit(":", 1)[1])
    process = LoggedProcess([heterarchy, "serve", kind, *args], tmp_path / "server.log")
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and process.process.poll() is None:
            found = listening_addresses(process.process.pid)
            if found:
                break
            time.sleep(0.05)
        if process.process.poll() is not None:
            log = (tmp_path / "server.log").read_text()
            if "in use" in log:
                # Another server holds the default port; the refusal still names the address.
                assert f"cannot listen on {default}" in log, log
                pytest.skip(f"{default} is taken by another process: {log.strip()}")
            pytest.fail(log)
        assert found == [default], found
        assert not any(address.startswith(("0.0.0.0", "[::]")) for address in found)
    finally:
        process.kill()
