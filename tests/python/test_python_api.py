"""The Python package `heterarchy` (docs/python.md): each function returns what its command
prints with `--format json`, field for field; traces read as an iterator; errors are
`HeterarchyError` with the command line's one-line message, and wrong keyword arguments or types
are `TypeError`; every function's keyword arguments are its command's flags; long calls release
the GIL and stop at Ctrl-C."""

import inspect
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
import threading
import time

import pandas as pd
import pytest

from helpers import SMALL_HIERARCHY, run, run_json

heterarchy_py = pytest.importorskip("heterarchy", reason="the Python package is not installed: pip install ./python (scripts/test does)")

WORKLOAD = "uniform:keys=8000,requests=20000,size=4k,kind=block,seed=1"


@pytest.fixture(scope="module")
def trace(zipf_trace):
    return zipf_trace(0.9, keys=5_000, requests=50_000)


@pytest.fixture(scope="module")
def block_trace(heterarchy, tmp_path_factory):
    path = tmp_path_factory.mktemp("api") / "block.csv"
    run(heterarchy, "trace", "generate", "block-io:requests=40000,write=0.3,seed=5", "-o", path)
    return path


def records(frame: pd.DataFrame) -> list:
    """A frame's rows as the command's JSON rows (NaN-free, native types)."""
    return [{k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()} for row in frame.to_dict("records")]


def test_sim_equals_the_cli_field_for_field(heterarchy, trace):
    frame = heterarchy_py.sim(trace, ["lru", {"name": "s3fifo", "small_size_ratio": 0.2}, "lru-k:k=2"], ["0.01", "0.1", "256kb"])
    cli = run_json(heterarchy, "sim", trace, "--policy", "lru,s3fifo:small-size-ratio=0.2,lru-k:k=2", "--size", "0.01,0.1,256kb")
    assert list(frame.columns) == list(cli[0])
    assert records(frame) == cli
    assert len(frame) == 9


@pytest.mark.parametrize("options,flags", [
    ({}, []),
    ({"method": "shards", "rate": 0.1}, ["--method", "shards", "--rate", "0.1"]),
    ({"policy": "s3fifo", "points": 6}, ["--policy", "s3fifo", "--points", "6"]),
    ({"ignore_obj_size": True}, ["--ignore-obj-size"]),
])
def test_mrc_equals_the_cli(heterarchy, trace, options, flags):
    frame = heterarchy_py.mrc(trace, **options)
    cli = run_json(heterarchy, "mrc", trace, *flags)
    assert records(frame) == cli.pop("points")
    assert frame.attrs == cli


def test_trace_stats_and_policies_equal_the_cli(heterarchy, trace, block_trace):
    assert heterarchy_py.trace_stats(trace) == run_json(heterarchy, "trace", "stats", trace)
    assert heterarchy_py.trace_stats(block_trace) == run_json(heterarchy, "trace", "stats", block_trace)
    listed = run_json(heterarchy, "policies")
    found = heterarchy_py.policies()
    assert sum(map(len, found.values())) == len(listed)
    for entry in listed:
        ours = dict(found[entry["kind"]][entry["name"]])
        params = ours.pop("params")
        assert [{"name": name, **spec} for name, spec in params.items()] == entry.pop("params")
        assert ours == entry
    assert found["policy"]["s3fifo"]["params"]["small-size-ratio"]["default"] == "0.1"
    assert "size" in found["policy"] and "size" in found["admission"]


def test_simulate_takes_a_path_toml_text_or_a_dict(heterarchy, tmp_path):
    config = tmp_path / "pair.toml"
    config.write_text(SMALL_HIERARCHY)
    cli = run_json(heterarchy, "simulate", "--config", config, "--workload", WORKLOAD)
    assert heterarchy_py.simulate(config, WORKLOAD) == cli
    assert heterarchy_py.simulate(SMALL_HIERARCHY, WORKLOAD) == cli
    as_dict = {
        "seed": 1,
        "cache": {"mode": "wt", "policy": "lru"},
        "tier": [{"device": "flashsim-50", "size": "16MiB"}, {"device": "flashsim-25"}],
        "load": {"outstanding": 16, "requests": 20000},
    }
    assert heterarchy_py.simulate(as_dict, WORKLOAD) == cli


