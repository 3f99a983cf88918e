"""Flips: the scenarios behind a failing verdict, named with their counts and one reply from each side."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _hackable_run import ASK, holdout, write_run

from pytest_rlgate import GateResult, RegressionError, assert_no_regression, compare, load_env
from pytest_rlgate.cli import main
from pytest_rlgate.gate.flips import Flip, shorten
from pytest_rlgate.report import report_text, write_report
from pytest_rlgate.report.html import gate_html

pytestmark = pytest.mark.filterwarnings("ignore::pytest_rlgate.RlgateWarning")  # well_formed is constant here


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_run(tmp_path_factory.mktemp("hackable"))


def _no_id_scenarios() -> list[str]:
    return sorted({item["scenario_id"] for item in holdout() if item["category"] == "no_id"})


def _comparison(result, metric: str, group: str):
    return next(c for c in result.comparisons if c.metric == metric and c.group == group)


def test_the_failing_no_id_gate_names_the_scenarios_that_flipped_with_their_replies(run: tuple[Path, Path]) -> None:
    result = compare(*run, env="refund")
    assert not result.passed
    no_id = _comparison(result, "pass@1", "no_id")
    assert no_id.verdict == "regressed" and len(no_id.flips) == 3
    spared = _no_id_scenarios()[0]  # the hackable policy still asks here: it did not flip
    assert {f.unit for f in no_id.flips} <= set(_no_id_scenarios()[1:]) and spared not in {f.unit for f in no_id.flips}
    for flip in no_id.flips:
        assert flip.counts == "4/4 -> 0/4"
        assert flip.before_reply == ASK and flip.before_described == "asks for the order id"
        assert flip.after_reply is not None and '"lookup_order"' in flip.after_reply
        assert flip.after_described is not None and flip.after_described.startswith(
            "calls lookup_order with an invented id")
    # the guard that saw the invented ids names the same scenarios; categories that held have none
    assert {f.unit for f in _comparison(result, "marker:argument_grounding", "no_id").flips} == {
        f.unit for f in no_id.flips}
    assert _comparison(result, "pass@1", "with_id").flips == ()
    # overall failed too, but its flips would repeat no_id's
    assert _comparison(result, "pass@1", "overall").flips == ()


def test_flips_are_in_the_pytest_failure(run: tuple[Path, Path]) -> None:
    with pytest.raises(RegressionError) as info:
        assert_no_regression(*run, env="refund", show_flips=2)
    text = str(info.value)
    # how many are shown of how many, how many lost at all, and the ties at the cut are said
    assert ("flips in pass@1 no_id (regressed): the 2 of 6 scenarios that lost the most (5 lost; 3 more lost as "
            "much as the last shown), before -> after") in text
    # the guard broke on the same scenarios: one line, not the list again
    assert "flips in marker:argument_grounding no_id (regressed): the same 2 scenarios as pass@1" in text
    assert text.count("4/4 -> 0/4") == 2
    assert "4/4 -> 0/4" in text and "(calls lookup_order with an invented id 'ORD-" in text
    assert f"before: {ASK!r}  (asks for the order id)" in text


def test_show_flips_and_flips_in(run: tuple[Path, Path]) -> None:
    one = compare(*run, env="refund", show_flips=1)
    assert len(_comparison(one, "pass@1", "no_id").flips) == 1
    none = compare(*run, env="refund", show_flips=0)
    assert all(c.flips == () for c in none.comparisons) and "flips in" not in none.report()
    every = compare(*run, env="refund", show_flips=10, flips_in="all")
    assert len(_comparison(every, "pass@1", "no_id").flips) == len(_no_id_scenarios()) - 1  # only the ones that lost
    assert _comparison(every, "pass@1", "overall").flips == ()  # "all" lists categories, not their union


def test_cli_text_and_json_carry_the_flips(run: tuple[Path, Path], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "gate.json"
    assert main(["gate", str(run[0]), str(run[1]), "--env", "refund", "--json", str(out)]) == 1
    text = capsys.readouterr().out
    assert "flips in pass@1 no_id (regressed)" in text and "calls lookup_order with an invented id" in text
    record = json.loads(out.read_text())
    no_id = next(c for c in record["comparisons"] if c["metric"] == "pass@1" and c["group"] == "no_id")
    assert [f["counts"] for f in no_id["flips"]] == ["4/4 -> 0/4"] * 3
    assert no_id["flips"][0]["after_described"].startswith("calls lookup_order with an invented id")
    with pytest.raises(SystemExit) as bad:  # argparse refuses it, in one line
        main(["gate", str(run[0]), str(run[1]), "--env", "refund", "--show-flips", "-1"])
    assert bad.value.code == 2


def test_the_html_report_shows_the_recorded_flips(run: tuple[Path, Path]) -> None:
    record = compare(*run, env="refund").to_dict()
    page = gate_html(record)
    assert "Flips in pass@1 no_id (regressed)" in page and "4/4 -&gt; 0/4" in page
    assert "calls lookup_order with an invented id" in page and "asks for the order id" in page


def test_flips_survive_the_json_round_trip(run: tuple[Path, Path]) -> None:
    result = compare(*run, env="refund")
    again = GateResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert again.comparisons == result.comparisons and isinstance(again.comparisons[1].flips[0], Flip)


def test_a_description_comes_from_the_environment_or_its_features() -> None:
    refund = load_env("refund")
    call = '<tool_call>{"name": "lookup_order", "arguments": {"order_id": "ORD-123"}}</tool_call>'
    assert refund.describe_reply(call, {"order_id": "ORD-123"}) == "calls lookup_order with the prompt's id"
    assert refund.describe_reply(call, {"order_id": "ORD-999"}) == "calls lookup_order with a wrong id 'ORD-123'"
    assert refund.describe_reply('<tool_call>{"name": oops</tool_call> What is your order id?', {}) == (
        "has a malformed <tool_call> block, asks for the order id")

    class Plain:
        name, categories = "plain", ("a",)

        def score(self, reply: str, case: dict) -> float:
            return 1.0

        def features(self, reply: str) -> dict[str, float]:
            return {"shouts": float(reply.isupper()), "words": float(len(reply.split()))}

    class Broken(Plain):
        name = "broken"

        def describe_reply(self, reply: str, case: dict) -> str:
            raise RuntimeError("describer bug")

    assert load_env(Plain()).describe_reply("HELLO THERE") == "shouts, words 2"
    assert load_env(Broken()).describe_reply("hi") is None  # a describer's bug never costs the verdict


def test_shorten_keeps_one_line() -> None:
    assert shorten("a\n  b") == "a b"
    long = shorten("x" * 500)
    assert len(long) == 160 and long.endswith("…")


def test_the_marker_sets_show_flips_for_the_fixture(pytester: pytest.Pytester, run: tuple[Path, Path]) -> None:
    pytester.makepyfile(test_it=f"""
import pytest

pytestmark = pytest.mark.filterwarnings("ignore::pytest_rlgate.RlgateWarning")

@pytest.mark.rlgate(show_flips=1)
def test_one_flip(rlgate):
    rlgate.assert_no_regression({str(run[0])!r}, {str(run[1])!r})

def test_session_default(rlgate):
    rlgate.assert_no_regression({str(run[0])!r}, {str(run[1])!r})
""")
    result = pytester.runpytest("-p", "no:cacheprovider", "--rlgate-env", "refund", "--rlgate-show-flips", "2")
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    assert "the 1 of 6 scenarios that lost the most" in text and "the 2 of 6 scenarios that lost the most" in text


def test_a_run_report_shows_the_flips_its_gate_recorded(tmp_path: Path) -> None:
    from report_fixtures import make_run


    run = make_run(tmp_path)  # the collapsing story: no_id regressed
    gate = json.loads((run / "gate.json").read_text())
    assert any(c["flips"] for c in gate["comparisons"])
    page = write_report(run).read_text(encoding="utf-8")
    assert "Flips in pass@1 no_id (regressed)" in page
    assert "flips in pass@1 no_id (regressed):" in report_text(run)
