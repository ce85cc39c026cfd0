"""`heterarchy trace stats` on block traces (issue 19, item 1): besides the request-level
measures, the I/Os before splitting — sizes, inter-arrival times and misalignment to 4 KiB
pages, reads and writes apart; key-value traces have no block section."""

import pytest

from helpers import TRACES, run_json


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
