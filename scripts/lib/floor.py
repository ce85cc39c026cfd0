"""The floor (crates/floor, `heterarchy-floor`): starting it for the NBD and key-value
benchmarks, and judging a server's CPU time per request against it."""

from pathlib import Path

# heterarchy's target: at most this multiple of the floor's CPU time per request
# (docs/benchmarks.md).
TARGET_MULTIPLE = 1.3


def nbd_command(floor: Path, port: int, size_bytes: int) -> list:
    """The floor serving one read-only export of `size_bytes` zeros on 127.0.0.1:`port`."""
    return [floor, "nbd", "--listen", f"127.0.0.1:{port}", "--size-bytes", size_bytes]


def memcached_command(floor: Path, port: int, value_bytes: int) -> list:
    """The floor answering every get on 127.0.0.1:`port` with a value of `value_bytes`."""
    return [floor, "memcached", "--listen", f"127.0.0.1:{port}", "--value-bytes", value_bytes]
