"""The README's first gating test, as the README writes it, can fail on the collapse the README
pitches: pointed at the hackable reward (refund's ``lookup_anything``), it fails on no_id (slow).

The test's source is read from README.md (its marker and its body), and only the marker's
reward is added, so the README cannot show a first test that is blind to its own story: with
the default holdout (24/30/24 scenarios held out) a no-id drop of 0.20 is ``regressed`` with
96 % power (``rlgate plan``), and this policy's drop is larger. Time on 2 shared CPU cores: the
README quotes it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[1] / "README.md"
HACKABLE = "lookup_anything"


def readme_first_test() -> str:
    """The Python block under the README's "The first gating test" heading."""
    section = README.read_text(encoding="utf-8").split("## The first gating test", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readmes_first_test_on_the_hackable_reward_fails_on_no_id(pytester: pytest.Pytester) -> None:
    source = readme_first_test()
    marker = re.search(r"@pytest\.mark\.rlgate\((?P<knobs>[^)]*)\)", source)
    assert marker is not None, "the README's first test has no @pytest.mark.rlgate(...) marker"
    hacked = source.replace(marker.group(0), f'@pytest.mark.rlgate({marker["knobs"]}, reward="{HACKABLE}")')
    pytester.makepyfile(test_first=hacked)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=3600)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*RegressionError*comparisons regressed*pass@1 in no_id*",
                                 "E*pass@1*no_id*30×4*REGRESSED*"])
    assert not any("BLIND: no_id" in line for line in result.outlines)
