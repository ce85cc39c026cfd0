"""Every command's `--report` page (docs/simulation.md, "Reports"), opened in headless Chromium
(browser.py): each command runs on small real inputs — Zipf traces, a generated block trace and
its sample, a device model, a key-value server under `loadgen kv`, an NBD volume under I/O — and
its page must load without error, not be blank, hold charts with lines or bars drawn, and load
nothing but itself (no script, no outside asset). HETERARCHY_UPDATE_SCREENSHOTS=1 keeps the
`sim` report's screenshot as docs/img/report-sim.png; the others go to tmp_path."""

import random
import re
import subprocess

import pytest

from browser import SCREENSHOTS
from helpers import BINARY, SMALL_HIERARCHY, run
from nbd_support import BLOCK, connect

SIM_SCREENSHOT = "report-sim.png"
SCREENSHOT_MAX_BYTES = 150_000
# An outside asset: a URL to fetch in an attribute or in CSS. The SVG namespace
# (xmlns="http://www.w3.org/2000/svg") names, it does not fetch.
OUTSIDE_ASSET = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//|url\(\s*["']?\s*(?:https?:)?//|@import""", re.I)


@pytest.fixture(autouse=True)
def built(heterarchy):
    """Every test runs the release binary: fail clearly when it is missing."""


def check_report(browser_page, path, tmp_path, title: str, charts: int, screenshot: str | None = None):
    """Fails unless the report at `path` is self-contained, loads without error, shows `title`,
    is not blank and has at least `charts` charts drawn; takes a screenshot (named `screenshot`,
    or after the file) into tmp_path, or for a named `screenshot` into docs/img when updating
    them, and returns its path."""
    html = path.read_text()
    assert "<script" not in html.lower(), f"{path.name} holds a script"
    assert not OUTSIDE_ASSET.search(html), f"{path.name} names an outside asset: {OUTSIDE_ASSET.search(html).group(0)}"
    browser_page.open(path.as_uri())
    browser_page.check_not_blank()
    browser_page.check_charts(at_least=charts)
    assert title in browser_page.page.inner_text("h1"), browser_page.page.inner_text("h1")
    # Every request the page made is for the page itself.
    assert browser_page.requests == [path.as_uri()], browser_page.requests
    shot = browser_page.screenshot(screenshot or f"{path.stem}.png", tmp_path, keep=screenshot is not None)
    browser_page.check_no_errors()
    return shot


def test_sim_report_charts_every_policy_and_is_the_screenshot(heterarchy, zipf_trace, browser_page, tmp_path,
                                                              monkeypatch):
    report = tmp_path / "sim.html"
    # A short name, given relative to the working directory: the report shows it as given.
    trace = tmp_path / "zipf-0.9.oracleGeneral.bin"
    trace.symlink_to(zipf_trace(0.9, keys=5000, requests=50_000))
    monkeypatch.chdir(tmp_path)
    run(heterarchy, "sim", trace.name, "--policy", "lru,fifo,sieve,s3fifo,arc", "--report", report)
    html = report.read_text()
    assert "Request miss ratio by cache size" in html and "Byte miss ratio by cache size" in html
    # Each policy a line in each chart and a legend entry.
    for policy in ("lru", "fifo", "sieve", "s3fifo", "arc"):
        assert html.count(f"<title>{policy}</title></polyline>") == 2, policy
    shot = check_report(browser_page, report, tmp_path, "heterarchy sim", charts=2, screenshot=SIM_SCREENSHOT)
    if shot.parent == SCREENSHOTS:
        assert shot.stat().st_size <= SCREENSHOT_MAX_BYTES, f"{shot}: {shot.stat().st_size} bytes to commit"


def test_sim_report_at_one_size_has_bars_by_policy(heterarchy, zipf_trace, browser_page, tmp_path):
    report = tmp_path / "sim-one-size.html"
    run(heterarchy, "sim", zipf_trace(0.9, keys=5000, requests=50_000), "--policy", "lru,fifo", "--size", "0.1",
        "--report", report)
    assert report.read_text().count('class="bar"') == 4
    check_report(browser_page, report, tmp_path, "heterarchy sim", charts=1)


@pytest.mark.parametrize("flags, charts", [([], 2), (["--policy", "fifo", "--points", "6"], 1)], ids=["lru", "fifo"])
def test_mrc_report_has_the_curve_and_lrus_reuse_histogram(heterarchy, zipf_trace, browser_page, tmp_path, flags, charts):
    report = tmp_path / "mrc.html"
    run(heterarchy, "mrc", zipf_trace(0.9, keys=5000, requests=50_000), *flags, "--report", report)
    html = report.read_text()
    assert ("Reuse (stack) distances" in html) == (not flags)
    check_report(browser_page, report, tmp_path, "heterarchy mrc", charts=charts)


@pytest.fixture(scope="module")
def block_trace(heterarchy, tmp_path_factory):
    """A 20,000-I/O generated block trace in MSR CSV and a BlkSample of it at rate 0.1."""
    folder = tmp_path_factory.mktemp("block")
    full, sample = folder / "full.csv", folder / "sample.csv"
    run(heterarchy, "trace", "generate", "block-io:requests=20000,write=0.3,misaligned=0.1,seed=5", "-o", full)
    run(heterarchy, "trace", "sample", full, "--rate", "0.1", "-o", sample)
    return full, sample


