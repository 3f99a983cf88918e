"""Release policies: tiers, drop limits, required categories and min_units, from YAML or TOML files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _hackable_run import write_run
from test_gate import table_rows

from pytest_rlgate import UsageError, compare
from pytest_rlgate.cli import main
from pytest_rlgate.errors import RlgateDeprecationWarning
from pytest_rlgate.gate import load_release_policy
from pytest_rlgate.gate.options import GateOptions

pytestmark = pytest.mark.filterwarnings("ignore::pytest_rlgate.RlgateWarning")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_run(tmp_path_factory.mktemp("hackable"))


def _policy(tmp_path: Path, text: str, name: str = "release.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _cmp(result, metric: str, group: str):
    return next(c for c in result.comparisons if c.metric == metric and c.group == group)


def test_advisory_no_id_turns_the_hackable_failure_into_a_pass(run: tuple[Path, Path], tmp_path: Path) -> None:
    assert not compare(*run, env="refund").passed
    policy = _policy(tmp_path, "rules:\n  no_id: advisory\n  off_topic: {tier: supporting}\n")
    result = compare(*run, env="refund", release_policy=policy)
    assert result.passed, result.failures
    no_id = _cmp(result, "pass@1", "no_id")
    assert no_id.verdict == "regressed" and no_id.tier == "advisory"
    assert no_id.decided_by == f"{policy}:2 no_id"
    assert _cmp(result, "marker:argument_grounding", "no_id").tier == "advisory"  # its category's rule
    assert _cmp(result, "pass@1", "overall").decided_by == f"{policy} (no rule: overall is advisory)"
    assert "release policy" in result.rule and "no_id advisory (line 2)" in result.rule
    assert "advisory" in result.report()


def test_critical_no_id_keeps_it_failing_and_names_the_line(run: tuple[Path, Path], tmp_path: Path) -> None:
    policy = _policy(tmp_path, "tiers:\n  critical: {confidence: 0.90}\nrules:\n  no_id:\n    tier: critical\n")
    result = compare(*run, env="refund", release_policy=policy)
    assert not result.passed
    assert any(f.startswith("pass@1 regressed in no_id") and f.endswith(f"[critical ({policy}:4 no_id)]")
               for f in result.failures)
    no_id = _cmp(result, "pass@1", "no_id")
    # inside the family a critical tier at 0.90 is held to twice the level of the supporting ones at 0.95
    assert no_id.tier == "critical" and "weight 2 (90% tier)" in no_id.flags
    assert no_id.flips  # the failure still names the scenarios
    message = result.message()
    assert f"[critical ({policy}:4 no_id)]" in message and "failure" in message.splitlines()[0]


def test_the_same_policy_in_toml(run: tuple[Path, Path], tmp_path: Path) -> None:
    policy = _policy(tmp_path, '[rules.no_id]\ntier = "critical"\n\n[rules.off_topic]\ntier = "advisory"\n',
                     "release.toml")
    result = compare(*run, env="refund", release_policy=policy)
    assert not result.passed and _cmp(result, "pass@1", "no_id").decided_by == f"{policy}:1 no_id"
    assert _cmp(result, "pass@1", "off_topic").decided_by == f"{policy}:4 off_topic"


@pytest.mark.parametrize(("text", "line", "match"), [
    ("rules:\n  no_id: {tier: critical, treshold: 2}\n", 2, "unknown key 'treshold' in rule 'no_id'"),
    ("rules:\n  no_id: {tier: vital}\n", 2, "tier must be one of critical, supporting, advisory"),
    ("rules:\n  no_id: advisory\n  no_idd: critical\n", 3, "'no_idd' matches no category of the rows"),
    ("rules:\n  'marker:grounding': critical\n", 2, "matches no guarded marker"),
    ("rules:\n  no_id: {max_drop: 2}\n", 2, "max_drop must be a number in [0, 1)"),
    ("policy:\n  no_id: advisory\n", 1, "unknown key 'policy'"),
    ("tiers:\n  advisory: {confidence: 0.9}\nrules:\n  no_id: advisory\n", 2, "advisory never fails"),
    ("rules:\n  no_id: [critical]\n", 2, "at most tiers/rules"),
])
def test_a_bad_policy_is_one_error_naming_the_line(run: tuple[Path, Path], tmp_path: Path, text: str, line: int,
                                                    match: str) -> None:
    policy = _policy(tmp_path, text)
    with pytest.raises(UsageError, match=re.escape(match)) as info:
        compare(*run, env="refund", release_policy=policy)
    assert str(info.value).startswith(f"{policy}:{line}: ")
    assert "\n" not in str(info.value)


def test_a_bad_toml_key_names_its_line(tmp_path: Path) -> None:
    policy = _policy(tmp_path, '[rules.no_id]\ntier = "critical"\nmin_unit = 4\n', "release.toml")
    with pytest.raises(UsageError, match=r"release.toml:3: unknown key 'min_unit'"):
        load_release_policy(policy)


def test_required_min_units_and_drop_limits(tmp_path: Path) -> None:
    before = table_rows("big", [0] * 12) + table_rows("small", [0, 0, 0, 0]) + table_rows("low", [3] * 10)
    after = table_rows("big", [1] * 12) + table_rows("small", [0, 0, 0, 0]) + table_rows("low", [4, 3, 3, 2, 3] * 2)
    # big: 1.00 -> 0.75 everywhere (regressed); low: 0.25 -> 0.25, interval [-0.125, +0.125]: not
    # regressed, but its lower bound is half the baseline
    policy = _policy(tmp_path, "rules:\n  small: {tier: critical, min_units: 6}\n  big: advisory\n"
                               "  low: {max_relative_drop: 0.3}\n  missing: {required: true}\n")
    result = compare(before, after, guards=(), release_policy=policy)
    small = _cmp(result, "pass@1", "small")
    assert small.verdict == "insufficient" and "fewer than min_units 6" in small.flags
    assert any("small is insufficient for a critical tier" in f for f in result.failures)
    assert any("required category 'missing' is missing from both sides" in f and f"{policy}:5" in f
               for f in result.failures)
    assert any("low may have dropped more than max_relative_drop 30%" in f for f in result.failures)
    assert not any(" big" in f for f in result.failures)  # advisory: its regression is shown, never failed
    lenient = _policy(tmp_path, "rules:\n  small: {tier: supporting, min_units: 6}\n  big: advisory\n",
                      "lenient.yaml")
    relaxed = compare(before, after, guards=(), release_policy=lenient)
    assert _cmp(relaxed, "pass@1", "small").verdict == "insufficient" and relaxed.passed


def test_max_drop_per_rule(tmp_path: Path) -> None:
    before = table_rows("a", [0] * 10)
    after = table_rows("a", [1] + [0] * 9)  # 1.000 -> 0.975: flat, but its lower bound is below -0.02
    loose = compare(before, after, guards=())
    assert loose.passed
    policy = _policy(tmp_path, "rules:\n  a: {max_drop: 0.02}\n")
    tight = compare(before, after, guards=(), release_policy=policy)
    assert any("may have dropped more than max_drop 0.020" in f and f"{policy}:2 a" in f for f in tight.failures)


def test_globs_and_marker_rules(run: tuple[Path, Path], tmp_path: Path) -> None:
    policy = _policy(tmp_path, "rules:\n  '*': advisory\n  'marker:*': critical\n")
    result = compare(*run, env="refund", release_policy=policy)
    assert _cmp(result, "pass@1", "no_id").tier == "advisory"
    assert _cmp(result, "marker:argument_grounding", "no_id").tier == "critical"
    assert not result.passed and all("marker:argument_grounding" in f for f in result.failures)


def test_cli_policy_flag(run: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    advisory = _policy(tmp_path, "rules:\n  no_id: advisory\n")
    critical = _policy(tmp_path, "rules:\n  no_id: critical\n", "critical.yaml")
    args = ["gate", str(run[0]), str(run[1]), "--env", "refund"]
    assert main([*args, "--release-policy", str(advisory)]) == 0
    assert main([*args, "--release-policy", str(critical)]) == 1
    assert f"critical ({critical}:2 no_id)" in capsys.readouterr().out
    typo = _policy(tmp_path, "rules:\n  noid: critical\n", "typo.yaml")
    assert main([*args, "--release-policy", str(typo)]) == 2
    assert f"{typo}:2: 'noid' matches no category" in capsys.readouterr().err
    assert main([*args, "--release-policy", str(tmp_path / "absent.yaml")]) == 2


def test_ini_policy_in_pytest(pytester: pytest.Pytester, run: tuple[Path, Path]) -> None:
    (pytester.path / "release.yaml").write_text("rules:\n  no_id: advisory\n", encoding="utf-8")
    pytester.makeini("[pytest]\nrlgate_release_policy = release.yaml\nrlgate_env = refund\n")
    pytester.makepyfile(test_it=f"""
