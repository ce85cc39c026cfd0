"""The NBD server under hostile clients (docs/reliability.md, "Limits on what a client can make
a server hold"): floods of 32 MiB READs and WRITEs whose answers are never read, of 4 GiB TRIMs
and WRITE ZEROES, and of idle sockets, each from its own loopback address, with clients that
reset and reconnect. Under each, the server's resident memory stays under its byte budget plus
a fixed margin (both printed), and a well-behaved client's 4 KiB reads go on being answered
(within 250 ms at the 99th percentile and 1 s at most; the figures are printed). Deadlines close handshakes that never end and, when asked for, idle clients;
one peer's connections cannot take another's slots."""

import socket
import struct
import subprocess
import time

import pytest

from helpers import free_port
from hostile import HOSTILE_SOURCE, MIB, Flood, Probe, rss_bytes
from nbd_support import BLOCK, EXPORT, REP_ACK, NbdClient

SERVER_BUFFER_MIB = 128
CONNECTION_BUFFER_MIB = 64
# What the server may hold beyond its byte budget: its cache tier's 16 MiB as lines fill, the
# probe's connection (one small request beyond the budget), the allocator's slack.
MARGIN_MIB = 48
FLOOD_SECONDS = 6
# The target is every read within 100 ms (docs/reliability.md has the figures measured); on a
# shared 2-core machine, where the flood's own threads compete for the cores, a test holds the
# 99th percentile to 250 ms and the slowest read to 1 s, which the server without these limits
# misses by seconds.
LATENCY_LIMIT_SECONDS = 0.250
SLOWEST_LIMIT_SECONDS = 1.0
LIMITS = ("--connection-buffer", f"{CONNECTION_BUFFER_MIB}m", "--server-buffer", f"{SERVER_BUFFER_MIB}m")


def flood_and_probe(server, kind: str, volume_bytes: int, connections: int, cycle_seconds=1.0,
                    probe_export=EXPORT):
    """Runs the flood of EXPORT beside a probe of `probe_export` for FLOOD_SECONDS; checks the
    probe's latency and the server's memory, and that the server serves normally once the flood
    has gone."""
    pid = server.process.pid
    probe = Probe(server.port, pid, export=probe_export)
    probe.start()
    probe.wait_ready()
    before = rss_bytes(pid)
    flood = Flood(server.port, kind, volume_bytes=volume_bytes, connections=connections,
                  cycle_seconds=cycle_seconds, seconds=FLOOD_SECONDS + 5)
    flood.start()
    time.sleep(FLOOD_SECONDS)
    rounds, slowest = probe.stop()
    flood.stop()
    growth = probe.rss_peak - before
    bound = (SERVER_BUFFER_MIB + MARGIN_MIB) * MIB
    p99 = sorted(probe.latencies)[int(len(probe.latencies) * 0.99)] if probe.latencies else float("inf")
    print(f"{kind} flood: {connections} connections, {flood.rounds} rounds; RSS {before / MIB:.0f} MiB "
          f"before, peak {probe.rss_peak / MIB:.0f} MiB (+{growth / MIB:.0f} MiB; budget "
          f"{SERVER_BUFFER_MIB} MiB + margin {MARGIN_MIB} MiB); probe: {rounds} reads, p99 "
          f"{p99 * 1000:.1f} ms, slowest {slowest * 1000:.1f} ms")
    assert flood.rounds >= 1, "the flood never ran"
    assert rounds >= FLOOD_SECONDS * 10, f"the probe was served only {rounds} reads"
    assert p99 < LATENCY_LIMIT_SECONDS, f"4 KiB reads took {p99 * 1000:.0f} ms at p99 under the {kind} flood"
    assert slowest < SLOWEST_LIMIT_SECONDS, f"a 4 KiB read took {slowest * 1000:.0f} ms under the {kind} flood"
    assert growth < bound, f"RSS grew {growth / MIB:.0f} MiB under the {kind} flood"
    with NbdClient(server.port) as client:
        assert client.go(EXPORT) == REP_ACK
        client.write(0, b"\x5a" * BLOCK)
        assert client.read(0, BLOCK) == b"\x5a" * BLOCK


