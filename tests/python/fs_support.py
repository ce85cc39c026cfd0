"""A kernel file system over one of heterarchy's NBD exports, for the tests and scripts: the
export as a file (nbdfuse, from libnbd-bin), that file as a block device (a loop device), and
ext4 or xfs made and mounted on it, as docs/file-systems.md tells a user to do. Every piece is
taken down in reverse on every path, with bounded waits: the mount, the loop device, the FUSE
mount and the nbdfuse process this module started, by its id."""

import os
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

# A command may wait this long; a mount over a server that was killed answers at once with EIO,
# so only a stuck kernel would reach it.
COMMAND_SECONDS = 120
READY_SECONDS = 10

# What each kind of file system needs: its mkfs, its checker, and the checker's read-only flags.
KINDS = {
    "ext4": {"mkfs": ["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"], "check": ["e2fsck", "-f", "-n"]},
    "xfs": {"mkfs": ["mkfs.xfs", "-q", "-f"], "check": ["xfs_repair", "-n"]},
}
# The smallest volume mkfs.xfs accepts (xfsprogs 5.19 and later).
XFS_MIN_BYTES = 300 << 20
TOOLS = ("nbdfuse", "fusermount3", "losetup", "mount", "umount")


def missing(kind: str = "ext4") -> str | None:
    """What keeps a file system of `kind` from being mounted over an export here, or None."""
    if os.geteuid() != 0:
        return "not root: mounting a file system and attaching a loop device need root"
    for device in ("/dev/fuse", "/dev/loop-control"):
        if not Path(device).exists():
            return f"{device} is missing (FUSE and loop devices are needed)"
    tools = [*TOOLS, KINDS[kind]["mkfs"][0], KINDS[kind]["check"][0]]
    absent = [tool for tool in tools if shutil.which(tool) is None]
    if absent:
        return f"{', '.join(absent)} not found (Debian: libnbd-bin fuse3 mount e2fsprogs xfsprogs)"
    return None


def command(*args, timeout=COMMAND_SECONDS, check=True) -> subprocess.CompletedProcess:
    """Runs one command; raises with its output unless it exits 0 (when `check`)."""
    done = subprocess.run(list(map(str, args)), capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))} exited {done.returncode}: {done.stdout}{done.stderr}".strip())
    return done


class FileSystem:
    """A file system over the export at `uri`, its pieces in `workdir`: `attach()` exposes the
    export as a loop device, `make()` formats it, `mount()` mounts it at `self.root`, `check()`
    runs the file system's checker read-only, and `close()` takes down whatever is up, in
    reverse. `detach()` after a server was killed takes the pieces down all the same, so that
    the next `attach()` sees the restarted server."""

    def __init__(self, uri: str, workdir: Path, kind: str = "ext4"):
        assert kind in KINDS, f"file system {kind}: expected one of {', '.join(KINDS)}"
        self.uri, self.kind = uri, kind
        self.fuse_dir, self.root = workdir / "fuse", workdir / "mnt"
        self.fuse_dir.mkdir(parents=True, exist_ok=True)
        self.root.mkdir(parents=True, exist_ok=True)
        self.log = workdir / "nbdfuse.log"
        self.nbdfuse: subprocess.Popen | None = None
        self.loop: str | None = None
        self.mounted = False

    @property
    def image(self) -> Path:
        return self.fuse_dir / "disk"

    def attach(self):
        """nbdfuse serves the export as `fuse/disk`; a loop device (direct I/O, so no second
        page cache) makes a block device of it."""
        assert self.nbdfuse is None and self.loop is None, "attached already"
        pidfile = self.fuse_dir.parent / "nbdfuse.pid"
        pidfile.unlink(missing_ok=True)
        with open(self.log, "ab") as output:
            self.nbdfuse = subprocess.Popen(
                ["nbdfuse", "-P", str(pidfile), str(self.image), self.uri], stdout=output, stderr=subprocess.STDOUT
            )
        # nbdfuse writes its pid file once the FUSE mount is up.
        deadline = time.monotonic() + READY_SECONDS
        while not pidfile.exists():
            if self.nbdfuse.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"nbdfuse {self.uri} did not mount in {READY_SECONDS} s: {self.log.read_text().strip()}")
            time.sleep(0.02)
        self.loop = command("losetup", "--find", "--show", "--direct-io=on", self.image).stdout.strip()

    def make(self):
        """Formats the attached device."""
        command(*KINDS[self.kind]["mkfs"], self.loop)

    def mount(self, *options: str):
        """Mounts the attached device at `self.root` (a journal left by a crash is replayed)."""
        args = ["-o", ",".join(options)] if options else []
        command("mount", "-t", self.kind, *args, self.loop, self.root)
        self.mounted = True

    def unmount(self):
        if self.mounted:
            command("umount", self.root)
            self.mounted = False

    def check(self) -> subprocess.CompletedProcess:
        """The checker, read-only, on the attached device (unmounted): exit code 0 is clean."""
        assert not self.mounted, "check the file system unmounted"
        return command(*KINDS[self.kind]["check"], self.loop, check=False)

    def detach(self):
        """Unmounts and takes down the loop device, the FUSE mount and nbdfuse, in that order;
        each step is tried even if one before it failed, and the first failure is raised."""
        failures = []
        for step in (self.unmount, self._detach_loop, self._stop_nbdfuse):
            try:
                step()
            except (RuntimeError, subprocess.TimeoutExpired) as error:
                failures.append(error)
        if failures:
            raise failures[0]

    def close(self):
        """`detach()` for a test's end: a mount still busy is detached lazily (it goes once its
        last file closes), so nothing stays mounted; the failure is raised all the same."""
        try:
            self.detach()
        except (RuntimeError, subprocess.TimeoutExpired):
            if self.mounted:
                command("umount", "-l", self.root, check=False)
                self.mounted = False
                self.detach()
            raise

    def _detach_loop(self):
        if self.loop is not None:
            command("losetup", "-d", self.loop)
            self.loop = None

    def _stop_nbdfuse(self):
        if self.nbdfuse is None:
            return
        if self.nbdfuse.poll() is None:
            command("fusermount3", "-u", self.fuse_dir, check=False)
            try:
                self.nbdfuse.wait(timeout=READY_SECONDS)
            except subprocess.TimeoutExpired:
                self.nbdfuse.kill()
                self.nbdfuse.wait(timeout=READY_SECONDS)
        else:
            # nbdfuse exits when its server goes; its FUSE mount may stay behind.
            command("fusermount3", "-u", "-z", self.fuse_dir, check=False)
        self.nbdfuse = None
        leftover = [line for line in Path("/proc/mounts").read_text().splitlines() if f" {self.fuse_dir} " in line]
        if leftover:
            raise RuntimeError(f"the FUSE mount {self.fuse_dir} is still there: {leftover[0]}")


@contextmanager
def made_and_mounted(uri: str, workdir: Path, kind: str = "ext4"):
    """A fresh file system of `kind` over the export at `uri`, made and mounted; taken down
    however the block ends (the benchmark scripts' way; the tests' fixture does it too)."""
    fs = FileSystem(uri, workdir, kind)
    try:
        fs.attach()
        fs.make()
        fs.mount()
        yield fs
    finally:
        fs.close()