import pytest

pytestmark = pytest.mark.filterwarnings("ignore::pytest_rlgate.RlgateWarning")

def test_advisory_from_the_ini(rlgate):
    rlgate.assert_no_regression({str(run[0])!r}, {str(run[1])!r})

@pytest.mark.rlgate(release_policy="critical.yaml")
def test_critical_from_the_marker(rlgate):
    rlgate.assert_no_regression({str(run[0])!r}, {str(run[1])!r})
""")
    (pytester.path / "critical.yaml").write_text("rules:\n  no_id: critical\n", encoding="utf-8")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*critical.yaml:2 no_id*"])
    (pytester.path / "release.yaml").write_text("rules:\n  no_id: {tier: advisory, oops: 1}\n", encoding="utf-8")
    bad = pytester.runpytest("-p", "no:cacheprovider")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*rlgate_release_policy*release.yaml:2: unknown key 'oops'*"])


def test_an_explicit_family_level_wins_over_the_policys_even_at_the_default(run: tuple[Path, Path], tmp_path: Path,
                                                                               capsys: pytest.CaptureFixture[str]
                                                                               ) -> None:
    policy = _policy(tmp_path, "family_level: 0.2\nrules:\n  no_id: supporting\n")
    # not given: the policy's level
    assert compare(*run, env="refund", release_policy=policy).family.level == pytest.approx(0.2)
    assert compare(*run, env="refund", release_policy=policy, family_level=0.05).family.level == pytest.approx(0.05)
    args = ["gate", str(run[0]), str(run[1]), "--env", "refund", "--release-policy", str(policy), "--json"]
    for extra, level in (([], 0.2), (["--family-level", "0.05"], 0.05)):
        main([*args, str(tmp_path / "out.json"), *extra])
        record = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
        assert record["family"]["level"] == pytest.approx(level), extra
    assert "--family-level 0.05" in " ".join(GateOptions.build(family_level=0.05).to_argv())  # reproduced as given
    capsys.readouterr()


def test_the_old_spellings_still_read_for_one_release(run: tuple[Path, Path], tmp_path: Path,
                                                      pytester: pytest.Pytester) -> None:
    policy = _policy(tmp_path, "rules:\n  no_id: advisory\n")
    with pytest.warns(RlgateDeprecationWarning, match="policy= is now release_policy="):
        assert compare(*run, env="refund", policy=policy).passed
    with pytest.warns(RlgateDeprecationWarning, match="--policy is now --release-policy"):
        assert main(["gate", str(run[0]), str(run[1]), "--env", "refund", "--policy", str(policy)]) == 0
    (pytester.path / "release.yaml").write_text("rules:\n  no_id: advisory\n", encoding="utf-8")
    pytester.makeini("[pytest]\nrlgate_policy = release.yaml\nrlgate_env = refund\n")
    pytester.makepyfile(f"""
def test_advisory(rlgate):
    rlgate.assert_no_regression({str(run[0])!r}, {str(run[1])!r})
""")
    result = pytester.runpytest("-p", "no:cacheprovider", "-W", "always")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*rlgate_policy is now --rlgate-release-policy / rlgate_release_policy*"])
