"""Inspect Scout findings as guardable markers, on a scan the real ``inspect_scout`` wrote over real Inspect logs.

``tests/data/harness/scout`` holds two Inspect logs (the scripted mock model of
``_harness.py``: the base, and the candidate that forgets most math answers) and one scan
over both by two model-free scanners (``tests/data/harness/make_scout.py``):
``said_no_idea`` flags replies saying "no idea" (the candidate says it in math),
``asked_q1x`` flags transcripts mentioning "question 1" (the same samples on both sides).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("inspect_ai")
pytest.importorskip("inspect_scout")

from _harness import HARNESS_DATA, gate_deltas, paired_category_deltas

from pytest_rlgate import DataError, compare, read_rows
from pytest_rlgate.cli import main

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SCOUT = HARNESS_DATA / "scout"
(BASE,) = (SCOUT / "base").glob("*.eval")
(CANDIDATE,) = (SCOUT / "candidate").glob("*.eval")
SCANS = SCOUT / "scans"


def _scout_reference(log: Path, scanner: str) -> dict[tuple[str, str], list[float]]:
    """(category, sample id) -> per-epoch "not flagged", straight from inspect_scout's and inspect_ai's readers."""
    from inspect_ai.log import read_eval_log
    from inspect_scout import scan_results_df

    (scan,) = SCANS.iterdir()
    table = scan_results_df(str(scan), scanner=scanner).scanners[scanner]
    flagged = {uuid for uuid, value in zip(table["transcript_id"], table["value"]) if value}
    out: dict[tuple[str, str], list[float]] = {}
    for sample in read_eval_log(str(log)).samples or []:
        out.setdefault((sample.metadata["category"], str(sample.id)), []).append(float(sample.uuid not in flagged))
    return out


def _marker_deltas(result, marker: str) -> dict[str, float]:
    return {c.group: c.delta for c in result.comparisons if c.metric == f"marker:{marker}" and c.group != "overall"}


def test_each_scanner_is_a_marker_whose_deltas_equal_the_scans_own() -> None:
    before, after = read_rows(BASE, findings=str(SCANS)), read_rows(CANDIDATE, findings=str(SCANS))
    rows = list(before)
    assert {tuple(sorted(r["markers"])) for r in rows} == {("scout.asked_q1x", "scout.said_no_idea")}
    assert before.header["source"]["findings"]["markers"] == ["scout.asked_q1x", "scout.said_no_idea"]
    result = compare(before, after, guards=["scout.said_no_idea", "scout.asked_q1x"], n_resamples=500)
    for scanner in ("said_no_idea", "asked_q1x"):
        assert _marker_deltas(result, f"scout.{scanner}") == pytest.approx(paired_category_deltas(
            _scout_reference(BASE, scanner), _scout_reference(CANDIDATE, scanner)))
    assert _marker_deltas(result, "scout.said_no_idea")["math"] == pytest.approx(-0.75)
    assert gate_deltas(result)["math"] == pytest.approx(-0.75)


POLICY = """\
rules:
  "marker:scout.*": {tier: critical}
  "*": advisory
"""


def test_a_scout_marker_fails_the_gate_where_its_flagged_rate_rises_and_passes_where_it_does_not(
        tmp_path: Path, capsys) -> None:
    """Under a release policy where only the scanners count, the scanner alone decides."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    args = ["gate", str(BASE), str(CANDIDATE), "--findings", str(SCANS), "--release-policy", str(policy),
            "--resamples", "2000"]
    assert main([*args, "--guard", "scout.said_no_idea"]) == 1
    out = capsys.readouterr().out
    assert "FAIL: marker:scout.said_no_idea regressed in math" in out
    assert "regressed in chat" not in out and "regressed in refund" not in out
    flips = out[out.index("flips in marker:scout.said_no_idea math"):]
    assert [line.split()[0] for line in flips.splitlines()[1:10:3]] == ["q10", "q16", "q19"]  # newly flagged
    assert main([*args, "--guard", "scout.asked_q1x", "--json", str(tmp_path / "r.json")]) == 0
    record = json.loads((tmp_path / "r.json").read_text())
    verdicts = {c["group"]: c["verdict"] for c in record["comparisons"] if c["metric"] == "marker:scout.asked_q1x"}
    assert set(verdicts.values()) == {"flat"} and len(verdicts) == 4
    result = compare(read_rows(BASE, findings=str(SCANS)), read_rows(CANDIDATE, findings=str(SCANS)),
                     guards=["scout.said_no_idea"], release_policy=str(policy), n_resamples=500)
    assert not result.passed and any("marker:scout.said_no_idea" in f and "math" in f for f in result.failures)


