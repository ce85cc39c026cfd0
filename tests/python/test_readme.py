"""The README is the front door: it opens with exactly the two commands (scripts/test runs the
first as written), stays short enough to read in minutes, and every page it and docs/ link to
exists; the docs state what was measured rather than who measured it, and cite what a reader of
the repository can open (a seed section, a docs page, a test), never this project's issue
numbers."""

import re

import pytest

from helpers import REPO

README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
TWO_COMMANDS = ["cargo run --release -- demo", "scripts/test"]
# "About 250 lines" for a page read in five minutes.
README_LINES_MAX = 260
# First person, but not "I/O" (nor memcached's `-I` flag).
FIRST_PERSON = re.compile(r"(?<![-`])\b(?:I(?![/\w])|I'm|I've|we|We|our|Our|us|my|mine)\b")
ISSUE_CITATION = re.compile(r"\bissues? #?\d+|notes §|shared/notes", re.I)
# Another project's issue tracker may be cited: "libCacheSim issue 25", "open-cas-linux 667".
OTHER_PROJECT = re.compile(r"(?:libCacheSim|libcachesim|memcached|foyer|open-cas-linux|CacheLib|rustls|nbdkit|PyMimircache)[ ,]*(?:issues?|PR)? #?\d+", re.I)


def code_blocks(text: str) -> list[list[str]]:
    """The lines of each fenced code block, in order."""
    return [block.strip("\n").splitlines() for block in re.findall(r"^```[^\n]*\n(.*?)^```", text, re.M | re.S)]


def test_the_readme_opens_with_exactly_the_two_commands():
    text = README.read_text()
    blocks = code_blocks(text)
    assert blocks and blocks[0] == TWO_COMMANDS, blocks[:1]
    # Nothing but the title comes before them.
    before = text[: text.index("```")].strip().splitlines()
    assert before == ["# heterarchy"], before


def test_the_readme_is_a_page_read_in_minutes():
    lines = README.read_text().count("\n")
    assert lines <= README_LINES_MAX, f"README.md has {lines} lines"
    assert "cargo install --path crates/cli" in README.read_text()


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda page: page.name)
def test_every_relative_link_leads_to_a_file(page):
    text = page.read_text()
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text) + re.findall(r'src="([^"]+)"', text)
    missing = [target for target in targets
               if not re.match(r"[a-z]+:", target) and not (page.parent / target).exists()]
    assert not missing, f"{page.name} links to missing files: {missing}"


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda page: page.name)
def test_docs_state_measurements_without_a_diary_or_issue_numbers(page):
    for number, line in enumerate(page.read_text().splitlines(), start=1):
        if line.startswith("    ") or line.startswith("```"):
            continue
        prose = OTHER_PROJECT.sub("", re.sub(r"`[^`]*`", "", line))
        assert not FIRST_PERSON.search(prose), f"{page.name}:{number}: first person: {line.strip()}"
        assert not ISSUE_CITATION.search(prose), f"{page.name}:{number}: cites an issue: {line.strip()}"
