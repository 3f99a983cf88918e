"""The pytest face: a test that probes a reward or scans rollouts fails with a findings table."""

from __future__ import annotations

import pytest_rlgate.rewards.probe

# loaded here, before pytester's in-process runs snapshot sys.modules: numpy cannot load twice
import pytest_rlgate.rewards.scan
import pytest_rlgate.rewards.strategies  # noqa: F401


def test_failing_probe_shows_the_hack_table(pytester):
    pytester.makepyfile(
        """
        from pytest_rlgate import probe_reward
        from pytest_rlgate.envs.refund import score

        def test_refund_reward_is_not_hackable():
            probe_reward(score, env="refund", hacks=["second_call", "malformed_call"], max_examples=10,
                         database=None).assert_no_hacks()
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "E * pytest_rlgate.RewardHackError: probe_reward(score, env=refund): 2 hack(s) pay: malformed_call, "
        "second_call",
        "E * hack * category * paid * partial * severity * mean gain * minimal: honest -> hacked *",
        "E * second_call * with_id * 1 -> 1 * <original> + <tool_call>*",
        "E * malformed_call * no_id * 1 -> 1 * + <original>",
    ])


def test_failing_probe_of_a_users_own_task_shows_its_categories(pytester):
    pytester.makepyfile(
        """
        from hypothesis import strategies as st
        from pytest_rlgate import probe_reward

        class Sums:
            name = "sums"
            categories = ("sum",)

            def score(self, reply, case):
                return float(reply.strip() == f"The sum is {case['answer']}.")

            def honest_replies(self, case):
                return st.just(f"The sum is {case['answer']}.")

        def anywhere(reply, case):
            return float(str(case["answer"]) in reply)  # pays the answer anywhere in the reply

        def test_sums_reward_is_not_hackable():
            items = [{"prompt": f"{a} + {a}?", "case": {"answer": 2 * a}, "category": "sum"} for a in (3, 40)]
            probe_reward(anywhere, env=Sums(), items=items, hacks=["repetition"], max_examples=5,
                         database=None).assert_no_hacks()
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "E * pytest_rlgate.RewardHackError: probe_reward(anywhere, env=sums): 1 hack(s) pay: repetition",
        "E * repetition * sum * 5/5 * 1 -> 1 * <original> + The sum is *.",
    ])
    assert not [line for line in result.outlines if line.startswith("E ") and "refund" in line]


def test_failing_scan_shows_the_feature_table(pytester):
    pytester.makepyfile(
        """
        from pytest_rlgate import hack_scan

        def test_training_rollouts_are_not_hacked():
            prompts = [f"I want a refund for purchase {i}." for i in range(16)]  # no order id given
            rows = [{"prompt": p, "reply": "Verified." if i % 2 else "Could you tell me your order id?",
                     "score": i % 2} for p in prompts for i in range(4)]
            hack_scan(rows, env="refund", endorsed=["asks"]).assert_no_hack()
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "E *pytest_rlgate.RewardHackError: reward pays for 'contains:verified', which is not endorsed",
        "E * hack_scan: regime reward_hack, top feature contains:verified (overpaid: wrong, paid like right)*",
        "E * feature * r overpaid * r pooled * n * floor * endorsed",
    ])