def test_experiment_device_probe_sizing_and_sampling_equal_the_cli(heterarchy, block_trace, tmp_path):
    assert records(heterarchy_py.experiment("nhc-orthus-cas", scale=0.5)) == run_json(
        heterarchy, "experiment", "nhc-orthus-cas", "--scale", "0.5")
    assert records(heterarchy_py.experiments()) == run_json(heterarchy, "experiment", "list")
    probe = heterarchy_py.device_probe("nvme-flash", qd=[1, 4, 32], op="mix:0.3")
    cli = run_json(heterarchy, "device", "probe", "nvme-flash", "--qd", "1,4,32", "--op", "mix:0.3")
    assert records(probe) == cli.pop("results")
    assert probe.attrs == cli
    sized = heterarchy_py.sizing(block_trace, budget=["0.5", "2"], config="FastDRAM/FastSSD/SlowHDD")
    assert records(sized) == run_json(heterarchy, "sizing", block_trace, "--budget", "0.5,2", "--config", "FastDRAM/FastSSD/SlowHDD")
    ours = heterarchy_py.trace_sample(block_trace, tmp_path / "ours.csv", rate=0.1, seed=3)
    theirs = run_json(heterarchy, "trace", "sample", block_trace, "-o", tmp_path / "cli.csv", "--rate", "0.1", "--seed", "3")
    assert ours == theirs
    assert (tmp_path / "ours.csv").read_bytes() == (tmp_path / "cli.csv").read_bytes()
    assert heterarchy_py.trace_compare(block_trace, tmp_path / "ours.csv", rate=0.1) == run_json(
        heterarchy, "trace", "compare", block_trace, tmp_path / "cli.csv", "--rate", "0.1")


def test_read_trace_yields_every_request(heterarchy, trace, tmp_path):
    requests = list(heterarchy_py.read_trace(trace))
    stats = run_json(heterarchy, "trace", "stats", trace)
    assert len(requests) == stats["requests"]
    assert len({r.key for r in requests}) == stats["unique_keys"]
    assert sum(r.size for r in requests) == stats["requested_bytes"]
    # The same requests as the CLI's own reader writes out as CSV.
    run(heterarchy, "trace", "convert", trace, "-o", tmp_path / "t.csv", "--output-format", "csv")
    lines = (tmp_path / "t.csv").read_text().splitlines()
    assert len(lines) - 1 == len(requests)
    assert [int(line.split(",")[1]) for line in lines[1:]] == [r.key for r in requests]
    with pytest.raises(heterarchy_py.HeterarchyError, match="block-size"):
        heterarchy_py.read_trace(trace, block_size="0")


@pytest.mark.parametrize("call,args", [
    (lambda p: heterarchy_py.sim(p, "no-such-policy"), ["sim", "{p}", "--policy", "no-such-policy"]),
    (lambda p: heterarchy_py.sim(p, sizes="lots"), ["sim", "{p}", "--size", "lots"]),
    (lambda p: heterarchy_py.sim(p + ".missing"), ["sim", "{p}.missing"]),
    (lambda p: heterarchy_py.mrc(p, method="shards", rate=2.0), ["mrc", "{p}", "--method", "shards", "--rate", "2"]),
    (lambda p: heterarchy_py.device_probe("no-such-device"), ["device", "probe", "no-such-device"]),
])
def test_errors_carry_the_command_lines_message(heterarchy, trace, call, args):
    path = str(trace)
    with pytest.raises(heterarchy_py.HeterarchyError) as raised:
        call(path)
    assert isinstance(raised.value, ValueError)
    done = run(heterarchy, *[a.format(p=path) for a in args], check=False)
    assert done.returncode == 1
    assert str(raised.value) == done.stderr.strip().removeprefix("error: ")
    assert "\n" not in str(raised.value)


def test_wrong_keyword_arguments_and_types_are_type_errors(trace):
    with pytest.raises(TypeError, match="bogus"):
        heterarchy_py.sim(trace, bogus=1)
    with pytest.raises(TypeError, match="warmup"):
        heterarchy_py.sim(trace, warmup=True)
    with pytest.raises(TypeError, match="ignore_obj_size"):
        heterarchy_py.sim(trace, ignore_obj_size="yes")
    with pytest.raises(TypeError, match="size"):
        heterarchy_py.sim(trace, sizes=[object()])
    with pytest.raises(TypeError, match="name"):
        heterarchy_py.sim(trace, [{"k": 2}])
    with pytest.raises(heterarchy_py.HeterarchyError, match="threads"):
        heterarchy_py.sim(trace, threads="many")


# Each function and its command: every keyword argument is one of the command's flags and every
# flag (but --format, which the package sets) is a keyword argument, so the signatures, and with
# them the editors' completions, cannot drift from the command line.
FUNCTIONS = [
    ("sim", ["sim"], {"policies": "policy", "sizes": "size"}),
    ("mrc", ["mrc"], {}),
    ("trace_stats", ["trace", "stats"], {}),
    ("simulate", ["simulate"], {}),
    ("experiment", ["experiment"], {}),
    ("device_probe", ["device", "probe"], {}),
    ("sizing", ["sizing"], {}),
    ("trace_sample", ["trace", "sample"], {}),
    ("trace_compare", ["trace", "compare"], {}),
]


