"""Seeded Zipf workloads written as libCacheSim oracleGeneral traces, with numpy.

Written independently of heterarchy's own generator, so that the tests can feed both
simulators a trace neither of them produced.
"""

from pathlib import Path

import numpy as np

# libCacheSim's oracleGeneral record: packed little-endian {u32 time; u64 id; u32 size; i64 next}.
ORACLE_GENERAL = np.dtype([("time", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])


def next_access_vtimes(ids: np.ndarray) -> np.ndarray:
    """For each request, the 1-based position of the next request to the same id, or -1.

    1-based because that is what libCacheSim writes: cloudPhysicsIO.oracleGeneral.bin's next
    field is the 0-based index of the next access plus one.
    """
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    same = sorted_ids[1:] == sorted_ids[:-1]
    nxt = np.full(len(ids), -1, dtype=np.int64)
    nxt[order[:-1][same]] = order[1:][same] + 1
    return nxt


def zipf_requests(theta: float, keys: int, requests: int, seed: int) -> np.ndarray:
    """Ranks (0 = most popular) of `requests` draws from Zipf(theta) over `keys` keys."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, keys + 1, dtype=np.float64) ** theta
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    return np.minimum(np.searchsorted(cdf, rng.random(requests)), keys - 1)


def write_zipf_trace(
    path: Path,
    theta: float,
    keys: int,
    requests: int,
    seed: int,
    object_size: int | None = None,
    sizes: str = "log-uniform",
) -> Path:
    """Writes a Zipf(theta) oracleGeneral trace to `path` and returns `path`.

    Each key gets a random 64-bit id (so popularity is not visible in the id) and, unless
    `object_size` fixes one size for all, a size of its own that stays the same on every
    request: drawn log-uniformly from 100 B to 100 KiB (`sizes="log-uniform"`), or log-normally
    with a median of e^8 ≈ 3 KB and σ = 1.5 (`sizes="log-normal"`, a long tail up to megabytes).
    """
    rng = np.random.default_rng(seed + 1)
    key_ids = rng.choice(np.iinfo(np.int64).max, size=keys, replace=False).astype(np.uint64)
    if object_size is None and sizes == "log-normal":
        key_sizes = np.maximum(rng.lognormal(mean=8.0, sigma=1.5, size=keys), 1).astype(np.uint32)
    elif object_size is None:
        key_sizes = np.exp(rng.uniform(np.log(100), np.log(100 * 1024), size=keys)).astype(np.uint32)
    else:
        key_sizes = np.full(keys, object_size, dtype=np.uint32)
    ranks = zipf_requests(theta, keys, requests, seed)
    records = np.empty(requests, dtype=ORACLE_GENERAL)
    # A thousand requests per second of trace time, so the clock field moves.
    records["time"] = np.arange(requests, dtype=np.uint64) // 1000
    records["id"] = key_ids[ranks]
    records["size"] = key_sizes[ranks]
    records["next"] = next_access_vtimes(records["id"])
    records.tofile(path)
    return path


def working_set_bytes(path: Path) -> int:
    """Sum of the sizes of the distinct objects of an oracleGeneral trace (first size seen)."""
    records = np.fromfile(path, dtype=ORACLE_GENERAL)
    _, first = np.unique(records["id"], return_index=True)
    return int(records["size"][first].sum(dtype=np.uint64))
