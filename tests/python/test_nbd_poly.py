"""PolyEMT served over NBD (docs/pm-block-device.md, "PolyEMT: one memory tier, three roles"):
`heterarchy serve nbd --poly` with a persistent memory tier (a file standing for BB-DRAM) over a
file backing store, driven by qemu-io and fio (verifying, with compressible data), killed with
SIGKILL and restarted without losing an acknowledged write, as an `[[export]]` table with
`scheme = "poly"`, and the one-line errors of flags it cannot serve."""

import json

import pytest

from helpers import free_port, run
from nbd_support import EXPORT, MISSING, qemu_io, tool

if MISSING:
    pytest.skip(
        f"the NBD tests need {', '.join(MISSING)} (Debian packages libnbd-bin, qemu-utils, fio)",
        allow_module_level=True,
    )

BACKING_BYTES = 64 << 20


def poly_device(serve, tmp_path, *flags, tier="4m"):
    port = free_port()
    return serve(
        "nbd", "--listen", f"127.0.0.1:{port}", "--export", EXPORT,
        "--backing", f"file:{tmp_path / 'ssd.img'}:{BACKING_BYTES}",
        "--cache", f"pmem:{tmp_path / 'tier.pm'}:{tier}", "--poly", *flags, nbd=port,
    )


@pytest.mark.parametrize("flags", [
    ["--poly-interval", "0.2"],                  # the search, stepping five times a second
    ["--poly-knobs", "0.5,0.5", "--poly-codec", "zstd"],
    ["--poly-knobs", "1,0"],                     # no write cache: writes go through
])
def test_qemu_io_patterns_through_poly(serve, tmp_path, flags):
    server = poly_device(serve, tmp_path, *flags)
    qemu_io(
        server,
        "write -P 0xab 0 64k", "write -P 0xcd 1m 4k", "read -P 0xab 0 64k", "read -P 0xcd 1m 4k",
        "write -P 0x11 1000 3000", "read -P 0x11 1000 3000", "read -P 0xab 0 1000",
        "read -P 0xab 4000 61536", "write -P 0x22 2m 8m", "read -P 0x22 2m 8m", "flush",
    )
    qemu_io(server, "read -P 0x11 1000 3000", "read -P 0xcd 1m 4k", "read -P 0x22 2m 8m")
    info = json.loads(tool("nbdinfo", "--no-content", "--json", server.uri()).stdout)["exports"][0]
    assert info["export-size"] == BACKING_BYTES


def test_fio_verifies_compressible_random_writes(serve, tmp_path):
    # 32 MiB of writes over a 4 MiB tier: write-back, compression and eviction all happen.
    server = poly_device(serve, tmp_path, "--poly-knobs", "0.2,0.5")
    report = tmp_path / "fio.json"
    tool(
        "fio", "--name=poly", "--ioengine=nbd", f"--uri={server.uri()}", "--rw=randwrite",
        "--bs=4k", "--size=32m", "--iodepth=16", "--buffer_compress_percentage=50",
        "--refill_buffers", "--verify=crc32c", "--do_verify=1", "--verify_fatal=1",
        "--output-format=json", f"--output={report}",
        timeout=300, cwd=tmp_path,
    )
    [job] = json.loads(report.read_text())["jobs"]
    assert job["error"] == 0
    assert job["write"]["io_bytes"] == 32 << 20


def test_sigkill_loses_no_acknowledged_write(serve, tmp_path):
    # All write cache, some of it compressed: what qemu-io was told is written is in the tier.
    flags = ["--poly-knobs", "0,0.5"]
    server = poly_device(serve, tmp_path, *flags)
    qemu_io(server, "write -P 0x5a 0 1m", "write -P 0x6b 3m 512k", "write -P 0x7c 100000 5000")
    server.kill()  # SIGKILL: no shutdown, no flush
    server = poly_device(serve, tmp_path, *flags)
    qemu_io(server, "read -P 0x5a 0 100000", "read -P 0x7c 100000 5000",
            "read -P 0x5a 105000 943576", "read -P 0x6b 3m 512k")
    assert "pages recovered" in server.log.read_text()


def test_a_config_table_with_scheme_poly(serve, tmp_path):
    port = free_port()
    config = tmp_path / "serve.toml"
    config.write_text(
        f'[server]\nlisten = "127.0.0.1:{port}"\n'
        f'[[export]]\nname = "{EXPORT}"\nbacking = "file:{tmp_path / "ssd.img"}:{BACKING_BYTES}"\n'
        f'cache = "pmem:{tmp_path / "tier.pm"}:2m"\n'
        '[export.caching]\nscheme = "poly"\n'
        '[export.caching.poly]\nstep = 0.25\ninterval = 0.5\ncodec = "zstd"\n'
    )
    server = serve("--config", str(config), nbd=port)
    qemu_io(server, "write -P 0x42 0 2m", "read -P 0x42 0 2m", "flush")


@pytest.mark.parametrize("flags, named", [
    (["--cache", "ram:4m", "--poly"], "--cache"),
    (["--cache", "pmem:{tmp}/t:4m", "--poly", "--mode", "wa"], "--mode"),
    (["--cache", "pmem:{tmp}/t:4m", "--poly", "--nhc"], "--nhc"),
    (["--cache", "pmem:{tmp}/t:4m", "--cache", "pmem:{tmp}/u:4m", "--poly"], "--cache"),
    (["--cache", "pmem:{tmp}/t:4m", "--poly", "--poly-step", "0.3"], "--poly-step"),
    (["--cache", "pmem:{tmp}/t:4m", "--poly", "--poly-codec", "brotli"], "--poly-codec"),
    (["--cache", "pmem:{tmp}/t:4m", "--poly", "--poly-knobs", "0.5,1.5"], "--poly-knobs"),
    (["--cache", "pmem:{tmp}/t:4m", "--poly", "--poly-knobs", "half"], "--poly-knobs"),
    (["--cache", "pmem:{tmp}/t:4k", "--poly"], "too small"),
])
def test_bad_poly_flags_are_one_line_errors(heterarchy, tmp_path, flags, named):
    flags = [flag.replace("{tmp}", str(tmp_path)) for flag in flags]
    done = run(heterarchy, "serve", "nbd", "--listen", f"127.0.0.1:{free_port()}",
               "--backing", f"file:{tmp_path / 'x.img'}:64m", *flags, check=False)
    assert done.returncode != 0
    # One line says what is wrong and names the flag (clap may add its usage below).
    assert named in done.stderr.splitlines()[0], done.stderr
    assert "panicked" not in done.stderr


def test_a_config_table_refuses_cached_volume_keys(heterarchy, tmp_path):
    config = tmp_path / "serve.toml"
    config.write_text(
        f'[[export]]\nname = "p"\nbacking = "file:{tmp_path / "ssd.img"}:64m"\n'
        f'cache = "pmem:{tmp_path / "tier.pm"}:2m"\n'
        '[export.caching]\nscheme = "poly"\nmode = "wb"\n'
    )
    done = run(heterarchy, "serve", "--config", str(config), check=False)
    assert done.returncode != 0
    assert "mode" in done.stderr, done.stderr
    assert "panicked" not in done.stderr
