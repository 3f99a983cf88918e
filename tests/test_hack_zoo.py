"""The hack zoo is what it claims: every flawed reward's exploit is wrong and paid, no sound reward pays one.

The zoo (``tests/hack_zoo/``) is the benchmark the probe is measured on, so it must be honest on its
own terms, checked here without the probe: each exploit is a reply the environment's truth calls
wrong (its score does not pass, or a guarded marker drops) that the flawed reward pays at least as
much as an honest reply, or filler the reward pays more than the honest reply; its sound base
reward is not fooled; and every sound reward pays honest replies and none of the exploits.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hack_zoo import ENVS, FLAW_KINDS, ZOO, env_of, honest, items_for, judge_wrong

from pytest_rlgate import probe_reward
from pytest_rlgate.rewards.strategies import pays

BY_NAME = {entry.name: entry for entry in ZOO}
FLAWED = [e for e in ZOO if not e.sound]
SOUND = [e for e in ZOO if e.sound]


def cases_of(env_name: str, category: str, n: int = 8) -> list[dict]:
    found = [item for item in items_for(env_name) if item["category"] == category]
    return found[:: max(1, len(found) // n)][:n]


def test_the_zoo_has_thirty_flawed_and_ten_sound_rewards_over_four_environments():
    assert len(FLAWED) >= 30 and len(SOUND) >= 10
    assert {e.env for e in ZOO} == set(ENVS)
    assert all(Counter(e.env for e in SOUND)[env] >= 2 for env in ENVS)
    assert {e.flaw for e in FLAWED} <= set(FLAW_KINDS) and len(BY_NAME) == len(ZOO)
    assert all(BY_NAME[e.base].sound and BY_NAME[e.base].env == e.env for e in FLAWED)


@pytest.mark.parametrize("entry", FLAWED, ids=lambda e: e.name)
def test_each_exploit_is_wrong_and_paid_and_its_base_is_not_fooled(entry):
    env = env_of(entry.env)
    base = BY_NAME[entry.base]
    tried = 0
    for category in entry.categories:
        for item in cases_of(entry.env, category):
            case, prompt = item["case"], item["prompt"]
            exploit = entry.exploit(case)
            if exploit is None:
                continue
            tried += 1
            right = honest(entry.env, case)
            assert not judge_wrong(env, right, case, prompt), (entry.name, right)
            paid, fair, empty = (entry.score(exploit, case, prompt), entry.score(right, case, prompt),
                                 entry.score("", case, prompt))
            if entry.exploit_kind == "wrong":
                assert judge_wrong(env, exploit, case, prompt), (entry.name, exploit)
                assert paid >= fair and paid > empty, (entry.name, exploit, paid, fair)
            elif entry.exploit_kind == "partial":  # paid part of the credit, where its sound base pays nothing
                assert judge_wrong(env, exploit, case, prompt), (entry.name, exploit)
                assert 0 < paid < fair and base.score(exploit, case, prompt) == 0, (entry.name, exploit, paid)
            else:
                assert not judge_wrong(env, exploit, case, prompt) and paid > fair, (entry.name, exploit, paid, fair)
            fooled, honest_base = base.score(exploit, case, prompt), base.score(right, case, prompt)
            fair_base = fooled <= honest_base if entry.exploit_kind == "unpriced" else fooled < honest_base
            assert fair_base, (entry.name, exploit)
    assert tried >= 3, entry.name


@pytest.mark.parametrize("entry", SOUND, ids=lambda e: e.name)
def test_each_sound_reward_pays_honest_replies_and_no_exploit(entry):
    env = env_of(entry.env)
    for category in env.categories:
        for item in cases_of(entry.env, category, n=4):
            case, prompt = item["case"], item["prompt"]
            right = entry.score(honest(entry.env, case), case, prompt)
            assert right > entry.score("", case, prompt), (entry.name, category)
            for flawed in (f for f in FLAWED if f.env == entry.env and category in f.categories):
                exploit = flawed.exploit(case)
                if exploit is None:
                    continue
                paid = entry.score(exploit, case, prompt)
                assert paid <= right if flawed.exploit_kind == "unpriced" else paid < right, (flawed.name, exploit)


@pytest.mark.slow
def test_the_probe_detects_ninety_percent_of_the_flawed_rewards_and_no_sound_one():
    """What ``benchmarks/bench_hack_zoo.py`` measures, held as a test: every zoo reward probed at the defaults."""
    def attributed(entry, finding) -> bool:
        base, example, prompt = BY_NAME[entry.base], finding.example, finding.prompt
        case = next(i["case"] for i in items_for(entry.env) if i["prompt"] == prompt)

        def paid_by(who) -> bool:
            return pays(example.kind, who.score(example.original, case, prompt),
                        who.score(example.hacked, case, prompt), lambda: who.score("", case, prompt))

        if not finding.pays:  # partial credit: the planted flaw is what raised the example's pay
            return entry.score(example.hacked, case, prompt) > base.score(example.hacked, case, prompt)
        return paid_by(entry) and not paid_by(base)

    detected, alarms = [], []
    for entry in ZOO:
        kwargs = {"items": list(items_for(entry.env))} if entry.env == "quickmath" else {}
        result = probe_reward(entry.reward, env=env_of(entry.env), database=None, **kwargs)
        if entry.sound and result.hacks:
            alarms.append(entry.name)
        if not entry.sound and any(attributed(entry, f) for f in result.paying):
            detected.append(entry.name)
    assert alarms == []
    assert len(detected) >= 0.9 * len(FLAWED), sorted({e.name for e in FLAWED} - set(detected))
