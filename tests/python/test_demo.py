"""`heterarchy demo` on its built-in workload (crates/cli/src/commands/demo): every view's results
hold what the view claims, the live volume's decisions are the simulator's (one policy code, two
executors), and the report opens in headless Chromium with each section's charts drawn.
scripts/test also runs the README's first command as written, in a scratch folder."""

import json
import subprocess
import time

import pytest

from helpers import BINARY

SECTIONS = {
    "1. Eviction policies": 2,
    "2. The timed hierarchy": 4,
    "3. Sizing": 1,
    "4. Live": 2,
}
# Well under a minute on 2 cores; the runs here take 10 to 20 s.
DEMO_SECONDS_MAX = 60


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The built-in demo, run once: its JSON document, its report and how long it took."""
    folder = tmp_path_factory.mktemp("demo")
    report = folder / "report.html"
    started = time.monotonic()
    done = subprocess.run([str(BINARY), "demo", "--report", str(report), "--format", "json"],
                          capture_output=True, text=True, timeout=300, cwd=folder)
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), report, seconds


def test_the_demo_takes_well_under_a_minute(demo):
    _, _, seconds = demo
    assert seconds < DEMO_SECONDS_MAX, f"the demo took {seconds:.1f} s"


def test_no_online_policy_beats_belady_and_lru_misses_less_with_more_cache(demo):
    policies = demo[0]["policies"]
    results = policies["results"]
    names = {r["policy"] for r in results}
    assert names == {"lru", "fifo", "clock", "sieve", "s3fifo", "lfu", "arc", "twoq", "lirs", "belady"}
    sizes = sorted({r["cache_size"] for r in results})
    assert len(sizes) == 8
    for size in sizes:
        at = {r["policy"]: r["miss_ratio"] for r in results if r["cache_size"] == size}
        assert all(at["belady"] <= miss for miss in at.values()), (size, at)
    lru = [r["miss_ratio"] for r in sorted(results, key=lambda r: r["cache_size"]) if r["policy"] == "lru"]
    assert all(b <= a for a, b in zip(lru, lru[1:])), lru
    # A scan-resistant policy beats LRU on this trace, which begins with a scan (the fill).
    middle = sizes[4]
    at = {r["policy"]: r["miss_ratio"] for r in results if r["cache_size"] == middle}
    assert min(at["arc"], at["s3fifo"], at["lirs"]) < at["lru"]
    # At the working set, LRU's exact curve misses only the first touch of each line: the fill
    # touches every line of the volume first.
    lines = demo[0]["volume_bytes"] // 4096
    assert policies["lru_exact"][-1][1] == pytest.approx(lines / policies["requests"], rel=1e-12)


def test_the_timed_hierarchy_holds_the_volume_and_nhc_raises_throughput(demo):
    timed = demo[0]["hierarchy"]
    runs = dict((name, result) for name, result in timed["runs"])
    assert set(runs) == {"classic", "NHC"}
    for result in runs.values():
        assert len(result["tier_hit_ratios"]) == 3
        assert sum(result["tier_hit_ratios"]) == pytest.approx(result["hit_ratio"], abs=1e-12)
        # The fill wrote the whole volume into the tiers, and the Optane SSD tier holds it all.
        assert result["hit_ratio"] == 1.0
        assert [d["role"] for d in result["devices"]] == ["tier 0", "tier 1", "tier 2", "backing store"]
        assert result["devices"][3]["read_ops"] == 0
    # NHC stops copying what the lower tiers hit up into DRAM and PM: fewer writes there, more
    # requests a second (seed 000 ch. 4).
    assert runs["NHC"]["throughput_ops"] > 1.2 * runs["classic"]["throughput_ops"]
    assert runs["NHC"]["devices"][0]["write_ops"] < runs["classic"]["devices"][0]["write_ops"]


def test_cydonia_never_beats_the_exhaustive_optimum_and_stays_within_ten_evaluations(demo):
    sizing = demo[0]["sizing"]
    assert sizing["config"] == "FastDRAM/FastSSD/SlowHDD"
    assert [b["dollars"] for b in sizing["budgets"]] == [0.5, 1.0, 2.0]
    for budget in sizing["budgets"]:
        assert budget["exhaustive_latency_us"] <= budget["cydonia_latency_us"]
        assert budget["exhaustive_latency_us"] <= budget["single_tier_latency_us"]
        assert 1 <= budget["cydonia_evaluations"] <= 10 < budget["exhaustive_evaluations"]
        # The exhaustive optimum is the least of the curve over every split and the one tier.
        least = min([latency for _, latency in budget["curve"]] + [budget["single_tier_latency_us"]])
        assert least == pytest.approx(budget["exhaustive_latency_us"], rel=1e-9)
    # A larger budget never buys a slower hierarchy.
    optima = [b["exhaustive_latency_us"] for b in sizing["budgets"]]
    assert all(b <= a for a, b in zip(optima, optima[1:])), optima


def test_the_live_volume_decides_as_the_simulator_does(demo):
    live = demo[0]["live"]
    report, predicted = live["live"], live["predicted"]
    assert report["requests"] == demo[0]["mix_ios"] - demo[0]["mix_ios"] // 4
    lines = report["line_requests"]
    live_shares = [tier["hits"] / lines for tier in report["tiers"]] + [report["misses"] / lines]
    simulated = predicted["tier_hit_ratios"] + [1 - predicted["hit_ratio"]]
    # The same policy code in both executors, fed the same I/Os in the same order: only the live
    # tiers' slot tables, which take a little of each tier's room, tell them apart.
    for live_share, simulated_share in zip(live_shares, simulated):
        assert live_share == pytest.approx(simulated_share, abs=0.03), (live_shares, simulated)
    assert report["iops"] > 0 and predicted["throughput_ops"] > 0
    assert live["software_us"] == pytest.approx(1e6 / live["cpu_only_iops"])


def test_the_report_shows_every_section_with_its_charts(demo, browser_page):
    _, report, _ = demo
    html = report.read_text()
    assert "<script" not in html.lower()
    browser_page.open(report.as_uri())
    browser_page.check_not_blank()
    drawn = browser_page.page.evaluate("""() => {
        const counts = {};
        let section = null;
        for (const element of document.body.children) {
            if (element.tagName === "H2") {
                section = element.innerText.trim();
                counts[section] = 0;
            } else if (section !== null) {
                for (const svg of element.querySelectorAll("svg")) {
                    const line = [...svg.querySelectorAll("path, polyline")].some((path) =>
                        ((path.getAttribute(path.tagName === "path" ? "d" : "points") || "")
                            .match(/-?\\d+(\\.\\d+)?/g) || []).length >= 4);
                    const bar = [...svg.querySelectorAll("rect.bar")].some((rect) => {
                        const box = rect.getBBox();
                        return box.width > 0 && box.height > 0;
                    });
                    if (line || bar) counts[section] += 1;
                }
            }
        }
        return counts;
    }""")
    for section, charts in SECTIONS.items():
        assert drawn.get(section, 0) >= charts, (section, drawn)
    browser_page.check_no_errors()


def test_bad_demo_arguments_are_one_line_errors(tmp_path):
    for args, expected in [
        (["--workload", "zipf:keys=10"], "expected the pattern block-io"),
        (["--workload", "block-io:size=6k"], "size"),
        (["--format", "csv"], "--format csv"),
    ]:
        done = subprocess.run([str(BINARY), "demo", "--report", str(tmp_path / "r.html"), *args],
                              capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert done.returncode != 0
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], done.stderr
        assert not (tmp_path / "r.html").exists()
