"""Every link between the pages of README.md and docs/ reaches a page that exists and a heading it has.

Pages are split and sections move (the gate's page became five); a link to a section that moved
elsewhere still renders, and takes the reader to the top of the wrong page. So each relative link
``[text](page.md#anchor)`` (and ``(#anchor)`` within a page) is resolved here the way GitHub
resolves it: the file must exist, and the anchor must be the slug of one of its headings (lower
case, punctuation dropped, spaces as dashes, ``-1``, ``-2`` after a repeated heading). Headings
inside fenced blocks and HTML comments (the examples' hidden set-up) are not headings.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")


def _prose_lines(text: str) -> list[str]:
    """The page's lines outside fenced blocks and HTML comments (those become empty lines)."""
    text = re.sub(r"<!--.*?-->", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    out, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else line)
    return out


def slug(heading: str) -> str:
    """GitHub's anchor of a heading's text (its inline markup's characters dropped like punctuation)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    return "".join(ch for ch in text if ch.isalnum() or ch in "-_ ").replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    counts: dict[str, int] = {}
    for line in _prose_lines(page.read_text(encoding="utf-8")):
        match = _HEADING.match(line)
        if match:
            base = slug(match.group(2))
            n = counts.get(base, 0)
            counts[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(page: Path) -> list[tuple[int, str]]:
    """(line, target) of every relative link on the page, outside fenced blocks."""
    found = []
    for number, line in enumerate(_prose_lines(page.read_text(encoding="utf-8")), 1):
        for match in _LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            target = match.group(1)
            if not re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                found.append((number, target))
    return found


ALL = [(page, number, target) for page in PAGES for number, target in links(page)]


def test_the_pages_link_to_each_other() -> None:
    """The reader above finds links (a broken reader would pass every page vacuously)."""
    assert len(ALL) >= 40
    assert any("#" in target for _, _, target in ALL)


@pytest.mark.parametrize(("page", "line", "target"), ALL,
                         ids=[f"{p.relative_to(ROOT)}:{n}" for p, n, _ in ALL])
def test_link_reaches_a_page_and_a_heading(page: Path, line: int, target: str) -> None:
    path, _, anchor = target.partition("#")
    goal = (page.parent / path).resolve() if path else page
    where = f"{page.relative_to(ROOT)}:{line}: ({target})"
    assert goal.exists(), f"{where}: no such file {path}"
    if anchor and goal.suffix == ".md":
        assert anchor in anchors(goal), f"{where}: {goal.name} has no heading with the anchor #{anchor}"


def test_slugs_follow_github() -> None:
    assert slug("Spending replies where they decide: `rlgate sample --until-decided`") == \
        "spending-replies-where-they-decide-rlgate-sample---until-decided"
    assert slug("What broke: flips, release policies and the pull-request view") == \
        "what-broke-flips-release-policies-and-the-pull-request-view"
    assert slug("rlgate gate: ❌ FAILED (2 failures)") == "rlgate-gate--failed-2-failures"
