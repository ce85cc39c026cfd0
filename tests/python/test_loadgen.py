"""`heterarchy loadgen kv`, the memcached text-protocol load generator of scripts/bench-kv,
against the real memcached (one thread, 64 MiB, as kv_support starts it): the counts add up and
match memcached's own counters, gets hit after the prefill, latency percentiles are ordered, a
server's error replies are counted and fail the run, and an unreachable, dying or stalled server
gives a one-line error and a non-zero exit within a bounded time. With --verify (heterarchy's
server too), a mixed load with deletes and misses finds no wrong reply and values overwritten
behind the run's back are caught; --stream prints each interval as it ends. `loadgen block`
over NBD: a verified load reads back what it wrote, data overwritten behind it and refused
requests count as errors. Every process is killed at teardown, and every run is bounded by
RUN_SECONDS."""

import json
import math
import os
import signal
import subprocess
import time

import pytest

from helpers import BINARY, free_port
from kv_support import Raw, tool_path
from nbd_support import EXPORT

# A generous bound on any run here: prefill, warm-up, 1 s measured, and the 2 s drain bound.
RUN_SECONDS = 30
KEYS = 10_000
MEMCACHED_ITEM_MAX = 1 << 20


@pytest.fixture(autouse=True)
def built(heterarchy):
    """Every test runs the release binary: fail clearly when it is missing."""


@pytest.fixture
def memcached(servers):
    """A fresh memcached: `memcached -l 127.0.0.1 -p PORT -U 0 -t 1 -m 64`."""
    return servers.start("memcached")


def loadgen_argv(*args) -> list:
    return [str(BINARY), "loadgen", "kv", *map(str, args)]


def loadgen(*args, duration="1s", warmup="200ms") -> subprocess.CompletedProcess:
    """Runs `heterarchy loadgen kv ARGS --duration 1s --warmup 200ms --format json`; the run
    must end by itself well within RUN_SECONDS (subprocess.run kills it otherwise)."""
    argv = loadgen_argv(*args, "--duration", duration, "--warmup", warmup, "--format", "json")
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_SECONDS)
    # The run's length as this test saw it, against which the report's own duration is checked.
    done.wall_secs = time.monotonic() - started
    return done


def loadgen_while(args: list, after_seconds: float, action) -> subprocess.CompletedProcess:
    """Runs `heterarchy loadgen kv ARGS`, does `action` `after_seconds` into the run, and waits
    for the run to end by itself (killing it after RUN_SECONDS)."""
    argv = loadgen_argv(*args)
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as run:
        try:
            time.sleep(after_seconds)
            action()
            stdout, stderr = run.communicate(timeout=RUN_SECONDS)
        finally:
            run.kill()
    return subprocess.CompletedProcess(argv, run.returncode, stdout, stderr)


def report_of(done: subprocess.CompletedProcess) -> dict:
    """The run's JSON report (a list of them with several targets); a single one gains
    `wall_secs`: how long the process ran, by this test's clock."""
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    if isinstance(report, dict):
        report["wall_secs"] = done.wall_secs
    return report


def one_line_error(done: subprocess.CompletedProcess) -> str:
    """The error of a failed run: a non-zero exit and exactly one line on stderr."""
    assert done.returncode != 0, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def assert_consistent(report: dict, connections: int, pipeline: int):
    """Counts that add up and latency percentiles in order."""
    assert report["ops"] > 0
    assert report["ops"] == report["gets"] + report["sets"]
    # The load ran for its warm-up and measured second (the process lived at least that long),
    # and not much longer than the prefill and both.
    assert report["duration_secs"] == 1.0
    assert 1.2 <= report["wall_secs"] < 1.2 + 5.0, report["wall_secs"]
    assert (report["connections"], report["pipeline"]) == (connections, pipeline)
    latencies = [report[f"latency_us_{name}"] for name in ("p50", "p90", "p99", "p999", "max")]
    assert 0 < latencies[0] and latencies == sorted(latencies), latencies


