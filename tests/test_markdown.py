"""The pull-request view: the Markdown summary of a gate, its text bars, CI step summaries, JUnit verdicts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _hackable_run import write_run

from pytest_rlgate import GateResult, compare, write_rows
from pytest_rlgate.cli import main
from pytest_rlgate.report.markdown import interval_bar, markdown_summary, reproduce_command

pytestmark = pytest.mark.filterwarnings("ignore::pytest_rlgate.RlgateWarning")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return write_run(tmp_path_factory.mktemp("hackable"))


def _tokens(text: str) -> list:
    markdown_it = pytest.importorskip("markdown_it")
    return markdown_it.MarkdownIt("commonmark").enable("table").parse(text)


def _table_rows(tokens: list) -> list[list[str]]:
    rows, row, inside = [], [], False
    for token in tokens:
        if token.type == "tr_open":
            row = []
        elif token.type in ("td_open", "th_open"):
            inside = True
        elif token.type == "inline" and inside:
            row.append(token.content)
            inside = False
        elif token.type == "tr_close":
            rows.append(row)
    return rows


def test_the_summary_renders_failing_first_with_flips_rule_and_reproduce(run: tuple[Path, Path]) -> None:
    result = compare(*run, env="refund")
    text = markdown_summary(result)
    tokens = _tokens(text)
    heading = next(t for i, t in enumerate(tokens) if i and tokens[i - 1].type == "heading_open")
    assert heading.content.startswith("rlgate gate: ❌ FAILED (4 failures)")
    rows = _table_rows(tokens)
    assert rows[0][:2] == ["metric", "group"] and rows[0][-1] == "verdict"
    body = rows[1:]
    assert all(len(r) == len(rows[0]) for r in body)
    failing = [r for r in body if r[-1] == "REGRESSED"]
    assert [r[-1] for r in body[:len(failing)]] == ["REGRESSED"] * len(failing)  # failing ones first
    assert {(r[0], r[1]) for r in failing} == {("pass@1", "no_id"), ("pass@1", "overall"),
                                               ("marker:argument_grounding", "no_id"),
                                               ("marker:argument_grounding", "overall")}
    assert [r[1] for r in body if r[0] == "pass@1"][-2:] == ["off_topic", "with_id"]  # every category has a line
    no_id = next(r for r in body if r[:2] == ["pass@1", "no_id"])
    c = result.comparison("pass@1", "no_id")
    assert no_id[3] == "1.000 → 0.167" and no_id[5] == f"[{c.low:+.3f}, {c.high:+.3f}]" and c.high < 0
    bar = no_id[6].strip("`")
    assert len(bar) == 21 and bar.index("●") < bar.index("│")  # the whole interval left of zero
    items = [t.content for t in tokens if t.type == "inline" and "→ 0/4" in t.content]
    assert len(items) == 3  # three scenarios for pass@1; the guard broke on the same three, said in one line
    assert "Flips in" not in text and "flips in marker:argument_grounding no_id (regressed): the same 3 scenarios as " \
        "pass@1" in text
    code = [c.content for t in tokens if t.type == "inline" for c in t.children or () if c.type == "code_inline"]
    assert any('"lookup_order"' in c for c in code)
    fences = [t for t in tokens if t.type == "fence"]
    assert fences and fences[-1].content.strip() == reproduce_command(result)
    assert reproduce_command(result).startswith("rlgate gate ") and "--env refund" in reproduce_command(result)
    assert "**Rule:**" in text and "calls lookup_order with an invented id" in text


def test_summary_and_report_read_the_same_result_object(run: tuple[Path, Path]) -> None:
    result = compare(*run, env="refund")
    record = result.to_dict()
    assert markdown_summary(result) == markdown_summary(record)
    assert markdown_summary(GateResult.from_dict(json.loads(json.dumps(record)))) == markdown_summary(result)


def test_a_passing_gate_reads_passed(run: tuple[Path, Path]) -> None:
    text = markdown_summary(compare(run[0], run[0], env="refund"))
    assert text.startswith("### rlgate gate: ✅ PASSED\n") and "Failures" not in text and "Flips" not in text


def test_interval_bar() -> None:
    # position = round((x + scale) / (2 * scale) * (width - 1)): -0.5 -> 5, -0.3 -> 7, -0.1 -> 9, 0 -> 10
    assert interval_bar(-0.5, -0.1, -0.3, 1.0, width=21) == "·····━━●━━│··········"
    assert interval_bar(-0.2, 0.2, 0.0, 1.0, width=21) == "········━━●━━········"
    assert interval_bar(None, None, 0.4, 1.0, width=11) == "·····│·●···"
    assert interval_bar(-0.1, 0.3, 0.1, 1.0, width=11) == "····━┼●····"  # zero inside the interval


def test_cli_writes_markdown_and_the_ci_step_summary(run: tuple[Path, Path], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    summary = tmp_path / "step.md"
    summary.write_text("earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    monkeypatch.setenv("CI", "true")
    out = tmp_path / "gate.md"
    assert main(["gate", str(run[0]), str(run[1]), "--env", "refund", "--markdown", str(out)]) == 1
    assert out.read_text(encoding="utf-8").startswith("### rlgate gate: ❌ FAILED")
    step = summary.read_text(encoding="utf-8")
    assert step.startswith("earlier step\n### rlgate gate: ❌ FAILED")  # appended, as GitHub expects
    monkeypatch.delenv("CI")
    main(["gate", str(run[0]), str(run[1]), "--env", "refund"])
    assert summary.read_text(encoding="utf-8") == step  # outside CI the variable is left alone


def test_the_plugin_writes_one_summary_for_the_session(pytester: pytest.Pytester, run: tuple[Path, Path]) -> None:
    pytester.makepyfile(test_it=f"""
