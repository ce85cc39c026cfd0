"""The browser checks themselves (browser.py), on small pages written here and opened from files
as HTML reports are: a page with a chart passes, and a blank page, a page without a chart, a
script that throws and a console error are each caught."""

import pytest


def test_a_static_page_with_a_chart_passes(browser_page, tmp_path):
    report = tmp_path / "report.html"
    report.write_text("<!doctype html><meta charset='utf-8'><title>report</title><h1>Miss ratio</h1>"
                      "<svg width='200' height='100'><polyline points='0,90 50,40 100,20 200,10' "
                      "fill='none' stroke='black'/></svg>")
    browser_page.open(report.as_uri())
    browser_page.check_not_blank()
    browser_page.check_charts(at_least=1)
    browser_page.check_no_errors()


def test_a_bar_chart_counts_and_a_bare_frame_does_not(browser_page, tmp_path):
    report = tmp_path / "bars.html"
    report.write_text("<!doctype html><meta charset='utf-8'><title>bars</title><h1>Hit ratio</h1>"
                      "<svg width='200' height='100'><rect x='0' y='0' width='200' height='100' fill='none'/>"
                      "<rect class='bar' x='20' y='40' width='30' height='60'/></svg>"
                      "<svg width='200' height='100'><rect x='0' y='0' width='200' height='100' fill='none'/>"
                      "<rect class='bar' x='20' y='100' width='30' height='0'/></svg>")
    browser_page.open(report.as_uri())
    assert browser_page.charts() == 1


def test_blank_pages_missing_charts_and_errors_are_caught(browser_page, tmp_path):
    blank = tmp_path / "blank.html"
    blank.write_text("<!doctype html><meta charset='utf-8'><title>blank</title><svg><path d=''/></svg>")
    browser_page.open(blank.as_uri())
    with pytest.raises(pytest.fail.Exception, match="looks blank"):
        browser_page.check_not_blank()
    with pytest.raises(pytest.fail.Exception, match="0 SVG charts"):
        browser_page.check_charts()

    broken = tmp_path / "broken.html"
    broken.write_text("<!doctype html><meta charset='utf-8'><title>broken</title><p>text</p>"
                      "<script>console.error('drawn wrong'); noSuchFunction();</script>")
    with pytest.raises(pytest.fail.Exception, match="reported errors"):
        browser_page.open(broken.as_uri())
    errors = "\n".join(browser_page.errors)
    assert "console error: drawn wrong" in errors and "uncaught: " in errors, errors
    # Caught on purpose: not a failure at teardown.
    browser_page.errors.clear()