def test_default_mix_hits_every_prefilled_key(memcached):
    """The defaults (32 connections, 100 000 keys of 32 bytes, 100-byte values, 90% gets,
    uniform) after the prefill: no errors, every get hits, and gets are 90% of the requests.
    memcached holds exactly the 100 000 distinct keys and counted at least the sets and gets
    reported (the warm-up's come on top)."""
    before = memcached.stats()
    report = report_of(loadgen("--server", f"127.0.0.1:{memcached.port}"))
    assert_consistent(report, connections=32, pipeline=1)
    assert report["errors"] == 0 and report["first_error"] is None
    assert report["get_hits"] == report["gets"] and report["get_misses"] == 0
    # Each request is a get with probability 0.9, independently: the share of gets has standard
    # deviation sqrt(0.09 / ops). Five of them (a false failure about once in 3.5 million runs),
    # and never tighter than one percentage point.
    tolerance = max(0.01, 5 * math.sqrt(0.09 / report["ops"]))
    assert report["gets"] / report["ops"] == pytest.approx(0.9, abs=tolerance)
    after = memcached.stats()
    assert int(after["curr_items"]) == 100_000
    assert int(after["cmd_set"]) - int(before["cmd_set"]) >= 100_000 + report["sets"]
    assert int(after["get_hits"]) - int(before["get_hits"]) >= report["get_hits"]
    assert int(after["get_misses"]) == 0


def test_pipelined_zipf_4k_values_over_a_unix_socket(servers, tmp_path):
    """--pipeline 8 on 4 connections to a Unix socket, Zipf keys and 4 KiB values: the replies
    of a batch arrive cut anywhere across reads and every one is matched to its request."""
    socket_path = tmp_path / "memcached.sock"
    server = servers.start("memcached", unix=socket_path)
    report = report_of(loadgen(
        "--server", f"unix:{socket_path}", "--connections", 4, "--pipeline", 8,
        "--distribution", "zipf:0.99", "--value-bytes", "4k", "--keys", KEYS,
    ))
    assert_consistent(report, connections=4, pipeline=8)
    assert report["errors"] == 0
    assert report["get_hits"] == report["gets"] > 0


@pytest.mark.parametrize("rate", [2000, 20000])
def test_a_rate_caps_the_requests_a_second(memcached, rate):
    """--rate N over 8 connections: N requests in the measured second, within 5%."""
    report = report_of(loadgen("--server", f"127.0.0.1:{memcached.port}", "--connections", 8,
                               "--keys", KEYS, "--rate", rate))
    assert_consistent(report, connections=8, pipeline=1)
    assert report["ops"] == pytest.approx(rate, rel=0.05), report


def test_several_targets_at_once_each_with_its_rate_burst_and_series(servers):
    """Two memcacheds loaded together, as seed 000's tenants are: a light get-heavy target at a
    steady 2000 requests a second and a write-heavy one at 1000 that bursts to 10 000 at 2 s.
    Each gets its own row and a series of 1 s intervals over the same measured time: the light
    one steady throughout, the other at its base rate before the burst and its burst rate after,
    each within 5%, and every write counted by its own server."""
    light, heavy = servers.start("memcached"), servers.start("memcached")
    before = heavy.stats()
    done = loadgen(
        "--keys", KEYS, "--interval", "1s",
        "--target", f"name=light,server=127.0.0.1:{light.port},connections=2,rate=2000",
        "--target", f"name=heavy,server=127.0.0.1:{heavy.port},connections=4,get-ratio=0.1,"
                    "rate=1000,rate-step=2s:10000",
        duration="4s",
    )
    reports = report_of(done)
    assert [r["target"] for r in reports] == ["light", "heavy"]
    assert reports[1]["server"] == f"127.0.0.1:{heavy.port}"
    series = {r["target"]: [i["ops_per_sec"] for i in r["series"]] for r in reports}
    assert [i["start_secs"] for i in reports[0]["series"]] == [0.0, 1.0, 2.0, 3.0]
    assert series["light"] == pytest.approx([2000] * 4, rel=0.05), series
    assert series["heavy"] == pytest.approx([1000, 1000, 10000, 10000], rel=0.05), series
    assert all(i["latency_us_p99"] > 0 for r in reports for i in r["series"])
    assert all(r["errors"] == 0 for r in reports)
    assert reports[1]["sets"] > 0.8 * reports[1]["ops"]
    after = heavy.stats()
    assert int(after["cmd_set"]) - int(before["cmd_set"]) >= KEYS + reports[1]["sets"]


