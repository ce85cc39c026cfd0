"""Each of our policies and admission filters beside libcachesim's class of the same algorithm,
with the arguments that make them the same cache: shared by the parity test and
scripts/bench-sim."""

EXACT, SEEDED, HASHED = "exact", "seeded", "hashed"
# Issue 21: randomized and sketch-based policies within 0.005 absolute of libcachesim.
TOLERANCE = 0.005
SEEDS = range(5)

# (our policy as --policy takes it, libcachesim's class, its keyword arguments, how it compares).
POLICIES = [
    ("lru", "LRU", {}, EXACT),
    ("fifo", "FIFO", {}, EXACT),
    ("clock", "Clock", {}, EXACT),
    ("clock:init-freq=1,n-bit-counter=2", "Clock", {"init_freq": 1, "n_bit_counter": 2}, EXACT),
    ("arc", "ARC", {}, EXACT),
    ("2q", "TwoQ", {}, EXACT),
    ("twoq:ain-size-ratio=0.1,aout-size-ratio=1", "TwoQ", {"a_in_size_ratio": 0.1, "a_out_size_ratio": 1.0}, EXACT),
    ("s3fifo", "S3FIFO", {}, EXACT),
    (
        "s3fifo:small-size-ratio=0.2,ghost-size-ratio=0.5,move-to-main-threshold=1",
        "S3FIFO",
        {"small_size_ratio": 0.2, "ghost_size_ratio": 0.5, "move_to_main_threshold": 1},
        EXACT,
    ),
    ("sieve", "Sieve", {}, EXACT),
    ("lfu", "LFU", {}, EXACT),
    ("lirs", "LIRS", {}, EXACT),
    ("belady", "Belady", {}, EXACT),
]
# (our filter as --admission takes it, libcachesim's admissioner class, its keyword arguments,
# how it compares); each sits in front of every policy of FILTERED_POLICIES.
FILTERS = [
    ("size:size=8192", "SizeAdmissioner", {"size_threshold": 8192}, EXACT),
]
FILTERED_POLICIES = [("lru", "LRU"), ("s3fifo", "S3FIFO")]


def with_param(spec: str, name: str, value) -> str:
    """`spec` with one more `name=value` parameter."""
    return f"{spec}{',' if ':' in spec else ':'}{name}={value}"
