"""`heterarchy experiment` and tuned admission in `heterarchy simulate` (docs/simulation.md,
"Experiments" and "Non-hierarchical caching"), as the binary runs them.

What each test compares against, derived independently of the experiment code:
- the documented interface: `experiment list`, one JSON row per (hierarchy, hit ratio, load) for
  nhc-orthus-cas with the named fields, CSV with the same columns, an HTML report with charts;
- the rows' own arithmetic (gain from the two throughputs, normalization by the device's peak);
- seed 000 §4.5.1.1's statement that NHC never loses to classic caching;
- the thesis' Table 4.2, printed beside ours;
- one-line errors for bad names, scales and settings.
"""

import csv
import io

import pytest

from helpers import run, run_json

EXPERIMENTS = [
    "nhc-orthus-cas",
    "nhc-write-modes",
    "nhc-targets",
    "nhc-ycsb-c",
    "nhc-ycsb",
    "nhc-zippydb",
    "nhc-hotspot",
    "nhc-ycsb-d",
    "nhc-prior-work",
    "nhc-alpha",
    "caiti-iodepth",
    "caiti-jobs",
    "caiti-breakdown",
    "caiti-fsync",
    "caiti-fsync-every",
    "caiti-cache-size",
    "nyx-profile",
    "nyx-interference",
    "nyx-limit",
    "nyx-qos",
    "nyx-fair",
    "nyx-proportional",
    "nyx-estimate",
    "nyx-spike",
    "nyx-critical",
    "nyx-hit-ratio",
    "nyx-experiment-step",
    "nyx-donate-step",
    "nyx-pelikan",
    "poly-roles",
    "poly-compression",
    "poly-convergence",
    "poly-tco",
    "poly-offline",
]


@pytest.fixture(scope="module")
def orthus_cas(heterarchy):
    return run_json(heterarchy, "experiment", "nhc-orthus-cas", "--scale", "0.5")


def test_list_names_every_experiment_with_what_it_reproduces(heterarchy):
    listed = run_json(heterarchy, "experiment", "list")
    assert [entry["name"] for entry in listed] == EXPERIMENTS
    assert all(entry["reproduces"] and entry["description"] for entry in listed)
    text = run(heterarchy, "experiment", "list").stdout
    assert "seed 000 Figure 4.7" in text


def test_orthus_cas_has_one_row_per_hierarchy_hit_ratio_and_load(orthus_cas):
    keys = {(row["hierarchy"], row["hit_ratio"], row["load"]) for row in orthus_cas}
    assert len(orthus_cas) == len(keys) == 5 * 2 * 4
    for row in orthus_cas:
        for field in ("hierarchy", "hit_ratio", "load", "classic_throughput", "nhc_throughput"):
            assert field in row
        assert row["nhc_gb_s"] >= 0.98 * row["classic_gb_s"], row
        assert 0 <= row["nhc_load_admit"] <= 1 and 0 <= row["nhc_data_admit"] <= 1
        # Throughputs are shares of the cache device's peak: classic caching, which sends every
        # hit to it, never passes it.
        assert 0 < row["classic_throughput"] <= 1.001, row
    # Classic caching saturates the cache device at the highest load on every hierarchy, and
    # NHC's gain is a high-load effect (seed 000 Figure 4.7): larger at Load-1.5 and 2.0 than at
    # Load-0.5.
    for hierarchy in {row["hierarchy"] for row in orthus_cas}:
        rows = [row for row in orthus_cas if row["hierarchy"] == hierarchy]
        assert max(row["classic_throughput"] for row in rows if row["load"] == 2.0) > 0.95, hierarchy
    def mean_gain(loads):
        gains = [row["gain"] for row in orthus_cas if row["load"] in loads]
        return sum(gains) / len(gains)
    assert mean_gain({1.5, 2.0}) > mean_gain({0.5}) + 0.1


def test_orthus_cas_notes_state_the_software_cost_and_each_deviation(heterarchy):
    text = run(heterarchy, "experiment", "nhc-orthus-cas", "--scale", "0.5").stdout
    notes = [line for line in text.splitlines() if line.startswith("note: ")]
    assert any("48 us" in note and "judgment" in note for note in notes), notes
    deviations = [note for note in notes if note.startswith("note: Deviation")]
    for subject in ("Load-0.5", "DRAM + PM", "FlashSim", "Table 4.2", "Figure 4.8"):
        assert any(subject in note for note in deviations), (subject, deviations)


def test_orthus_cas_csv_has_the_json_columns(heterarchy, orthus_cas):
    text = run(heterarchy, "experiment", "nhc-orthus-cas", "--scale", "0.5", "--format", "csv").stdout
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0].keys()) == list(orthus_cas[0].keys())
    assert len(rows) == len(orthus_cas)
    assert float(rows[0]["nhc_gb_s"]) == pytest.approx(orthus_cas[0]["nhc_gb_s"])


