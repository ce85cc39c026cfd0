"""`heterarchy mrc`: the exact curve equals LRU simulation at every size we check, and SHARDS at
rate 0.01 stays within 0.01 mean absolute error of the exact curve on the real traces."""

import numpy as np
import pytest

from helpers import TRACES, run, run_json, trace_path

SHARDS_RATE = 0.01
SHARDS_MAE_MAX = 0.01
# Below this many distinct keys SHARDS at 1% keeps under 100 keys: its curve is noise, not a
# property of our implementation.
SHARDS_MIN_KEYS = 10_000


def spread(points, count=8):
    """Up to `count` points with nonzero cache size, evenly spaced along the curve."""
    points = [point for point in points if point["cache_size"] > 0]
    picks = np.unique(np.linspace(0, len(points) - 1, count).round().astype(int))
    return [points[i] for i in picks]


def assert_curve_equals_lru(heterarchy, path, *flags):
    points = spread(run_json(heterarchy, "mrc", path, "--method", "exact", *flags)["points"])
    sizes = ",".join(str(point["cache_size"]) for point in points)
    rows = run_json(heterarchy, "sim", path, "--policy", "lru", "--size", sizes, *flags)
    simulated = {row["cache_size"]: row["miss_ratio"] for row in rows}
    for point in points:
        assert point["miss_ratio"] == pytest.approx(
            simulated[point["cache_size"]], rel=0, abs=1e-12
        ), f"cache size {point['cache_size']}: exact MRC vs LRU simulation"


@pytest.mark.parametrize("trace", ["cloudPhysicsIO", "zipf-0.9"])
def test_exact_object_curve_equals_lru_simulation(heterarchy, zipf_trace, trace):
    if trace == "cloudPhysicsIO":
        path = trace_path("cloudPhysicsIO.oracleGeneral.bin")
    else:
        path = zipf_trace(0.9)
    assert_curve_equals_lru(heterarchy, path, "--ignore-obj-size")


def test_exact_byte_curve_equals_lru_simulation_on_uniform_sizes(heterarchy, zipf_trace):
    # Uniform sizes: with variable ones, LRU skips objects larger than the cache, which a byte
    # stack-distance curve cannot see.
    assert_curve_equals_lru(heterarchy, zipf_trace(0.9, object_size=4096))


def real_traces():
    if not TRACES.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"real traces not found at {TRACES}"))]
    names = sorted(path.name for path in TRACES.iterdir() if path.name != "MANIFEST.md")
    return [pytest.param(name, id=name) for name in names]


@pytest.mark.parametrize("name", real_traces())
def test_shards_is_close_to_exact(heterarchy, name):
    path = TRACES / name
    stats = run(heterarchy, "trace", "stats", path, "--format", "json", check=False)
    if stats.returncode != 0:
        pytest.skip(f"heterarchy trace stats cannot read {name}: {stats.stderr.strip()}")
    exact = run_json(heterarchy, "mrc", path, "--method", "exact", "--ignore-obj-size")["points"]
    if max(point["cache_size"] for point in exact) < SHARDS_MIN_KEYS:
        pytest.skip(f"{name} has under {SHARDS_MIN_KEYS} distinct keys: too few to sample at {SHARDS_RATE}")
    shards = run_json(
        heterarchy, "mrc", path, "--method", "shards", "--rate", SHARDS_RATE, "--ignore-obj-size"
    )["points"]
    exact_sizes = np.array([point["cache_size"] for point in exact], dtype=float)
    exact_ratios = np.array([point["miss_ratio"] for point in exact])
    shards_ratios = np.interp(
        exact_sizes,
        [point["cache_size"] for point in shards],
        [point["miss_ratio"] for point in shards],
    )
    mae = float(np.abs(shards_ratios - exact_ratios).mean())
    assert mae <= SHARDS_MAE_MAX, f"SHARDS MAE {mae:.4f} on {name}"