def test_a_diurnal_rate_swings_between_night_and_day(memcached):
    """--diurnal 4s:0.2 on --rate 5000: each measured second's rate is the cosine day's mean
    over it (night at 0 s and 4 s, midday at 2 s), within 5%."""
    report = report_of(loadgen(
        "--server", f"127.0.0.1:{memcached.port}", "--connections", 4, "--keys", KEYS,
        "--rate", 5000, "--diurnal", "4s:0.2", "--interval", "1s", duration="4s", warmup="0s",
    ))
    # The mean of 0.2 + 0.8 (1 - cos(2 pi t / 4)) / 2 over [k, k + 1).
    def mean_share(k):
        integral = lambda t: 0.6 * t - 0.4 * 4 / (2 * math.pi) * math.sin(2 * math.pi * t / 4)
        return integral(k + 1) - integral(k)
    expected = [5000 * mean_share(k) for k in range(4)]
    got = [i["ops_per_sec"] for i in report["series"]]
    assert got == pytest.approx(expected, rel=0.05), (got, expected)


@pytest.mark.parametrize("argv, named", [
    (["--target", "server=127.0.0.1:1,bogus=1"], "unknown key \"bogus\""),
    (["--target", "server=127.0.0.1:1,rate=x"], "rate=x: expected a number"),
    (["--target", "server=127.0.0.1:1,rate-step=2s"], "AT:RATE"),
    (["--rate-step", "2s:100"], "give --rate"),
    (["--rate", 100, "--rate-step", "5s:10", "--rate-step", "2s:10"], "time order"),
])
def test_bad_targets_and_schedules_are_one_line_errors(argv, named):
    line = one_line_error(loadgen(*argv))
    assert named in line, line


@pytest.mark.parametrize("argv, named", [
    (["--rate", 100, "--rate-step", "2s"], "AT:RATE"),
    (["--rate", 100, "--diurnal", "0s:0.5"], "PERIOD:LOW"),
])
def test_bad_flags_are_refused_by_the_parser_naming_the_form(argv, named):
    done = loadgen(*argv)
    assert done.returncode != 0
    first = done.stderr.splitlines()[0]
    assert first.startswith("error: ") and named in first, done.stderr


def test_a_rate_must_be_positive(memcached):
    line = one_line_error(loadgen("--server", f"127.0.0.1:{memcached.port}", "--rate", 0))
    assert "--rate" in line


def test_without_prefill_every_get_misses(memcached):
    """--no-prefill --get-ratio 1 on an empty memcached: only gets, and all miss."""
    report = report_of(loadgen(
        "--server", f"127.0.0.1:{memcached.port}", "--no-prefill", "--get-ratio", 1,
        "--connections", 4, "--keys", KEYS,
    ))
    assert_consistent(report, connections=4, pipeline=1)
    assert report["errors"] == 0 and report["sets"] == 0
    assert report["get_misses"] == report["gets"] == report["ops"]
    assert int(memcached.stats()["curr_items"]) == 0


def test_values_over_the_item_limit_are_counted_errors_and_fail_the_run(memcached):
    """Values of 2 000 000 bytes, over memcached's default 1 MiB item limit, get
    `SERVER_ERROR object too large for cache`. During the load, every set counts as an error:
    the report is still printed (errors == sets, the first error line quoted) and the run exits
    non-zero with one line saying how many requests failed. With the prefill, the first set
    that is not STORED ends the run at once with a one-line error and no report."""
    address = f"127.0.0.1:{memcached.port}"
    too_large = 2 * MEMCACHED_ITEM_MAX
    common = ("--server", address, "--value-bytes", too_large, "--keys", 100, "--connections", 4)
    done = loadgen(*common, "--no-prefill")
    message = one_line_error(done)
    report = json.loads(done.stdout)
    assert report["sets"] > 0 and report["errors"] == report["sets"]
    assert report["first_error"] == "SERVER_ERROR object too large for cache"
    assert report["get_misses"] == report["gets"]
    assert f"{report['errors']} of {report['ops']} requests to {address}" in message
    assert "SERVER_ERROR object too large for cache" in message

    done = loadgen(*common)
    message = one_line_error(done)
    assert done.stdout == ""
    assert f"prefill of {address} failed" in message and "SERVER_ERROR" in message
    # memcached swallowed the oversized values and serves on.
    with Raw(memcached.port) as conn:
        conn.exchange(b"set after 0 0 2\r\nok\r\n", b"STORED\r\n")