def test_trace_stats_report_charts_the_distributions(heterarchy, zipf_trace, browser_page, tmp_path):
    report = tmp_path / "stats.html"
    run(heterarchy, "trace", "stats", zipf_trace(0.9, keys=5000, requests=50_000), "--report", report)
    html = report.read_text()
    for title in ("Requests by op", "Object sizes", "Reuse time"):
        assert title in html, title
    assert "Block I/Os" not in html
    check_report(browser_page, report, tmp_path, "heterarchy trace stats", charts=3)


def test_trace_stats_report_of_a_block_trace_adds_its_ios(heterarchy, block_trace, browser_page, tmp_path):
    report = tmp_path / "block-stats.html"
    run(heterarchy, "trace", "stats", block_trace[0], "--report", report)
    html = report.read_text()
    assert "Block I/O sizes by op" in html and "Inter-arrival time by op" in html
    check_report(browser_page, report, tmp_path, "heterarchy trace stats", charts=5)


def test_trace_compare_report_charts_full_and_sample_hit_rates(heterarchy, block_trace, browser_page, tmp_path):
    report = tmp_path / "compare.html"
    full, sample = block_trace
    run(heterarchy, "trace", "compare", full, sample, "--rate", "0.1", "--report", report)
    html = report.read_text()
    assert "read_size_mean_bytes" in html
    assert "<title>full trace</title></polyline>" in html and "<title>sample</title></polyline>" in html
    check_report(browser_page, report, tmp_path, "heterarchy trace compare", charts=1)


def test_device_probe_report_charts_each_measure_by_queue_depth(heterarchy, browser_page, tmp_path):
    report = tmp_path / "probe.html"
    run(heterarchy, "device", "probe", "nvme-flash", "--qd", "1,4,16,64", "--report", report)
    html = report.read_text()
    for title in ("Mean latency by queue depth", "Throughput by queue depth", "Bandwidth by queue depth"):
        assert title in html, title
    check_report(browser_page, report, tmp_path, "heterarchy device probe", charts=3)


def test_loadgen_kv_report_charts_latency_and_throughput_over_time(servers, browser_page, tmp_path):
    server = servers.start("heterarchy")
    report = tmp_path / "loadgen-kv.html"
    run(BINARY, "loadgen", "kv", "--server", f"127.0.0.1:{server.port}", "--connections", "4", "--keys", "2000",
        "--duration", "2s", "--warmup", "200ms", "--interval", "500ms", "--report", report)
    html = report.read_text()
    for title in ("Latency percentiles", "Throughput per interval", "p99 latency per interval"):
        assert title in html, title
    check_report(browser_page, report, tmp_path, "heterarchy loadgen kv", charts=3)


def test_volume_stats_report_charts_each_export(volume, browser_page, tmp_path):
    server = volume("wb", "--cache-line", "4k", "--nhc", metrics=True)
    with connect(server) as client:
        data = random.Random(3).randbytes(BLOCK)
        for index in range(64):
            client.write(index * BLOCK, data)
        for index in range(128):
            client.read(index * BLOCK, BLOCK)
    report = tmp_path / "volume.html"
    run(BINARY, "volume", "stats", "--server", f"127.0.0.1:{server.metrics}", "--report", report)
    html = report.read_text()
    for title in ("Hit ratio and NHC admission by export", "Cache lines by export", "Device bandwidth"):
        assert title in html, title
    assert "NHC admission</h2>" in html
    check_report(browser_page, report, tmp_path, "heterarchy volume stats", charts=3)


@pytest.mark.parametrize("name", ["simulate", "sizing", "experiment", "model", "loadgen-block"])
def test_the_older_reports_load_too(heterarchy, block_trace, browser_page, tmp_path, name):
    report = tmp_path / f"{name}.html"
    config = tmp_path / "hierarchy.toml"
    config.write_text(SMALL_HIERARCHY)
    args, title = {
        "simulate": (["simulate", "--config", config, "--workload",
                      "uniform:keys=4000,requests=20000,size=4k,kind=block,seed=1"], "heterarchy simulate"),
        "sizing": (["sizing", block_trace[0], "--budget", "1"], "heterarchy sizing"),
        "experiment": (["experiment", "nhc-hotspot", "--scale", "0.1"], "heterarchy experiment"),
        "model": (["model"], "Modelled caching and splitting throughput"),
        "loadgen-block": (["loadgen", "block", "--backing", "ram:16m", "--staging-size", "4m", "--duration", "500ms"],
                          "heterarchy loadgen block"),
    }[name]
    run(heterarchy, *args, "--report", report)
    check_report(browser_page, report, tmp_path, title, charts=1)


def test_an_unwritable_report_is_a_one_line_error(heterarchy, zipf_trace, tmp_path):
    report = tmp_path / "no" / "such" / "folder" / "sim.html"
    done = subprocess.run([str(heterarchy), "sim", str(zipf_trace(0.9, keys=5000, requests=50_000)),
                           "--report", str(report)], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert lines == [f"error: cannot write report {report}: No such file or directory (os error 2)"], done.stderr
