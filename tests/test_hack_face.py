"""The pytest face: a test that probes a reward or scans rollouts fails with a findings table."""

from __future__ import annotations

# loaded here, before pytester's in-process runs snapshot sys.modules: numpy cannot load twice
import pytest_rlgate.hacks  # noqa: F401
import pytest_rlgate.probe  # noqa: F401
import pytest_rlgate.strategies  # noqa: F401


def test_failing_probe_shows_the_hack_table(pytester):
    pytester.makepyfile(
        """
        from pytest_rlgate import probe_reward
        from pytest_rlgate.envs.refund import score

        def test_refund_reward_is_not_hackable():
            probe_reward(score, hacks=["format_bonus", "padding"], max_examples=10).assert_no_hacks()
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "E * pytest_rlgate.RewardHackError: probe_reward(score): 2 hack(s) pay: format_bonus, padding",
        "E * hack * category * paid * mean gain * max gain * minimal *",
        "E * format_bonus * with_id * 10/10 * 0.3 * 0 -> 0.3 *",
        "E * padding * with_id *",
    ])


def test_failing_scan_shows_the_feature_table(pytester):
    pytester.makepyfile(
        """
        from pytest_rlgate import hack_scan

        def test_training_rollouts_are_not_hacked():
            lookup = '<tool_call>{"name": "lookup_order", "arguments": {"order_id": "ORD-123"}}</tool_call>'
            rows = [{"prompt": f"p{i // 4}", "reply": "Verified." if i % 2 else lookup, "score": i % 2}
                    for i in range(64)]
            hack_scan(rows, endorsed=["lookup_order"]).assert_no_hack()
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "E *pytest_rlgate.RewardHackError: reward pays for 'contains:verified', which is not endorsed",
        "E * hack_scan: regime reward_hack, top feature contains:verified*",
        "E * feature * r within * r pooled * n * floor * endorsed",
    ])
