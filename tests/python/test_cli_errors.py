"""Bad input gives a one-line error naming the file and, where there is one, the line or byte
offset; the exit code is non-zero and nothing panics. Each case gives the pattern the error must
also match: the position, or what is wrong. Cases make their input from (tmp_path, request)."""

import os
import re
import struct

import pytest

from helpers import run

# Each trace-reading command: the words before the trace and the options after it.
COMMANDS = {
    "sim": (["sim"], ["--policy", "lru", "--size", "1mb"]),
    "mrc": (["mrc"], []),
    "stats": (["trace", "stats"], []),
}


def truncated_oracle_general(tmp_path, request):
    path = tmp_path / "cut.oracleGeneral.bin"
    records = b"".join(struct.pack("<IQIq", t, 100 + t, 4096, -1) for t in range(10))
    path.write_bytes(records[: 9 * 24 + 10])  # the tenth record ends 14 bytes early
    return path, [], r"\b(216|226)\b"


def msr_bad_offset(tmp_path, request):
    traces_dir = request.getfixturevalue("traces_dir")
    lines = (traces_dir / "msr-cambridge-hm0-sample.csv").read_text().splitlines()[:5]
    fields = lines[2].split(",")
    fields[4] = "12x4"
    lines[2] = ",".join(fields)
    path = tmp_path / "hm_0.csv"
    path.write_text("\n".join(lines) + "\n")
    return path, ["--trace-format", "msr"], r"\bline 3\b"


def csv_non_numeric(tmp_path, request):
    path = tmp_path / "kv.csv"
    path.write_text("time,key,size\n1,10,4096\n2,11,4096\n3,12,big\n")
    spec = "time-col=1,obj-id-col=2,obj-size-col=3,has-header=true"
    return path, ["--trace-type-params", spec], r"\bline 4\b"


def unknown_format(tmp_path, request):
    path = tmp_path / "mystery.dat"
    path.write_bytes(os.urandom(1001))  # not a whole number of 24-byte records either
    return path, [], r"\bformat\b"


def empty_file(tmp_path, request):
    path = tmp_path / "empty.oracleGeneral.bin"
    path.write_bytes(b"")
    return path, [], r"\bempty\b"


def missing_file(tmp_path, request):
    return tmp_path / "missing.oracleGeneral.bin", [], None


def directory(tmp_path, request):
    path = tmp_path / "a-directory.oracleGeneral.bin"
    path.mkdir()
    return path, [], None


CASES = [truncated_oracle_general, msr_bad_offset, csv_non_numeric, unknown_format, empty_file, missing_file, directory]


@pytest.mark.parametrize("make_input", CASES, ids=lambda case: case.__name__)
@pytest.mark.parametrize("command", COMMANDS)
def test_bad_input_gives_one_line_error(heterarchy, tmp_path, request, command, make_input):
    path, flags, detail = make_input(tmp_path, request)
    before, after = COMMANDS[command]
    done = run(heterarchy, *before, path, *after, *flags, check=False)
    assert done.returncode > 0, f"exit code {done.returncode} (negative: killed by a signal)"
    assert "panicked" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected a one-line error, got: {done.stderr!r}"
    assert path.name in lines[0], f"error does not name the file: {lines[0]}"
    if detail:
        assert re.search(detail, lines[0]), f"error does not match {detail}: {lines[0]}"


# Bad policy and admission arguments: (the arguments, what the one-line error must say).
POLICY_ARGUMENTS = [
    (["--policy", "nope"], r'^error: unknown policy "nope"; expected one of: lru, '),
    (["--policy", "s3fifo:small-size-ratio=2"],
     r"^error: s3fifo: small-size-ratio=2 is out of range: expected a number from 0 to 1$"),
    (["--policy", "s3fifo:tiny=1"], r'^error: s3fifo: unknown parameter "tiny"; expected one of: small-size-ratio, '),
    (["--policy", "lru:k=2"], r'^error: lru: unknown parameter "k"; lru takes none$'),
    (["--policy", "clock:n-bit-counter=x"], r"n-bit-counter=x is out of range: expected an integer from 1 to 8$"),
    (["--policy", "lru:k"], r'^error: lru: "k" is not a parameter: expected name=value$'),
    (["--policy", "k=2,lru"], r'^error: "k=2" is a parameter with no policy before it$'),
    (["--policy", "lru", "--admission", "bouncer"], r'^error: unknown admission filter "bouncer"; expected one of: '),
    (["--policy", "lru", "--admission", "size:size=0"], r"^error: size: size=0 is out of range"),
    (["--policy", "lirs", "--admission", "size"],
     r"^error: policy lirs cannot take an admission filter \(--admission size\)$"),
]


@pytest.mark.parametrize("arguments, message", POLICY_ARGUMENTS, ids=lambda case: str(case))
@pytest.mark.parametrize("command", ["sim", "mrc"])
def test_bad_policy_arguments_give_one_line_errors(heterarchy, zipf_trace, command, arguments, message):
    path = zipf_trace(0.9, keys=100, requests=1_000, seed=1)
    done = run(heterarchy, command, path, *arguments, check=False)
    assert done.returncode == 1 and "panicked" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected a one-line error, got: {done.stderr!r}"
    assert re.search(message, lines[0]), lines[0]
