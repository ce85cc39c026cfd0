"""Fixtures shared by the Python tests: the release binary, the shared traces, Zipf traces,
servers, and a headless browser page."""

from pathlib import Path

import pytest

from browser import VIEWPORT, BrowserPage, launch, unavailable
from helpers import BINARY, TRACES, free_port
from kv_support import Servers
from nbd_support import EXPORT, VOLUME_BYTES, Server
from zipf_trace import write_zipf_trace


@pytest.fixture(scope="session")
def heterarchy() -> Path:
    """The binary: HETERARCHY_BIN (scripts/test names its `ci` build) or the release build."""
    if not BINARY.is_file():
        pytest.fail(f"{BINARY} is missing: run `cargo build --release` or scripts/test")
    return BINARY


@pytest.fixture(scope="session")
def traces_dir() -> Path:
    """The shared real traces (../shared/traces beside the repository)."""
    if not TRACES.is_dir():
        pytest.skip(f"real traces not found at {TRACES}: tests that need them are skipped")
    return TRACES


@pytest.fixture(scope="session")
def zipf_trace(tmp_path_factory):
    """`zipf_trace(theta, keys=, requests=, seed=, object_size=, sizes=)` writes, once per
    session, a seeded Zipf oracleGeneral trace; object sizes vary (`sizes`: "log-uniform" or
    "log-normal") unless `object_size` fixes them."""
    made: dict[tuple, Path] = {}

    def make(theta, keys=20_000, requests=200_000, seed=1, object_size=None, sizes="log-uniform") -> Path:
        spec = (theta, keys, requests, seed, object_size, sizes)
        if spec not in made:
            name = f"zipf-{theta}-{keys}-{requests}-{seed}-{object_size or sizes}.oracleGeneral.bin"
            path = tmp_path_factory.getbasetemp() / name
            made[spec] = write_zipf_trace(path, theta, keys, requests, seed, object_size, sizes)
        return made[spec]

    return make


@pytest.fixture
def servers(tmp_path):
    """Starts key-value servers for one test (`servers.start(kind, ...)`); kills every one at
    teardown."""
    started = Servers(tmp_path)
    yield started
    started.kill_all()


@pytest.fixture
def serve(heterarchy, tmp_path):
    """`serve(*args, nbd=, metrics=)` starts `heterarchy serve *args` and waits until it accepts
    connections on `nbd` (a port or a Unix socket path) and `metrics` (a port); every server
    still running at teardown is killed."""
    servers = []

    def start(*args, nbd, metrics=None) -> Server:
        server = Server(heterarchy, ["serve", *args], tmp_path / f"server-{len(servers)}.log", nbd, metrics)
        servers.append(server)
        server.wait_until_ready()
        return server

    yield start
    for server in servers:
        server.kill()


@pytest.fixture
def volume(serve, tmp_path):
    """`volume(mode, *flags, backing=, cache=, metrics=, listen=)` serves one export, EXPORT, by
    default a 64 MiB file in tmp_path over a 16 MiB RAM cache, on a free TCP port (on a Unix
    socket if `listen` is its path), with an HTTP metrics port if `metrics`."""

    def start(mode="wt", *flags, backing=None, cache="ram:16m", metrics=False, listen=None) -> Server:
        nbd = listen or free_port()
        address = f"unix:{nbd}" if isinstance(nbd, Path) else f"127.0.0.1:{nbd}"
        metrics_port = free_port() if metrics else None
        args = [
            "nbd", "--listen", address, "--export", EXPORT,
            "--backing", backing or f"file:{tmp_path / 'backing.img'}:{VOLUME_BYTES}",
            "--cache", cache, "--mode", mode, *flags,
        ]
        if metrics_port:
            args += ["--metrics", f"127.0.0.1:{metrics_port}"]
        return serve(*args, nbd=nbd, metrics=metrics_port)

    return start


@pytest.fixture(scope="session")
def chromium():
    """Debian's headless Chromium through Playwright, one for the session (browser.py); skips
    the tests that use it when either is missing, except in CI, where that fails."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("the Python package playwright is not installed (tests/python/requirements.txt)")
    with sync_playwright() as playwright:
        browser = launch(playwright)
        yield browser
        browser.close()


@pytest.fixture
def browser_page(chromium):
    """A fresh page (browser.BrowserPage, VIEWPORT-sized) in a context of its own: `open(url)`,
    `check_no_errors()`, `check_not_blank()`, `check_charts()`, `screenshot(name, tmp_path)`,
    and the Playwright page as `.page`. Any error the page reported up to the test's end fails
    it at teardown too."""
    context = chromium.new_context(viewport=VIEWPORT)
    page = BrowserPage(context)
    yield page
    errors = list(page.errors)
    context.close()
    if errors:
        pytest.fail(f"{page.page.url} reported errors:\n" + "\n".join(errors))
