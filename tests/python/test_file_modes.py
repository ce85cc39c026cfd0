"""Files on disk (docs/reliability.md, "Files on disk"), from outside: `serve nbd` and `serve kv`
create their cache, PM, BTT, PolyEMT and values files mode 0600 (in /dev/shm, where emulated PM
lives, and in the test's folder), say which persistence a PM file got, refuse a planted symbolic
link and another user's file, tighten a file of theirs that others could read, leave the Unix
socket of a running server alone, and refuse bad tenant names and shared files with one line.
Every server started here is stopped by its pid; the /dev/shm folder is removed."""

import os
import socket
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from helpers import LoggedProcess, accepts_connections, free_port

SHM = Path("/dev/shm")


@pytest.fixture
def shm_dir():
    """A folder in /dev/shm (tmpfs) for the test, removed after it."""
    if not (SHM.is_dir() and os.access(SHM, os.W_OK)):
        pytest.skip("needs a writable /dev/shm")
    with tempfile.TemporaryDirectory(prefix="heterarchy-file-modes-", dir=SHM) as folder:
        yield Path(folder)


@pytest.fixture
def start(heterarchy, tmp_path):
    """`start(*args, wait=[addresses])` runs `heterarchy serve *args` until it listens; each is
    stopped by its pid at teardown."""
    started = []

    def run(*args, wait):
        server = LoggedProcess([heterarchy, "serve", *args], tmp_path / f"server-{len(started)}.log")
        started.append(server)
        server.wait_for(wait)
        return server

    yield run
    for server in started:
        server.kill()


def refusal(heterarchy, *args) -> str:
    """Runs a `heterarchy serve` that must not start; its error, which is one line, the last
    (progress lines of what opened before may come first)."""
    try:
        done = subprocess.run(
            [str(heterarchy), "serve", *map(str, args)], capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"serve {' '.join(map(str, args))} started instead of refusing")
    assert done.returncode != 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("error: "), done.stderr
    assert all(line.startswith("heterarchy: ") for line in lines[:-1]), done.stderr
    return lines[-1]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_nbd_tiers_btt_and_polyemt_files_are_the_owners_alone(start, tmp_path, shm_dir):
    port = free_port()
    files = {
        "backing": tmp_path / "backing.img",
        "pm tier": shm_dir / "cache.pm",
        "file tier": tmp_path / "tier.img",
        "btt": shm_dir / "pm0.btt",
        "poly backing": tmp_path / "ssd.img",
        "poly tier": tmp_path / "poly.pm",
    }
    config = tmp_path / "serve.toml"
    config.write_text(
        f'[server]\nlisten = "127.0.0.1:{port}"\n'
        f'[[export]]\nname = "vol"\nbacking = "file:{files["backing"]}:16m"\n'
        f'cache = ["pmem:{files["pm tier"]}:4m", "file:{files["file tier"]}:8m"]\n'
        f'[[export]]\nname = "pm0"\nbacking = "btt:{files["btt"]}:16m"\nstaging = "caiti"\n'
        f'staging_size = "1m"\n'
        f'[[export]]\nname = "poly0"\nbacking = "file:{files["poly backing"]}:16m"\n'
        f'cache = "pmem:{files["poly tier"]}:8m"\n[export.caching]\nscheme = "poly"\n'
    )
    server = start("--config", config, wait=[port])
    for what, path in files.items():
        assert mode(path) == 0o600, f"{what}: {oct(mode(path))}"
    assert server.stop() == 0
    log = server.log.read_text()
    # The BTT on tmpfs says it flushes lines, as on PM, with nothing to lose at a power cut.
    assert "tmpfs: cache-line flush" in log, log


def test_a_kv_values_file_is_the_owners_alone_and_says_its_persistence(start, tmp_path, shm_dir):
    for folder in (shm_dir, tmp_path):
        port = free_port()
        values = folder / "values.pm"
        server = start("kv", "--listen", f"127.0.0.1:{port}", "--pmem", f"{values}:4m", wait=[port])
        assert mode(values) == 0o600
        assert server.stop() == 0
        log = server.log.read_text()
        tmpfs = folder == shm_dir
        expected = "(tmpfs: cache-line flush" if tmpfs else "MAP_SYNC" if "MAP_SYNC" in log else "(msync)"
        assert f"{values} {expected}" in log, log


def test_a_file_of_ours_that_others_could_read_is_tightened_with_a_warning(start, tmp_path):
    values = tmp_path / "values.pm"
    values.write_bytes(b"")
    values.chmod(0o644)
    port = free_port()
    server = start("kv", "--listen", f"127.0.0.1:{port}", "--pmem", f"{values}:4m", wait=[port])
    assert mode(values) == 0o600
    assert server.stop() == 0
    warnings = [line for line in server.log.read_text().splitlines() if "warning" in line]
    assert len(warnings) == 1 and str(values) in warnings[0] and "0644" in warnings[0], warnings