def test_reads_of_32_mib_never_read_hold_the_server_to_its_budget(volume, tmp_path):
    """Four clients with 64 READs of 32 MiB each (8 GiB asked for), reset and reconnected every
    second: the requests of a reset connection stay counted until they finish."""
    size = 256 * MIB
    server = volume("wt", *LIMITS, "--threads", "1", backing=f"file:{tmp_path / 'b.img'}:{size}:direct")
    flood_and_probe(server, "reads", size, connections=4)


def test_writes_of_32_mib_behind_a_slow_backing_store_hold_the_server_to_its_budget(serve, tmp_path):
    """Two clients send 32 MiB WRITEs as fast as their sockets take them, to a write-through
    volume over a disk-paced backing store, and read no answer; the probe reads another export
    of the same server (on this one its reads would wait for the disk the flood keeps busy)."""
    size = 256 * MIB
    port = free_port()
    config = tmp_path / "writes.toml"
    config.write_text(
        f'[server]\nlisten = "127.0.0.1:{port}"\nthreads = 1\nconnection_buffer = "{CONNECTION_BUFFER_MIB}m"\n'
        f'server_buffer = "{SERVER_BUFFER_MIB}m"\n'
        f'[[export]]\nname = "{EXPORT}"\nbacking = "file:{tmp_path / "b.img"}:{size}"\ncache = "ram:16m"\n'
        'backing_throttle = "hdd"\n[export.caching]\nmode = "wt"\n'
        f'[[export]]\nname = "probe"\nbacking = "file:{tmp_path / "p.img"}:16m"\ncache = "ram:4m"\n')
    server = serve("--config", config, nbd=port)
    flood_and_probe(server, "writes", size, connections=2, cycle_seconds=3.0, probe_export="probe")


def test_trims_and_write_zeroes_of_4_gib_delay_no_one(volume, tmp_path):
    """Two clients with 512 TRIMs and WRITE ZEROES of 4 GiB each over a 4 GiB volume: planned a
    slice at a time on the workers, one per client at once, never on the event loop."""
    size = 4 << 30
    server = volume("wb", *LIMITS, "--threads", "1", backing=f"file:{tmp_path / 'b.img'}:{size}")
    flood_and_probe(server, "trims", size, connections=2, cycle_seconds=3.0)


def greeted(sock: socket.socket) -> bool:
    """Whether the server greeted this socket (it was served, not closed over a limit)."""
    try:
        return len(sock.recv(18)) == 18
    except (ConnectionError, socket.timeout):
        return False


