"""docs/index.md lists every page of docs/ once, and every page it links exists."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_the_index_links_every_page_once_and_only_pages_that_exist() -> None:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    entries = re.findall(r"^\d+\. \[[^\]]+\]\(([^)#]+\.md)\): \S", index, flags=re.MULTILINE)
    pages = sorted(p.name for p in DOCS.glob("*.md") if p.name != "index.md")
    assert sorted(entries) == pages, "docs/index.md must name each page of docs/ once, one line each"
    assert all((DOCS / entry).is_file() for entry in entries)