def test_a_planted_symbolic_link_is_refused_and_its_target_left_alone(heterarchy, tmp_path, shm_dir):
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    for folder in (shm_dir, tmp_path):
        link = folder / "cache.pm"
        link.symlink_to(victim)
        port = free_port()
        error = refusal(
            heterarchy, "nbd", "--listen", f"127.0.0.1:{port}", "--export", "vol",
            "--backing", "ram:16m", "--cache", f"pmem:{link}:4m",
        )
        assert f"{link} is a symbolic link" in error, error
        error = refusal(heterarchy, "kv", "--listen", f"127.0.0.1:{port}", "--pmem", f"{link}:4m")
        assert f"{link} is a symbolic link" in error, error
        link.unlink()
    assert victim.read_bytes() == b"precious"


def test_another_users_file_is_refused(heterarchy, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    planted = tmp_path / "values.pm"
    planted.write_bytes(b"")
    os.chown(planted, 65534, 65534)
    error = refusal(heterarchy, "kv", "--listen", f"127.0.0.1:{free_port()}", "--pmem", f"{planted}:4m")
    assert f"{planted} is owned by uid 65534" in error, error
    assert planted.stat().st_size == 0


def test_a_running_servers_unix_socket_is_not_unlinked_by_a_second(heterarchy, start, tmp_path):
    # Short paths: a Unix socket's path has room for about 100 bytes.
    with tempfile.TemporaryDirectory(prefix="hfm-") as short:
        nbd_socket, kv_socket = Path(short) / "nbd.sock", Path(short) / "kv.sock"
        nbd_args = ["--export", "vol", "--backing", "ram:16m", "--cache", "ram:4m"]
        first_nbd = start("nbd", "--listen", f"unix:{nbd_socket}", *nbd_args, wait=[nbd_socket])
        port = free_port()
        first_kv = start("kv", "--listen", f"127.0.0.1:{port}", "--unix", kv_socket, wait=[port, kv_socket])
        error = refusal(heterarchy, "nbd", "--listen", f"unix:{nbd_socket}", *nbd_args)
        assert error.endswith(f"{nbd_socket}: another server is listening there"), error
        error = refusal(heterarchy, "kv", "--listen", f"127.0.0.1:{free_port()}", "--unix", kv_socket)
        assert error.endswith(f"{kv_socket}: another server is listening there"), error
        # The first servers still take connections on their sockets.
        assert accepts_connections(nbd_socket) and accepts_connections(kv_socket)
        with socket.socket(socket.AF_UNIX) as client:
            client.settimeout(5)
            client.connect(str(kv_socket))
            client.sendall(b"version\r\n")
            assert client.recv(100).startswith(b"VERSION")
        assert first_nbd.stop() == 0 and first_kv.stop() == 0
        # A socket nobody listens on any more is stale: a new server replaces it.
        stale = socket.socket(socket.AF_UNIX)
        stale.bind(str(kv_socket))
        stale.close()
        port = free_port()
        again = start("kv", "--listen", f"127.0.0.1:{port}", "--unix", kv_socket, wait=[port, kv_socket])
        assert again.stop() == 0


@pytest.mark.parametrize("name", ['"../x"', '"a/b"', '".."', '"x\\u0001y"', '"tab\\there"'])
def test_a_bad_tenant_name_is_refused_with_one_line(heterarchy, tmp_path, name):
    config = tmp_path / "serve.toml"
    config.write_text(f'[[tenant]]\nname = {name}\nlisten = "127.0.0.1:{free_port()}"\n')
    error = refusal(heterarchy, "--config", config)
    assert "tenant[0]" in error and "name" in error, error


def test_two_tenants_or_a_tenant_and_an_export_on_one_file_are_refused_naming_both(heterarchy, tmp_path):
    values = tmp_path / "shared.pm"
    alias = tmp_path / "sub" / ".." / "shared.pm"
    (tmp_path / "sub").mkdir()
    config = tmp_path / "serve.toml"
    config.write_text(
        f'[[tenant]]\nname = "alpha"\nlisten = "127.0.0.1:{free_port()}"\npmem = "{values}:4m"\n'
        f'[[tenant]]\nname = "beta"\nlisten = "127.0.0.1:{free_port()}"\npmem = "{alias}:4m"\n'
    )
    error = refusal(heterarchy, "--config", config)
    assert "tenant[1] (beta).values" in error and "tenant[0] (alpha).values" in error, error
    config.write_text(
        f'[server]\nlisten = "127.0.0.1:{free_port()}"\n'
        f'[[export]]\nname = "vol"\nbacking = "ram:16m"\ncache = "pmem:{values}:4m"\n'
        f'[[tenant]]\nname = "alpha"\nlisten = "127.0.0.1:{free_port()}"\npmem = "{alias}:4m"\n'
    )
    error = refusal(heterarchy, "--config", config)
    assert "tenant[0] (alpha).values" in error and "export[0] (vol).cache[0]" in error, error
    assert not values.exists()