@pytest.mark.parametrize("server", ["tcp", "unix"])
def test_an_unreachable_server_is_a_one_line_error(server, tmp_path):
    """Nothing listening at the address: one line naming it and why, a non-zero exit."""
    address = f"127.0.0.1:{free_port()}" if server == "tcp" else f"unix:{tmp_path / 'none.sock'}"
    started = time.monotonic()
    done = loadgen("--server", address)
    message = one_line_error(done)
    assert time.monotonic() - started < 10
    assert done.stdout == ""
    assert f"cannot connect to {address}" in message
    assert ("refused" if server == "tcp" else "No such file") in message


def test_a_bad_address_is_refused_before_connecting():
    done = loadgen("--server", "127.0.0.1")
    assert done.returncode != 0
    assert "expected HOST:PORT" in done.stderr


def test_a_server_that_dies_mid_run_is_a_one_line_error(memcached):
    """memcached killed during the measured time: the run stops at once with one line naming
    the server and what happened to the connection."""
    address = f"127.0.0.1:{memcached.port}"
    args = ["--server", address, "--connections", 4, "--keys", KEYS, "--duration", "5s", "--warmup", "0s",
            "--format", "json"]
    message = one_line_error(loadgen_while(args, 1, memcached.kill))
    assert address in message
    assert any(what in message for what in ("reset", "Broken pipe", "closed connection")), message


def test_a_stalled_server_ends_the_run_after_the_drain_bound(memcached):
    """memcached stopped (SIGSTOP) during the run answers nothing: the run still ends by itself,
    2 s after the measured time, saying how many requests were left unanswered."""
    args = ["--server", f"127.0.0.1:{memcached.port}", "--connections", 4, "--no-prefill", "--duration", "1s",
            "--warmup", "0s"]
    started = time.monotonic()
    try:
        done = loadgen_while(args, 0.3, lambda: os.kill(memcached.process.pid, signal.SIGSTOP))
    finally:
        memcached.kill()  # SIGKILL ends a stopped process too
    elapsed = time.monotonic() - started
    message = one_line_error(done)
    assert "4 requests unanswered for 2 s" in message, message
    assert 2.5 < elapsed < 10, elapsed


def streamed(stdout: str) -> tuple[list, dict]:
    """The interval lines `--stream` printed, and the report after them."""
    lines = stdout.splitlines()
    intervals = [json.loads(line) for line in lines if line.startswith('{"') and line.endswith("}")]
    rest = [line for line in lines if not (line.startswith('{"') and line.endswith("}"))]
    return intervals, json.loads("\n".join(rest))


@pytest.mark.parametrize("kind", ["heterarchy", "memcached"])
def test_verified_mixed_load_with_deletes_and_misses_finds_no_error_and_streams_each_interval(servers, kind):
    server = servers.start(kind, memory_mb=64)
    done = loadgen("--server", f"127.0.0.1:{server.port}", "--connections", 16, "--pipeline", 4, "--keys", KEYS,
                   "--value-bytes", 200, "--get-ratio", 0.7, "--delete-ratio", 0.1, "--miss-ratio", 0.2, "--verify",
                   "--interval", "500ms", "--stream", duration="2s", warmup="0s")
    assert done.returncode == 0, done.stderr
    intervals, report = streamed(done.stdout)
    assert report["errors"] == 0, report["first_error"]
    assert report["deletes"] > 0 and report["sets"] > 0
    # A fifth of the gets ask for keys never set, and deleted keys miss too.
    assert report["get_misses"] > report["gets"] * 0.15, report
    assert report["verified"] > report["get_hits"] * 0.9, report
    assert [interval["index"] for interval in intervals] == [0, 1, 2, 3]
    assert sum(interval["ops"] for interval in intervals) == report["ops"]
    assert all(interval["latency_us_p99"] > 0 and interval["errors"] == 0 for interval in intervals)


