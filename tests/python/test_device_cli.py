"""`heterarchy device`: the presets (docs/simulation.md, "Devices"), the Optane SSD's queueing
rule as the binary prints it (seed 000 §3.1.1: a 4 KiB random read at QD 64 takes 8x QD 8 and
11x QD 1), custom device files, and one-line errors with exit code 1 for bad input."""

import csv
import io
import re
import tomllib

import pytest

from helpers import run, run_json

# The presets every build ships: one Optane PM DIMM and interleaved sets of 2 and 6.
PRESETS = {
    "dram",
    "cxl-memory",
    "optane-pm",
    "optane-pm-x2",
    "optane-pm-x6",
    "optane-ssd",
    "nvme-flash",
    "sata-flash",
    "hdd",
    "hdd-10k",
    "fast-hdd-seed002",
    "fast-dram-seed002",
    "slow-dram-seed002",
    "fast-ssd-seed002",
    "medium-ssd-seed002",
    "slow-ssd-seed002",
    "slow-hdd-seed002",
    "flashsim-50",
    "flashsim-25",
    "flashsim-10",
}


def test_list_holds_every_preset_with_its_numbers(heterarchy):
    devices = run_json(heterarchy, "device", "list")
    assert {device["name"] for device in devices} == PRESETS
    assert len(devices) == len(PRESETS)
    ssd = next(device for device in devices if device["name"] == "optane-ssd")
    # Seed 000 Table 4.1 and §3.1.5: 10 us, 2.5/2.3 GB/s, 575K IOPS, 4 KiB granularity.
    assert ssd["kind"] == "block"
    assert (ssd["read_latency_us"], ssd["write_latency_us"]) == (10, 10)
    assert (ssd["read_bandwidth_gb_s"], ssd["write_bandwidth_gb_s"]) == (2.5, 2.3)
    assert ssd["max_read_iops"] == 575_000
    assert ssd["granularity_bytes"] == 4096
    # A pure rate cap has no IOPS cap: one 4 KiB granule at a time at 50 MB/s.
    flashsim = next(device for device in devices if device["name"] == "flashsim-50")
    assert flashsim["max_read_iops"] == pytest.approx(50e6 / 4096)
    for device in devices:
        assert device["description"], device["name"]


