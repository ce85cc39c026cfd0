"""Our miss ratios equal libcachesim's (PyPI 0.3.5), computed side by side on the same traces at
the same byte capacities: one real block trace and two generated Zipf traces with variable
object sizes."""

import libcachesim as lcs
import pytest

from helpers import run_json
from zipf_trace import working_set_bytes

# Our policy name -> libcachesim's class of the same algorithm.
POLICIES = {
    "lru": "LRU",
    "fifo": "FIFO",
    "clock": "Clock",
    "arc": "ARC",
    "2q": "TwoQ",
    "s3fifo": "S3FIFO",
    "sieve": "Sieve",
    "lfu": "LFU",
    "lirs": "LIRS",
    "belady": "Belady",
}
# Cache sizes as fractions of the working set (sum of the sizes of distinct objects).
FRACTIONS = [0.001, 0.01, 0.05, 0.1, 0.3]
TRACES = ["cloudPhysicsIO", "zipf-0.8", "zipf-1.0"]
# (policy, trace) -> why ours differs, as documented at the top of the policy's file.
KNOWN_DIFFERENCES: dict[tuple[str, str], str] = {}


@pytest.fixture(scope="module")
def ours(heterarchy, zipf_trace, request):
    """`ours(trace)` -> (path, sizes, {(policy, cache_size): row}) from ONE `heterarchy sim`
    run over every policy and size, made once per trace."""
    made = {}

    def results(name):
        if name not in made:
            if name == "cloudPhysicsIO":
                path = request.getfixturevalue("traces_dir") / "cloudPhysicsIO.oracleGeneral.bin"
            else:
                path = zipf_trace(float(name.removeprefix("zipf-")), keys=20_000, requests=200_000, seed=7)
            working_set = working_set_bytes(path)
            sizes = [int(fraction * working_set) for fraction in FRACTIONS]
            rows = run_json(
                heterarchy, "sim", path,
                "--policy", ",".join(POLICIES),
                "--size", ",".join(map(str, sizes)),
            )
            made[name] = path, sizes, {(row["policy"], row["cache_size"]): row for row in rows}
        return made[name]

    return results


def cases():
    for trace in TRACES:
        for policy in POLICIES:
            reason = KNOWN_DIFFERENCES.get((policy, trace))
            marks = [pytest.mark.xfail(reason=reason)] if reason else []
            for index, fraction in enumerate(FRACTIONS):
                yield pytest.param(trace, policy, index, marks=marks, id=f"{trace}-{policy}-{fraction:g}")


@pytest.mark.parametrize("trace, policy, size_index", list(cases()))
def test_miss_ratios_equal_libcachesim(ours, trace, policy, size_index):
    path, sizes, rows = ours(trace)
    size = sizes[size_index]
    row = rows.get((policy, size))
    assert row is not None, f"heterarchy sim printed no row for {policy} at {size} bytes"
    cache = getattr(lcs, POLICIES[policy])(cache_size=size)
    reader = lcs.TraceReader(str(path), lcs.TraceType.ORACLE_GENERAL_TRACE)
    theirs_miss_ratio, theirs_byte_miss_ratio = cache.process_trace(reader)
    assert row["requests"] == path.stat().st_size // 24
    assert (row["miss_ratio"], row["byte_miss_ratio"]) == pytest.approx(
        (theirs_miss_ratio, theirs_byte_miss_ratio), rel=0, abs=1e-12
    ), f"{policy} at {size} bytes: ours (obj, byte) vs libcachesim's"
