"""`heterarchy trace generate block-io`, `trace sample` and `trace compare` (seed 002 ch. 5;
docs/simulation.md, "Sampling block traces"): samples are block traces that read back;
BlkSample's features are closer to the full trace's than random spatial sampling's; bad
arguments are one-line errors."""

import pytest

from helpers import TRACES, run, run_json


@pytest.fixture(scope="module")
def generated(heterarchy, tmp_path_factory):
    """A 200,000-I/O generated block trace in MSR CSV."""
    path = tmp_path_factory.mktemp("sample") / "generated.csv"
    run(heterarchy, "trace", "generate", "block-io:requests=200000,write=0.3,seed=5", "-o", path)
    return path


def test_generated_block_traces_are_msr_csv_with_offsets(heterarchy, generated):
    first = generated.read_text().splitlines()[0].split(",")
    assert len(first) == 7 and first[3] in ("Read", "Write")
    stats = run_json(heterarchy, "trace", "stats", generated)
    assert stats["block"]["records"] == 200_000
    writes = stats["block"]["writes"]["requests"] / 200_000
    assert abs(writes - 0.3) < 0.01


def sample(heterarchy, trace, out, method, *extra):
    return run_json(heterarchy, "trace", "sample", trace, "--method", method, "--rate", "0.1",
                    "-o", out, *extra)


def test_blksample_is_closer_to_the_trace_than_spatial_sampling(heterarchy, generated, tmp_path):
    spatial = sample(heterarchy, generated, tmp_path / "spatial.csv", "spatial")
    blk = sample(heterarchy, generated, tmp_path / "blk.csv", "blksample")
    assert spatial["report"]["options"]["bits"] == 0 and blk["report"]["options"]["bits"] == 4
    # The post-processing loop's error falls with every removal.
    errors = blk["report"]["iteration_errors"]
    assert len(errors) > 1 and all(b < a for a, b in zip(errors, errors[1:]))
    compared = {}
    for name in ("spatial", "blk"):
        compared[name] = run_json(heterarchy, "trace", "compare", generated, tmp_path / f"{name}.csv",
                                  "--rate", "0.1")
    for result in compared.values():
        assert {f["name"] for f in result["features"]} >= {
            "request_ratio", "read_size_mean_bytes", "write_size_mean_bytes", "read_iat_mean_us",
            "write_iat_mean_us", "read_misalignment_mean_bytes", "write_misalignment_mean_bytes"}
        assert [p["wss_fraction"] for p in result["hit_rates"]] == [0.25, 0.5, 0.75, 1.0]
        assert 0 <= result["hit_rate_error"] <= 100
    assert compared["blk"]["mean_feature_error"] < compared["spatial"]["mean_feature_error"]
    # What `trace sample` says of its sample is what `trace compare` measures in the file.
    assert blk["mean_feature_error"] == pytest.approx(compared["blk"]["mean_feature_error"])
    size = {name: {f["name"]: f["error"] for f in result["features"]}
            for name, result in compared.items()}
    for feature in ("read_size_mean_bytes", "write_size_mean_bytes"):
        assert size["blk"][feature] < size["spatial"][feature]


def test_samples_of_a_real_trace_in_native_format(heterarchy, tmp_path):
    trace = TRACES / "cloudPhysicsIO.vscsi"
    if not trace.is_file():
        pytest.skip(f"{trace} not found")
    out = tmp_path / "sample.htrace"
    done = run(heterarchy, "trace", "sample", trace, "--rate", "0.1", "-o", out)
    assert "blksample sample of" in done.stdout and "mean feature error" in done.stdout
    compared = run(heterarchy, "trace", "compare", trace, out, "--rate", "0.1")
    assert "hit-rate error" in compared.stdout


def test_a_sample_named_for_its_source_is_read_by_its_last_extension(heterarchy, tmp_path):
    """A sample of a vscsi trace written to `NAME.vscsi.blksample.csv` is MSR CSV, as its last
    extension says, and reads back as such: the `.vscsi` marker earlier in the name does not win."""
    trace = TRACES / "cloudPhysicsIO.vscsi"
    if not trace.is_file():
        pytest.skip(f"{trace} not found")
    out = tmp_path / "cloudPhysicsIO.vscsi.blksample.csv"
    sampled = sample(heterarchy, trace, out, "blksample")
    assert out.read_text().split("\n", 1)[0].count(",") == 6  # MSR CSV's seven fields
    stats = run_json(heterarchy, "trace", "stats", out)
    assert stats["block"]["records"] == sampled["report"]["sample_requests"] > 0


@pytest.mark.parametrize("args, expected", [
    (["--rate", "0"], "--rate 0: expected a sampling rate in (0, 1]"),
    (["--rate", "1.5"], "--rate 1.5: expected a sampling rate in (0, 1]"),
    (["--rate", "0.1", "--bits", "40"], "--bits 40: expected at most 20"),
    (["--rate", "0.1", "--method", "reservoir"], "--method \"reservoir\": expected spatial or blksample"),
    (["--rate", "0.1", "--output-format", "twitter"], "expected one of msr, native"),
])
def test_bad_sampling_arguments_are_one_line_errors(heterarchy, generated, tmp_path, args, expected):
    done = run(heterarchy, "trace", "sample", generated, "-o", tmp_path / "s.csv", *args, check=False)
    assert done.returncode != 0
    assert expected in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_key_value_trace_has_no_block_records_to_sample(heterarchy, tmp_path):
    trace = TRACES / "twitter-sample.csv"
    if not trace.is_file():
        pytest.skip(f"{trace} not found")
    done = run(heterarchy, "trace", "sample", trace, "--rate", "0.1", "-o", tmp_path / "s.csv",
               check=False)
    assert done.returncode != 0 and "has no block records" in done.stderr
    done = run(heterarchy, "trace", "compare", trace, trace, "--rate", "0.1", check=False)
    assert done.returncode != 0 and "has no block records" in done.stderr


def test_compare_refuses_a_rate_outside_the_unit_interval(heterarchy, generated):
    done = run(heterarchy, "trace", "compare", generated, generated, "--rate", "2", check=False)
    assert done.returncode != 0 and "--rate 2: expected a sampling rate in (0, 1]" in done.stderr
