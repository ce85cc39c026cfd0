"""Kernel file systems and databases on every kind of live volume (docs/file-systems.md): ext4
(and xfs) through nbdfuse and a loop device over `heterarchy serve nbd`, carrying SQLite in WAL
mode with synchronous=FULL, PostgreSQL under pgbench, RocksDB's db_bench and fio on files; then
the server killed with SIGKILL under SQLite and under pgbench, restarted, the journal replayed,
the file system checked clean and every acknowledged commit found.

Needs root, /dev/fuse, /dev/loop-control and the Debian packages scripts/test installs; skips,
naming what is missing, where they are absent. Every server, nbdfuse, PostgreSQL process, mount
and loop device a test starts is ended or taken down by the test, by id."""

import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from fs_support import XFS_MIN_BYTES, FileSystem, missing
from fs_workloads import (
    Postgres,
    acknowledged,
    acknowledged_puts,
    check_rocksdb,
    check_sqlite,
    db_bench,
    postgres_bin,
    postgres_ids,
    processed_transactions,
    rocksdb_count,
    sqlite_commits,
    sqlite_rows,
)
from helpers import free_port
from nbd_support import EXPORT, volume_stats

VOLUME_BYTES = 384 << 20
HERE = Path(__file__).resolve().parent

# Every kind of export a file system goes on: `serve nbd` flags, with {disk} a folder on the
# test's disk and {shm} one in /dev/shm (tmpfs, where emulated PM persists by cache-line flushes).
EXPORTS = {
    "ram-wb": ["--backing", "file:{disk}/backing.img:{size}", "--cache", "ram:64m", "--mode", "wb"],
    "ram-wt": ["--backing", "file:{disk}/backing.img:{size}", "--cache", "ram:64m", "--mode", "wt"],
    "pmem-wb": ["--backing", "file:{disk}/backing.img:{size}", "--cache", "pmem:{shm}/c0.pm:64m", "--mode", "wb"],
    "ram-pmem-nhc-wb": [
        "--backing", "file:{disk}/backing.img:{size}", "--cache", "ram:16m", "--cache", "pmem:{shm}/c1.pm:64m",
        "--mode", "wb", "--nhc",
    ],
    "ram-pmem-file-wb": [
        "--backing", "file:{disk}/backing.img:{size}", "--cache", "ram:8m", "--cache", "pmem:{shm}/c1.pm:32m",
        "--cache", "file:{disk}/c2.img:96m", "--mode", "wb",
    ],
    "btt": ["--backing", "btt:{shm}/pm.btt:{size}", "--staging", "none"],
    "btt-caiti": ["--backing", "btt:{shm}/pm.btt:{size}", "--staging", "caiti", "--staging-size", "32m"],
    "btt-pmbd": ["--backing", "btt:{shm}/pm.btt:{size}", "--staging", "pmbd", "--staging-size", "32m"],
    "btt-pmbd70": ["--backing", "btt:{shm}/pm.btt:{size}", "--staging", "pmbd70", "--staging-size", "32m"],
    "btt-lru": ["--backing", "btt:{shm}/pm.btt:{size}", "--staging", "lru", "--staging-size", "32m"],
    "btt-coactive": ["--backing", "btt:{shm}/pm.btt:{size}", "--staging", "coactive", "--staging-size", "32m"],
    "poly": ["--backing", "file:{disk}/backing.img:{size}", "--cache", "pmem:{shm}/poly.pm:64m", "--poly"],
}
# The kinds a kill -9 under a file system is tried on in the suite: a volatile write-back
# cache, persistent tiers under NHC, Caiti over the BTT, PolyEMT.
KILL_EXPORTS = ["ram-wb", "ram-pmem-nhc-wb", "btt-caiti", "poly"]


def skip_unless_ready(kind="ext4"):
    if why := missing(kind):
        pytest.skip(why)


