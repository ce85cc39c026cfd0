"""`heterarchy model`: the analytic caching-vs-splitting model of seed 000 §4.2.1 as the binary
prints it. The expected values come from the thesis's Eqs 4.2, 4.7, 4.8 and 4.9, evaluated here
with exact fractions, and from its prose: with D_hi twice as fast as D_lo, about two-thirds of
the requests on D_hi realise the aggregate bandwidth."""

import csv
import io
from fractions import Fraction

import pytest

from helpers import run, run_json


def cache_low(r_hi, r_lo, hit):
    return r_hi * r_lo / (hit * r_lo + (1 - hit) * (r_hi + r_lo))  # Eq 4.2


def cache_high(r_hi, r_lo, hit):
    return 1 / max((1 - hit) / r_lo, 1 / r_hi)  # Eq 4.7


def split_low(r_hi, r_lo, split):
    return 1 / ((1 - split) / r_lo + split / r_hi)  # Eq 4.8


def split_high(r_hi, r_lo, split):
    return 1 / max((1 - split) / r_lo, split / r_hi)  # Eq 4.9


EQUATIONS = {
    "cache_low": cache_low,
    "cache_high": cache_high,
    "split_low": split_low,
    "split_high": split_high,
}


def test_best_split_of_100_to_50_is_two_thirds_at_150_ops(heterarchy):
    [model] = run_json(heterarchy, "model", "--ratio", "100:50")
    assert (model["r_hi"], model["r_lo"]) == (100, 50)
    assert model["best_split"] == pytest.approx(2 / 3, rel=1e-12)
    assert model["best_split_ops"] == pytest.approx(150, rel=1e-12)
    # Caching is capped by D_hi, reached once misses no longer outlast D_hi's work: H >= 1/2.
    assert model["cache_ceiling_ops"] == pytest.approx(100, rel=1e-12)
    assert model["cache_ceiling_hit"] == pytest.approx(0.5, rel=1e-12)


def test_defaults_are_the_four_ratios_of_figure_4_3(heterarchy):
    models = run_json(heterarchy, "model", "--points", "5")
    assert [(m["r_hi"], m["r_lo"]) for m in models] == [(100, 1), (100, 10), (100, 50), (100, 100)]
    for model in models:
        r_hi, r_lo = Fraction(model["r_hi"]), Fraction(model["r_lo"])
        assert model["best_split"] == pytest.approx(float(r_hi / (r_hi + r_lo)), rel=1e-12)
        assert model["best_split_ops"] == pytest.approx(float(r_hi + r_lo), rel=1e-12)
        assert [p["x"] for p in model["points"]] == [0, 0.25, 0.5, 0.75, 1]
        for point in model["points"]:
            x = Fraction(point["x"])
            for name, equation in EQUATIONS.items():
                expected = float(equation(r_hi, r_lo, x))
                assert point[name] == pytest.approx(expected, rel=1e-12), (model["r_lo"], x, name)


def test_csv_has_one_row_per_ratio_and_point(heterarchy):
    done = run(heterarchy, "model", "--ratio", "100:10,3:7", "--points", "11", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    assert list(rows[0]) == ["ratio", "x", *EQUATIONS]
    assert [row["ratio"] for row in rows] == ["100:10"] * 11 + ["3:7"] * 11
    for row in rows:
        r_hi, r_lo = map(Fraction, row["ratio"].split(":"))
        x = Fraction(row["x"])
        for name, equation in EQUATIONS.items():
            assert float(row[name]) == pytest.approx(float(equation(r_hi, r_lo, x)), rel=1e-12)


def test_report_has_a_chart_per_ratio(heterarchy, tmp_path):
    path = tmp_path / "model.html"
    run(heterarchy, "model", "--report", path)
    html = path.read_text()
    assert html.count("<svg") == 4
    for r_lo in (1, 10, 50, 100):
        assert f"Device Ratio 100 : {r_lo}" in html


@pytest.mark.parametrize(
    "args, offending",
    [
        (["--ratio", "100:x"], "100:x"),
        (["--ratio", "100:50,0:5"], "0:5"),
        (["--ratio", "100:-5"], "100:-5"),
        (["--ratio", "100"], "100"),
        (["--points", "1"], "points"),
    ],
)
def test_bad_input_gives_one_line_error(heterarchy, args, offending):
    done = run(heterarchy, "model", *args, check=False)
    assert done.returncode > 0, f"exit code {done.returncode} (negative: killed by a signal)"
    assert "panicked" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected a one-line error, got: {done.stderr!r}"
    assert offending in lines[0]
    assert done.stdout == ""
