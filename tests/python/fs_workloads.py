"""Applications on a mounted file system, and what each must find after a crash: SQLite (WAL,
synchronous=FULL), PostgreSQL with pgbench, RocksDB's db_bench and fio on files. Used by
tests/python/test_fs.py, scripts/crash-campaign (the fs-kill store) and scripts/bench-fs.

Run as a script, `python fs_workloads.py sqlite-commits DB COUNT [FULL|OFF]` commits COUNT
transactions one at a time and prints `commit ID` after each COMMIT returns: the lines a crash
test reads as the acknowledged commits; `rocksdb-puts DB COUNT [sync|nosync]` does the same
with RocksDB puts, printing `put INDEX`."""

import glob
import hashlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

COMMAND_SECONDS = 300


def row_payload(row_id: int) -> str:
    """The 256 characters row `row_id` holds: a torn or misplaced page cannot pass for it."""
    return hashlib.sha256(str(row_id).encode()).hexdigest() * 4


def open_sqlite(path: Path, synchronous="FULL") -> sqlite3.Connection:
    assert synchronous in ("FULL", "OFF"), f"synchronous={synchronous}: expected FULL or OFF"
    connection = sqlite3.connect(path, isolation_level=None, timeout=30)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute(f"PRAGMA synchronous={synchronous}")
    connection.execute("CREATE TABLE IF NOT EXISTS commits (id INTEGER PRIMARY KEY, payload TEXT NOT NULL)")
    return connection


def sqlite_commits(path: Path, count: int, out=sys.stdout, synchronous="FULL"):
    """Commits `count` transactions, each inserting the next row, and prints `commit ID` once
    its COMMIT has returned (SQLite has then synced the WAL, unless `synchronous` is OFF: the
    crash tests' control, whose commits a crash may take)."""
    with closing(open_sqlite(path, synchronous)) as connection:
        (last,) = connection.execute("SELECT coalesce(max(id), 0) FROM commits").fetchone()
        for row_id in range(last + 1, last + 1 + count):
            connection.execute("BEGIN")
            connection.execute("INSERT INTO commits (id, payload) VALUES (?, ?)", (row_id, row_payload(row_id)))
            connection.execute("COMMIT")
            print(f"commit {row_id}", file=out, flush=True)


def acknowledged(output: str) -> list[int]:
    """The commits a `sqlite-commits` run printed."""
    return [int(match) for match in re.findall(r"^commit (\d+)$", output, re.MULTILINE)]


def sqlite_rows(path: Path) -> list[int]:
    """The ids of the rows in the database at `path`."""
    with closing(sqlite3.connect(path, isolation_level=None, timeout=30)) as connection:
        return [row_id for (row_id,) in connection.execute("SELECT id FROM commits ORDER BY id")]


def against_acknowledged(found: int, acked: list[int], write: str, things: str) -> list[str]:
    """What is wrong with finding writes 1..`found` after a crash when `acked` were answered and
    each went one at a time: every acknowledged one must be there, and at most the one in flight
    after the last besides. Problems that lose writes start with "lost"."""
    last = max(acked, default=0)
    if found < last:
        return [f"lost acknowledged {write}s: {found} {things}, {write} {last} was acknowledged"]
    if found > last + 1:
        return [f"{found} {things}, but only {last} {write}s were acknowledged and one more was in flight"]
    return []


def check_sqlite(path: Path, acked: list[int]) -> list[str]:
    """What is wrong with the database at `path` after a crash, given the commits acknowledged
    before it: it must pass integrity_check, hold rows 1..N with their own payloads, and N must
    be the last acknowledged commit or the one in flight after it."""
    try:
        with closing(sqlite3.connect(path, isolation_level=None, timeout=30)) as connection:
            integrity = [row[0] for row in connection.execute("PRAGMA integrity_check")]
            rows = connection.execute("SELECT id, payload FROM commits ORDER BY id").fetchall()
    except sqlite3.Error as error:
        return [f"{path}: {error}"]
    problems = [] if integrity == ["ok"] else [f"integrity_check: {'; '.join(integrity[:5])}"]
    ids = [row_id for row_id, _ in rows]
    if ids != list(range(1, len(ids) + 1)):
        holes = sorted(set(range(1, (ids[-1] if ids else 0) + 1)) - set(ids))
        problems.append(f"rows are not 1..{len(ids)}: missing {holes[:10]}")
    wrong = [row_id for row_id, payload in rows if payload != row_payload(row_id)]
    if wrong:
        problems.append(f"{len(wrong)} rows hold another row's payload, first {wrong[:5]}")
    return problems + against_acknowledged(len(ids), acked, "commit", "rows")


def rocksdb_options():
    from rocksdict import Options

    options = Options(raw_mode=True)
    options.create_if_missing(True)
    # Small memtables, so that a run of a few thousand puts flushes SST files and compacts them:
    # a crash then meets the MANIFEST and SST files as well as the WAL.
    options.set_write_buffer_size(256 << 10)
    options.set_target_file_size_base(256 << 10)
    return options


def rocksdb_key(index: int) -> bytes:
    return b"key%08d" % index


