"""The scripts in scripts/ (all but scripts/test, which runs this suite): each answers --help;
each names a missing prerequisite in one line on stderr and exits non-zero before it starts
anything; bad arguments get one line too; and crash-campaign accounts for a store that could not
run as not run, never as damage."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import BINARY, REPO

SCRIPTS = REPO / "scripts"
EXECUTABLES = sorted(path.name for path in SCRIPTS.iterdir()
                     if path.is_file() and os.access(path, os.X_OK) and path.name != "test")
# A check answers at once: well under this, even on a loaded 2-core machine.
CHECK_SECONDS = 30


def run_script(name: str, *args, env: dict, timeout=CHECK_SECONDS) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPTS / name), *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=REPO)


@pytest.fixture
def scratch_env(tmp_path) -> dict:
    """The environment with TMPDIR in tmp_path, empty, so that a test sees whatever a script
    left there, and no PYTHON but the test's own."""
    (tmp_path / "tmp").mkdir()
    env = {key: value for key, value in os.environ.items() if key != "PYTHON"}
    env["TMPDIR"] = str(tmp_path / "tmp")
    return env


def path_without(tool: str, folder: Path) -> str:
    """A PATH of one folder holding a link to every command on PATH but `tool`."""
    folder.mkdir()
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            target = folder / entry.name
            if entry.name != tool and not target.exists() and os.access(entry.path, os.X_OK) and not entry.is_dir():
                target.symlink_to(entry.path)
    return str(folder)


def bare_python(folder: Path) -> Path:
    """An interpreter with the standard library alone: this one without its site packages."""
    wrapper = folder / "python"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