def test_verification_catches_values_changed_behind_the_runs_back(servers):
    """Halfway through a gets-only run, another client overwrites every key with bytes of the
    same length: the run's gets after that are wrong, and it says so and fails."""
    server = servers.start("memcached", memory_mb=64)
    argv = loadgen_argv("--server", f"127.0.0.1:{server.port}", "--connections", 2, "--keys", 64,
                        "--value-bytes", 64, "--get-ratio", 1.0, "--verify", "--duration", "5s", "--warmup", "0s",
                        "--format", "json")
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as run:
        with Raw(server.port) as raw:
            keys = []
            for _ in range(100):
                raw.send(b"lru_crawler metadump all\r\n")
                dump = b""
                while not dump.endswith(b"END\r\n"):
                    dump += raw.line()
                # One line per item, ended by a bare \n.
                keys = [field[4:] for field in dump.split() if field.startswith(b"key=")]
                if len(keys) == 64:
                    break
                time.sleep(0.05)
            assert len(keys) == 64, "the prefill set every key"
            for key in keys:
                raw.exchange(b"set " + key + b" 0 0 64\r\n" + b"x" * 64 + b"\r\n", b"STORED\r\n")
            # Else the run ended before its gets could see the change, and there is nothing to catch.
            assert run.poll() is None, "the run ended before every key was overwritten"
        stdout, stderr = run.communicate(timeout=RUN_SECONDS)
    assert run.returncode != 0
    report = json.loads(stdout)
    assert report["errors"] > 0
    assert "bytes the run never wrote" in report["first_error"], report["first_error"]


def block_loadgen(server, *flags) -> subprocess.CompletedProcess:
    """`heterarchy loadgen block` over NBD against `server` (a volume of nbd_support)."""
    return subprocess.run([
        str(BINARY), "loadgen", "block", "--target", f"nbd://127.0.0.1:{server.port}/{EXPORT}", "--format", "json",
        *map(str, flags),
    ], capture_output=True, text=True, timeout=RUN_SECONDS)


def test_verified_block_load_over_nbd_reads_back_what_it_wrote_and_streams_each_interval(volume):
    server = volume("wb", cache="ram:4m")
    done = block_loadgen(server, "--jobs", 2, "--iodepth", 4, "--read-percent", 60, "--span", "8m",
                         "--fsync-every", 64, "--verify", "--interval", "500ms", "--stream", "--duration", "2s",
                         "--series", 0)
    assert done.returncode == 0, done.stderr
    intervals, report = streamed(done.stdout)
    assert report["errors"] == 0, report["first_error"]
    # 2048 blocks, written at 40%: most reads find a block the run wrote.
    assert report["verified_reads"] > report["reads"] / 3, report
    assert [interval["index"] for interval in intervals] == [0, 1, 2, 3]
    assert all(interval["ops"] > 0 and interval["errors"] == 0 for interval in intervals)
    assert intervals == report["intervals"]


def test_block_verification_catches_data_overwritten_behind_the_runs_back(volume):
    """Halfway through, qemu-io writes a pattern over the blocks the run uses: its reads of
    blocks it wrote before then return bytes that are no version of theirs."""
    server = volume("wb", cache="ram:4m")
    argv = [str(BINARY), "loadgen", "block", "--target", f"nbd://127.0.0.1:{server.port}/{EXPORT}", "--jobs", 1,
            "--iodepth", 4, "--read-percent", 80, "--span", "1m", "--verify", "--duration", "2s", "--series", 0,
            "--format", "json"]
    with subprocess.Popen(list(map(str, argv)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as run:
        time.sleep(1)
        qemu = subprocess.run([tool_path("qemu-io", "qemu-utils"), "-f", "raw", "-c", "write -P 0x55 0 1M",
                               f"nbd://127.0.0.1:{server.port}/{EXPORT}"],
                              capture_output=True, text=True, timeout=RUN_SECONDS)
        stdout, _ = run.communicate(timeout=RUN_SECONDS)
    assert qemu.returncode == 0, qemu.stderr
    assert run.returncode != 0
    report = json.loads(stdout)
    assert report["errors"] > 0
    assert "is torn" in report["first_error"], report["first_error"]


def test_block_requests_the_server_refuses_count_as_errors_and_the_run_goes_on(servers):
    """The floor's export is read-only: every write is refused, every read still served."""
    port = free_port()
    floor = servers.start_process("floor", [BINARY.with_name("heterarchy-floor"), "nbd", "--listen",
                                            f"127.0.0.1:{port}", "--size-bytes", 16 << 20], [port])
    argv = [BINARY, "loadgen", "block", "--target", f"nbd://127.0.0.1:{floor.port}/", "--iodepth", 4,
            "--read-percent", 50, "--duration", "500ms", "--series", 0, "--format", "json"]
    done = subprocess.run(list(map(str, argv)), capture_output=True, text=True, timeout=RUN_SECONDS)
    assert done.returncode != 0
    report = json.loads(done.stdout)
    assert report["errors"] == report["writes"] > 0
    assert report["reads"] > 0
    assert "EPERM" in report["first_error"] or "not permitted" in report["first_error"], report["first_error"]