def rocksdb_puts(path: Path, count: int, out=sys.stdout, sync=True):
    """Puts `count` keys, each with a synced write (WriteOptions.sync: the WAL is fsynced
    before the put returns; unless not `sync`, the crash tests' control), and prints
    `put INDEX` once each has returned."""
    from rocksdict import Rdict, WriteOptions

    db = Rdict(str(path), rocksdb_options())
    synced = WriteOptions()
    synced.sync = sync
    first = 1 + sum(1 for _ in db.keys())
    for index in range(first, first + count):
        db.put(rocksdb_key(index), row_payload(index).encode(), synced)
        print(f"put {index}", file=out, flush=True)
    db.close()


def acknowledged_puts(output: str) -> list[int]:
    """The puts a `rocksdb-puts` run printed."""
    return [int(match) for match in re.findall(r"^put (\d+)$", output, re.MULTILINE)]


def rocksdb_count(path: Path) -> int:
    """The number of keys in the database at `path`."""
    from rocksdict import Rdict

    db = Rdict(str(path), rocksdb_options())
    count = sum(1 for _ in db.keys())
    db.close()
    return count


def check_rocksdb(path: Path, acked: list[int]) -> list[str]:
    """What is wrong with the RocksDB database at `path` after a crash: it must open, hold keys
    1..N with their own values, and N must be the last acknowledged put or the one after it."""
    from rocksdict import Rdict

    try:
        db = Rdict(str(path), rocksdb_options())
        items = list(db.items())
        db.close()
    except Exception as error:  # rocksdict raises plain Exceptions for RocksDB's errors
        return [f"{path}: RocksDB did not open: {error}"]
    expected = [rocksdb_key(index) for index in range(1, len(items) + 1)]
    problems = []
    if [key for key, _ in items] != expected:
        problems.append(f"keys are not 1..{len(items)}: first keys {[key for key, _ in items][:5]}")
    wrong = [key for index, (key, value) in enumerate(items, 1) if value != row_payload(index).encode()]
    if wrong:
        problems.append(f"{len(wrong)} keys hold another value, first {wrong[:5]}")
    return problems + against_acknowledged(len(items), acked, "put", "keys")


def db_bench(path: Path, benchmarks: str, *flags: str) -> dict[str, float]:
    """Runs RocksDB's db_bench on a database folder; returns operations per second by
    benchmark, as db_bench reports them."""
    done = subprocess.run(
        ["db_bench", f"--db={path}", f"--benchmarks={benchmarks}", *flags],
        capture_output=True, text=True, timeout=COMMAND_SECONDS,
    )
    if done.returncode != 0:
        raise RuntimeError(f"db_bench {benchmarks} exited {done.returncode}: {(done.stdout + done.stderr)[-1500:]}")
    rates = {
        name: float(rate)
        for name, rate in re.findall(r"^(\w+)\s*:\s*[\d.]+ micros/op (\d+) ops/sec", done.stdout, re.MULTILINE)
    }
    missing = [name for name in benchmarks.split(",") if name not in rates]
    if missing:
        raise RuntimeError(f"db_bench printed no rate for {', '.join(missing)}: {done.stdout[-1500:]}")
    return rates