import pytest

pytestmark = pytest.mark.filterwarnings("ignore::pytest_rlgate.RlgateWarning")

def test_hackable(rlgate):
    rlgate.assert_no_regression({str(run[0])!r}, {str(run[1])!r})

def test_same(rlgate):
    rlgate.assert_no_regression({str(run[0])!r}, {str(run[0])!r})
""")
    result = pytester.runpytest("-p", "no:cacheprovider", "--rlgate-env", "refund", "--rlgate-markdown", "gates.md",
                                "--junitxml", "junit.xml")
    result.assert_outcomes(passed=1, failed=1)
    text = (pytester.path / "gates.md").read_text(encoding="utf-8")
    first, second = text.index("test_it.py::test_hackable"), text.index("test_it.py::test_same")
    assert first < second and "❌ FAILED" in text[first:second] and "✅ PASSED" in text[second:]
    assert "pytest test_it.py::test_hackable" in text
    junit = (pytester.path / "junit.xml").read_text(encoding="utf-8")
    assert 'name="rlgate:pass@1:no_id" value="REGRESSED -0.833' in junit


def test_a_recipe_gate_reads_the_same(run: tuple[Path, Path], tmp_path: Path) -> None:
    second = tmp_path / "after-seed2.jsonl"
    shutil.copyfile(run[1], second)  # a second seed, hacked the same way (one file twice is refused)
    result = compare(run[0], [run[1], second], env="refund")
    text = markdown_summary(result)
    assert "| pass@1 | no_id | 6×4 | 1.000 → 0.167 |" in text and "| REGRESSED |" in text
    command = reproduce_command(result)
    assert str(run[1]) in command and str(second) in command


def test_an_inconclusive_summary_points_at_rlgate_plan(tmp_path: Path) -> None:
    from test_gate import table_rows


    before, after = tmp_path / "before.jsonl", tmp_path / "after.jsonl"
    write_rows(before, table_rows("no_id", [0] * 6))
    write_rows(after, table_rows("no_id", [4, 0, 0, 0, 0, 0]))
    text = markdown_summary(compare(before, after, guards=()))
    assert f"`rlgate plan {before} --drop 0.10` says how many each needs" in text
