"""The live dashboard at GET / of a server's metrics port, in headless Chromium (browser.py):
one server with an NHC block export and two key-value tenants sharing a `[[pm]]` under
NyxCache's `fair` policy, clients loading both for a few seconds, and the page checked for
errors, drawn charts and charts that move. HETERARCHY_UPDATE_SCREENSHOTS=1 keeps its screenshot
as docs/img/dashboard.png."""

import socket
import threading
import time

from pymemcache.client.base import Client

from browser import SCREENSHOTS
from helpers import free_port
from nbd_support import BLOCK, IO_SECONDS, REP_ACK, NbdClient

EXPORT = "vol"
# The load stops by itself after this long, whatever the test does.
LOAD_SECONDS = 30
# Two samples of the charts this far apart must differ.
BETWEEN_SAMPLES = 3.0
SCREENSHOT = "dashboard.png"
SCREENSHOT_MAX_BYTES = 150_000


def write_config(tmp_path, ports: dict):
    config = tmp_path / "dashboard.toml"
    config.write_text(f"""\
[server]
listen = "127.0.0.1:{ports['nbd']}"
metrics = "127.0.0.1:{ports['metrics']}"
threads = 2
policy = "fair"
alone_pause_ms = 20

[[export]]
name = "{EXPORT}"
backing = "file:{tmp_path / 'backing.img'}:64m"
cache = "ram:4m"
cache_line = "4k"
[export.caching]
mode = "wb"
admission = "nhc"

[[pm]]
name = "pm0"
path = "{tmp_path / 'pm0'}"
size = "64m"
throttle = "optane-pm-x2"

[[tenant]]
name = "alpha"
listen = "127.0.0.1:{ports['alpha']}"
pm = "pm0"
pm_size = "16m"

[[tenant]]
name = "beta"
listen = "127.0.0.1:{ports['beta']}"
pm = "pm0"
pm_size = "16m"
""")
    return config


class Load:
    """Client threads that load the server until `stop()` or LOAD_SECONDS, whichever comes
    first; `stop()` re-raises the first failure of any of them."""

    def __init__(self, *targets):
        self.stopping = threading.Event()
        self.deadline = time.monotonic() + LOAD_SECONDS
        self.failures: list[BaseException] = []
        self.threads = [threading.Thread(target=self._run, args=(target,), daemon=True) for target in targets]
        for thread in self.threads:
            thread.start()

    def running(self) -> bool:
        return not self.stopping.is_set() and time.monotonic() < self.deadline

    def _run(self, target):
        try:
            target(self)
        except BaseException as failure:  # noqa: BLE001 -- handed to the test thread by stop()
            self.failures.append(failure)

    def stop(self):
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=LOAD_SECONDS)
        if self.failures:
            raise self.failures[0]


def kv_load(port: int, keys: int, sets: bool):
    """Gets of `keys` keys, a third of them never set (misses), and with `sets` a set of one
    of them every other request."""

    def run(load: Load):
        client = Client(("127.0.0.1", port), connect_timeout=IO_SECONDS, timeout=IO_SECONDS,
                        default_noreply=False)
        value = b"v" * 512
        for key in range(0, keys, 3):
            client.set(f"k{key}", value)
        i = 0
        while load.running():
            client.get(f"k{i * 7 % keys}")
            if sets and i % 2:
                client.set(f"k{i * 3 % keys}", value)
            i += 1
        client.close()

    return run


