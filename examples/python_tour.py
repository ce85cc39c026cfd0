"""A tour of the heterarchy Python package, on a trace it generates (no data needed).

Run with the package installed (`pip install ./python`): `python examples/python_tour.py`.
"""

import tempfile
from pathlib import Path

import heterarchy

def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="heterarchy-tour-"))
    trace = work / "zipf.oracleGeneral.bin"
    # Any command is one call away; `run` returns the JSON documents it prints.
    heterarchy.run("trace", "generate", "zipf:theta=0.9,keys=50000,requests=500000,size=4k,seed=1",
                   "-o", trace, "--output-format", "oracleGeneral")

    stats = heterarchy.trace_stats(trace)
    print(f"{stats['requests']:,} requests over {stats['unique_keys']:,} objects")

    # Miss ratios of three policies at three sizes: a DataFrame, one row per (policy, size).
    frame = heterarchy.sim(trace, ["lru", "s3fifo", {"name": "lru-k", "k": 2}], ["0.01", "0.05", "0.2"])
    print(frame.pivot(index="cache_size", columns="policy", values="miss_ratio"))

    # LRU's whole curve in one pass, and S3-FIFO's simulated at eight sizes.
    lru = heterarchy.mrc(trace)
    s3fifo = heterarchy.mrc(trace, policy="s3fifo", points=8)
    print(f"LRU curve: {len(lru)} points; S3-FIFO at {len(s3fifo)} sizes")

    # The requests themselves.
    first = next(iter(heterarchy.read_trace(trace)))
    print("first request:", first)

    # A policy's parameters, as the registry lists them.
    for name, spec in heterarchy.policies()["policy"]["s3fifo"]["params"].items():
        print(f"s3fifo {name} = {spec['default']} ({spec['range']})")

    # A timed hierarchy on device models, given as a dict.
    hierarchy = {
        "seed": 1,
        "cache": {"mode": "wt", "policy": "s3fifo"},
        "tier": [{"device": "dram", "size": "16MiB"}, {"device": "nvme-flash"}],
        "load": {"outstanding": 16, "requests": 50000},
    }
    result = heterarchy.simulate(hierarchy, "zipf:theta=0.9,keys=20000,requests=60000,size=4k,kind=block,seed=2")
    print(f"simulated: {result['throughput_ops']:,.0f} ops/s, mean latency {result['mean_latency_us']:.1f} us")

    # A sweep of six pairs on a local Dask cluster, into Parquet (run it again: nothing to do).
    configs = [{"kind": "sim", "policy": p, "size": s} for p in ("lru", "sieve", "arc") for s in ("0.01", "0.1")]
    swept = heterarchy.sweep([trace], configs, output=work / "results.parquet")
    print(swept[["config.policy", "config.size", "miss_ratio"]].sort_values("miss_ratio"))


# Dask starts its workers as new processes that import this file: the tour runs only when it is
# the program.
if __name__ == "__main__":
    main()
