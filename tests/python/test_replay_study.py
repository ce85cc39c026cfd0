"""`scripts/replay-study --quick` and `scripts/sample-replay` at their smallest (seed 002 ch. 4
and §5.3.4; docs/simulation.md, "Sizing a hierarchy"): the campaigns run end to end against
in-process volumes and print their summaries; the full campaigns are scripts, not tests."""

import json
import subprocess

from helpers import REPO


def script(*args, timeout=300):
    done = subprocess.run([str(REPO / "scripts" / args[0]), *map(str, args[1:])], capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_replay_study_compares_tiers_and_learns_a_rule(tmp_path):
    out = tmp_path / "study.json"
    text = script("replay-study", "--quick", "--json", out)
    found = json.loads(out.read_text())
    # One trace, one tier-1 size: one tier, a non-pyramid and a pyramid, each compared once.
    assert [run["t2_pages"] > 0 for run in found["runs"]] == [False, True, True]
    assert len(found["comparisons"]) == 2
    for comparison in found["comparisons"]:
        assert comparison["pyramidal"] == (comparison["t2_pages"] >= comparison["t1_pages"])
        assert comparison["mb_per_s"] > 0
    assert "r6525-like" in text and "97/2/1" in text and "decision tree" in text


def test_sample_replay_prints_each_methods_bandwidth_error():
    text = script("sample-replay", "--requests", "3000", "--rates", "0.2", "--shares", "0.5", "--depth", "8")
    assert "median_bandwidth_error" in text
    rows = [line.split() for line in text.splitlines() if line.startswith(("spatial ", "blksample "))]
    assert {(row[0], row[1]) for row in rows if len(row) == 4} == {("spatial", "0"), ("blksample", "4")}
