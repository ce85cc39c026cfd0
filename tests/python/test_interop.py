"""Traces we write are read the same way by libcachesim, and `trace convert` loses nothing a
simulation can see."""

import libcachesim as lcs
import numpy as np
import pytest

from helpers import run, run_json
from zipf_trace import ORACLE_GENERAL, next_access_vtimes, working_set_bytes

KEYS = 20_000
REQUESTS = 200_000


@pytest.fixture(scope="module")
def generated(heterarchy, tmp_path_factory):
    """A Zipf trace written by `heterarchy trace generate` in libCacheSim's format."""
    path = tmp_path_factory.mktemp("generate") / "zipf.oracleGeneral.bin"
    spec = f"zipf:theta=0.9,keys={KEYS},requests={REQUESTS},size=4096,seed=3"
    run(heterarchy, "trace", "generate", spec, "-o", path, "--output-format", "oracleGeneral")
    return path


def test_generated_trace_has_the_requested_shape(generated):
    records = np.fromfile(generated, dtype=ORACLE_GENERAL)
    assert len(records) == REQUESTS
    assert generated.stat().st_size == REQUESTS * ORACLE_GENERAL.itemsize
    assert len(np.unique(records["id"])) <= KEYS
    assert (records["size"] == 4096).all()
    assert (np.diff(records["time"].astype(np.int64)) >= 0).all()
    # libCacheSim's Belady reads this field, so it must be libCacheSim's 1-based next position.
    assert (records["next"] == next_access_vtimes(records["id"])).all()


@pytest.mark.parametrize("policy, theirs", [("lru", "LRU"), ("belady", "Belady")])
def test_libcachesim_reads_our_trace_with_the_same_miss_ratio(heterarchy, generated, policy, theirs):
    size = working_set_bytes(generated) // 10
    [row] = run_json(heterarchy, "sim", generated, "--policy", policy, "--size", size)
    reader = lcs.TraceReader(str(generated), lcs.TraceType.ORACLE_GENERAL_TRACE)
    miss_ratio, byte_miss_ratio = getattr(lcs, theirs)(cache_size=size).process_trace(reader)
    assert row["requests"] == REQUESTS
    assert (row["miss_ratio"], row["byte_miss_ratio"]) == pytest.approx(
        (miss_ratio, byte_miss_ratio), rel=0, abs=1e-12
    )


def test_convert_to_native_and_back_keeps_simulation_results(heterarchy, zipf_trace, tmp_path):
    original = zipf_trace(1.0)
    native = tmp_path / "zipf.native"
    back = tmp_path / "back.oracleGeneral.bin"
    run(heterarchy, "trace", "convert", original, "-o", native, "--output-format", "native")
    run(heterarchy, "trace", "convert", native, "-o", back, "--output-format", "oracleGeneral")

    def simulate(path):
        return run_json(heterarchy, "sim", path, "--policy", "all", "--size", "0.01,0.1")

    expected = simulate(original)
    assert simulate(native) == expected
    assert simulate(back) == expected
    assert np.array_equal(np.fromfile(back, dtype=ORACLE_GENERAL), np.fromfile(original, dtype=ORACLE_GENERAL))
