"""`heterarchy trace stats` on block traces (docs/simulation.md, "Traces"): besides the
request-level measures, the I/Os before splitting — sizes, inter-arrival times and misalignment
to 4 KiB pages, reads and writes apart; key-value traces have no block section."""

import gzip
import json
import subprocess

import pytest

from helpers import TRACES, run, run_json


def stats_of(heterarchy, name):
    path = TRACES / name
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return run_json(heterarchy, "trace", "stats", path)


def test_a_block_trace_describes_its_ios(heterarchy):
    stats = stats_of(heterarchy, "cloudPhysicsIO.vscsi")
    block = stats["block"]
    # 113,872 I/Os with data (the unsplit request count), all reads or writes.
    assert block["records"] == 113_872
    assert block["reads"]["requests"] + block["writes"]["requests"] == 113_872
    for op in ("reads", "writes"):
        summary = block[op]
        assert 0 < summary["sizes"]["p50_bytes"] <= summary["sizes"]["p99_bytes"] <= summary["sizes"]["max_bytes"]
        assert 0 <= summary["misaligned_requests"] <= summary["requests"]
        # At most a page short of alignment at each end.
        assert summary["misaligned_bytes"] <= 2 * 4095 * summary["misaligned_requests"]
        times = summary["inter_arrival"]
        assert times["p50_us"] <= times["p99_us"] <= times["max_us"]
    # CloudPhysics addresses 512 B sectors: most of its writes start or end inside a page.
    assert block["writes"]["misaligned_requests"] > block["writes"]["requests"] / 2


def test_a_key_value_trace_has_no_block_section(heterarchy):
    assert "block" not in stats_of(heterarchy, "twitter-sample.csv")


def test_convert_writes_the_cache_trace_as_time_page_op(heterarchy, tmp_path):
    """`trace convert --output-format csv`: the split page requests, one per line, in order:
    as many as `trace stats` counts, a misaligned write's edge reads before its writes."""
    path = TRACES / "msr-cambridge-hm0-sample.csv"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    out = tmp_path / "cache.csv"
    run(heterarchy, "trace", "convert", path, "-o", out, "--output-format", "csv")
    lines = out.read_text().splitlines()
    assert lines[0] == "time,page,op"
    rows = [line.split(",") for line in lines[1:]]
    assert len(rows) == run_json(heterarchy, "trace", "stats", path)["requests"] == 2_580
    assert {op for _, _, op in rows} == {"r", "w"}
    # The first I/O writes 2 KiB inside page 2210941: read, then written.
    assert rows[:2] == [[rows[0][0], "2210941", "r"], [rows[0][0], "2210941", "w"]]
    times = [int(time) for time, _, _ in rows]
    assert times == sorted(times)


def test_a_trace_on_standard_input_reads_as_its_file_does(heterarchy):
    """`-` reads the trace from standard input, gzipped or not, the format told by content alone;
    stats, a simulation and replay's records agree with the file's."""
    path = TRACES / "msr-cambridge-hm0-sample.csv"
    if not path.is_file():
        pytest.skip(f"{path} is missing (the shared traces are not here)")
    data = path.read_bytes()
    for given in (data, gzip.compress(data)):
        for args in (["trace", "stats"], ["sim", "--policy", "lru", "--size", "0.1"]):
            from_file = run_json(heterarchy, *args, path)
            piped = subprocess.run([str(heterarchy), *args, "-", "--format", "json"], input=given,
                                   capture_output=True, timeout=120)
            assert piped.returncode == 0, piped.stderr.decode()
            from_stdin = json.loads(piped.stdout)
            if args[0] == "trace":
                from_file.pop("path", None), from_stdin.pop("path", None)
            assert from_stdin == from_file, args
    empty = subprocess.run([str(heterarchy), "trace", "stats", "-"], input=b"", capture_output=True, timeout=60)
    assert empty.returncode != 0 and empty.stderr.decode().count("\n") == 1, empty.stderr
    assert "<stdin>" in empty.stderr.decode()
