"""Headless Chromium for the tests that look at a page as a person would: the live dashboard
(test_dashboard.py) and HTML reports opened from files. Debian's `chromium`, driven by
Playwright (never `playwright install`: its browser builds cannot be downloaded here), with every
error the page reports collected, a check that the page is not blank, one that it holds charts,
and screenshots kept in docs/img when HETERARCHY_UPDATE_SCREENSHOTS=1.

The fixtures that use this module are in conftest.py: `chromium` (one browser per session) and
`browser_page` (a fresh page per test; any error the page reports, up to the test's end, fails
the test at teardown too, so a test cannot forget to check)."""

import os
from pathlib import Path

import pytest

from helpers import REPO

CHROMIUM = Path("/usr/bin/chromium")
# Headless, and quiet on the network: no QUIC, no first-run, sync, update or background
# requests of its own, so that every request a test sees is the page's.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",  # the tests run as root, where Chromium's sandbox refuses to start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1000, "height": 700}
SCREENSHOTS = REPO / "docs" / "img"
# How long a page may take to load or a check to wait for what it draws.
LOAD_MS = 15_000


def unavailable(why: str):
    """Skips the calling test, except in CI (CI=true), where a missing browser means a broken
    install step: that fails."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{why}; CI=true, so the browser tests must run (scripts/test installs it)")
    pytest.skip(why)


def launch(playwright):
    """Debian's Chromium, headless, through a started Playwright."""
    if not CHROMIUM.is_file():
        unavailable(f"{CHROMIUM} is missing (Debian package chromium)")
    return playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)


class BrowserPage:
    """One page in a context of its own, sized VIEWPORT, that collects what goes wrong in it:
    uncaught exceptions, console errors and failed requests (in `errors`), and the URL of every
    request it makes (in `requests`)."""

    def __init__(self, context):
        self.page = context.new_page()
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))
        self.page.on("console", self._console)
        self.page.on("requestfailed", lambda request: self.errors.append(
            f"request failed: {request.url}: {request.failure}"))
        self.page.on("request", lambda request: self.requests.append(request.url))

    def _console(self, message):
        if message.type == "error":
            self.errors.append(f"console error: {message.text} ({message.location})")

    def open(self, url: str):
        """Loads `url` (http:// or file://) and fails the test unless it loaded without error."""
        response = self.page.goto(url, wait_until="load", timeout=LOAD_MS)
        # A file:// load may have no response to judge.
        if response is not None and not response.ok:
            pytest.fail(f"{url} answered {response.status}")
        self.check_no_errors()

    def check_no_errors(self):
        """Fails the test if the page has reported any error so far."""
        if self.errors:
            pytest.fail(f"{self.page.url} reported errors:\n" + "\n".join(self.errors))

    def check_not_blank(self):
        """Fails the test unless the page shows text and elements of some size."""
        shown = self.page.evaluate("""() => {
            const sized = [...document.querySelectorAll("body *")].filter((element) => {
                const box = element.getBoundingClientRect();
                return box.width > 0 && box.height > 0;
            });
            return { text: document.body ? document.body.innerText.trim().length : 0, sized: sized.length };
        }""")
        if shown["text"] == 0 or shown["sized"] == 0:
            pytest.fail(f"{self.page.url} looks blank: {shown['text']} characters of text, "
                        f"{shown['sized']} elements with an area")

    def charts(self) -> int:
        """How many SVG elements hold a drawn line or bar: a path with at least two points, a
        polyline with at least two, or a bar with an area (a `rect` of class `bar`, as
        crates/report draws bar charts; a chart's frame is a `rect` too, so class it is)."""
        return self.page.evaluate("""() => [...document.querySelectorAll("svg")].filter((svg) =>
            [...svg.querySelectorAll("path, polyline")].some((line) => {
                const drawn = line.getAttribute(line.tagName === "path" ? "d" : "points") || "";
                return (drawn.match(/-?\\d+(\\.\\d+)?/g) || []).length >= 4;
            }) || [...svg.querySelectorAll("rect.bar")].some((bar) => {
                const box = bar.getBBox();
                return box.width > 0 && box.height > 0;
            })).length""")

    def check_charts(self, at_least: int = 1):
        """Fails the test unless at least `at_least` charts have lines or bars drawn."""
        drawn = self.charts()
        if drawn < at_least:
            pytest.fail(f"{self.page.url}: {drawn} SVG charts with a line or bar drawn, expected at least {at_least}")

    def screenshot(self, name: str, tmp_path: Path, keep: bool = True) -> Path:
        """A PNG of the viewport, into docs/img/`name` with HETERARCHY_UPDATE_SCREENSHOTS=1 and
        `keep` (to commit), else into tmp_path; returns its path."""
        update = keep and os.environ.get("HETERARCHY_UPDATE_SCREENSHOTS") == "1"
        folder = SCREENSHOTS if update else tmp_path
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / name
        self.page.screenshot(path=str(path), type="png")
        return path
