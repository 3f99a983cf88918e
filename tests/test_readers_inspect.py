"""Inspect AI logs, written by the real ``inspect_ai.eval`` with its scripted mock model, as gate sides."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")

from _harness import CATEGORIES, EPOCHS, N_PER_CATEGORY, gate_deltas, paired_category_deltas, write_inspect_log

from pytest_rlgate import DataError, compare, read_rows
from pytest_rlgate.cli import main
from pytest_rlgate.data import detect_format

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # inspect_ai's own retry settings


@pytest.fixture(scope="session")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """base, candidate (forgets math), errored (one sample errors), failed (status error), v2 (task version 2)."""
    root = tmp_path_factory.mktemp("inspect")
    return {
        "base": write_inspect_log(root / "base"),
        "candidate": write_inspect_log(root / "candidate", candidate=True),
        "errored": write_inspect_log(root / "errored", candidate=True, error_on=frozenset({5})),
        "failed": write_inspect_log(root / "failed", error_on=frozenset({5}), fail_on_error=True),
        "v2": write_inspect_log(root / "v2", candidate=True, task_version=2),
    }


def _reference(path: Path) -> dict[tuple[str, str], list[float]]:
    """(metadata category, sample id) -> per-epoch pass, straight from inspect_ai's own reader."""
    from inspect_ai.log import read_eval_log

    out: dict[tuple[str, str], list[float]] = {}
    for sample in read_eval_log(str(path)).samples or []:
        if sample.error is None:
            out.setdefault((sample.metadata["category"], str(sample.id)), []).append(
                float(sample.scores["match"].value == "C"))
    return out


def test_per_category_deltas_equal_a_paired_reference(logs) -> None:
    before, after = read_rows(logs["base"]), read_rows(logs["candidate"])
    assert before.format == "inspect" and detect_format(logs["base"]) == "inspect"
    rows = list(before)
    assert len(rows) == len(CATEGORIES) * N_PER_CATEGORY * EPOCHS
    assert {r["rollout_index"] for r in rows} == set(range(EPOCHS))
    result = compare(before, after, n_resamples=500)
    assert gate_deltas(result) == pytest.approx(paired_category_deltas(_reference(logs["base"]),
                                                                       _reference(logs["candidate"])))
    assert gate_deltas(result)["math"] == pytest.approx(-0.75)
    source = before.header["source"]
    assert source["harness"] == "inspect" and source["tasks"] == {"rg_inspect": "1"}
    assert source["scorers"] == ["match"] and source["epochs"] == EPOCHS


def test_rlgate_gate_fails_naming_the_regressed_category(logs, capsys) -> None:
    assert main(["gate", str(logs["base"]), str(logs["candidate"]), "--resamples", "500"]) == 1
    out = capsys.readouterr().out
    assert "FAIL: pass@1 regressed in math" in out
    assert "regressed in chat" not in out and "regressed in refund" not in out


def test_errored_samples_are_counted_and_reported_never_dropped_silently(logs, capsys) -> None:
    errored = read_rows(logs["errored"])
    assert len(list(errored)) == (len(CATEGORIES) * N_PER_CATEGORY - 1) * EPOCHS
    assert errored.errors == EPOCHS
    (note,) = errored.notes
    assert "2 errored sample(s) not gated (q5 epoch 1, q5 epoch 2): RuntimeError('the mock provider refused" in note
    assert main(["gate", str(logs["base"]), str(logs["errored"])]) == 2  # the errored unit no longer pairs
    assert "1 unit(s) of" in capsys.readouterr().err
    assert main(["gate", str(logs["base"]), str(logs["errored"]), "--shared-units-only", "--resamples", "500"]) == 1
    out = capsys.readouterr().out
    assert "warning: " + note in out
    result = compare(logs["base"], logs["errored"], shared_units_only=True, n_resamples=500)
    assert note in result.warnings


def test_a_log_that_did_not_succeed_is_refused_with_its_error(logs, capsys) -> None:
    with pytest.raises(DataError, match=r"Inspect log status is 'error' \(RuntimeError\('the mock provider refused "
                                        r"question 5'\)\); only a finished eval"):
        read_rows(logs["failed"])
    assert main(["gate", str(logs["failed"]), str(logs["candidate"])]) == 2
    assert "Inspect log status is 'error'" in capsys.readouterr().err


def test_another_task_version_is_refused_naming_both(logs, capsys) -> None:
    assert main(["gate", str(logs["base"]), str(logs["v2"])]) == 2
    err = capsys.readouterr().err
    assert f"{logs['base']} is the inspect 0.3" in err and "log of rg_inspect v1 but" in err
    assert "task version changed (rg_inspect: 1 -> 2)" in err


def test_a_json_log_reads_like_the_eval_one(logs, tmp_path: Path) -> None:
    from inspect_ai.log import read_eval_log, write_eval_log

    as_json = tmp_path / "base.json"
    write_eval_log(read_eval_log(str(logs["base"])), str(as_json), format="json")
    assert detect_format(as_json) == "inspect"
    assert list(read_rows(as_json)) == list(read_rows(logs["base"]))


def test_category_unit_and_scorer_options(logs) -> None:
    rows = list(read_rows(logs["base"], unit="scenario"))
    assert len({r["scenario_id"] for r in rows}) == len(CATEGORIES) * N_PER_CATEGORY // 2
    with pytest.raises(DataError, match="no category at 'metadata.topic' \\(keys there: category, scenario, from "
                                        "--category-key topic\\)"):
        list(read_rows(logs["base"], category="topic"))
    with pytest.raises(DataError, match="no scorer 'judge' \\(it has match\\)"):
        list(read_rows(logs["base"], score="judge"))
    assert {r["category"] for r in read_rows(logs["base"], category="scenario")} == {f"s{i}" for i in range(12)}


def test_the_category_key_is_a_dotted_path_into_the_sample_and_a_bare_key_still_reads_metadata(logs) -> None:
    """One meaning across readers: a path into the record; Inspect's older bare metadata key still works."""
    dotted = [r["category"] for r in read_rows(logs["base"], category="metadata.scenario")]
    bare = [r["category"] for r in read_rows(logs["base"], category="scenario")]
    assert dotted == bare and set(dotted) == {f"s{i}" for i in range(12)}
    assert {r["category"] for r in read_rows(logs["base"], category="target")} == {f"answer-{i}" for i in range(24)}
    assert [r["scenario_id"] for r in read_rows(logs["base"], unit="metadata.scenario")] == [
        r["scenario_id"] for r in read_rows(logs["base"], unit="scenario")]
    assert read_rows(logs["base"], category="metadata.scenario").header["env_fingerprint"] != read_rows(
        logs["base"]).header["env_fingerprint"]


def test_convert_keeps_the_inspect_provenance(logs, tmp_path: Path, capsys) -> None:
    out = tmp_path / "base.jsonl.gz"
    assert main(["convert", str(logs["base"]), "--out", str(out)]) == 0
    assert "wrote 48 rows of the inspect 0.3" in capsys.readouterr().out
    assert read_rows(out).header["source"]["tasks"] == {"rg_inspect": "1"}
    assert main(["gate", str(out), str(logs["candidate"]), "--resamples", "500"]) == 1
    assert "FAIL: pass@1 regressed in math" in capsys.readouterr().out
    assert main(["gate", str(out), str(logs["v2"])]) == 2
    assert "task version changed (rg_inspect: 1 -> 2)" in capsys.readouterr().err
