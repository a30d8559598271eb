"""The docs read as reference: README.md and every study page (docs/*/README.md) speak of the
library and its runs only, not of how the runs were made day to day (which commit snapshot, the
load on a machine, working sessions, the people who made them) and not of machine folders. How a
run was made lives in its record (a run folder's provenance). A study page opens with how to run
it. No model runs here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DIARY = re.compile(
    r"\bsessions?\b|\bhelpers?\b|\bour team\b|\bthe team\b|\bteam's\b|\bengineers\b"
    r"|\bthis round\b|\blast round\b|\bsnapshot [0-9a-f]{7}|\bsnapshots? of the (?:code|tree)"
    r"|\bstretch(?:es)? of work|\bload average\b|\bworking tree\b|\bissue \d+\b"
    r"|(?<![\w.~<>-])/(?:work|tmp|home|root|mnt|scratch)/",
    re.I,
)
"""Words of a diary: a working session, the team, a round of work, a commit snapshot or working
tree a run came from, the machine's load, an issue number a reader cannot open, a machine folder.
("KV cache" and "snapshot" alone are not on the list: a cache snapshot is a term of the trade.)"""
PAGES = sorted(ROOT.glob("docs/*/README.md"))


def test_the_pattern_finds_diary_words_and_not_reference_text():
    for text in (
        "rewritten this session",
        "from a working tree with changes",
        "snapshot 4e4b04f",
        "load average 8-11",
        "the team's shared machine",
        "open in issue 35",
        "through `/work/team/heavy`",
        "this round's default",
        "8 engineers",
        "the helpers keep tensors",
    ):
        assert DIARY.search(text), text
    for text in (
        "the KV cache keeps the sink",
        "a snapshot of the cache",
        "`circuits p0 --model smollm2-135m`",
        "docs/p0/smollm2-135m",
        "issued",
        "runs/x/tmp/y",
    ):
        assert not DIARY.search(text), text


def test_there_are_study_pages():
    assert len(PAGES) >= 10, [p.parent.name for p in PAGES]


def diary_words(page: Path) -> list[str]:
    """One line per diary word on `page`: where, which, and the line it stands in."""
    return [
        f"{page.relative_to(ROOT)}:{n}: {m.group(0)!r} in {line.strip()[:90]!r}"
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        for m in DIARY.finditer(line)
    ]


@pytest.mark.parametrize(
    "page", [ROOT / "README.md", *PAGES], ids=lambda p: str(p.relative_to(ROOT))
)
def test_a_page_has_no_diary_words(page: Path):
    found = diary_words(page)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_study_page_opens_with_how_to_run(page: Path):
    headings = re.findall(r"^##\s+(.+)$", page.read_text(encoding="utf-8"), re.M)
    assert headings, f"{page.relative_to(ROOT)}: no section"
    assert headings[0].strip().lower().startswith("how to run"), (
        f"{page.relative_to(ROOT)}: the first section is {headings[0]!r}, not 'How to run'"
    )
