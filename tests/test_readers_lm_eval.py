"""lm-evaluation-harness ``--log_samples`` output, written by the real harness, as gate sides.

The committed logs (tests/data/harness/lm_eval) are two real ``lm_eval run`` outputs on the
shipped tiny refund policy: the base, and a candidate with a shorter generation budget
that cuts the with-id tool calls short (``make_lm_eval.py`` regenerates them; the slow test
at the end does so live).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _harness import LM_EVAL, gate_deltas, paired_category_deltas

from pytest_rlgate import DataError, compare, read_rows
from pytest_rlgate.cli import main
from pytest_rlgate.data import detect_format

BASE, CANDIDATE = LM_EVAL / "base", LM_EVAL / "candidate"


def _samples(folder: Path, filter_name: str = "none") -> dict[tuple[str, str], list[float]]:
    """(doc.category, task/doc_id) -> [metric] straight from the JSONL, the way lm-eval wrote it."""
    out: dict[tuple[str, str], list[float]] = {}
    for file in sorted(folder.glob("samples_*.jsonl")):
        task = file.name[len("samples_"):].rsplit("_", 1)[0]
        for line in file.read_text().splitlines():
            rec = json.loads(line)
            if rec["filter"] == filter_name:
                out[(rec["doc"]["category"], f"{task}/{rec['doc_id']}")] = [rec[rec["metrics"][0]]]
    return out


def test_the_committed_logs_are_what_lm_eval_writes() -> None:
    for side in (BASE, CANDIDATE):
        assert detect_format(side) == "lm-eval"
        results = next(side.glob("results_*.json"))
        data = json.loads(results.read_text())
        assert data["versions"] == {"rg_refund": 2.0, "rg_refund_choice": 1.0}
        assert sorted(p.name.split("_2026")[0] for p in side.glob("samples_*.jsonl")) == [
            "samples_rg_refund", "samples_rg_refund_choice"]


def test_per_category_deltas_equal_a_paired_reference() -> None:
    before = read_rows(BASE, filter="none", category="doc.category")
    after = read_rows(CANDIDATE, filter="none", category="doc.category")
    result = compare(before, after, n_resamples=500)
    assert gate_deltas(result) == pytest.approx(paired_category_deltas(_samples(BASE), _samples(CANDIDATE)))
    assert gate_deltas(result)["with_id"] < -0.4
    assert before.header["source"] | {"path": None, "results": None} == {
        **before.header["source"], "harness": "lm-eval", "version": "0.4.13",
        "tasks": {"rg_refund": "2.0", "rg_refund_choice": "1.0"}, "path": None, "results": None}


def test_the_default_category_is_the_leaf_task_and_units_are_task_and_doc() -> None:
    rows = list(read_rows(BASE, filter="first-line"))
    assert {r["category"] for r in rows} == {"rg_refund", "rg_refund_choice"}
    assert len({r["scenario_id"] for r in rows}) == len(rows) == 80
    choice = next(r for r in rows if r["category"] == "rg_refund_choice")
    assert choice["reply"] in {"Let me look up that order for you.", "Sorry, I can only help with orders and refunds.",
                               "Which order is it? Please send the order id.", "Here is a poem about the sea."}


def test_rlgate_gate_fails_naming_the_regressed_category(capsys) -> None:
    code = main(["gate", str(BASE), str(CANDIDATE), "--filter", "none", "--category-key", "doc.category",
                 "--resamples", "500"])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL: pass@1 regressed in with_id" in out
    assert not any("regressed in no_id" in line or "regressed in off_topic" in line for line in out.splitlines())


def test_several_filters_need_one_chosen(capsys) -> None:
    assert main(["gate", str(BASE), str(CANDIDATE)]) == 2
    err = capsys.readouterr().err
    assert "task 'rg_refund' was scored under 2 filters (first-line, none); choose one with --filter NAME" in err


def _copy(tmp_path: Path, name: str, edit_line=None, edit_results=None) -> Path:
    target = tmp_path / name
    shutil.copytree(CANDIDATE, target)
    if edit_line is not None:
        samples = next(target.glob("samples_rg_refund_2*.jsonl"))
        lines = samples.read_text().splitlines()
        rec = json.loads(lines[3])
        edit_line(rec)
        lines[3] = json.dumps(rec)
        samples.write_text("\n".join(lines) + "\n")
    if edit_results is not None:
        results = next(target.glob("results_*.json"))
        data = json.loads(results.read_text())
        edit_results(data)
        results.write_text(json.dumps(data))
    return target


def test_a_changed_prompt_is_refused_unless_allowed(tmp_path: Path, capsys) -> None:
    changed = _copy(tmp_path, "chat-template", edit_line=lambda rec: rec.update(prompt_hash="f" * 64))
    args = ["gate", str(BASE), str(changed), "--filter", "none", "--resamples", "500"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "the prompt of item rg_refund 3 changed between" in err and str(BASE) in err and str(changed) in err
    assert "(ffffffffffff)" in err and "--allow-prompt-change" in err
    assert main([*args, "--allow-prompt-change"]) == 1
    out = capsys.readouterr().out
    assert "warning: prompts changed on 1 item(s)" in out and "first: rg_refund 3" in out


def test_another_document_or_target_is_refused(tmp_path: Path, capsys) -> None:
    for what, field in (("document", "doc_hash"), ("target", "target_hash")):
        changed = _copy(tmp_path, what, edit_line=lambda rec, f=field: rec.update({f: "0" * 64}))
        assert main(["gate", str(BASE), str(changed), "--filter", "none", "--allow-prompt-change"]) == 2
        err = capsys.readouterr().err
        assert f"item rg_refund 3 is another {what} in {BASE}" in err and f"({field}" in err


def test_another_task_version_or_task_is_refused_naming_both(tmp_path: Path, capsys) -> None:
    bumped = _copy(tmp_path, "v3", edit_results=lambda d: d["versions"].update(rg_refund=3.0))
    assert main(["gate", str(BASE), str(bumped), "--filter", "none"]) == 2
    err = capsys.readouterr().err
    assert f"{BASE} is the lm-eval 0.4.13 log of rg_refund v2.0" in err and f"but {bumped} is" in err
    assert "task version changed (rg_refund: 2.0 -> 3.0)" in err
    one_task = tmp_path / "one-task"
    shutil.copytree(CANDIDATE, one_task)
    next(one_task.glob("samples_rg_refund_choice_*")).unlink()
    assert main(["gate", str(BASE), str(one_task), "--filter", "none"]) == 2
    assert "ran different tasks (rg_refund_choice on one side only)" in capsys.readouterr().err


def test_the_group_of_a_task_is_a_category(tmp_path: Path) -> None:
    grouped = _copy(tmp_path, "grouped", edit_results=lambda d: d.update(
        group_subtasks={"rg_all": ["rg_refund", "rg_refund_choice"]}))
    assert {r["category"] for r in read_rows(grouped, filter="none", category="group")} == {"rg_all"}
    with pytest.raises(DataError, match="--category-key group needs the run's results"):
        read_rows(_lonely(tmp_path), category="group")


def _lonely(tmp_path: Path) -> Path:
    folder = tmp_path / "lonely"
    folder.mkdir()
    shutil.copy(next(BASE.glob("samples_rg_refund_choice_*")), folder)
    return folder


def test_a_non_binary_metric_needs_a_pass_threshold(tmp_path: Path) -> None:
    choice = next(BASE.glob("samples_rg_refund_choice_*"))
    rows = [json.loads(line) for line in choice.read_text().splitlines()]
    for rec in rows:
        rec["acc"] = 0.25 if rec["acc"] == 0 else 0.75
    folder = tmp_path / "soft"
    folder.mkdir()
    (folder / choice.name).write_text("\n".join(map(json.dumps, rows)) + "\n")
    with pytest.raises(DataError, match=r"metric 'acc' is 0\.\d+, not 0 or 1: say what passes with --pass-threshold"):
        list(read_rows(folder))
    assert {r["reward"] for r in read_rows(folder, pass_threshold=0.5)} == {0, 1}
    with pytest.raises(DataError, match="no metric 'f1' .*pass --score-key NAME"):
        list(read_rows(folder, score="f1"))


def test_convert_writes_rows_whose_header_names_the_harness(tmp_path: Path, capsys) -> None:
    out = tmp_path / "base.jsonl.gz"
    assert main(["convert", str(BASE), "--filter", "none", "--category-key", "doc.category", "--out", str(out)]) == 0
    assert "wrote 80 rows of the lm-eval 0.4.13 log of rg_refund v2.0, rg_refund_choice v1.0" in capsys.readouterr().out
    converted = read_rows(out)
    assert converted.format == "rlgate" and converted.header["source"]["harness"] == "lm-eval"
    assert converted.header["source"]["options"]["filter"] == "none"
    assert main(["gate", str(out), str(CANDIDATE), "--filter", "none", "--category-key", "doc.category",
                 "--resamples", "500"]) == 1
    assert "FAIL: pass@1 regressed in with_id" in capsys.readouterr().out
    assert main(["gate", str(out), str(CANDIDATE), "--filter", "first-line", "--category-key", "doc.category"]) == 2
    assert "read with different options (filter 'none' vs 'first-line')" in capsys.readouterr().err


@pytest.mark.slow
def test_a_live_lm_eval_run_still_writes_what_the_reader_reads(tmp_path: Path, capsys) -> None:
    pytest.importorskip("lm_eval")
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_lm_eval", LM_EVAL.parent / "make_lm_eval.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = module.generate(tmp_path / "lm_eval")
    assert main(["gate", str(out / "base"), str(out / "candidate"), "--filter", "none", "--category-key",
                 "doc.category", "--resamples", "500"]) == 1
    assert "FAIL: pass@1 regressed in with_id" in capsys.readouterr().out