def test_one_scan_per_side_and_a_scan_of_another_log_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": "q99", "scanner": "x", "value": True}) + "\n")
    with pytest.raises(DataError, match=r"names 1 sample\(s\) this log does not have \(q99\)"):
        list(read_rows(BASE, findings=str(other)))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="holds no Inspect Scout scan"):
        read_rows(BASE, findings=str(tmp_path / "empty"))
    per_side = read_rows(f"{BASE}#findings={SCANS}")
    assert per_side.options.text("findings") == str(SCANS) and "scout.said_no_idea" in next(iter(per_side))["markers"]
    assert "findings" not in per_side.header["source"]["options"]  # a scan per side does not make sides differ


def test_a_findings_file_keyed_by_sample_id_gives_markers_too(tmp_path: Path) -> None:
    """Any tool's per-sample findings: JSON lines of id, epoch (optional), scanner, value."""
    def write(path: Path, flagged: set[str]) -> str:
        lines = [{"id": f"q{i}", "scanner": "refusal", "value": f"q{i}" in flagged} for i in range(24)]
        lines.append({"id": "q0", "epoch": 2, "scanner": "refusal", "value": "yes"})  # one epoch of one sample
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        return str(path)

    before = read_rows(BASE, findings=write(tmp_path / "before.jsonl", set()))
    after = read_rows(CANDIDATE, findings=write(tmp_path / "after.jsonl", {"q1", "q4"}))
    marks = {(r["case"]["id"], r["case"]["epoch"]): r["markers"]["findings.refusal"] for r in before}
    assert marks[("q0", 1)] == 1.0 and marks[("q0", 2)] == 0.0 and marks[("q5", 2)] == 1.0
    result = compare(before, after, guards=["findings.refusal"], n_resamples=500)
    deltas = {c.group: c.delta for c in result.comparisons if c.metric == "marker:findings.refusal"}
    assert deltas["math"] == pytest.approx(-2 / 8) and deltas["refund"] == 0 and deltas["chat"] == 0  # q1, q4
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "q1", "value": true}\n')
    with pytest.raises(DataError, match=r"bad.jsonl:1: a finding needs its 'scanner'"):
        read_rows(BASE, findings=str(bad))


@pytest.mark.slow
def test_a_fresh_scan_of_fresh_logs_reads_as_the_committed_one(tmp_path: Path) -> None:
    """Regenerate the logs and the scan with the installed inspect-ai and inspect-scout (about 20 s)."""
    import sys

    sys.path.insert(0, str(HARNESS_DATA))
    from make_scout import make

    made = make(tmp_path / "scout")
    fresh = compare(read_rows(made["base"], findings=str(made["scans"])),
                    read_rows(made["candidate"], findings=str(made["scans"])), guards=["scout.said_no_idea"],
                    n_resamples=500)
    committed = compare(read_rows(BASE, findings=str(SCANS)), read_rows(CANDIDATE, findings=str(SCANS)),
                        guards=["scout.said_no_idea"], n_resamples=500)
    assert [(c.metric, c.group, c.delta) for c in fresh.comparisons] == [
        (c.metric, c.group, c.delta) for c in committed.comparisons]