@pytest.mark.parametrize("name,path,renamed", FUNCTIONS)
def test_signatures_are_the_commands_flags(name, path, renamed):
    from heterarchy import _native

    options = _native.command_options(path)
    flags = {flag for flag, positional, _ in options if not positional} - {"format"}
    positionals = [flag for flag, positional, _ in options if positional]
    parameters = inspect.signature(getattr(heterarchy_py, name)).parameters.values()
    named = {renamed.get(p.name, p.name) for p in parameters if p.kind is not inspect.Parameter.VAR_POSITIONAL}
    variadic = sum(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters)
    assert flags <= named, f"flags without a keyword argument: {flags - named}"
    # What is left are the command's positional arguments, in the same number.
    assert len(named - flags) + variadic == len(positionals)
    assert getattr(heterarchy_py, name).__doc__


def test_a_long_call_releases_the_gil(trace):
    ticks = 0
    stop = threading.Event()

    def tick():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    ticker = threading.Thread(target=tick)
    ticker.start()
    started = time.monotonic()
    heterarchy_py.sim(trace, "all", ["0.01", "0.1"], threads=1)
    took = time.monotonic() - started
    stop.set()
    ticker.join()
    # The ticker ran through the call: at least a tenth of the ticks a free interpreter allows.
    assert took > 0.2
    assert ticks > took * 100


@pytest.mark.parametrize("call", [
    'heterarchy.sim(TRACE, ["lru", "s3fifo", "arc"], ["0.001", "0.01", "0.1"], threads=1)',
    'heterarchy.mrc(TRACE, policy="arc", points=12)',
])
def test_ctrl_c_stops_a_long_call(tmp_path, zipf_trace, call):
    trace = zipf_trace(0.9, keys=200_000, requests=4_000_000, seed=7)
    script = tmp_path / "long.py"
    script.write_text(textwrap.dedent(f"""
        import signal, sys, time, heterarchy
        # A shell that runs the tests in the background has SIGINT ignored, and so would this
        # child, whose Python would then raise no KeyboardInterrupt.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        TRACE = {str(trace)!r}
        print("start", flush=True)
        started = time.monotonic()
        try:
            {call}
        except KeyboardInterrupt:
            took = time.monotonic() - started
            # The command stopped too, at its next read of the trace: after that, the process
            # uses no more CPU.
            time.sleep(2.0)
            cpu = time.process_time()
            time.sleep(1.0)
            print(f"interrupted {{took:.2f}} {{time.process_time() - cpu:.3f}}", flush=True)
            sys.exit(3)
        print("finished", flush=True)
    """))
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "start"
    time.sleep(0.5)
    sent = time.monotonic()
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 3, out
    took = float(out.split()[-2])
    assert took < 2.0, f"the call raised only {took} s after it started"
    cpu_after = float(out.split()[-1])
    assert cpu_after < 0.1, f"the command went on using {cpu_after} s of CPU after Ctrl-C"


def test_the_tour_runs(tmp_path):
    tour = subprocess.run([sys.executable, str(Path(__file__).resolve().parents[2] / "examples" / "python_tour.py")],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert tour.returncode == 0, tour.stderr[-2000:]
    assert "miss_ratio" in tour.stdout and "simulated:" in tour.stdout


def test_report_writes_the_commands_html_report(trace, tmp_path):
    heterarchy_py.sim(trace, ["lru", "sieve"], ["0.01", "0.1"], report=tmp_path / "sim.html")
    heterarchy_py.mrc(trace, report=tmp_path / "mrc.html")
    for name in ("sim.html", "mrc.html"):
        page = (tmp_path / name).read_text()
        assert page.startswith("<!DOCTYPE html>") and "<svg" in page


def test_the_package_installs_in_a_fresh_virtualenv(tmp_path, trace, heterarchy):
    # What the README shows: a new virtualenv, `pip install ./python`, a first call.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    repo = Path(__file__).resolve().parents[2]
    installed = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", str(repo / "python")],
                               capture_output=True, text=True, timeout=900)
    assert installed.returncode == 0, installed.stderr[-3000:]
    first = subprocess.run([str(venv / "bin" / "python"), "-c",
                            f"import heterarchy; print(heterarchy.sim({str(trace)!r}, 'lru', '0.1').to_json(orient='records'))"],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    import json

    # to_json rounds floats to 10 digits: the integers must be equal, the ratios near.
    [ours] = json.loads(first.stdout)
    [cli] = run_json(heterarchy, "sim", trace, "--policy", "lru", "--size", "0.1")
    assert ours.keys() == cli.keys()
    for field, value in cli.items():
        assert ours[field] == (pytest.approx(value, rel=1e-9) if isinstance(value, float) else value), field