def closed_by_server(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes `sock` within `seconds` (what it sent first is skipped)."""
    sock.settimeout(seconds)
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            if sock.recv(4096) == b"":
                return True
    except ConnectionError:
        return True
    except socket.timeout:
        return False
    return False


def test_one_peers_idle_sockets_take_only_its_own_slots_and_the_handshake_deadline_frees_them(volume):
    server = volume("wt", "--max-connections", "64", "--max-connections-per-peer", "16",
                    "--handshake-timeout-s", "2")
    hostile = [socket.create_connection(("127.0.0.1", server.port), timeout=2, source_address=(HOSTILE_SOURCE, 0))
               for _ in range(100)]
    served = [sock for sock in hostile if greeted(sock)]
    print(f"idle flood: {len(served)} of {len(hostile)} sockets from {HOSTILE_SOURCE} greeted")
    assert len(served) == 16, f"{len(served)} idle sockets of one peer were served, not 16"
    started = time.monotonic()
    with NbdClient(server.port) as client:
        assert client.go(EXPORT) == REP_ACK
        client.write(0, b"\x01" * BLOCK)
        assert client.read(0, BLOCK) == b"\x01" * BLOCK
    assert time.monotonic() - started < LATENCY_LIMIT_SECONDS * 5
    assert all(closed_by_server(sock, 4.0) for sock in served), "a handshake outlived its 2 s deadline"
    for sock in hostile:
        sock.close()


def test_a_full_server_frees_the_slots_of_handshakes_that_never_end(volume):
    """64 idle sockets take every slot; within the 2 s handshake deadline they are closed and a
    new client is served."""
    server = volume("wt", "--max-connections", "64", "--handshake-timeout-s", "2")
    hostile = [socket.create_connection(("127.0.0.1", server.port), timeout=2, source_address=(HOSTILE_SOURCE, 0))
               for _ in range(64)]
    assert all(greeted(sock) for sock in hostile)
    refused = socket.create_connection(("127.0.0.1", server.port), timeout=2)
    assert not greeted(refused), "a 65th connection was served over max_connections"
    refused.close()
    time.sleep(3.5)
    with NbdClient(server.port) as client:
        assert client.go(EXPORT) == REP_ACK
    for sock in hostile:
        sock.close()


def test_an_idle_timeout_closes_quiet_clients_and_none_by_default(volume):
    quiet_server = volume("wt", "--idle-timeout-s", "1")
    with NbdClient(quiet_server.port) as quiet, NbdClient(quiet_server.port) as busy:
        assert quiet.go(EXPORT) == REP_ACK and busy.go(EXPORT) == REP_ACK
        for _ in range(8):
            time.sleep(0.3)
            busy.read(0, BLOCK)
        assert closed_by_server(quiet.sock, 2.0), "a client quiet for 2.4 s outlived a 1 s idle timeout"
        busy.read(0, BLOCK)
    default = volume("wt")
    with NbdClient(default.port) as client:
        assert client.go(EXPORT) == REP_ACK
        assert not closed_by_server(client.sock, 2.5), "a quiet client was closed with no idle timeout"
        client.read(0, BLOCK)


def test_one_exports_clients_cannot_take_another_exports_slots(serve, tmp_path):
    """Two exports on one server; one peer holds every connection it may to "a", idle after its
    handshake: a client of "b" from another address is served at once."""
    port = free_port()
    config = tmp_path / "two.toml"
    config.write_text(
        f'[server]\nlisten = "127.0.0.1:{port}"\nmax_connections = 40\nmax_connections_per_peer = 32\n'
        + "".join(f'[[export]]\nname = "{name}"\nbacking = "file:{tmp_path / name}.img:16m"\ncache = "ram:4m"\n'
                  for name in ("a", "b")))
    serve("--config", config, nbd=port)
    held = []
    for _ in range(40):
        try:
            client = NbdClient(port, source=HOSTILE_SOURCE)
        except (EOFError, ConnectionError, struct.error, AssertionError):
            continue
        if client.go("a") == REP_ACK:
            held.append(client)
    print(f"export slots: {len(held)} idle clients of export a from {HOSTILE_SOURCE}")
    assert len(held) == 32
    with NbdClient(port) as client:
        assert client.go("b") == REP_ACK
        client.write(BLOCK, b"\x02" * BLOCK)
        assert client.read(BLOCK, BLOCK) == b"\x02" * BLOCK
    for client in held:
        client.sock.close()


@pytest.mark.parametrize("flag, value, named", [
    ("--connection-buffer", "100k", "connection-buffer"),
    ("--server-buffer", "lots", "server-buffer"),
    ("--handshake-timeout-s", "0", "handshake-timeout-s"),
    ("--max-connections-per-peer", "0", "max-connections-per-peer"),
])
def test_bad_limits_fail_at_start_with_one_line(heterarchy, tmp_path, flag, value, named):
    result = subprocess.run([heterarchy, "serve", "nbd", "--listen", "127.0.0.1:0", "--export", EXPORT,
                             "--backing", f"file:{tmp_path / 'b.img'}:16m", "--cache", "ram:4m", flag, value],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], result.stderr
