"""What the soak scripts share (scripts/soak-nbd, scripts/soak-kv): their options, a server's
resident memory sampled while the load runs, `heterarchy loadgen` streaming one interval a
line, and the verdict: 0 errors, resident memory under its bound all along, and the last
interval's p99 within 1.5 x the first's."""

import argparse
import json
import subprocess
import threading
from pathlib import Path

import needs

MAX_P99_GROWTH = 1.5
MIB = 1 << 20
# How often resident memory is sampled: often enough to catch a peak that lasts a second.
RSS_SAMPLE_SECONDS = 0.5
# Time allowed beyond the load for prefilling, draining and the report.
SLACK_SECONDS = 300


def options(description: str, default_rss_limit_mib, configure) -> argparse.Namespace:
    """The soak's command line: --minutes (one line a minute), a hidden --seconds for smoke
    runs (a line every quarter of them), --rss-limit (MiB; by default `default_rss_limit_mib`
    of the parsed options), --binary; `configure(parser)` adds the script's own."""
    parser = needs.Parser(description=description)
    parser.add_argument("--minutes", type=int, default=10, help="how long to hold the load (default 10)")
    parser.add_argument("--seconds", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--rss-limit", type=int, metavar="MIB",
                        help="the most resident memory the server may reach, in MiB (default: see the script)")
    parser.add_argument("--binary", type=Path, help="the heterarchy binary (default: HETERARCHY_BIN, else the release build)")
    configure(parser)
    parsed = parser.parse_args()
    if parsed.minutes < 1 or (parsed.seconds is not None and parsed.seconds < 4):
        parser.error("--minutes must be at least 1 (--seconds at least 4)")
    parsed.total_seconds = parsed.seconds if parsed.seconds is not None else parsed.minutes * 60
    parsed.interval_seconds = max(1, parsed.seconds // 4) if parsed.seconds is not None else 60
    if parsed.rss_limit is None:
        parsed.rss_limit = default_rss_limit_mib(parsed)
    return parsed


def rss_mib(pid: int) -> float:
    """Resident memory of process `pid` (VmRSS in /proc/PID/status), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise ValueError(f"/proc/{pid}/status has no VmRSS line")


class RssSampler:
    """Samples a process's resident memory in a thread until stopped; keeps the latest and the
    highest."""

    def __init__(self, pid: int):
        self.pid, self.latest, self.highest = pid, rss_mib(pid), rss_mib(pid)
        self.gone = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(RSS_SAMPLE_SECONDS):
            try:
                self.latest = rss_mib(self.pid)
            except (OSError, ValueError) as error:
                self.gone = str(error)
                return
            self.highest = max(self.highest, self.latest)

    def stop(self):
        self._stop.set()
        self._thread.join()


def run_load(command: list, sampler: RssSampler, total_seconds: int) -> dict:
    """Runs `heterarchy loadgen ... --stream --format json`, printing a line for each interval
    as it arrives (errors so far, the server's resident memory, p99, throughput); returns the
    intervals, the final report (None if the load generator failed before it) and its exit
    status and error output."""
    print(f"{'interval':<10}{'errors so far':>14}{'RSS MiB':>9}{'max RSS':>9}{'p99 us':>9}{'ops/s':>11}", flush=True)
    process = subprocess.Popen(list(map(str, command)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # stderr is read beside, so that a chatty load generator never blocks on a full pipe.
    stderr = []
    reader = threading.Thread(target=lambda: stderr.append(process.stderr.read()), daemon=True)
    reader.start()
    # A load generator that hangs is killed; its missing report fails the soak.
    watchdog = threading.Timer(total_seconds + SLACK_SECONDS, process.kill)
    watchdog.start()
    intervals, rest, errors = [], [], 0
    for line in process.stdout:
        interval = None
        if line.startswith("{") and line.rstrip().endswith("}"):
            try:
                interval = json.loads(line)
            except json.JSONDecodeError:
                interval = None
        if isinstance(interval, dict) and "index" in interval:
            intervals.append(interval)
            errors += interval["errors"]
            print(f"{interval['start_secs']:>6.0f} s  {errors:>14}{sampler.latest:>9.0f}{sampler.highest:>9.0f}"
                  f"{interval['latency_us_p99']:>9.0f}{interval['ops_per_sec']:>11,.0f}", flush=True)
        else:
            rest.append(line)
    status = process.wait()
    watchdog.cancel()
    reader.join()
    try:
        report = json.loads("".join(rest))
    except json.JSONDecodeError:
        report = None
    return {"intervals": intervals, "report": report, "status": status, "stderr": "".join(stderr).strip()}


def verdict(run: dict, sampler: RssSampler, rss_limit_mib: int, server_alive: bool) -> bool:
    """Prints the soak's verdict and whether it passed."""
    intervals, report = run["intervals"], run["report"]
    problems = []
    errors = report["errors"] if report else sum(interval["errors"] for interval in intervals)
    if run["status"] != 0 or report is None:
        problems.append(f"the load generator exited {run['status']}: {run['stderr'] or 'no message'}")
    if errors:
        first = (report or {}).get("first_error")
        problems.append(f"{errors} errors" + (f", the first: {first}" if first else ""))
    if sampler.gone or not server_alive:
        problems.append(f"the server is gone ({sampler.gone or 'exited'})")
    if sampler.highest > rss_limit_mib:
        problems.append(f"resident memory reached {sampler.highest:.0f} MiB, over the bound of {rss_limit_mib} MiB")
    growth = None
    # With one interval (--minutes 1) the first is the last.
    if intervals and intervals[0]["latency_us_p99"] > 0:
        growth = intervals[-1]["latency_us_p99"] / intervals[0]["latency_us_p99"]
        if growth > MAX_P99_GROWTH:
            problems.append(f"the last interval's p99 is {growth:.2f} x the first's, over {MAX_P99_GROWTH}")
    else:
        problems.append("no interval reported a p99")
    print(f"\nerrors {errors}; resident memory at most {sampler.highest:.0f} MiB (bound {rss_limit_mib} MiB); "
          + (f"last p99 / first p99 {growth:.2f} (at most {MAX_P99_GROWTH})" if growth is not None else "p99 not compared"))
    for problem in problems:
        print(f"  {problem}")
    print("PASS" if not problems else "FAIL")
    return not problems