@pytest.fixture
def export(serve, tmp_path):
    """`export(name)` serves EXPORTS[name] on a Unix socket and returns a function that starts
    it (again, after a kill: the same files); the /dev/shm folder goes at teardown."""
    shm = Path(tempfile.mkdtemp(prefix="heterarchy-fs-", dir="/dev/shm"))
    socket = tmp_path / "nbd.sock"

    def make(name: str, size=VOLUME_BYTES):
        args = [arg.format(disk=tmp_path, shm=shm, size=size) for arg in EXPORTS[name]]

        def start():
            return serve("nbd", "--listen", f"unix:{socket}", "--export", EXPORT, *args, nbd=socket)

        return start

    yield make
    shutil.rmtree(shm, ignore_errors=True)


@pytest.fixture
def file_systems():
    """`file_systems(server, kind)`: a FileSystem over the server's export in a folder of its
    own under /tmp (mode 0755, so that the postgres user reaches the mount); every one is taken
    down and its folder removed at teardown, and no loop device may be left on its image."""
    made = []

    def make(server, kind="ext4") -> FileSystem:
        workdir = Path(tempfile.mkdtemp(prefix="heterarchy-fs-"))
        workdir.chmod(0o755)
        made.append(FileSystem(server.uri(), workdir, kind))
        return made[-1]

    yield make
    errors = []
    for fs in made:
        try:
            fs.close()
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            errors.append(str(error))
        left = subprocess.run(["losetup", "-j", str(fs.image)], capture_output=True, text=True).stdout.strip()
        if left:
            errors.append(f"a loop device is left on {fs.image}: {left}")
        shutil.rmtree(fs.fuse_dir.parent, ignore_errors=True)
    assert not errors, "; ".join(errors)


def mounted(file_systems, server, kind="ext4") -> FileSystem:
    fs = file_systems(server, kind)
    fs.attach()
    fs.make()
    fs.mount()
    return fs


class KillTally:
    """What a file-system kill test's trials found, and its crash campaign line: lost
    acknowledged writes, the checker's findings and other damage, trial by trial."""

    def __init__(self, store: str, seed: int):
        self.store, self.seed, self.started = store, seed, time.monotonic()
        self.trials = self.lost = self.fsck_errors = self.other = 0
        self.failed: dict[int, str] = {}

    @staticmethod
    def start(store: str, default_trials: int) -> tuple[int, random.Random, "KillTally"]:
        """The trials to run (`HETERARCHY_FS_KILL_TRIALS`), the kill points' random source
        (`HETERARCHY_CRASH_SEED`, which `scripts/crash-campaign --store fs-kill` sets) and the
        tally of `store`."""
        trials = int(os.environ.get("HETERARCHY_FS_KILL_TRIALS", default_trials))
        seed = int(os.environ.get("HETERARCHY_CRASH_SEED", 7))
        return trials, random.Random(seed), KillTally(store, seed)

    def record(self, checker: list[str], application: list[str]):
        """One trial: what the file system's checker and the application's check said."""
        lost = sum(1 for problem in application if problem.startswith("lost"))
        self.lost += lost
        self.other += len(application) - lost
        self.fsck_errors += len(checker)
        if checker or application:
            self.failed[self.trials] = "; ".join(checker + application)
        self.trials += 1

    def report(self):
        """Prints the crash campaign's line and fails the test on any damage."""
        print(
            f"\ncrash campaign: store={self.store} trials={self.trials} crashes={self.trials} lost_flushed={self.lost} "
            f"torn=0 phantom=0 other={self.other + self.fsck_errors} fsck_errors={self.fsck_errors} "
            f"failed_seeds={','.join(f'{self.seed}:{trial}' for trial in self.failed) or '-'} "
            f"seconds={time.monotonic() - self.started:.1f}"
        )
        assert not self.failed, "\n".join(f"seed {self.seed} trial {trial}: {why}" for trial, why in self.failed.items())


def remount_and_check(fs: FileSystem) -> list[str]:
    """After a restart: mount (the journal is replayed), unmount, the checker read-only must
    find nothing, then mount again for the application's check."""
    fs.attach()
    fs.mount()
    fs.unmount()
    checked = fs.check()
    fs.mount()
    if checked.returncode != 0:
        return [f"{fs.kind} checker exited {checked.returncode}: {(checked.stdout + checked.stderr).strip()[-1500:]}"]
    return []


