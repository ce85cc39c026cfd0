"""Each of our policies and admission filters beside libcachesim's class of the same algorithm,
with the arguments that make them the same cache: shared by the parity test and
scripts/bench-sim."""

# How ours compares with libcachesim:
# EXACT: deterministic on both sides, equal to 1e-12.
# FRESH: randomized, but with seed 0 ours draws exactly what libcachesim draws in a fresh
#   process (its generator starts from the same state in each thread), so equal to 1e-12 against
#   libcachesim run alone in a new interpreter.
# SEEDED: randomized differently; the mean of ours over SEEDS within TOLERANCE.
EXACT, FRESH, SEEDED = "exact", "fresh", "seeded"
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
    ("slru", "SLRU", {}, EXACT),
    ("wtinylfu", "WTinyLFU", {}, EXACT),
    ("wtinylfu:main-cache=lru,window-size=0.2", "WTinyLFU", {"main_cache": "LRU", "window_size": 0.2}, EXACT),
    ("lecar", "LeCaR", {}, FRESH),
    ("lecar:update-weight=false,lru-weight=0.3", "LeCaR", {"update_weight": False, "lru_weight": 0.3}, FRESH),
    ("cacheus", "Cacheus", {}, FRESH),
    ("random", "Random", {}, SEEDED),
    ("lru-prob", "LRUProb", {}, SEEDED),
    ("lru-prob:prob=0.2", "LRUProb", {"prob": 0.2}, SEEDED),
    ("hyperbolic", "Hyperbolic", {}, SEEDED),
    ("lhd", "LHD", {}, SEEDED),
    ("mq", "MQ", {}, EXACT),
    ("mq:n-queue=4,lifetime=100,qout-size-ratio=0.5", "MQ", {"n_queue": 4, "lifetime": 100, "qout_size_ratio": 0.5}, EXACT),
    ("lru-k", "LRUK", {}, EXACT),
    ("lru-k:k=3", "LRUK", {"k": 3}, EXACT),
    ("gdsf", "GDSF", {}, EXACT),
    ("lfuda", "LFUDA", {}, EXACT),
    ("size", "Size", {}, EXACT),
    ("beladysize", "BeladySize", {}, SEEDED),
    ("beladysize:n-sample=16", "BeladySize", {"n_samples": 16}, SEEDED),
    ("clockpro", "ClockPro", {}, EXACT),
    ("clockpro:init-ref=1,init-ratio-cold=0.2", "ClockPro", {"init_ref": 1, "init_ratio_cold": 0.2}, EXACT),
    ("clock2q+", "Clock2QPlus", {}, EXACT),
    (
        "clock2q+:fifo-size-ratio=0.2,ghost-size-ratio=0.5,move-to-main-threshold=2,corr-window-ratio=0.2",
        "Clock2QPlus",
        {"fifo_size_ratio": 0.2, "ghost_size_ratio": 0.5, "move_to_main_threshold": 2, "corr_window_ratio": 0.2},
        EXACT,
    ),
]
# (our filter as --admission takes it, libcachesim's admissioner class, its keyword arguments,
# how it compares); each sits in front of every policy of FILTERED_POLICIES.
FILTERS = [
    ("size:size=8192", "SizeAdmissioner", {"size_threshold": 8192}, EXACT),
    ("bloom", "BloomFilterAdmissioner", {}, EXACT),
    ("prob:prob=0.3", "ProbAdmissioner", {"prob": 0.3}, FRESH),
    ("size-prob:exponent=0.0001", "SizeProbabilisticAdmissioner", {"exponent": 0.0001}, FRESH),
    ("adaptsize", "AdaptSizeAdmissioner", {}, FRESH),
    ("adaptsize:max-iteration=5,reconf-interval=5000", "AdaptSizeAdmissioner", {"max_iteration": 5, "reconf_interval": 5000}, FRESH),
]
FILTERED_POLICIES = [("lru", "LRU"), ("s3fifo", "S3FIFO")]


def with_param(spec: str, name: str, value) -> str:
    """`spec` with one more `name=value` parameter."""
    return f"{spec}{',' if ':' in spec else ':'}{name}={value}"


def variants(spec: str, kind: str) -> list:
    """The labels `spec` runs under: one per seed in `SEEDS` when it is SEEDED, else itself."""
    return [with_param(spec, "seed", seed) for seed in SEEDS] if kind == SEEDED else [spec]
