"""Failing devices under real servers and real clients (docs/reliability.md, "Injecting faults";
docs/architecture.md, "Faults"): each device is wrapped in heterarchy's fault injector
(`--cache-faults`, `--backing-faults`, a tenant's `faults`), armed by creating its trigger file
as nbdkit's error filter is, while qemu-io and pymemcache use the servers."""

import json
import socket
import subprocess
import time

import pytest
from pymemcache.exceptions import MemcacheServerError

from helpers import free_port
from nbd_support import MISSING, qemu_io, tool, volume_stats

pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"NBD tools missing: {MISSING}")

MIB = 1 << 20


def qemu_io_fails(server, command: str) -> str:
    """Runs one qemu-io command that must fail with EIO; returns its output."""
    done = subprocess.run(["qemu-io", "-f", "raw", server.uri(), "-c", command], capture_output=True, text=True,
                          timeout=60)
    output = done.stdout + done.stderr
    assert "failed" in output and "Input/output error" in output, output
    return output


def eventually(check, seconds=10.0):
    """Calls `check` until it returns a true value (the server's cleaner ticks every second)."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def test_a_backing_store_error_reaches_the_client_as_eio_and_the_volume_goes_on(volume, tmp_path):
    trigger = tmp_path / "inject"
    server = volume("wt", "--backing-faults", f"read-error-at=8m+64k,file={trigger}", metrics=True)
    qemu_io(server, "write -P 7 8m 64k", "write -P 9 16m 64k")
    qemu_io(server, "discard 8m 64k")  # leave the cache so that the read reaches the backing store
    trigger.touch()
    qemu_io_fails(server, "read 8m 4k")
    qemu_io(server, "read -P 9 16m 64k", "write -P 3 24m 64k", "read -P 3 24m 64k")
    trigger.unlink()
    qemu_io(server, "read 8m 4k")
    stats = volume_stats(server)
    assert stats["state"] == "caching"
    assert stats["devices"][-1]["errors"] >= 1
    assert 'heterarchy_volume_device_errors_total{export="vol",device="backing"}' in server.http("/metrics")


def test_a_clean_line_is_served_from_the_backing_store_when_the_cache_cannot_read_it(volume, tmp_path):
    trigger = tmp_path / "inject"
    server = volume("wt", "--cache-faults", f"read-error=1,file={trigger}", "--fallback-pt-errors", "0",
                    metrics=True)
    qemu_io(server, "write -P 5 0 1m")
    trigger.touch()
    qemu_io(server, "read -P 5 0 1m")
    stats = volume_stats(server)
    assert stats["devices"][0]["errors"] >= 16 and stats["state"] == "caching"


def test_a_dirty_line_the_cache_cannot_read_is_reported_and_kept(volume, tmp_path):
    trigger = tmp_path / "inject"
    # A persistent tier keeps dirty lines over a FLUSH (qemu-io flushes as it closes).
    server = volume("wb", "--cache-faults", f"read-error=1,file={trigger}", "--fallback-pt-errors", "0",
                    cache=f"pmem:{tmp_path / 'cache.pm'}:16m", metrics=True)
    qemu_io(server, "write -P 6 0 64k")
    trigger.touch()
    qemu_io_fails(server, "read -P 6 0 64k")
    trigger.unlink()
    # The cleaner writes the stranded line back within a tick or two; then it reads back whole.
    assert eventually(lambda: volume_stats(server)["stranded_lines"] == 0)
    qemu_io(server, "read -P 6 0 64k")


def test_a_failing_cache_takes_the_volume_to_pass_through_after_writing_back(volume, tmp_path):
    trigger = tmp_path / "inject"
    server = volume("wb", "--cache-faults", f"write-error=1,flush-error=1,file={trigger}",
                    cache=f"pmem:{tmp_path / 'cache.pm'}:16m", metrics=True)
    qemu_io(server, "write -P 1 0 1m", "flush")
    assert volume_stats(server)["dirty_lines"] > 0
    trigger.touch()
    # Writes into the cache fail until its errors reach the threshold (16); then they go around.
    for attempt in range(40):
        done = subprocess.run(["qemu-io", "-f", "raw", server.uri(), "-c", f"write -P 2 {2 + attempt % 4}m 64k"],
                              capture_output=True, text=True, timeout=60)
        if "failed" not in done.stdout + done.stderr and volume_stats(server)["state"] != "caching":
            break
    stats = eventually(lambda: (s := volume_stats(server))["resident_lines"] == 0 and s)
    assert stats, volume_stats(server)
    assert stats["state"].startswith("pass-through: "), stats["state"]
    assert stats["stranded_lines"] == 0 and stats["devices"][0]["errors"] >= 16
    # Nothing acknowledged is lost, and the volume goes on without its cache.
    qemu_io(server, "read -P 1 0 1m", "write -P 4 8m 1m", "flush", "read -P 4 8m 1m")
    assert 'heterarchy_volume_passthrough{export="vol"} 1' in server.http("/metrics")


def test_a_cache_device_that_disappears_loses_nothing_written_through(volume, tmp_path):
    gone = tmp_path / "gone"
    server = volume("wt", "--cache-faults", f"gone-file={gone}", metrics=True)
    qemu_io(server, "write -P 8 0 2m")
    gone.touch()
    qemu_io(server, "read -P 8 0 2m")
    assert eventually(lambda: volume_stats(server)["state"] == "pass-through: cache tier 0 is gone")
    qemu_io(server, "write -P 9 4m 1m", "flush", "read -P 9 4m 1m", "read -P 8 0 2m")


def kv_config(tmp_path, faults: str) -> tuple:
    """Two tenants with values on persistent memory (files in tmp_path); alpha's fail as
    `faults` says."""
    ports = {"alpha": free_port(), "beta": free_port()}
    text = "[server]\nthreads = 1\n"
    for name, extra in (("alpha", {"faults": faults}), ("beta", {})):
        table = {"name": name, "listen": f"127.0.0.1:{ports[name]}", "pmem": f"{tmp_path / name}.pm:16m",
                 "memory": "4m", **extra}
        text += "[[tenant]]\n" + "".join(f"{key} = {json.dumps(value)}\n" for key, value in table.items())
    config = tmp_path / "tenants.toml"
    config.write_text(text)
    return config, ports


def test_a_tenant_whose_storage_fails_answers_server_error_and_others_go_on(servers, heterarchy, tmp_path):
    trigger = tmp_path / "inject"
    config, ports = kv_config(tmp_path, f"write-error=1,read-error=1,file={trigger}")
    server = servers.start_config(config, [ports["alpha"], ports["beta"]])
    alpha, beta = server.client(ports["alpha"]), server.client(ports["beta"])
    assert alpha.set("kept", b"acknowledged") and beta.set("kept", b"beta's")
    trigger.touch()
    with pytest.raises(MemcacheServerError, match="injected fault"):
        alpha.set("new", b"refused")
    with socket.create_connection(("127.0.0.1", ports["alpha"]), timeout=10) as raw:
        raw.sendall(b"get kept\r\n")
        line = raw.makefile("rb").readline()
    assert line.startswith(b"SERVER_ERROR ") and b"injected fault" in line, line
    for i in range(100):
        assert beta.set(f"b{i}", b"x" * 100)
    assert beta.get("kept") == b"beta's" and beta.get("b99") == b"x" * 100
    trigger.unlink()
    assert alpha.get("kept") == b"acknowledged", "an acknowledged value survives its device's errors"
    assert alpha.get("new") is None
    assert alpha.set("after", b"works") and alpha.get("after") == b"works"
