"""Every Eval Ever instance-level files, written by Every Eval Ever's own converter, as gate sides.

``tests/data/harness/eee/{base,candidate}`` are what ``every_eval_ever convert lm_eval
--include_samples`` (every-eval-ever 0.3.0, run from a Python 3.12 environment: the package
needs it, this venv is 3.11) wrote from the committed lm-eval logs
(``tests/data/harness/make_eee.py`` says how). ``demo`` is Every Eval Ever's frozen reference
conversion from its repository; ``eval.schema.json`` its aggregate schema (0.3.0), against
which :func:`eee_record`'s output is validated.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _harness import HARNESS_DATA, LM_EVAL, gate_deltas, paired_category_deltas

from pytest_rlgate import DataError, compare, read_rows, write_rows
from pytest_rlgate.cli import main
from pytest_rlgate.data import detect_format
from pytest_rlgate.data.readers.eee import eee_record

EEE = HARNESS_DATA / "eee"
BASE, CANDIDATE = EEE / "base", EEE / "candidate"
#: the metric the raw lm-eval line scores first, per task (what the lm-eval reader reads by default)
FIRST = "contains,acc"


def _raw(folder: Path) -> dict[tuple[str, str], list[float]]:
    """(task, task/doc_id) -> [pass] straight from the lm-eval samples files, filter none, first metric."""
    out: dict[tuple[str, str], list[float]] = {}
    for file in sorted(folder.glob("samples_*.jsonl")):
        task = file.name[len("samples_"):].rsplit("_", 1)[0]
        for line in file.read_text().splitlines():
            rec = json.loads(line)
            if rec["filter"] == "none":
                out[(task, f"{task}/{rec['doc_id']}")] = [float(rec[rec["metrics"][0]] == 1.0)]
    return out


def test_the_committed_files_are_what_the_converter_writes() -> None:
    for side in (BASE, CANDIDATE):
        assert detect_format(side) == "eee"
        for samples in side.glob("*/*_samples.jsonl"):
            aggregate = json.loads(samples.with_name(samples.name.replace("_samples.jsonl", ".json")).read_text())
            assert aggregate["eval_library"] == {"name": "lm_eval", "version": "0.4.13"}
            assert aggregate["detailed_evaluation_results"]["file_path"].endswith(samples.name)
            first = json.loads(samples.read_text().splitlines()[0])
            assert first["schema_version"] == "0.3.0" and first["interaction_type"] == "single_turn"


def test_the_eee_readers_deltas_equal_the_raw_lm_eval_files() -> None:
    result = compare(read_rows(BASE, score=FIRST), read_rows(CANDIDATE, score=FIRST), n_resamples=500)
    reference = paired_category_deltas(_raw(LM_EVAL / "base"), _raw(LM_EVAL / "candidate"))
    assert gate_deltas(result) == pytest.approx(reference) and reference["rg_refund"] == pytest.approx(-0.6)
    direct = compare(read_rows(LM_EVAL / "base", filter="none"), read_rows(LM_EVAL / "candidate", filter="none"),
                     n_resamples=500)
    assert [(c.group, c.delta, c.low, c.high) for c in result.comparisons] == [
        (c.group, c.delta, c.low, c.high) for c in direct.comparisons]


def test_a_sample_under_several_results_needs_a_metric_and_errors_are_reported(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"evaluation 'rg_refund_choice' has records of several results \(acc, "
                                        r"acc_norm\); choose with --score-key ID"):
        list(read_rows(BASE / "rg_refund_choice"))
    rows = list(read_rows(BASE, score="acc_norm"))
    assert {r["category"] for r in rows} == {"rg_refund_choice"} and len(rows) == 40
    (samples,) = (BASE / "rg_refund").glob("*_samples.jsonl")
    lines = [json.loads(line) for line in samples.read_text().splitlines()]
    lines[0]["error"] = "timeout"
    broken = tmp_path / samples.name
    broken.write_text("".join(json.dumps(line) + "\n" for line in lines))
    source = read_rows(broken, score="contains")
    assert len(list(source)) == 39 and source.errors == 1
    assert "1 errored record(s) not gated (rg_refund sample 0): timeout" in source.notes[0]
    assert {r["category"] for r in read_rows(broken, score="contains", category="metadata.filter")} == {"none"}


def test_the_repositorys_own_example_reads(tmp_path: Path) -> None:
    demo = EEE / "demo"
    assert detect_format(demo) == "eee"
    (row,) = read_rows(demo)
    assert row["scenario_id"] == "demo-source.demo_bench/demo_0001" and row["reward"] == 1
    assert row["reply"] == "The answer is 4." and row["prompt"] == "What is 2 + 2?"
    (subject,) = read_rows(demo, category="metadata.subject")
    assert subject["category"] == "arithmetic"
    assert read_rows(demo).header["source"]["model"] == "demo-org/demo-model"


def test_convert_writes_rows_from_it_and_the_gate_reads_those(tmp_path: Path, capsys) -> None:
    out = tmp_path / "base.jsonl.gz"
    assert main(["convert", str(BASE), "--score-key", FIRST, "--out", str(out)]) == 0
    assert "wrote 80 rows of the eee 0.3.0 log of rg_refund" in capsys.readouterr().out
    assert main(["gate", str(out), str(CANDIDATE), "--score-key", FIRST, "--resamples", "500"]) == 1
    assert "FAIL: pass@1 regressed in rg_refund: 0.900 -> 0.300" in capsys.readouterr().out
    assert main(["gate", str(out), str(CANDIDATE), "--score-key", "acc", "--resamples", "500"]) == 2  # other options
    assert "the sides were read with different options (metric 'contains,acc' vs 'acc')" in capsys.readouterr().err


def test_json_writes_the_gates_intervals_in_eees_uncertainty_fields(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    target = tmp_path / "gate.json"
    assert main(["gate", str(BASE), str(CANDIDATE), "--score-key", FIRST, "--resamples", "500", "--json", str(target),
                 "--json-format", "eee"]) == 1
    record = json.loads(target.read_text())
    jsonschema.validate(record, json.loads((EEE / "eval.schema.json").read_text()))
    result = compare(read_rows(BASE, score=FIRST), read_rows(CANDIDATE, score=FIRST), n_resamples=500)
    by_name = {r["evaluation_name"]: r["score_details"] for r in record["evaluation_results"]}
    for c in result.comparisons:
        details = by_name[f"{c.metric} {c.group}"]
        interval = details["uncertainty"]["confidence_interval"]
        assert (details["score"], interval["lower"], interval["upper"]) == (c.delta, c.low, c.high)
        # the interval's own level (the family set it), and the sign flips that set it
        assert interval["confidence_level"] == pytest.approx(1 - 2 * c.level)
        assert details["uncertainty"]["num_samples"] == c.n_units
        assert details["details"]["verdict"] == (c.verdict.upper() if c.failed else c.verdict)
        assert details["uncertainty"]["num_bootstrap_samples"] == 500
    assert record["model_info"]["id"] == "rlgate/tiny-refund"
    boot = eee_record(compare(read_rows(BASE, score=FIRST), read_rows(CANDIDATE, score=FIRST), n_resamples=500,
                              method="expanded"), model="org/m")
    assert all(r["score_details"]["uncertainty"].get("num_bootstrap_samples") == 500
               for r in boot["evaluation_results"][1:] if "confidence_interval" in r["score_details"]["uncertainty"])
    assert eee_record(result, model="org/m", retrieved=1.0)["evaluation_id"] == "rlgate-gate/org/m/1"


def test_an_eee_export_of_a_policy_failure_carries_the_decision_its_failures_and_the_rule(tmp_path: Path,
                                                                                      capsys) -> None:
    """A gate that fails only on its release policy (``severe_flips`` on a flat category) exports as failed:
    the decision entry scores 0 with the rule and each failure, the comparison is not a plain ``flat``, and
    the draws behind the default method's level (its sign flips) are counted."""
    jsonschema = pytest.importorskip("jsonschema")
    from test_gate import table_rows

    before = write_rows(tmp_path / "before.jsonl",
                        table_rows("no_id", [0] + [4] + [1, 2, 0, 3, 1, 0] * 4 + [0, 0, 0, 0]))
    after = write_rows(tmp_path / "after.jsonl", table_rows("no_id", [4] + [0] + [1, 2, 0, 3, 1, 0] * 4 + [0, 0, 0, 0]))
    policy = tmp_path / "release.yaml"
    policy.write_text("rules:\n  no_id: {tier: critical, severe_flips: true}\n", encoding="utf-8")
    target = tmp_path / "gate.json"
    assert main(["gate", str(before), str(after), "--guard", "", "--release-policy", str(policy), "--json", str(target),
                 "--json-format", "eee"]) == 1
    record = json.loads(target.read_text())
    jsonschema.validate(record, json.loads((EEE / "eval.schema.json").read_text()))
    decision, *entries = record["evaluation_results"]
    assert decision["evaluation_result_id"] == "rlgate.gate" and decision["score_details"]["score"] == 0.0
    details = decision["score_details"]["details"]
    assert details["decision"] == "failed" and details["failures"] == "1" and "severe_flips" in details["rule"]
    assert details["failure_1"].startswith("pass@1 in no_id: 1 scenario went from every reply passing to none")
    assert decision["rlgate"]["passed"] is False and decision["rlgate"]["failures"] == [details["failure_1"]]
    no_id = next(e for e in entries if e["evaluation_name"] == "pass@1 no_id")
    shown = no_id["score_details"]["details"]
    assert shown["verdict"] == "FLAT" and shown["passed"] == "false" and shown["failure_kind"] == "severe_flips"
    assert shown["tier"] == "critical" and shown["decided_by"].endswith("release.yaml:2 no_id")
    assert no_id["rlgate"]["failure"]["kind"] == "severe_flips" and no_id["rlgate"]["verdict"] == "flat"
    uncertainty = no_id["score_details"]["uncertainty"]
    assert uncertainty["num_bootstrap_samples"] == 10_000  # the default paired t: the family's sign flips
    assert "sign flips" in uncertainty["confidence_interval"]["method"]
    overall = next(e for e in entries if e["evaluation_name"] == "pass@1 overall")["score_details"]["details"]
    assert overall["passed"] == "true" and "failure" not in overall
    capsys.readouterr()
    assert main(["gate", str(before), str(before), "--guard", "", "--json", str(target), "--json-format", "eee"]) == 0
    passed = json.loads(target.read_text())["evaluation_results"][0]
    assert passed["score_details"]["score"] == 1.0 and passed["score_details"]["details"]["decision"] == "passed"


