"""Our miss ratios equal libcachesim's (PyPI 0.3.5), computed side by side on the same traces at
the same capacities: one real block trace counted in bytes and in objects, and three generated
Zipf traces with variable object sizes (log-uniform and log-normal).

Deterministic policies and filters must match exactly; randomized ones as `policy_pairs` says
of each: exactly against libcachesim in a fresh process (FRESH), or within `TOLERANCE` as the
mean of our runs over `SEEDS` (SEEDED)."""

import json
import subprocess
import sys

import libcachesim as lcs
import pytest

import numpy as np

from helpers import run_json
from policy_pairs import EXACT, FILTERED_POLICIES, FILTERS, FRESH, POLICIES, SEEDED, TOLERANCE, variants
from zipf_trace import ORACLE_GENERAL, working_set_bytes

# Cache sizes as fractions of the working set (bytes of distinct objects, or their number).
FRACTIONS = [0.001, 0.01, 0.1]
# (trace, policy, fraction) -> why ours is outside the tolerance there; strict, so a case that
# starts passing fails until it is taken off this list.
RANDOM_GAP = (
    "Random in a cache of a few dozen to a few hundred objects: libCacheSim's draw weights come from "
    "collisions in its own hash table, which ours does not reproduce (off by up to 0.012)"
)
KNOWN_GAPS = {
    ("zipf-1.0", "random", 0.001): RANDOM_GAP,
    ("zipf-1.0", "random", 0.01): RANDOM_GAP,
    ("zipf-1.0-lognormal", "random", 0.001): RANDOM_GAP,
    ("zipf-1.0", "lhd", 0.001): "LHD in a cache of about 20 objects: five runs a side leave a gap of "
    "0.006, beyond what five seeds can resolve there",
}
# (trace, policy, fraction) where libcachesim gives nothing to compare: its LFUDA looks for the
# next frequency by trying every integer above the last one (minutes to hours), or follows an
# empty bucket to a crash (the log-normal trace at 0.1%).
LIBCACHESIM_UNFINISHED = {
    ("zipf-1.0-lognormal", "lfuda", 0.001),
    ("cloudPhysicsIO-objects", "lfuda", 0.001),
    ("zipf-0.8", "lfuda", 0.001),
    ("zipf-0.8", "lfuda", 0.01),
    ("zipf-1.0", "lfuda", 0.001),
    ("zipf-1.0", "lfuda", 0.01),
    ("zipf-1.0-lognormal", "lfuda", 0.01),
}
# name -> (how to make it, counted in objects)
TRACES = {
    "cloudPhysicsIO": ("cloudPhysicsIO", False),
    "cloudPhysicsIO-objects": ("cloudPhysicsIO", True),
    "zipf-0.8": ("zipf-0.8", False),
    "zipf-1.0": ("zipf-1.0", False),
    "zipf-1.0-lognormal": ("zipf-1.0-lognormal", False),
}


def objects_in(path) -> int:
    return len(np.unique(np.fromfile(path, dtype=ORACLE_GENERAL)["id"]))


@pytest.fixture(scope="module")
def trace(zipf_trace, request):
    """`trace(name)` -> (path, cache sizes, counted in objects), made once per module."""
    made = {}

    def make(name):
        if name not in made:
            source, objects = TRACES[name]
            if source == "cloudPhysicsIO":
                path = request.getfixturevalue("traces_dir") / "cloudPhysicsIO.oracleGeneral.bin"
            elif source.endswith("-lognormal"):
                path = zipf_trace(1.0, keys=20_000, requests=200_000, seed=11, sizes="log-normal")
            else:
                path = zipf_trace(float(source.removeprefix("zipf-")), keys=20_000, requests=200_000, seed=7)
            working_set = objects_in(path) if objects else working_set_bytes(path)
            made[name] = path, [max(1, int(f * working_set)) for f in FRACTIONS], objects
        return made[name]

    return make


@pytest.fixture(scope="module")
def ours(heterarchy, trace):
    """`ours(trace_name, admission)` -> {(policy label, cache_size): row} from ONE `heterarchy
    sim` run over every policy (every seed of the seeded ones) and size."""
    made = {}

    def results(name, admission=None):
        if (name, admission) not in made:
            path, sizes, objects = trace(name)
            if admission is None:
                specs = [label for spec, _, _, kind in POLICIES for label in variants(spec, kind)]
            else:
                specs = [spec for spec, _ in FILTERED_POLICIES]
                admission_kind = next(kind for spec, _, _, kind in FILTERS if spec == admission)
                admission_list = variants(admission, admission_kind)
            args = ["--size", ",".join(map(str, sizes))] + (["--ignore-obj-size"] if objects else [])
            rows = []
            for admitted in [None] if admission is None else admission_list:
                extra = [] if admitted is None else ["--admission", admitted]
                rows += run_json(heterarchy, "sim", path, "--policy", ",".join(specs), *args, *extra)
            made[name, admission] = {(row["policy"], row["cache_size"]): row for row in rows}
        return made[name, admission]

    return results