def test_list_csv_has_the_json_rows(heterarchy):
    done = run(heterarchy, "device", "list", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    devices = run_json(heterarchy, "device", "list")
    assert [row["name"] for row in rows] == [device["name"] for device in devices]
    for row, device in zip(rows, devices):
        assert float(row["read_latency_us"]) == device["read_latency_us"]
        assert float(row["max_write_iops"]) == device["max_write_iops"]


def test_optane_ssd_latency_grows_11x_and_8x_from_qd1_and_qd8_to_qd64(heterarchy):
    report = run_json(
        heterarchy, "device", "probe", "optane-ssd", "--op", "read", "--size", "4k",
        "--qd", "1,8,64",
    )
    assert (report["device"], report["size_bytes"], report["write_fraction"]) == (
        "optane-ssd",
        4096,
        0,
    )
    by_depth = {point["queue_depth"]: point for point in report["results"]}
    assert list(by_depth) == [1, 8, 64]
    latency = {depth: point["mean_latency_us"] for depth, point in by_depth.items()}
    # The thesis gives whole multiples: anything that rounds to them reproduces it.
    assert latency[64] / latency[1] == pytest.approx(11, abs=0.5)
    assert latency[64] / latency[8] == pytest.approx(8, abs=0.5)
    # Saturated at the 575K IOPS cap (§3.1.5), and bandwidth is IOPS times the size.
    assert by_depth[64]["iops"] == pytest.approx(575_000, rel=0.01)
    for point in by_depth.values():
        assert point["bandwidth_bytes_per_s"] == pytest.approx(point["iops"] * 4096, rel=1e-9)


def test_csv_probe_and_mixed_ops(heterarchy):
    done = run(
        heterarchy, "device", "probe", "optane-ssd", "--op", "mix:0.5", "--qd", "64",
        "--format", "csv",
    )
    [row] = list(csv.DictReader(io.StringIO(done.stdout)))
    assert list(row) == ["queue_depth", "mean_latency_us", "iops", "bandwidth_bytes_per_s"]
    reads = run_json(heterarchy, "device", "probe", "optane-ssd", "--qd", "64")["results"][0]
    # Seed 000 §3.1.4: at QD 64 the latency of a mix is that of reads alone.
    assert float(row["mean_latency_us"]) == pytest.approx(reads["mean_latency_us"], rel=0.05)


def test_shown_preset_is_a_starting_point_for_a_device_file(heterarchy, tmp_path):
    text = run(heterarchy, "device", "show", "optane-ssd").stdout
    spec = tomllib.loads(text)
    assert spec["name"] == "optane-ssd"
    assert spec["read"]["latency_ns"] == 10_000
    # The same device at twice the latency, from a file.
    slower = text.replace('"optane-ssd"', '"slower"').replace(
        "latency_ns = 10000.0", "latency_ns = 20000.0"
    )
    assert slower.count("20000.0") == 2
    path = tmp_path / "slower.toml"
    path.write_text(slower)
    report = run_json(heterarchy, "device", "probe", path, "--qd", "1")
    assert report["device"] == "slower"
    assert report["results"][0]["mean_latency_us"] == pytest.approx(20, rel=1e-6)


def negative_bandwidth_file(tmp_path):
    path = tmp_path / "broken.toml"
    path.write_text(
        'name = "broken"\ngranularity_bytes = 4096\n'
        "[read]\nlatency_ns = 10000\nbandwidth_gb_s = -2.5\n"
        "[write]\nlatency_ns = 10000\nbandwidth_gb_s = 2.3\n"
    )
    return str(path)


# (arguments after `device`, a pattern the one-line error must match)
BAD_INPUTS = {
    "unknown device": (["probe", "floppy"], r"floppy: unknown device"),
    "unknown device to show": (["show", "floppy"], r"floppy: unknown device"),
    "bad size": (["probe", "optane-ssd", "--size", "4q"], r'--size.*"4q"'),
    "zero size": (["probe", "optane-ssd", "--size", "0"], r"--size"),
    "queue depth 0": (["probe", "optane-ssd", "--qd", "1,0"], r'--qd "0"'),
    "queue depth not a number": (["probe", "optane-ssd", "--qd", "eight"], r'--qd "eight"'),
    "unknown op": (["probe", "optane-ssd", "--op", "trim"], r'--op "trim"'),
    "mix beyond 1": (["probe", "optane-ssd", "--op", "mix:1.5"], r'--op "mix:1.5"'),
    "offset past the granule": (["probe", "dram", "--offset", "64"], r"--offset.*64-byte"),
    "bad device file": (["probe", None], r"broken\.toml: key `read\.bandwidth_gb_s`: -2\.5"),
}


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_gives_one_line_and_exit_code_1(heterarchy, tmp_path, case):
    args, pattern = BAD_INPUTS[case]
    args = [negative_bandwidth_file(tmp_path) if arg is None else arg for arg in args]
    done = run(heterarchy, "device", *args, check=False)
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ")
    assert re.search(pattern, lines[0]), lines[0]


def test_codec_costs_time_both_codecs_at_each_compressibility(heterarchy):
    """`device codec-costs` (seed 004 §4's Compression-Store): per codec and compressibility,
    the cost per KiB of compressing and decompressing a 4 KiB page on this machine and the 512 B
    sectors it takes."""
    rows = run_json(heterarchy, "device", "codec-costs", "--pages", "200", "--compressibility", "0,0.5,0.9")
    assert [(row["codec"], row["compressibility"]) for row in rows] == [
        (codec, share) for codec in ("lz4", "zstd") for share in (0.0, 0.5, 0.9)]
    for row in rows:
        assert row["compress_us_per_kib"] > 0 and row["decompress_us_per_kib"] > 0
    sectors = {(row["codec"], row["compressibility"]): row["mean_sectors"] for row in rows}
    for codec in ("lz4", "zstd"):
        # Random data gains nothing; a tenth of a page of random data fits one sector.
        assert sectors[(codec, 0.0)] == 8 and sectors[(codec, 0.9)] == 1


@pytest.mark.parametrize("args, expected", [
    (["--codec", "lzma"], "--codec: unknown codec \"lzma\"; expected lz4 or zstd"),
    (["--compressibility", "1.5"], "--compressibility: \"1.5\" is not a share in [0, 1]"),
    (["--pages", "0"], "--pages 0"),
])
def test_codec_costs_refuse_bad_arguments(heterarchy, args, expected):
    done = run(heterarchy, "device", "codec-costs", *args, check=False)
    assert done.returncode != 0 and expected in done.stderr