def test_table_output_prints_the_thesis_beside_ours(heterarchy):
    text = run(heterarchy, "experiment", "nhc-targets").stdout
    assert "Table 4.2" in text
    assert "6.7, 77, 115" in text  # Open CAS on PM + Optane SSD, as the thesis prints it
    rows = run_json(heterarchy, "experiment", "nhc-targets")
    targets = {(row["hierarchy"], row["target"]) for row in rows}
    assert len(targets) == 8
    classic = next(r for r in rows if r["target"] == "open-cas" and r["hierarchy"] == "optane-ssd+nvme-flash")
    assert classic["thesis_throughput_gb_s"] == 2.3


def test_report_draws_charts(heterarchy, tmp_path):
    report = tmp_path / "fig.html"
    run(heterarchy, "experiment", "nhc-hotspot", "--scale", "0.5", "--report", report)
    html = report.read_text()
    assert html.count("<svg") >= 2
    assert "load_admit" in html


@pytest.mark.parametrize(
    "args, expected",
    [
        (["experiment", "nhc-nope"], "no experiment called \"nhc-nope\""),
        (["experiment", "nhc-targets", "--scale", "0"], "--scale 0 must be > 0"),
    ],
)
def test_bad_arguments_get_one_line_errors(heterarchy, args, expected):
    done = run(heterarchy, *args, check=False)
    assert done.returncode != 0
    assert expected in done.stderr
    assert done.stderr.strip().count("\n") == 0


HIERARCHY = """\
seed = 1
[cache]
mode = "wt"
admission = "{admission}"
[cache.nhc]
alpha = 0.05
[[tier]]
device = "optane-ssd"
size = "64MiB"
[[tier]]
device = "nvme-flash"
[load]
outstanding = 16
"""


def test_simulate_runs_nhc_from_a_hierarchy_file(heterarchy, tmp_path):
    workload = "uniform:keys=1100,requests=200000,size=64k,kind=block,seed=1"
    results = {}
    for admission in ("classic", "nhc"):
        config = tmp_path / f"{admission}.toml"
        config.write_text(HIERARCHY.format(admission=admission))
        results[admission] = run_json(heterarchy, "simulate", "--config", config, "--workload", workload)
    assert results["classic"]["tuning"] is None
    tuning = results["nhc"]["tuning"]
    assert tuning["intervals"] > 100
    assert set(tuning["state_seconds"]) <= {"state 1", "state 2"}
    assert any(not point["data_admit"][0] for point in tuning["points"])
    # 16 outstanding 64 KiB reads saturate the Optane SSD: NHC serves more.
    assert results["nhc"]["throughput_ops"] > 1.2 * results["classic"]["throughput_ops"]
    table = run(heterarchy, "simulate", "--config", tmp_path / "nhc.toml", "--workload", workload).stdout
    assert "admission tuning over" in table


@pytest.mark.parametrize(
    "setting, key",
    [
        ('admission = "nhcc"', "nhcc"),
        ("[cache.nhc]\nstep = 0.03", "cache.nhc.step"),
        ("[cache.nhc]\nalfa = 0.1", "alfa"),
    ],
)
def test_bad_admission_settings_are_one_line_errors(heterarchy, tmp_path, setting, key):
    text = HIERARCHY.format(admission="nhc").replace("[cache.nhc]\nalpha = 0.05\n", "")
    text = text.replace('admission = "nhc"\n', "") + ""
    text = text.replace("[[tier]]", setting + "\n[[tier]]", 1) if setting.startswith("[") else text.replace(
        "[cache]\n", "[cache]\n" + setting + "\n"
    )
    config = tmp_path / "bad.toml"
    config.write_text(text)
    done = run(heterarchy, "simulate", "--config", config, "--workload", "uniform:keys=10", check=False)
    assert done.returncode == 1
    assert key in done.stderr, done.stderr
    assert done.stderr.strip().count("\n") == 0


def test_poly_offline_has_online_and_offline_columns_and_measures_its_codec(heterarchy):
    rows = run_json(heterarchy, "experiment", "poly-offline", "--scale", "0.01")
    assert [row["workload"] for row in rows] == [f"ycsb-{w}" for w in "abcdef"]
    for row in rows:
        for field in (
            "online_throughput",
            "offline_throughput",
            "online_read_share",
            "online_compressed_share",
            "offline_read_share",
            "offline_compressed_share",
        ):
            assert field in row
        # The offline optimum is the best point of a grid the online point is on.
        assert row["online_throughput"] <= row["offline_throughput"]
        for share in ("online_read_share", "offline_compressed_share"):
            assert 0.0 <= row[share] <= 1.0
    text = run(heterarchy, "experiment", "poly-tco", "--scale", "0.01").stdout
    assert "lz4 measured on this machine" in text
    assert "app-oblivious-dynamic" in text
    paper = run(heterarchy, "experiment", "poly-tco", "--scale", "0.01", "--codec-costs", "paper")
    assert "Fig 4c" in paper.stdout
