"""The README's demo table says what the demo's transcript in docs/demo.md prints.

The transcript is the demo's own output; this keeps the README's short table from drifting
away from it when the gate's judgement changes.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the README's name of each run -> the transcript's
RUNS = {"GRPO, 20 steps": "GRPO, 20 steps", "GRPO `--balance 0.25`": "GRPO --balance 0.25, 20 steps",
        "DPO + constructed negatives": "DPO + constructed negatives, 20 steps",
        "GRPO on the hackable reward": "GRPO on the hackable reward, 20 steps *"}


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _readme_rows() -> dict[str, list[str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## What the demo shows", 1)[1].split("\n## ", 1)[0]
    rows = (_cells(line.replace("**", "")) for line in section.splitlines() if line.startswith("| "))
    return {cells[0]: cells[1:] for cells in rows if cells[0] in RUNS}


def _transcript_rows() -> dict[str, list[str]]:
    """Each run's block of the grid: 'before → after, verdict' per category, then the gate."""
    text = (ROOT / "docs" / "demo.md").read_text(encoding="utf-8")
    grid = text.split("$ rlgate demo", 1)[1].split("```", 1)[0].split("+==", 1)[1]
    blocks: list[list[list[str]]] = [[]]
    for line in grid.splitlines()[1:]:
        if line.startswith("+-"):
            blocks.append([])
        elif line.startswith("|"):
            blocks[-1].append(_cells(line))
    rows = {}
    for block in (b for b in blocks if len(b) >= 3):
        verdicts = [re.sub(r" \(.*\)$", "", cell).lower() for cell in block[2][1:4]]
        rows[block[0][0]] = [f"{moved}, {verdict}" for moved, verdict in zip(block[0][1:4], verdicts)] \
            + [block[0][4]]
    return rows


def test_the_readme_demo_table_is_the_transcripts() -> None:
    readme, transcript = _readme_rows(), _transcript_rows()
    assert set(readme) == set(RUNS)
    for short, long in RUNS.items():
        assert readme[short] == transcript[long], short