@pytest.mark.parametrize("name", list(EXPORTS))
def test_sqlite_commits_on_ext4_over_every_export(export, file_systems, tmp_path, name):
    """SQLite, WAL and synchronous=FULL, commits on ext4 over each kind of export; after a clean
    unmount, the checker finds the file system clean and the database whole."""
    skip_unless_ready()
    server = export(name)()
    fs = mounted(file_systems, server)
    database = fs.root / "commits.db"
    with open(tmp_path / "commits.out", "w") as out:
        sqlite_commits(database, 300, out)
    acked = acknowledged((tmp_path / "commits.out").read_text())
    assert acked == list(range(1, 301))
    fs.unmount()
    checked = fs.check()
    assert checked.returncode == 0, checked.stdout + checked.stderr
    fs.mount()
    assert check_sqlite(database, acked) == []


def test_xfs_carries_sqlite_over_a_write_back_cache(export, file_systems, tmp_path):
    """xfs, the other journaling file system users put on a block cache, over RAM in wb."""
    skip_unless_ready("xfs")
    server = export("ram-wb", size=max(VOLUME_BYTES, XFS_MIN_BYTES))()
    fs = mounted(file_systems, server, "xfs")
    database = fs.root / "commits.db"
    with open(tmp_path / "commits.out", "w") as out:
        sqlite_commits(database, 200, out)
    fs.unmount()
    checked = fs.check()
    assert checked.returncode == 0, checked.stdout + checked.stderr
    fs.mount()
    assert check_sqlite(database, list(range(1, 201))) == []


