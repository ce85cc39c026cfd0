"""`heterarchy sizing` (seed 002 ch. 3; docs/simulation.md, "Sizing a hierarchy"): per
configuration and budget, Cydonia's tier sizes and the exhaustive optimum with its single-tier,
pyramidal and non-pyramidal bests, as JSON rows; Cydonia never beats the exhaustive optimum,
spends at most ten evaluations, and every answer fits its budget; bad budgets, devices and
configurations are one-line errors."""

import pytest

from helpers import TRACES, run, run_json

TRACE = TRACES / "cloudPhysicsIO.vscsi"
FIELDS = {"trace", "config", "budget", "search", "t1_bytes", "t2_bytes", "mean_latency_us", "evaluations",
          "pyramidal"}
# Seed 002 §3.2.1: 1 MiB units, priced as 1 MB of the device, plus 31 B of metadata a page in
# tier 1's DRAM (FastDRAM $120 / 16 GB, FastSSD $1,120 / 375 GB).
METADATA = 256 * 31 * 120 / 16e9
UNIT = {"FastDRAM": 120 / 16e3 + METADATA, "FastSSD": 1120 / 375e3 + METADATA}


@pytest.fixture(scope="module")
def rows(heterarchy):
    if not TRACE.is_file():
        pytest.skip(f"{TRACE} not found")
    return run_json(heterarchy, "sizing", TRACE, "--budget", "0.5,2,8",
                    "--config", "FastDRAM/FastSSD/SlowHDD")


def test_rows_answer_every_search_within_budget(rows):
    assert all(set(row) == FIELDS for row in rows), rows[0]
    searches = {(row["budget"], row["search"]) for row in rows}
    for budget in (0.5, 2, 8):
        assert {(budget, "cydonia"), (budget, "exhaustive"), (budget, "single-tier")} <= searches
    for row in rows:
        units = (row["t1_bytes"] >> 20, row["t2_bytes"] >> 20)
        spent = units[0] * UNIT["FastDRAM"] + units[1] * UNIT["FastSSD"]
        assert spent <= row["budget"] + 1e-9, row
        assert row["pyramidal"] is None if units[1] == 0 else row["pyramidal"] == (units[1] >= units[0])


def test_cydonia_is_near_the_optimum_in_ten_evaluations(rows):
    by = {(row["budget"], row["search"]): row for row in rows}
    for budget in (0.5, 2, 8):
        cydonia, best = by[(budget, "cydonia")], by[(budget, "exhaustive")]
        assert cydonia["evaluations"] <= 10
        assert best["mean_latency_us"] <= cydonia["mean_latency_us"] <= 1.15 * best["mean_latency_us"]
        assert best["mean_latency_us"] <= by[(budget, "single-tier")]["mean_latency_us"]


@pytest.mark.parametrize("args, named", [
    (["--budget", "0.001"], "--budget 0.001"),
    (["--budget=-1"], "--budget"),
    (["--budget", "0"], "--budget"),
    (["--budget", "1", "--devices", "FastDRAM,Floppy,SlowHDD"], "Floppy"),
    (["--budget", "1", "--config", "A/B/C"], "--config"),
])
def test_bad_arguments_are_one_line_errors(heterarchy, args, named):
    if not TRACE.is_file():
        pytest.skip(f"{TRACE} not found")
    done = run(heterarchy, "sizing", TRACE, *args, check=False)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], done.stderr


def test_the_report_charts_each_budget_with_both_optima_marked(heterarchy, tmp_path):
    if not TRACE.is_file():
        pytest.skip(f"{TRACE} not found")
    report = tmp_path / "sizing.html"
    run(heterarchy, "sizing", TRACE, "--budget", "0.5,2", "--config", "FastDRAM/FastSSD/SlowHDD",
        "--report", report)
    html = report.read_text()
    assert html.count("<svg") == 2 and html.count("<circle") == 4
    assert "FastDRAM/FastSSD/SlowHDD at $2" in html


def test_devices_may_be_any_priced_preset(heterarchy):
    """`--devices` takes Table 3.1's labels or device presets (`heterarchy device list`)."""
    if not TRACE.is_file():
        pytest.skip(f"{TRACE} not found")
    found = run_json(heterarchy, "sizing", TRACE, "--budget", "1", "--devices", "dram,optane-ssd,hdd")
    assert {row["config"] for row in found} == {"dram/optane-ssd/hdd"}
    labelled = run_json(heterarchy, "sizing", TRACE, "--budget", "1",
                        "--devices", "fast-dram-seed002,fast-ssd-seed002,slow-hdd-seed002")
    table = run_json(heterarchy, "sizing", TRACE, "--budget", "1", "--devices", "FastDRAM,FastSSD,SlowHDD")
    # The presets carry Table 3.1's numbers: the same answers under either name.
    strip = lambda rows: [{k: v for k, v in row.items() if k != "config"} for row in rows]
    assert strip(labelled) == strip(table)


def test_the_table_ends_with_a_summary_per_budget_beside_the_thesis(heterarchy):
    if not TRACE.is_file():
        pytest.skip(f"{TRACE} not found")
    for policy, thesis in (("wt", "2.3% mean"), ("wb", "13.1% mean")):
        done = run(heterarchy, "sizing", TRACE, "--budget", "1,4", "--policy", policy, "--format", "table")
        lines = done.stdout.splitlines()
        header = next(i for i, line in enumerate(lines) if line.startswith("budget  cydonia_gap_mean_percent"))
        budgets = [lines[header + 2].split(), lines[header + 3].split()]
        assert [row[0] for row in budgets] == ["1", "4"]
        for row in budgets:
            # The optima's three shares add up to every configuration.
            assert sum(int(share.rstrip("%")) for share in row[4:7]) in (99, 100, 101)
        assert thesis in done.stdout and "of the grid" in done.stdout


def test_one_call_sizes_a_grid_of_traces(heterarchy):
    msr = TRACES / "msr-cambridge-hm0-sample.csv"
    if not TRACE.is_file() or not msr.is_file():
        pytest.skip("shared traces not found")
    rows = run_json(heterarchy, "sizing", TRACE, msr, "--budget", "0.5,2", "--config", "FastDRAM/FastSSD/SlowHDD")
    assert {row["trace"] for row in rows} == {"cloudPhysicsIO.vscsi", "msr-cambridge-hm0-sample.csv"}
    alone = run_json(heterarchy, "sizing", msr, "--budget", "0.5,2", "--config", "FastDRAM/FastSSD/SlowHDD")
    # Each trace is sized as it would be alone.
    assert [row for row in rows if row["trace"] == "msr-cambridge-hm0-sample.csv"] == alone


def test_a_key_value_trace_is_refused(heterarchy):
    path = TRACES / "twitter-sample.csv"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    done = run(heterarchy, "sizing", path, "--budget", "1", check=False)
    assert done.returncode != 0 and "has no block records" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
