"""heterarchy: caching for modern storage hierarchies, from Python.

The command line's jobs run in this process on the same Rust code (``sim``, ``mrc``,
``trace_stats``, ``simulate``, ``experiment``, ``device_probe``, ``sizing``, ``trace_sample``),
returning pandas DataFrames for tables; ``read_trace`` iterates over any trace's requests; and
``sweep`` runs many (trace, config) jobs on a Dask cluster into Parquet. docs/architecture.md,
"Python API", maps it.
"""

from ._api import (
    command,
    device_probe,
    experiment,
    experiments,
    mrc,
    policies,
    read_trace,
    run,
    sim,
    simulate,
    sizing,
    trace_compare,
    trace_sample,
    trace_stats,
)
from ._native import HeterarchyError, TraceIter, TraceRequest
from .sweep import sweep

__all__ = [
    "HeterarchyError",
    "TraceIter",
    "TraceRequest",
    "command",
    "device_probe",
    "experiment",
    "experiments",
    "mrc",
    "policies",
    "read_trace",
    "run",
    "sim",
    "simulate",
    "sizing",
    "sweep",
    "trace_compare",
    "trace_sample",
    "trace_stats",
]
