"""`heterarchy replay` (docs/block-volumes.md, "Replay"): a block trace's reads and writes
against a cached volume, over NBD (a `heterarchy serve nbd` on 127.0.0.1) or in this process
from a serve config; closed loop or by timestamps; bad arguments are one-line errors."""

import pytest

from helpers import TRACES, run, run_json
from nbd_support import volume_stats


@pytest.fixture(scope="module")
def trace(heterarchy, tmp_path_factory):
    """5,000 generated I/Os over a 256 MiB volume, 2,000 per second."""
    path = tmp_path_factory.mktemp("replay") / "io.csv"
    run(heterarchy, "trace", "generate", "block-io:requests=5000,pages=65536,rate=2000,seed=2", "-o", path)
    return path


def in_process_volume(tmp_path, cache='"ram:16m"', line=""):
    """A serve config with one cached export, "v", over a 256 MiB backing file."""
    config = tmp_path / "volume.toml"
    config.write_text(f"""
[[export]]
name = "v"
backing = "file:{tmp_path / 'disk.img'}:256m"
cache = {cache}
{line}
""")
    return config


def test_closed_loop_over_nbd_reaches_the_server(heterarchy, volume, trace):
    server = volume("wt", metrics=True)
    before = volume_stats(server)
    report = run_json(heterarchy, "replay", trace, "--to", server.uri(), "--outstanding", "4")
    assert report["requests"] == 5000
    assert report["reads"]["count"] + report["writes"]["count"] == 5000
    assert report["options"]["pacing"] == "closed_loop" and report["options"]["lanes"] == 4
    assert 0 < report["all"]["p50_us"] <= report["all"]["p99_us"] <= report["all"]["max_us"]
    after = volume_stats(server)
    # Every replayed byte went through the served volume.
    assert after["reads"] - before["reads"] >= report["reads"]["count"]
    assert after["writes"] - before["writes"] >= report["writes"]["count"]
    assert after["read_bytes"] - before["read_bytes"] == report["read_bytes"]


def test_timed_replay_follows_the_timestamps(heterarchy, volume, trace):
    server = volume("wt")
    # 5,000 I/Os at 2,000/s take 2.5 s; at 5x, about half a second.
    report = run_json(heterarchy, "replay", trace, "--to", server.uri(), "--speedup", "5")
    assert report["requests"] == 5000
    assert 0.4 < report["duration_s"] < 3.0, report["duration_s"]
    assert report["options"]["pacing"] == {"timed": {"speedup": 5.0}}
    assert report["issued_early"] == 0 and report["idle_skipped_s"] == 0


def test_in_process_volume_reports_tiers_and_devices(heterarchy, tmp_path, trace):
    config = in_process_volume(tmp_path, f'["ram:8m", "file:{tmp_path / "t2.img"}:32m"]', 'cache_line = "4k"')
    report = run_json(heterarchy, "replay", trace, "--volume", config, "--outstanding", "8", "--limit", "3000")
    assert report["requests"] == 3000
    assert [tier["tier"] for tier in report["tiers"]] == [0, 1]
    assert sum(tier["hits"] for tier in report["tiers"]) + report["misses"] == report["line_requests"]
    assert [device["role"] for device in report["devices"]] == ["tier0", "tier1", "backing"]
    assert report["devices"][2]["read_mb_per_s"] > 0
    done = run(heterarchy, "replay", trace, "--volume", config, "--outstanding", "2", "--limit", "100")
    assert "replayed 100 I/Os against volume v" in done.stdout and "line hit ratio" in done.stdout


def test_a_real_trace_replays_with_offsets_folded_into_the_volume(heterarchy, volume):
    path = TRACES / "msr-cambridge-hm0-sample.csv"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    server = volume("wb")
    report = run_json(heterarchy, "replay", path, "--to", server.uri(), "--outstanding", "8")
    assert report["requests"] == 1000


@pytest.mark.parametrize("args, expected", [
    (["--outstanding", "0"], "--outstanding/--lanes 0: expected 1 to 1024"),
    (["--speedup", "0"], "--speedup 0: expected a factor above 0"),
    (["--to", "http://x"], "--to: bad target"),
])
def test_bad_arguments_are_one_line_errors(heterarchy, volume, trace, args, expected):
    server = volume("wt")
    if "--to" not in args:
        args = ["--to", server.uri(), *args]
    done = run(heterarchy, "replay", trace, *args, check=False)
    assert done.returncode != 0
    assert expected in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_key_value_trace_is_refused(heterarchy, volume):
    path = TRACES / "twitter-sample.csv"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    server = volume("wt")
    done = run(heterarchy, "replay", path, "--to", server.uri(), check=False)
    assert done.returncode != 0 and "has no block records" in done.stderr


def test_skip_idle_issues_at_once_when_nothing_is_outstanding(heterarchy, tmp_path, trace):
    """The thesis' replayer: idle time is skipped. 5,000 I/Os at 2,000/s span 2.57 s by their
    timestamps; against an in-process volume many I/Os find nothing outstanding and go at once.
    How many do depends on this machine's speed, so the test checks the schedule's accounts, not
    the wall clock."""
    config = in_process_volume(tmp_path)
    report = run_json(heterarchy, "replay", trace, "--volume", config, "--skip-idle")
    assert report["requests"] == 5000 and report["options"]["skip_idle"] is True
    assert report["issued_early"] > 0 and report["idle_skipped_s"] > 0, report
    # MSR timestamps are in 100 ns units. The last I/O went no earlier than its time less the
    # time skipped, and no more time can be skipped than the trace spans.
    times = [int(line.split(",")[0]) for line in trace.read_text().splitlines()]
    span_s = (times[-1] - times[0]) * 1e-7
    assert report["idle_skipped_s"] <= span_s
    assert report["duration_s"] + report["idle_skipped_s"] >= span_s, report
    done = run(heterarchy, "replay", trace, "--volume", config, "--skip-idle", "--outstanding", "2", check=False)
    assert done.returncode != 0 and "cannot be used with" in done.stderr


def test_the_report_charts_throughput_over_time_and_latency(heterarchy, tmp_path, trace):
    config = in_process_volume(tmp_path)
    report = tmp_path / "replay.html"
    found = run_json(heterarchy, "replay", trace, "--volume", config, "--outstanding", "4", "--report", report)
    series = found["throughput_series"]
    assert 1 <= len(series) <= 50
    # The intervals' MB/s times their width add up to every byte replayed.
    width = series[0][0]
    total = sum(mb for _, mb in series) * width * 1e6
    assert total == pytest.approx(found["read_bytes"] + found["write_bytes"], rel=1e-6)
    html = report.read_text()
    assert html.count("<svg") == 2 and "Throughput over the replay" in html and "Latency by percentile" in html