def test_json_format_without_json_is_one_line_not_silence(capsys) -> None:
    assert main(["gate", str(BASE), str(CANDIDATE), "--score-key", FIRST, "--json-format", "eee"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--json-format eee" in err and "add --json PATH" in err


def test_a_filter_variant_is_the_same_samples_not_a_category(capsys) -> None:
    """lm-eval's two filters of rg_refund, converted, are two evaluations of the same 40 samples: reading both
    would count each sample twice (``overall`` 80 units from 40), so the reader refuses and asks for a
    filter as the lm-eval reader does; a chosen filter's rows are the lm-eval reader's."""
    (base,) = (BASE / "rg_refund").glob("*_samples.jsonl")
    (candidate,) = (CANDIDATE / "rg_refund").glob("*_samples.jsonl")
    refusal = (r"sample 0 is scored under both 'rg_refund' and 'rg_refund/first-line' \(lm-eval filters none, "
               r"first-line\); a sample counts once: choose one with --filter NAME")
    with pytest.raises(DataError, match=refusal):
        list(read_rows(base))
    with pytest.raises(DataError, match=refusal):
        list(read_rows(BASE, score="contains,contains:first-line"))
    with pytest.raises(DataError, match="choose one with --filter NAME"):
        list(read_rows(LM_EVAL / "base"))  # the lm-eval reader asks the same of the same data
    assert main(["gate", str(base), str(candidate)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a sample counts once: choose one with --filter NAME" in err
    for name in ("none", "first-line"):
        rows = list(read_rows(base, filter=name))
        assert len(rows) == 40 and {r["category"] for r in rows} == {"rg_refund"}
        assert len({r["scenario_id"] for r in rows}) == 40
        eee = compare(read_rows(base, filter=name), read_rows(candidate, filter=name), n_resamples=500)
        direct = compare(read_rows(LM_EVAL / "base", filter=name), read_rows(LM_EVAL / "candidate", filter=name),
                         n_resamples=500)
        mine, theirs = eee.comparison("pass@1", "rg_refund"), direct.comparison("pass@1", "rg_refund")
        assert (mine.n_units, mine.before, mine.after) == (theirs.n_units, theirs.before, theirs.after) == (
            40, mine.before, mine.after)
    with pytest.raises(DataError, match="--filter none: this record names no lm-eval filter"):
        list(read_rows(EEE / "demo", filter="none"))


def test_two_benchmarks_that_share_an_item_are_two_datasets_not_a_double_count(tmp_path: Path) -> None:
    (samples,) = (BASE / "rg_refund").glob("*_samples.jsonl")
    records = [json.loads(line) for line in samples.read_text().splitlines()]
    records = [r for r in records if r["metadata"]["filter"] == "none"]
    for name in ("bench_a", "bench_b"):  # the same 40 items, in two benchmarks of their own
        folder = tmp_path / name
        folder.mkdir()
        (folder / f"{name}_samples.jsonl").write_text(
            "".join(json.dumps({**r, "evaluation_name": name}) + "\n" for r in records), encoding="utf-8")
    rows = list(read_rows(tmp_path))
    assert len(rows) == 80 and {r["category"] for r in rows} == {"bench_a", "bench_b"}
