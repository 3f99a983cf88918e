"""The wild set is what it claims: real published scorers, each weakness real, each task's truth honest.

``tests/hack_wild/`` calls Inspect AI's, lm-evaluation-harness's and reasoning-gym's scorers as their
installed packages ship them. Checked here without the probe: every task's honest replies are right
by its truth and paid in full by every scorer expected clean; every documented weakness's exploit is
a reply the truth calls wrong that the real scorer pays (in full, or part of the credit); and the
probe, run on each scorer, says what the set expects of it (slow: the benchmark's measurement).
"""

from __future__ import annotations

import pytest

pytest.importorskip("inspect_ai")
pytest.importorskip("lm_eval")
pytest.importorskip("reasoning_gym")

from hack_wild import WILD, task

from pytest_rlgate import probe_reward

FOUND = [w for w in WILD if w.expected == "found"]
CLEAN = [w for w in WILD if w.expected == "clean"]


def items(entry, n: int = 6) -> list[dict]:
    env = task(entry.env)
    every = [i for i in env.build_prompts(0) if entry.categories is None or i["category"] in entry.categories]
    return every[:: max(1, len(every) // n)][:n]


def _first(entry, case) -> str:
    """The simplest honest reply to *case* (Hypothesis' shrink target of the task's honest replies)."""
    from hypothesis import find, settings

    return find(task(entry.env).honest_replies(case), lambda _: True, settings=settings(database=None))


def test_the_wild_set_covers_three_packages_with_sound_and_weak_scorers():
    assert {w.package for w in WILD} == {"inspect-ai", "lm-eval", "reasoning-gym"}
    assert len(FOUND) >= 12 and len(CLEAN) >= 2 and len({w.name for w in WILD}) == len(WILD)
    names = {w.call.split("(")[0] for w in WILD if w.package == "inspect-ai"}
    assert {"match", "includes", "pattern", "answer", "exact", "f1", "multiple_choice"} <= names
    assert all(k.what and k.kind in ("wrong", "partial") for w in WILD for k in w.weaknesses)
    assert all(w.none_because for w in CLEAN)


@pytest.mark.parametrize("entry", WILD, ids=lambda w: w.name)
def test_honest_replies_are_right_and_the_scorer_reads_them(entry):
    env = task(entry.env)
    for item in items(entry):
        reply = _first(entry, item["case"])
        assert env.score(reply, item["case"]) == 1.0, (entry.env, reply)
        paid = entry.reward(reply, item["case"])
        assert 0.0 <= paid <= 1.0
        if entry.expected == "clean":
            assert paid == 1.0, (entry.name, reply)


WEAKNESSES = [(w, k) for w in FOUND for k in w.weaknesses]


@pytest.mark.parametrize(("entry", "weakness"), WEAKNESSES,
                         ids=[f"{w.name}-{i}" for w in FOUND for i, _ in enumerate(w.weaknesses)])
def test_each_documented_weakness_is_real_on_the_real_scorer(entry, weakness):
    env = task(entry.env)
    tried = 0
    for item in items(entry):
        case = item["case"]
        exploit = weakness.exploit(case)
        if exploit is None:
            continue
        tried += 1
        right = _first(entry, case)
        paid, fair = entry.reward(exploit, case), entry.reward(right, case)
        assert env.score(exploit, case) < 1.0, (entry.name, exploit)
        if weakness.kind == "wrong":
            assert paid >= fair > 0, (entry.name, exploit, paid, fair)
        else:
            assert 0 < paid < fair, (entry.name, exploit, paid, fair)
    assert tried >= 2, entry.name


@pytest.mark.slow
@pytest.mark.parametrize("entry", WILD, ids=lambda w: w.name)
def test_the_probe_says_what_the_set_expects(entry):
    """What ``benchmarks/bench_hack_wild.py`` measures, held as a test."""
    kwargs = {"categories": list(entry.categories)} if entry.categories else {}
    result = probe_reward(entry.reward, env=task(entry.env), database=None, **kwargs)
    assert [k.what for k in entry.weaknesses if not k.shown_in(result)] == [], str(result)
    assert bool(result.hacks) == bool(entry.weaknesses), str(result)  # a sound scorer: no false alarm
