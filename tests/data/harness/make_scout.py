"""Regenerate the Inspect logs and the Inspect Scout scan under tests/data/harness/scout/.

Two real Inspect evals with the scripted mock model of ``tests/_harness.py`` (the base, and
the candidate that forgets most math answers), then one real ``inspect_scout.scan`` over
both logs with two scanners that need no model (``grep_scanner``):

* ``said_no_idea``: the reply says "no idea" (the candidate says it in math, both sides in
  some chat replies);
* ``asked_q1x``: the transcript mentions "question 1" (questions 1 and 10-19, on both
  sides alike).

About 20 s; run it after an inspect-ai or inspect-scout upgrade::

    python tests/data/harness/make_scout.py [OUT_DIR]

One slow test regenerates them live, so an upstream format change breaks our tests.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent.parent))

from _harness import write_inspect_log  # noqa: E402  (tests/ on the path first)


def make(out: Path) -> dict[str, Path]:
    """Write base/ and candidate/ logs and scans/ under *out*; return the two logs and the scan folder."""
    from inspect_scout import grep_scanner, scan, transcripts_from

    shutil.rmtree(out, ignore_errors=True)
    logs = {"base": write_inspect_log(out / "base"), "candidate": write_inspect_log(out / "candidate", candidate=True)}
    scanners = [grep_scanner("no idea", name="said_no_idea"), grep_scanner("question 1", name="asked_q1x")]
    status = scan(scanners, transcripts=transcripts_from([str(p) for p in logs.values()]), scans=str(out / "scans"),
                  display="none", max_processes=1)
    if not status.complete:
        raise SystemExit(f"the scan did not complete: {status.location}")
    return {**logs, "scans": Path(status.location)}


if __name__ == "__main__":
    print(make(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "scout"))
