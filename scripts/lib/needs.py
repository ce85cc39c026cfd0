"""What the Python scripts need before they start. Each check that fails prints one line on
stderr naming what is missing and how to get it, and exits 1, before the script starts anything.
The scripts parse their arguments first, so that --help answers on any Python 3; this module
uses the standard library alone for the same reason."""

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO.parent / "shared" / "traces"
VENV = REPO / ".venv"
# Cargo's release build (CARGO_TARGET_DIR as cargo reads it, relative to the repository root).
RELEASE = REPO / os.environ.get("CARGO_TARGET_DIR", "target") / "release"
# The binary the scripts run: HETERARCHY_BIN (scripts/test names its `ci` build), else the release build.
BINARY = Path(os.environ.get("HETERARCHY_BIN") or RELEASE / "heterarchy")
REQUIREMENTS = "run scripts/test, or .venv/bin/pip install -r tests/python/requirements.txt"
PACKAGE = "run scripts/test, or .venv/bin/pip install ./python"


def fail(message: str):
    sys.exit(f"{Path(sys.argv[0]).name}: {message}")


class Parser(argparse.ArgumentParser):
    """argparse's parser, saying what is wrong with the arguments in one line."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see --help)\n")


def modules(*names: str, remedy: str = REQUIREMENTS):
    """Each top-level module importable by this Python (the shell line atop each script picks
    PYTHON, else .venv, else python3)."""
    missing = [name for name in names if importlib.util.find_spec(name) is None]
    if not missing:
        return
    listed = f"the Python module{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
    if os.environ.get("PYTHON"):
        fail(f"PYTHON={os.environ['PYTHON']} lacks {listed}: {remedy}")
    if not (VENV / "bin" / "python").exists():
        fail(f"needs {listed} from .venv, which is missing: run scripts/test, which creates it")
    if Path(sys.prefix).resolve() == VENV.resolve():
        fail(f".venv lacks {listed}: {remedy}")
    fail(f"{sys.executable} lacks {listed}: {remedy}")


def tools(*needed: tuple):
    """Each (command, Debian package) on PATH."""
    missing = [(command, package) for command, package in needed if shutil.which(command) is None]
    if missing:
        commands = " and ".join(command for command, _ in missing)
        packages = " ".join(dict.fromkeys(package for _, package in missing))
        fail(f"needs {commands} on PATH: apt-get install {packages} (scripts/test installs "
             f"{'them' if len(missing) > 1 else 'it'})")


def shared_memory() -> Path:
    """/dev/shm, for files that must live in DRAM (emulated PM that persists by cache-line
    flushes alone, with no msync)."""
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        fail("needs a writable /dev/shm (tmpfs) for its DRAM-backed files")
    return shm


def cargo() -> str:
    """cargo, from ~/.cargo/bin where a non-login shell's PATH lacks it (rustup installs it there)."""
    found = shutil.which("cargo") or shutil.which("cargo", path=str(Path.home() / ".cargo" / "bin"))
    if not found:
        fail("needs cargo: install Rust with rustup, or run scripts/test, which installs Debian's where none is")
    return found


def build(*args: str):
    """`cargo build --release ARGS` in the repository, cargo's output on the terminal."""
    described = " ".join(["cargo build --release", *args])
    print(f"{Path(sys.argv[0]).name}: {described}", file=sys.stderr, flush=True)
    if subprocess.run([cargo(), "build", "--release", "--quiet", *args], cwd=REPO).returncode != 0:
        fail(f"{described} failed (cargo's errors above)")


def heterarchy(given: Path | None = None, floor: bool = False) -> Path:
    """The heterarchy binary to run: `given` (--binary) or HETERARCHY_BIN as they are, else the
    release build, which cargo first brings up to date (a second when nothing changed), with
    heterarchy-floor beside it when `floor` (`cargo run --release` builds heterarchy alone).
    Call it after every other check: a build may take minutes."""
    named = "--binary" if given else "HETERARCHY_BIN" if os.environ.get("HETERARCHY_BIN") else None
    if named is None:
        build("-p", "heterarchy", *(["-p", "heterarchy-floor"] if floor else []))
    binary = given or BINARY
    if not binary.is_file():
        fail(f"{named or 'the build'}: {binary} is missing"
             + (": unset HETERARCHY_BIN to use the release build" if named == "HETERARCHY_BIN" else ""))
    return binary


def floor_server(binary: Path, given: Path | None = None) -> Path:
    """heterarchy-floor: `given` (--floor-binary), else the one beside `binary`."""
    floor = given or binary.with_name("heterarchy-floor")
    if not floor.is_file():
        fail(f"{floor} is missing: build heterarchy-floor in the profile of {binary} "
             "(cargo build --release -p heterarchy-floor), or pass --floor-binary")
    return floor