def theirs(path, objects, cache_class, kwargs, size, admissioner=None, fresh=False, runs=1):
    """libcachesim's (miss ratio, byte miss ratio); `admissioner` is (class, kwargs). With
    `fresh`, in a new interpreter, whose random generator starts where ours does at seed 0; its
    mean over `runs` runs there, which continue one random stream (libcachesim cannot be
    seeded), so that a randomized policy's mean is the same in every test run."""
    if fresh:
        case = json.dumps([str(path), objects, cache_class, kwargs, size, admissioner, runs])
        done = subprocess.run([sys.executable, "-c", FRESH_RUN, case], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return tuple(json.loads(done.stdout.strip().splitlines()[-1]))
    admitted = getattr(lcs, admissioner[0])(**admissioner[1]) if admissioner else None
    cache = getattr(lcs, cache_class)(cache_size=size, admissioner=admitted, **kwargs)
    params = lcs.ReaderInitParam(ignore_obj_size=True) if objects else None
    reader = lcs.TraceReader(str(path), lcs.TraceType.ORACLE_GENERAL_TRACE, reader_init_params=params)
    return cache.process_trace(reader)


# One libcachesim run in a fresh interpreter, its case as JSON in argv[1] (see `theirs`).
FRESH_RUN = """
import json, sys
import libcachesim as lcs
path, objects, cache_class, kwargs, size, admissioner, runs = json.loads(sys.argv[1])
params = lcs.ReaderInitParam(ignore_obj_size=True) if objects else None
totals = [0.0, 0.0]
for _ in range(runs):
    admitted = getattr(lcs, admissioner[0])(**admissioner[1]) if admissioner else None
    cache = getattr(lcs, cache_class)(cache_size=size, admissioner=admitted, **kwargs)
    reader = lcs.TraceReader(path, lcs.TraceType.ORACLE_GENERAL_TRACE, reader_init_params=params)
    for index, ratio in enumerate(cache.process_trace(reader)):
        totals[index] += ratio / runs
print(json.dumps(totals))
"""


def compare(rows, labels, kind, expected, what):
    """Asserts our rows (one per seed for seeded policies) against libcachesim's ratios."""
    for label in labels:
        assert label in rows, f"heterarchy sim printed no row for {label}"
    ratios = np.array([(rows[label]["miss_ratio"], rows[label]["byte_miss_ratio"]) for label in labels])
    ours_mean = tuple(ratios.mean(axis=0))
    tolerance = TOLERANCE if kind == SEEDED else 1e-12
    assert ours_mean == pytest.approx(expected, rel=0, abs=tolerance), (
        f"{what}: ours (miss, byte miss) {ours_mean} vs libcachesim's {expected}"
    )


def policy_cases():
    for name in TRACES:
        for spec, cache_class, kwargs, kind in POLICIES:
            for index, fraction in enumerate(FRACTIONS):
                gap = KNOWN_GAPS.get((name, spec, fraction))
                marks = [pytest.mark.xfail(reason=gap, strict=True)] if gap else []
                if (name, spec, fraction) in LIBCACHESIM_UNFINISHED:
                    marks = [pytest.mark.skip(reason="libcachesim's LFUDA does not finish this case")]
                yield pytest.param(
                    name, spec, cache_class, kwargs, kind, index, marks=marks, id=f"{name}-{spec}-{fraction:g}"
                )


@pytest.mark.parametrize("name, spec, cache_class, kwargs, kind, size_index", list(policy_cases()))
def test_policy_equals_libcachesim(ours, trace, name, spec, cache_class, kwargs, kind, size_index):
    path, sizes, objects = trace(name)
    size = sizes[size_index]
    rows = {label: row for (label, cache_size), row in ours(name).items() if cache_size == size}
    labels = variants(spec, kind)
    assert all(rows[label]["requests"] == path.stat().st_size // 24 for label in labels if label in rows)
    # A seeded policy against as many libcachesim runs as ours, so both sides' noise shrinks alike.
    runs = len(labels)
    expected = theirs(path, objects, cache_class, kwargs, size, fresh=kind != EXACT, runs=runs)
    compare(rows, labels, kind, expected, f"{spec} at {size} {'objects' if objects else 'bytes'}")


def filter_cases():
    for name in TRACES:
        for spec, filter_class, kwargs, kind in FILTERS:
            for policy, cache_class in FILTERED_POLICIES:
                for index, fraction in enumerate(FRACTIONS):
                    yield pytest.param(
                        name, spec, filter_class, kwargs, kind, policy, cache_class, index,
                        id=f"{name}-{policy}+{spec}-{fraction:g}",
                    )


@pytest.mark.parametrize(
    "name, spec, filter_class, kwargs, kind, policy, cache_class, size_index", list(filter_cases())
)
def test_admission_filter_equals_libcachesim(
    ours, trace, name, spec, filter_class, kwargs, kind, policy, cache_class, size_index
):
    path, sizes, objects = trace(name)
    size = sizes[size_index]
    rows = {label: row for (label, cache_size), row in ours(name, spec).items() if cache_size == size}
    filters = variants(spec, kind)
    labels = [f"{policy}+{admitted}" for admitted in filters]
    runs = len(filters)
    expected = theirs(path, objects, cache_class, {}, size, (filter_class, kwargs), fresh=kind != EXACT, runs=runs)
    compare(rows, labels, kind, expected, f"{policy}+{spec} at {size}")