@pytest.mark.parametrize("script", EXECUTABLES)
def test_every_script_answers_help_with_its_usage_and_starts_nothing(script, scratch_env, tmp_path):
    started = time.monotonic()
    done = run_script(script, "--help", env=scratch_env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.lower().startswith("usage:"), done.stdout
    assert len(done.stdout.splitlines()) > 2, "the usage line and what the script does"
    assert done.stderr == ""
    assert time.monotonic() - started < CHECK_SECONDS / 3
    assert not any((tmp_path / "tmp").iterdir())


# (script, arguments, how the prerequisite is hidden: ("path", TOOL) strips TOOL from PATH,
# ("python", None) runs the script on a Python without site packages, ("env", (NAME, VALUE))
# sets a variable), and what the one line must name.
MISSING = [
    ("bench-nbd", ["--only", "nbdkit"], ("path", "nbdkit"), "nbdkit"),
    ("bench-nbd", ["--only", "nhc"], ("path", "fio"), "apt-get install fio"),
    ("bench-floor", ["--only", "nbd"], ("path", "fio"), "fio"),
    ("bench-kv", [], ("path", "memcached"), "apt-get install memcached"),
    ("bench-block", [], ("path", "cc"), "cc"),
    ("fuzz", ["--target", "memcache_text"], ("path", "cargo-fuzz"), "cargo-fuzz"),
    ("bench-request-cost", [], ("path", "cargo"), "needs cargo"),
    ("soak-kv", ["--minutes", "1"], ("python", None), "pytest"),
    ("bench-nyx", ["--skip-overhead"], ("python", None), "pytest"),
    ("bench-sim", [], ("python", None), "libcachesim"),
    ("bench-timed", [], ("python", None), "libcachesim"),
    ("bench-python", [], ("python", None), "heterarchy"),
    ("replay-study", ["--quick"], ("python", None), "sklearn"),
    ("sample-replay", [], ("env", ("HETERARCHY_BIN", "/nonexistent/heterarchy")), "HETERARCHY_BIN"),
    ("soak-nbd", ["--binary", "/nonexistent/heterarchy"], ("env", ("HETERARCHY_BIN", "")), "--binary"),
    ("bench-fs", ["--quick"], ("path", "nbdkit"), "apt-get install nbdkit"),
    ("app-experiments", ["--quick"], ("path", "db_bench"), "apt-get install rocksdb-tools"),
]


@pytest.mark.parametrize("script, args, hidden, named", MISSING,
                         ids=[f"{case[0]}-{case[2][1] or 'bare-python'}" if case[2][0] != "env" else case[0]
                              for case in MISSING])
def test_a_missing_prerequisite_is_named_in_one_line_before_anything_starts(
        script, args, hidden, named, scratch_env, tmp_path):
    how, what = hidden
    if how == "path":
        scratch_env["PATH"] = path_without(what, tmp_path / "bin")
        if what == "cargo":
            # rustup's cargo in ~/.cargo/bin is found even off PATH.
            scratch_env["HOME"] = str(tmp_path)
    elif how == "python":
        scratch_env["PYTHON"] = str(bare_python(tmp_path))
    else:
        scratch_env[what[0]] = what[1]
    started = time.monotonic()
    done = run_script(script, *args, env=scratch_env)
    assert done.returncode != 0
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and named in lines[0], done.stderr
    assert lines[0].startswith(f"{script}: ") or lines[0].startswith(f"scripts/{script}: "), lines[0]
    assert done.stdout == ""
    assert time.monotonic() - started < CHECK_SECONDS / 3
    assert not any((tmp_path / "tmp").iterdir()), "nothing started, nothing written"


@pytest.mark.parametrize("script, args, named", [
    ("crash-campaign", ["--trials", "many"], "--trials"),
    ("crash-campaign", ["--store", "disk"], "--store disk"),
    ("fuzz", ["--runs", "x"], "--runs"),
    ("bench-nbd", ["--only", "nope"], "nope"),
    ("bench-kv", ["--repeats", "0"], "--repeats"),
    ("sample-replay", ["--rates", "tenth"], "--rates"),
    ("soak-kv", ["--minutes", "0"], "--minutes"),
    ("bench-fs", ["--rounds", "0"], "--rounds"),
    ("app-experiments", ["--repeats", "0"], "--repeats"),
])
def test_bad_arguments_are_named_in_one_line(script, args, named, scratch_env):
    done = run_script(script, *args, env=scratch_env)
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and named in lines[0], done.stderr


def campaign_profile() -> str:
    """The Cargo profile of the binary under test, whose harnesses scripts/test has built too."""
    return {"debug": "dev"}.get(BINARY.parent.name, BINARY.parent.name)


def test_crash_campaign_reports_a_store_that_could_not_run_and_counts_no_damage_for_it(scratch_env, tmp_path):
    scratch_env["PYTHON"] = str(bare_python(tmp_path))
    done = run_script("crash-campaign", "--store", "nbd-kill", "--kill-trials", "1", "--profile", campaign_profile(),
                      env=scratch_env)
    assert done.returncode == 1, done.stdout + done.stderr
    rows = done.stdout.splitlines()
    [row] = [line for line in rows if line.startswith("nbd-kill")]
    assert re.fullmatch(r"nbd-kill +not run: PYTHON=\S+ lacks pytest, pymemcache", row), row
    assert rows[-1] == (f"crash campaign: FAIL: 1 store not run (nbd-kill: PYTHON={scratch_env['PYTHON']} lacks "
                        "pytest, pymemcache), 0 trials, 0 crashes, 0 damaged"), rows[-1]
    assert "nbd-kill will not run" in done.stderr and "pip install" in done.stderr


def test_crash_campaign_passes_a_clean_run_of_the_cheapest_store(scratch_env, tmp_path):
    done = run_script("crash-campaign", "--store", "btt", "--trials", "2", "--profile", campaign_profile(),
                      env=scratch_env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = done.stdout.splitlines()
    assert rows[0].split()[:3] == ["store", "trials", "crashes"]
    assert rows[1].split()[:2] == ["btt", "2"] and "not run" not in done.stdout
    assert re.fullmatch(r"crash campaign: PASS: 2 trials, \d+ crashes, 0 damaged", rows[-1]), rows[-1]
    assert not any((tmp_path / "tmp").iterdir()), "a passing campaign keeps no logs"
