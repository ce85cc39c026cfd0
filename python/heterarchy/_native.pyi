"""Types of the native module (crates/python/src/lib.rs)."""

from typing import Iterator, Optional

class HeterarchyError(ValueError):
    """A heterarchy command failed; the message is the command line's one-line error."""

class TraceRequest:
    """One request of a trace."""

    @property
    def time_ns(self) -> int: ...
    @property
    def key(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def tenant(self) -> int: ...
    @property
    def op(self) -> str: ...
    @property
    def next_access(self) -> int: ...

class TraceIter(Iterator[TraceRequest]):
    """The requests of a trace file, read in batches as the iteration goes."""

    def __init__(
        self,
        path: str,
        trace_format: Optional[str] = None,
        block_size: str = "4k",
        no_split: bool = False,
        trace_type_params: Optional[str] = None,
    ) -> None: ...
    def __iter__(self) -> "TraceIter": ...
    def __next__(self) -> TraceRequest: ...

def run(args: list[str]) -> str:
    """Runs ``heterarchy ARGS...`` in this process; its JSON results as one JSON array."""

def command_options(path: list[str]) -> list[tuple[str, bool, bool]]:
    """The subcommand's arguments: (id, positional, takes a value)."""

def toml_from_json(json: str) -> str:
    """A JSON object as TOML text."""