def nbd_load(port: int):
    """4 KiB writes over the first 2 MiB of the export, each block read back three times: the
    reads hit what the writes cached."""

    def run(load: Load):
        with NbdClient(port) as client:
            # A write's header and data go in two sends: without this, Nagle holds the data
            # for the header's delayed ACK, and writes, not the server, set the pace.
            client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            assert client.go(EXPORT) == REP_ACK
            data = b"d" * BLOCK
            blocks = (2 << 20) // BLOCK
            i = 0
            while load.running():
                offset = (i // 4 * 37 % blocks) * BLOCK
                if i % 4 == 0:
                    client.write(offset, data)
                else:
                    client.read(offset, BLOCK)
                i += 1

    return run


def sample_charts(page) -> dict:
    """Every chart by its data-chart name: its sample count, latest values and drawn paths."""
    return page.evaluate("""() => Object.fromEntries([...document.querySelectorAll("svg[data-chart]")].map(
        (svg) => [svg.dataset.chart, {
            points: Number(svg.dataset.points),
            last: (svg.dataset.last || "").split(",").map((value) => value === "" ? null : Number(value)),
            paths: [...svg.querySelectorAll("path")].map((path) => path.getAttribute("d")),
        }]))""")


def test_dashboard_charts_move_under_load(heterarchy, servers, browser_page, tmp_path):
    """The page loads with no error and asks nothing of anyone but the server; it charts the
    export (throughput, bandwidth, hit ratio, dirty lines, NHC admission) and each tenant
    (throughput, bandwidth, hit ratio, latency, NyxCache's share and accesses); under load,
    two samples 3 s apart differ in sample count, drawn paths and values, and the loaded
    throughput charts show work being done."""
    ports = {name: free_port() for name in ("nbd", "metrics", "alpha", "beta")}
    config = write_config(tmp_path, ports)
    servers.start_config(config, [ports["nbd"], ports["alpha"], ports["beta"], ports["metrics"]])
    load = Load(
        nbd_load(ports["nbd"]),
        kv_load(ports["alpha"], keys=3000, sets=True),
        kv_load(ports["beta"], keys=300, sets=False),
    )
    try:
        base = f"http://127.0.0.1:{ports['metrics']}/"
        browser_page.open(base)
        page = browser_page.page
        # Rates need two samples; a third shows the page keeps going.
        page.wait_for_function(
            """() => Number(document.querySelector('svg[data-chart="tenant/alpha/ops"]')
                ?.dataset.points) >= 3""",
            timeout=15_000,
        )
        before = sample_charts(page)
        time.sleep(BETWEEN_SAMPLES)
        after = sample_charts(page)
    finally:
        load.stop()

    expected = [f"export/{EXPORT}/{chart}" for chart in ("ops", "bandwidth", "hits", "dirty", "nhc")]
    for tenant in ("alpha", "beta"):
        expected += [f"tenant/{tenant}/{chart}" for chart in ("ops", "bandwidth", "hits", "latency", "pm-share",
                                                              "pm-accesses")]
    assert sorted(after) == sorted(expected), sorted(after)
    for name in expected:
        then, now = before[name], after[name]
        assert now["points"] >= then["points"] + 2, f"{name}: {then['points']} then {now['points']} samples"
        assert now["paths"] != then["paths"], f"{name}: the same paths {BETWEEN_SAMPLES} s later"
    # Rates measured over different seconds are never all the same, and all are of work done.
    for name in ("export/vol/ops", "export/vol/bandwidth", "tenant/alpha/ops", "tenant/beta/ops"):
        then, now = before[name]["last"], after[name]["last"]
        assert now != then, f"{name}: still {now} {BETWEEN_SAMPLES} s later"
        assert max(value or 0 for value in now) > 0, f"{name}: no throughput: {now}"
    # alpha's gets read back keys it set: some hit.
    assert (after["tenant/alpha/hits"]["last"][0] or 0) > 0, after["tenant/alpha/hits"]

    browser_page.check_not_blank()
    browser_page.check_charts(at_least=len(expected))
    browser_page.check_no_errors()
    outside = [url for url in browser_page.requests if not url.startswith(base)]
    assert not outside, f"the page asked for {outside}"

    shot = browser_page.screenshot(SCREENSHOT, tmp_path)
    assert shot.stat().st_size > 10_000, f"{shot}: {shot.stat().st_size} bytes, a blank page?"
    if shot.parent == SCREENSHOTS:
        assert shot.stat().st_size <= SCREENSHOT_MAX_BYTES, f"{shot}: {shot.stat().st_size} bytes to commit"