def acked_until_killed(server, workload: list[str], parse, kill_after: int, log: Path) -> list[int]:
    """Runs a workload of fs_workloads.py on the mounted file system, kills the server with
    SIGKILL once `kill_after` of its writes are acknowledged (`parse` finds them in its output)
    and returns the acknowledged writes."""
    with open(log, "w") as out:
        writer = subprocess.Popen([sys.executable, str(HERE / "fs_workloads.py"), *workload], stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    try:
        while len(parse(log.read_text())) < kill_after:
            assert writer.poll() is None, f"{workload[0]} exited {writer.returncode}: {log.read_text()[-500:]}"
            assert time.monotonic() < deadline, f"{kill_after} acknowledged writes took over 120 s"
            time.sleep(0.002)
        server.kill()
        writer.wait(timeout=60)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait(timeout=10)
    return parse(log.read_text())


def commits_until_killed(server, fs: FileSystem, kill_after: int, log: Path, synchronous="FULL") -> list[int]:
    """sqlite-commits until the kill; the file system is taken down after."""
    workload = ["sqlite-commits", str(fs.root / "commits.db"), "1000000", synchronous]
    acked = acked_until_killed(server, workload, acknowledged, kill_after, log)
    fs.detach()
    return acked


@pytest.mark.parametrize("name", KILL_EXPORTS)
def test_sigkill_under_sqlite_loses_no_commit(export, file_systems, tmp_path, name):
    """The server killed with SIGKILL in the middle of a commit stream, several times: after
    each restart the journal replays, e2fsck -fn finds nothing, integrity_check passes and every
    acknowledged commit is there (`HETERARCHY_FS_KILL_TRIALS`, and `HETERARCHY_CRASH_SEED` for
    the kill points, which `scripts/crash-campaign --store fs-kill` sets). Prints the crash
    campaign's line."""
    skip_unless_ready()
    trials, rng, tally = KillTally.start(f"fs-kill-sqlite-{name}", default_trials=2)
    start = export(name)
    server = start()
    fs = mounted(file_systems, server)
    acked = []
    for trial in range(trials):
        acked += commits_until_killed(server, fs, rng.randint(5, 150), tmp_path / f"commits-{trial}.out")
        server = start()
        problems = remount_and_check(fs)
        database = fs.root / "commits.db"
        found = check_sqlite(database, acked)
        tally.record(problems, found)
        # The next trial goes on from what survived.
        acked = list(range(1, len(sqlite_rows(database)) + 1))
    tally.report()


@pytest.mark.parametrize("application", ["sqlite", "rocksdb"])
def test_the_crash_checks_find_writes_never_synced(export, file_systems, tmp_path, application):
    """The controls: with synchronous=OFF SQLite, and RocksDB with unsynced puts, answer before
    anything reaches the volume, so a kill -9 of the server takes acknowledged writes, and the
    crash tests' checks say so."""
    skip_unless_ready()
    if application == "rocksdb":
        pytest.importorskip("rocksdict", reason="rocksdict is not installed (tests/python/requirements.txt)")
    start = export("ram-wb")
    server = start()
    fs = mounted(file_systems, server)
    if application == "sqlite":
        workload, parse, check = ["sqlite-commits", str(fs.root / "commits.db"), "1000000", "OFF"], acknowledged, check_sqlite
        path = fs.root / "commits.db"
    else:
        workload, parse, check = ["rocksdb-puts", str(fs.root / "rocks"), "1000000", "nosync"], acknowledged_puts, check_rocksdb
        path = fs.root / "rocks"
    acked = acked_until_killed(server, workload, parse, 200, tmp_path / "writes.out")
    fs.detach()
    start()
    remount_and_check(fs)
    problems = check(path, acked)
    assert any("lost acknowledged" in problem or "did not open" in problem or "no such table" in problem for problem in problems), problems


@pytest.fixture
def postgres_on():
    """`postgres_on(fs)`: a PostgreSQL cluster made on the mounted file system (its socket in a
    folder of its own under /tmp); crashed by id at teardown if still running."""
    if postgres_bin() is None:
        pytest.skip("PostgreSQL is not installed (Debian: postgresql)")
    clusters, folders = [], []

    def make(fs: FileSystem) -> Postgres:
        sockets = Path(tempfile.mkdtemp(prefix="heterarchy-pg-"))
        os.chown(sockets, *postgres_ids())
        folders.append(sockets)
        clusters.append(Postgres(fs.root / "pg", sockets))
        return clusters[-1]

    yield make
    for cluster in clusters:
        cluster.crash()
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("name", list(EXPORTS))
def test_pgbench_on_ext4_keeps_its_tables_consistent(export, file_systems, postgres_on, name):
    """PostgreSQL (data checksums, fsync on) on ext4 over the export: pgbench's load, then a
    clean stop and start; every transaction pgbench counted left its history row, the balances
    agree and pg_amcheck reads every table and index."""
    skip_unless_ready()
    fs = mounted(file_systems, export(name)())
    postgres = postgres_on(fs)
    postgres.init()
    postgres.start()
    postgres.pgbench("-i", "-s", "2", "-q")
    run = postgres.pgbench("-n", "-c", "2", "-j", "2", "-t", "250")
    processed = processed_transactions(run.stdout)
    assert processed == 500, run.stdout
    postgres.stop()
    postgres.start()
    assert postgres.check_pgbench(processed) == []
    postgres.stop()


def pgbench_until_killed(server, postgres: Postgres, seconds: float) -> int:
    """Runs pgbench, kills the server with SIGKILL after `seconds`, then PostgreSQL (as the
    machine's crash would); returns the transactions pgbench counted as processed."""
    bench = postgres.pgbench_popen("-n", "-c", "2", "-j", "2", "-T", "120")
    try:
        time.sleep(seconds)
        assert bench.poll() is None, f"pgbench exited {bench.returncode} before the kill: {bench.stdout.read()}"
        server.kill()
        output, _ = bench.communicate(timeout=120)
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait(timeout=10)
    postgres.crash()
    processed = processed_transactions(output)
    assert processed > 0, f"pgbench committed nothing in {seconds:.1f} s before the kill: {output[-1000:]}"
    return processed


@pytest.mark.parametrize("name", ["ram-wb", "btt-caiti"])
def test_sigkill_under_pgbench_loses_no_transaction(export, file_systems, postgres_on, name):
    """The server killed with SIGKILL under pgbench, then PostgreSQL: after the restart the
    journal replays, e2fsck -fn finds nothing, PostgreSQL recovers, every transaction pgbench
    counted is there, the balances agree and pg_amcheck passes (`HETERARCHY_FS_KILL_TRIALS`
    trials; `HETERARCHY_CRASH_SEED` seeds the kill times). Prints the crash campaign's line."""
    skip_unless_ready()
    trials, rng, tally = KillTally.start(f"fs-kill-pgbench-{name}", default_trials=1)
    start = export(name)
    server = start()
    fs = mounted(file_systems, server)
    postgres = postgres_on(fs)
    postgres.init()
    postgres.start()
    postgres.pgbench("-i", "-s", "2", "-q")
    processed = 0
    for trial in range(trials):
        processed += pgbench_until_killed(server, postgres, rng.uniform(0.5, 3.0))
        fs.detach()
        server = start()
        problems = remount_and_check(fs)
        postgres.start()
        found = postgres.check_pgbench(processed)
        tally.record(problems, found)
        # The next trial counts from what survived.
        processed = int(postgres.query("SELECT count(*) FROM pgbench_history"))
    postgres.stop()
    tally.report()


@pytest.mark.parametrize("name", list(EXPORTS))
def test_db_bench_on_ext4(export, file_systems, name):
    """RocksDB's db_bench on ext4 over the export: fillrandom with synced writes, overwrite,
    readrandom and readwhilewriting, each reporting a rate; then the database reopens for a
    readseq over every key and, unmounted, the file system checks clean."""
    skip_unless_ready()
    if shutil.which("db_bench") is None:
        pytest.skip("db_bench not found (Debian: rocksdb-tools)")
    fs = mounted(file_systems, export(name)())
    db = fs.root / "rocks"
    common = ["--value_size=400", "--compression_type=none", "--write_buffer_size=1048576", "--threads=1"]
    rates = db_bench(db, "fillrandom", "--num=1000", "--sync=1", *common)
    rates |= db_bench(
        db, "overwrite,readrandom,readwhilewriting", "--use_existing_db=1", "--num=20000", "--reads=10000", *common
    )
    assert all(rate > 0 for rate in rates.values()), rates
    db_bench(db, "readseq", "--use_existing_db=1", "--num=20000", *common)
    fs.unmount()
    checked = fs.check()
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("name", ["ram-wb", "btt-caiti"])
def test_sigkill_under_rocksdb_loses_no_synced_put(export, file_systems, tmp_path, name):
    """The server killed with SIGKILL under synced RocksDB puts (memtables small enough that
    SST files are flushed and compacted as they go): after each restart the journal replays,
    e2fsck -fn finds nothing, RocksDB reopens and every acknowledged put is there
    (`HETERARCHY_FS_KILL_TRIALS`, `HETERARCHY_CRASH_SEED`). Prints the crash campaign's line."""
    skip_unless_ready()
    pytest.importorskip("rocksdict", reason="rocksdict is not installed (tests/python/requirements.txt)")
    trials, rng, tally = KillTally.start(f"fs-kill-rocksdb-{name}", default_trials=2)
    start = export(name)
    server = start()
    fs = mounted(file_systems, server)
    db = fs.root / "rocks"
    acked = []
    for trial in range(trials):
        workload = ["rocksdb-puts", str(db), "1000000"]
        acked += acked_until_killed(server, workload, acknowledged_puts, rng.randint(5, 400), tmp_path / f"puts-{trial}.out")
        fs.detach()
        server = start()
        problems = remount_and_check(fs)
        found = check_rocksdb(db, acked)
        tally.record(problems, found)
        acked = list(range(1, rocksdb_count(db) + 1))
    tally.report()


@pytest.mark.parametrize("name", list(EXPORTS))
def test_fio_on_files_reads_back_what_it_wrote(export, file_systems, tmp_path, name):
    """fio on four files of a mounted ext4: random 4 KiB writes with an fsync every 32, each
    block checksummed (crc32c) and read back and checked once written, then again after the
    file system was unmounted, checked and mounted afresh (its page cache gone)."""
    skip_unless_ready()
    if shutil.which("fio") is None:
        pytest.skip("fio not found (Debian: fio)")
    fs = mounted(file_systems, export(name)())
    job = [
        "fio", "--name=files", f"--directory={fs.root}", "--nrfiles=4", "--size=32m", "--bs=4k", "--ioengine=psync",
        "--verify=crc32c", "--verify_fatal=1", "--verify_state_save=0", "--output-format=json",
    ]
    written = subprocess.run([*job, "--rw=randwrite", "--fsync=32", "--do_verify=1"], capture_output=True, text=True, timeout=300)
    assert written.returncode == 0, written.stdout + written.stderr
    fs.unmount()
    checked = fs.check()
    assert checked.returncode == 0, checked.stdout + checked.stderr
    fs.mount()
    verified = subprocess.run([*job, "--rw=randwrite", "--verify_only"], capture_output=True, text=True, timeout=300)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    [result] = json.loads(verified.stdout[verified.stdout.index("{"):])["jobs"]
    assert result["error"] == 0 and result["read"]["io_bytes"] == 32 << 20, result


def test_a_failing_cache_goes_pass_through_under_a_mounted_file_system(serve, file_systems, tmp_path):
    """The cache device's writes and flushes start failing under ext4 and SQLite: every write
    the cache fails goes around it to the backing store, a FLUSH the cache cannot carry gives
    it up after writing back what it holds, and the file system stays mounted and writing: no
    commit fails, none is lost, and the volume reports pass-through."""
    skip_unless_ready()
    trigger, socket, metrics = tmp_path / "inject", tmp_path / "nbd.sock", free_port()
    server = serve(
        "nbd", "--listen", f"unix:{socket}", "--export", EXPORT, "--backing", f"file:{tmp_path}/backing.img:{VOLUME_BYTES}",
        "--cache", f"pmem:{tmp_path}/cache.pm:64m", "--mode", "wb", "--cache-faults",
        f"write-error=1,flush-error=1,file={trigger}", "--metrics", f"127.0.0.1:{metrics}", nbd=socket, metrics=metrics,
    )
    fs = mounted(file_systems, server)
    database = fs.root / "commits.db"
    with open(tmp_path / "commits.out", "w") as out:
        sqlite_commits(database, 100, out)
        assert volume_stats(server)["dirty_lines"] > 0
        trigger.touch()
        sqlite_commits(database, 300, out)
    stats = volume_stats(server)
    assert stats["state"].startswith("pass-through: "), stats["state"]
    assert stats["went_around"] > 0 and stats["devices"][0]["errors"] > 0, stats
    fs.unmount()
    checked = fs.check()
    assert checked.returncode == 0, checked.stdout + checked.stderr
    fs.mount()
    assert check_sqlite(database, list(range(1, 401))) == []


def test_a_backing_store_error_reaches_sqlite_and_loses_nothing_acknowledged(serve, file_systems, tmp_path):
    """The backing store's writes start failing under a write-through cache: SQLite's next
    commit fails with an I/O error rather than being acknowledged, and once the store heals,
    every commit acknowledged before is there."""
    skip_unless_ready()
    trigger, socket = tmp_path / "inject", tmp_path / "nbd.sock"
    server = serve(
        "nbd", "--listen", f"unix:{socket}", "--export", EXPORT, "--backing", f"file:{tmp_path}/backing.img:{VOLUME_BYTES}",
        "--cache", "ram:64m", "--mode", "wt", "--backing-faults", f"write-error=1,flush-error=1,file={trigger}", nbd=socket,
    )
    fs = mounted(file_systems, server)
    database = fs.root / "commits.db"
    with open(tmp_path / "commits.out", "w") as out:
        sqlite_commits(database, 100, out)
        trigger.touch()
        with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
            sqlite_commits(database, 100, out)
    acked = acknowledged((tmp_path / "commits.out").read_text())
    assert acked == list(range(1, 101)), acked[-5:]
    trigger.unlink()
    fs.detach()
    fs.attach()
    fs.mount()
    assert check_sqlite(database, acked) == []
