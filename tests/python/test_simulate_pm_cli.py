"""`heterarchy simulate-pm`: a block trace with flushes replayed on the simulated block stacks on
PM (docs/pm-block-device.md, "Traces on the simulated stacks"), and its one-line errors.

What the tests compare against, derived from the trace written here, not from the simulator:
the requests it replays (reads, writes and flushes; trims skipped), the blocks it writes, which a
staging cache must each take as a hit, a fill or a bypass, and the flushes.
"""

import random
import re

import pytest

from helpers import run, run_json

BLOCK = 4096


def msr_trace(path, records):
    """Writes (op, offset, length) records as MSR lines, 100 ns apart."""
    with open(path, "w") as out:
        for tick, (op, offset, length) in enumerate(records):
            out.write(f"{tick},test,0,{op},{offset},{length},0\n")
    return path


def fsync_bursts(seed=3, writes=3000, every=100):
    """Random writes of 1 to 4 blocks, a read after every third, a trim now and then, a flush
    after every `every` writes: the shape of an fsyncing application under ext4."""
    rng = random.Random(seed)
    records = []
    for i in range(writes):
        records.append(("Write", rng.randrange(1 << 16) * BLOCK, BLOCK * rng.choice([1, 1, 2, 4])))
        if i % 3 == 0:
            records.append(("Read", rng.randrange(1 << 16) * BLOCK + 512, 1024))
        if i % 500 == 7:
            records.append(("Trim", rng.randrange(1 << 16) * BLOCK, BLOCK))
        if i % every == every - 1:
            records.append(("Flush", 0, 0))
    return records


def test_each_stack_replays_every_request_of_the_trace(heterarchy, tmp_path):
    records = fsync_bursts()
    trace = msr_trace(tmp_path / "app.msr.csv", records)
    # The published MSR traces hold no trims, so a file with some is read as MSR when told.
    runs = run_json(heterarchy, "simulate-pm", trace, "--trace-format", "msr", "--stacks", "btt,caiti,pmbd,lru,raw-pm",
                    "--staging-size", "4MiB", "--device", "optane-pm", "--cores", "2")
    by_stack = {row["stack"]: row for row in runs}
    assert list(by_stack) == ["btt", "caiti", "pmbd", "lru", "raw-pm"]
    replayed = sum(op != "Trim" for op, _, _ in records)
    flushes = sum(op == "Flush" for op, _, _ in records)
    blocks_written = sum(length // BLOCK for op, _, length in records if op == "Write")
    for name, row in by_stack.items():
        assert row["requests"] == replayed, name
        assert row["flushes"] == flushes, name
        assert row["cores"] == 2 and row["cache_bytes"] == 4 << 20
        staging = row["staging"]
        taken = staging["write_hits"] + staging["write_fills"] + staging["bypasses"]
        assert taken == (0 if name in ("btt", "raw-pm") else blocks_written), name
    assert by_stack["btt"]["time_over_btt"] == 1.0
    for name, row in by_stack.items():
        assert row["time_over_btt"] == pytest.approx(row["elapsed_ns"] / by_stack["btt"]["elapsed_ns"])
    # The BTT writes each block out of place with its map and flog entries: slower than raw PM.
    assert by_stack["raw-pm"]["elapsed_ns"] < by_stack["btt"]["elapsed_ns"]
    # Deterministic: the same run again gives the same times.
    again = run_json(heterarchy, "simulate-pm", trace, "--trace-format", "msr", "--stacks", "caiti", "--staging-size", "4MiB",
                     "--device", "optane-pm", "--cores", "2")
    assert again[0]["elapsed_ns"] == by_stack["caiti"]["elapsed_ns"]


def test_the_table_names_each_stack_and_its_time_over_the_btt(heterarchy, tmp_path):
    trace = msr_trace(tmp_path / "small.csv", [("Write", 0, BLOCK), ("Flush", 0, 0), ("Read", 0, BLOCK)])
    text = run(heterarchy, "simulate-pm", trace, "--trace-format", "msr", "--stacks", "btt,caiti").stdout
    lines = text.strip().splitlines()
    assert lines[0].split()[:3] == ["stack", "requests", "elapsed_ms"]
    assert re.match(r"btt\s+3\s+[\d.]+\s+1\.000\b", lines[2]), lines[2]
    assert re.match(r"caiti\s+3\s+", lines[3]), lines[3]


def only_trims(tmp_path):
    return msr_trace(tmp_path / "trims.csv", [("Trim", 0, BLOCK)] * 3), ["--trace-format", "msr"], r"no reads, writes or flushes"


def bad_offset(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("1,test,0,Write,4096,4096,0\n2,test,0,Write,12x4,4096,0\n")
    return path, ["--trace-format", "msr"], r"\bline 2\b"


def key_value_trace(tmp_path):
    path = tmp_path / "kv.csv"
    path.write_text("time,key,size\n1,10,4096\n")
    return path, ["--trace-type-params", "time-col=1,obj-id-col=2,obj-size-col=3,has-header=true"], r"block"


def unknown_stack(tmp_path):
    return msr_trace(tmp_path / "ok.csv", [("Write", 0, BLOCK)]), ["--stacks", "btt,fastest"], r'"fastest"'


def unknown_device(tmp_path):
    return msr_trace(tmp_path / "ok.csv", [("Write", 0, BLOCK)]), ["--device", "floppy"], r"floppy"


def no_evictors(tmp_path):
    return msr_trace(tmp_path / "ok.csv", [("Write", 0, BLOCK)]), ["--evictors", "0"], r"--evictors.*at least 1"


def bad_size(tmp_path):
    return msr_trace(tmp_path / "ok.csv", [("Write", 0, BLOCK)]), ["--staging-size", "lots"], r"--staging-size"


@pytest.mark.parametrize("make_input", [only_trims, bad_offset, key_value_trace, unknown_stack, unknown_device,
                                        no_evictors, bad_size],
                         ids=lambda case: case.__name__)
def test_bad_input_gives_one_line_error(heterarchy, tmp_path, make_input):
    path, flags, detail = make_input(tmp_path)
    done = run(heterarchy, "simulate-pm", path, *flags, check=False)
    assert done.returncode == 1 and "panicked" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected a one-line error, got: {done.stderr!r}"
    assert re.search(detail, lines[0]), f"error does not match {detail}: {lines[0]}"
    if make_input in (only_trims, bad_offset, key_value_trace):
        assert path.name in lines[0], f"error does not name the file: {lines[0]}"