def postgres_bin() -> Path | None:
    """Debian's PostgreSQL programs (postgresql-NN), the newest installed."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda path: int(path.split("/")[4]))
    return Path(found[-1]).parent if found else None


class Postgres:
    """A PostgreSQL cluster in `data` (on the mounted file system), run as the `postgres`
    user, listening on a Unix socket in `sockets` only (no TCP), its log beside the socket (a
    folder the postgres user owns). Its processes are this object's: `crash()` kills the
    postmaster and every backend by id."""

    def __init__(self, data: Path, sockets: Path):
        self.bin = postgres_bin()
        assert self.bin is not None, "PostgreSQL is not installed (Debian: postgresql)"
        self.data, self.sockets, self.log = data, sockets, sockets / "postgres.log"
        self.postmaster: subprocess.Popen | None = None

    def argv(self, program: str, *args) -> list[str]:
        """`program` of PostgreSQL's with `args`, run as the postgres user."""
        return ["runuser", "-u", "postgres", "--", str(self.bin / program), *map(str, args)]

    def as_postgres(self, program: str, *args, check=True, timeout=COMMAND_SECONDS) -> subprocess.CompletedProcess:
        done = subprocess.run(self.argv(program, *args), capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            said = self.log.read_text(errors="replace")[-1500:] if self.log.exists() else ""
            raise RuntimeError(
                f"{program} {' '.join(map(str, args))} exited {done.returncode}: {done.stdout}{done.stderr}\n"
                f"PostgreSQL's log ends: {said}".strip()
            )
        return done

    def init(self):
        """initdb with data checksums, so that a torn or stale page is reported when read."""
        self.data.mkdir(mode=0o700)
        os.chown(self.data, *postgres_ids())
        self.as_postgres("initdb", "-D", self.data, "--data-checksums", "-A", "trust", "-U", "postgres")

    def start(self):
        """Starts the postmaster as this process's child (setpriv execs it as the postgres
        user), so that its id is ours to kill and to reap; waits until it takes connections."""
        assert self.postmaster is None, "PostgreSQL runs already"
        argv = [
            "setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups", "--",
            str(self.bin / "postgres"), "-D", str(self.data), "-c", "listen_addresses=", "-k", str(self.sockets),
            "-c", "fsync=on", "-c", "full_page_writes=on",
        ]
        with open(self.log, "ab") as log:
            self.postmaster = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + COMMAND_SECONDS
        while self.as_postgres("pg_isready", "-q", "-h", self.sockets, check=False).returncode != 0:
            if self.postmaster.poll() is not None or time.monotonic() > deadline:
                code = self.postmaster.poll()
                self.crash()
                raise RuntimeError(f"PostgreSQL did not start (exit {code}): {self.log.read_text(errors='replace')[-1500:]}")
            time.sleep(0.05)

    def stop(self):
        """A fast shutdown (SIGINT): waits for the postmaster's exit code, 0."""
        self.postmaster.send_signal(signal.SIGINT)
        code = self.postmaster.wait(timeout=COMMAND_SECONDS)
        self.postmaster = None
        if code != 0:
            raise RuntimeError(f"PostgreSQL's fast shutdown exited {code}: {self.log.read_text(errors='replace')[-1500:]}")

    def crash(self):
        """SIGKILL to the postmaster and all its children, then waits until every one is gone
        (their files on the mount are then closed)."""
        if self.postmaster is None:
            return
        victims = children(self.postmaster.pid)
        self.postmaster.kill()
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.postmaster.wait(timeout=30)
        deadline = time.monotonic() + 30
        while any(alive(pid) for pid in victims):
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL processes {victims} still alive 30 s after SIGKILL")
            time.sleep(0.05)
        self.postmaster = None

    def pgbench(self, *args, check=True, timeout=COMMAND_SECONDS) -> subprocess.CompletedProcess:
        return self.as_postgres("pgbench", "-h", self.sockets, "-U", "postgres", *args, check=check, timeout=timeout)

    def pgbench_popen(self, *args) -> subprocess.Popen:
        argv = self.argv("pgbench", "-h", self.sockets, "-U", "postgres", *args)
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def query(self, sql: str) -> str:
        return self.as_postgres("psql", "-h", self.sockets, "-U", "postgres", "-At", "-v", "ON_ERROR_STOP=1", "-c", sql).stdout.strip()

    def check_pgbench(self, processed: int) -> list[str]:
        """What is wrong with pgbench's tables after a crash, given the transactions pgbench
        counted as processed before it: every one left a history row, and the balances of
        accounts, tellers and branches each sum to the history's deltas (every transaction
        moved all four together or none of them). Then pg_amcheck reads every table and index."""
        problems = []
        history = int(self.query("SELECT count(*) FROM pgbench_history"))
        if history < processed:
            problems.append(f"lost acknowledged transactions: {history} history rows, pgbench counted {processed}")
        sums = self.query(
            "SELECT (SELECT coalesce(sum(delta), 0) FROM pgbench_history), (SELECT sum(abalance) FROM pgbench_accounts),"
            " (SELECT sum(tbalance) FROM pgbench_tellers), (SELECT sum(bbalance) FROM pgbench_branches)"
        ).split("|")
        if len(set(sums)) != 1:
            problems.append(f"balances disagree: history {sums[0]}, accounts {sums[1]}, tellers {sums[2]}, branches {sums[3]}")
        amcheck = self.as_postgres(
            "pg_amcheck", "-h", self.sockets, "-U", "postgres", "--install-missing", "--heapallindexed", "postgres", check=False
        )
        if amcheck.returncode != 0:
            problems.append(f"pg_amcheck exited {amcheck.returncode}: {(amcheck.stdout + amcheck.stderr).strip()[:500]}")
        return problems


def processed_transactions(output: str) -> int:
    """pgbench's count of transactions it saw commit, from its summary."""
    match = re.search(r"number of transactions actually processed: (\d+)", output)
    assert match, f"pgbench printed no count of processed transactions: {output[-2000:]}"
    return int(match.group(1))


def postgres_ids() -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam("postgres")
    return entry.pw_uid, entry.pw_gid


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    found = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.split("/")[2]))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def main(argv: list[str]) -> int:
    if len(argv) in (3, 4) and argv[0] == "sqlite-commits":
        try:
            sqlite_commits(Path(argv[1]), int(argv[2]), synchronous=(argv[3:] or ["FULL"])[0])
        except sqlite3.Error as error:
            print(f"error {error}", flush=True)
            return 1
        return 0
    if len(argv) in (3, 4) and argv[0] == "rocksdb-puts" and argv[3:] in ([], ["sync"], ["nosync"]):
        try:
            rocksdb_puts(Path(argv[1]), int(argv[2]), sync=argv[3:] != ["nosync"])
        except Exception as error:  # RocksDB's I/O errors, as rocksdict raises them
            print(f"error {error}", flush=True)
            return 1
        return 0
    print("usage: fs_workloads.py sqlite-commits DB COUNT [FULL|OFF] | rocksdb-puts DB COUNT [sync|nosync]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
