"""Run reports: the page, its plots, the index, the text twin, and bad run folders."""

from __future__ import annotations

import html
import importlib
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="reports need the report extra: pip install 'pytest-rlgate[report]'")
from PIL import Image
from report_fixtures import ALARMS, ARITH, make_run, write_jsonl

import pytest_rlgate
from pytest_rlgate.cli import main
from pytest_rlgate.errors import DataError
from pytest_rlgate.report import load_report_data, report_text, write_index, write_report
from pytest_rlgate.report.levels import LEVEL_CONFIDENCE, gate_confidence, levels as _levels
from pytest_rlgate.report.text import gate_settings, interval_header

ROW = ('{"prompt": "p", "scenario_id": "s", "category": "no_id", "rollout_index": 0, "reply": "r", "score": 1.0, '
       '"reward": 1, "markers": {"well_formed": 1}}')
FEATURE_RED = (197, 48, 48)  # report.ALARM_COLOURS["feature"]
LENGTH_ORANGE = (221, 107, 32)  # report.ALARM_COLOURS["length"]


class _Page(HTMLParser):
    """The parts of a report page the tests look at: tables (as cell text), images, links."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.images: list[str] = []
        self.links: list[str] = []
        self._table: list[list[str]] | None = None
        self._cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            self._table = self.tables.setdefault(a.get("class") or "", [])
        elif tag == "tr" and self._table is not None:
            self._table.append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "img":
            self.images.append(a["src"] or "")
        elif tag == "a":
            self.links.append(a["href"] or "")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            self._table[-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _pixels(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"), dtype=np.int16)


def _count_colour(path: Path, rgb: tuple[int, int, int], tolerance: int = 30) -> int:
    return int((np.abs(_pixels(path) - np.array(rgb)).max(axis=2) <= tolerance).sum())


def _assert_png(path: Path) -> None:
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        assert image.format == "PNG" and min(image.size) >= 300, image.size
    assert path.stat().st_size > 20_000, "a plot with axes, curves and labels is tens of kB"
    assert len(np.unique(_pixels(path).reshape(-1, 3), axis=0)) > 50


# --------------------------------------------------------------------------- the page


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One full run folder, rendered once for the tests that only read its report."""
    run = make_run(tmp_path_factory.mktemp("rendered"))
    write_report(run)
    return run


def test_report_has_gate_table_plots_alarms_and_config(rendered: Path) -> None:
    run = rendered
    page_path = run / "report.html"
    assert page_path == run / "report.html"
    text = page_path.read_text(encoding="utf-8")
    page = _Page(text)

    gate_json = json.loads((run / "gate.json").read_text(encoding="utf-8"))
    gate = page.tables["gate"]
    assert gate[0] == ["metric", "group", "units×k", "before", "after", "Δ", interval_header(gate_json), "MDE", "noise",
                       "verdict", "flags"]
    body = {(r[0], r[1]): r for r in gate[1:]}
    groups = ("overall", "no_id", "off_topic", "with_id")
    assert set(body) == {(m, g) for m in ("pass@1", "marker:well_formed") for g in groups}
    for c in gate_json["comparisons"]:  # every number on the page is the gate's, as the gate rounds it
        row = body[c["metric"], c["group"]]
        assert row[2] == f"{c['n_units']}×{c['k']}" and row[3] == f"{c['before']:.3f}"
        assert row[5] == f"{c['delta']:+.3f}" and row[6] == f"[{c['low']:+.3f}, {c['high']:+.3f}]"
        assert row[9] == c["verdict"]
    assert body["pass@1", "no_id"][9] == "regressed" and body["pass@1", "with_id"][9] == "moved"
    assert re.search(r'<tr class="fail">.*?no_id.*?regressed', text), "the regressed row is highlighted"
    assert 'style="background:#c53030">regressed' in text and 'style="background:#2f855a">moved' in text
    assert "FAILED" in text and html.escape(gate_json["failures"][0]) in text and html.escape(gate_json["rule"]) in text
    # the page prints the settings line the gate itself printed: method, family, level, seed
    settings = gate_settings(gate_json)
    assert settings.startswith("paired t of per-scenario deltas; 8 comparisons held together by min-p over 10,000 "
                               "scenario sign flips") and html.escape(settings) in text

    assert sorted(page.images) == ["report-categories.png", "report-curves.png"], "relative links, beside the page"
    for name in page.images:
        _assert_png(run / name)

    alarms = page.tables["alarms"][1:]
    assert [(r[0], r[1]) for r in alarms] == [(str(a["step"]), a["kind"]) for a in ALARMS]
    assert alarms[0][2] == "the reward pays most for tool_call, which is not endorsed"
    assert alarms[1][2] == "holdout reply length 84 chars, was 61 at step 0 (+38%)"

    config = dict(r for r in page.tables["config"] if len(r) == 2)
    assert config["prompts.fingerprint"] == "3f5a9c0d1e2b7a41" and "prompts 3f5a9c0d1e2b…" in text
    assert config["versions.trl"] == "1.16.0" and config["knobs.beta"] == "0.04"
    assert "<details>" in text and "No monitor.json" not in text and "No gate.json" not in text
    assert "<h1>refund-grpo" in text, "the run name comes from config.json's knobs.run_name"
    assert '<p class="sub">env refund v1 sha256:5b2f5aba · grpo · rlgate/tiny-refund · 40 logged steps' in text


def test_a_run_of_another_environment_reports_its_own_categories_and_markers(tmp_path: Path) -> None:
    """Categories, their order and the guarded marker come from the run's rows and gate.json."""
    run = make_run(tmp_path, "arith-grpo", monitor=False, **ARITH)
    text = write_report(run).read_text(encoding="utf-8")
    gate = _Page(text).tables["gate"][1:]
    assert [(r[0], r[1]) for r in gate] == [(m, g) for m in ("pass@1", "marker:exact_format")
                                            for g in ("overall", "arithmetic", "unanswerable", "word_problem")]
    assert {r[1]: r[9] for r in gate if r[0] == "pass@1"}["unanswerable"] == "regressed"
    plain = report_text(run)
    assert "env arith v2 sha256:0b6e3f1c" in text and "env arith v2 sha256:0b6e3f1c" in plain.splitlines()[1]
    assert re.search(r"pass@1\s+unanswerable\s+5×4\s.*regressed", plain)
    for refund_word in ("no_id", "with_id", "off_topic", "well_formed", "tool_call", "lookup_order"):
        assert refund_word not in text and refund_word not in plain, refund_word


def test_alarms_are_drawn_as_vertical_lines_in_their_colours(rendered: Path, tmp_path: Path) -> None:
    with_monitor = rendered / "report-curves.png"
    without = write_report(make_run(tmp_path, "b", monitor=False)).parent / "report-curves.png"
    # three panels, each crossed top to bottom by a dashed line per alarm: hundreds of pixels
    assert _count_colour(with_monitor, FEATURE_RED) > 300
    assert _count_colour(with_monitor, LENGTH_ORANGE) > 300
    assert _count_colour(without, FEATURE_RED) == 0 and _count_colour(without, LENGTH_ORANGE) == 0


def test_feature_alarm_line_sits_at_its_step(tmp_path: Path) -> None:
    run = make_run(tmp_path, monitor=False, steps=40)
    # the bare-list form, with a free-text message
    (run / "monitor.json").write_text(json.dumps([{"step": 10, "kind": "feature", "message": "pays for length"}]),
                                      encoding="utf-8")
    curves = write_report(run).parent / "report-curves.png"
    red = np.abs(_pixels(curves) - np.array(FEATURE_RED)).max(axis=2) <= 30
    columns = np.flatnonzero(red.sum(axis=0) > 100)  # the vertical line, not the label text
    assert columns.size, "a vertical red line"
    width = red.shape[1]
    # step 10 of 1..40 is about a quarter of the way across the axes (which span ~10 %..95 %)
    assert 0.2 * width < columns.mean() < 0.4 * width


def test_same_run_renders_the_same_bytes(rendered: Path, tmp_path: Path) -> None:
    first = {p: (rendered / p).read_bytes() for p in ("report.html", "report-curves.png", "report-categories.png")}
    again = write_report(rendered, tmp_path / "report.html").parent
    assert all((again / p).read_bytes() == data for p, data in first.items())


def test_out_puts_page_and_plots_elsewhere(tmp_path: Path) -> None:
    run = make_run(tmp_path / "runs")
    page_path = write_report(run, tmp_path / "site" / "grpo.html")
    assert page_path.is_file() and not (run / "report.html").exists()
    assert sorted(_Page(page_path.read_text(encoding="utf-8")).images) == ["grpo-categories.png", "grpo-curves.png"]
    for name in ("grpo-categories.png", "grpo-curves.png"):
        _assert_png(tmp_path / "site" / name)


# --------------------------------------------------------------------------- optional files


def test_missing_monitor_leaves_a_note_and_no_alarm_table(tmp_path: Path) -> None:
    text = write_report(make_run(tmp_path, monitor=False)).read_text(encoding="utf-8")
    assert "No monitor.json" in text and "alarms" not in _Page(text).tables


def test_missing_gate_still_plots_levels_from_rows(tmp_path: Path) -> None:
    run = make_run(tmp_path, gate=False)
    text = write_report(run).read_text(encoding="utf-8")
    assert "No gate.json" in text and "NO GATE" in text and "gate" not in _Page(text).tables
    _assert_png(run / "report-categories.png")


def test_missing_rows_take_levels_from_the_gate(tmp_path: Path) -> None:
    run = make_run(tmp_path, holdout=False)
    text = write_report(run).read_text(encoding="utf-8")
    assert "pass@1 levels come from gate.json" in text
    _assert_png(run / "report-categories.png")


def test_nothing_to_compare_says_so(tmp_path: Path) -> None:
    run = make_run(tmp_path, gate=False, holdout=False)
    text = write_report(run).read_text(encoding="utf-8")
    assert "nothing to compare by category" in text and not (run / "report-categories.png").exists()


def test_metrics_without_a_curve_key_render_a_placeholder(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    write_jsonl(run / "metrics.jsonl", [{"step": s, "reward": s / 10, "loss": 0.1} for s in range(10)])
    write_report(run)
    _assert_png(run / "report-curves.png")
    assert "kl: " not in report_text(run) and "reward: 0 at step 0 -> 0.9 at step 9" in report_text(run)


def test_dpo_metrics_plot_the_margin_and_name_it(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    write_jsonl(run / "metrics.jsonl", [{"step": s, "rewards/margins": 0.1 * s, "loss": 0.69 - 0.01 * s,
                                         "rewards/accuracies": 0.5} for s in range(1, 11)])
    write_report(run)
    _assert_png(run / "report-curves.png")
    text = report_text(run)
    assert "reward [rewards/margins]: 0.1 at step 1 -> 1 at step 10" in text and "\nkl" not in text


def test_monitor_stop_off_and_errors_become_notes(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    monitor = json.loads((run / "monitor.json").read_text(encoding="utf-8"))
    monitor["stopped_at"] = {"step": 20, "alarm": "feature", "detail": ALARMS[0]}
    monitor["errors"] = ["step 10: RuntimeError: out of memory"]
    (run / "monitor.json").write_text(json.dumps(monitor), encoding="utf-8")
    text = write_report(run).read_text(encoding="utf-8")
    assert "Training stopped early at step 20 on the feature alarm" in text
    assert "Monitor error: step 10: RuntimeError: out of memory" in text
    monitor.update(settings={"every": 0}, alarms=[], history=[], stopped_at=None, errors=[])
    (run / "monitor.json").write_text(json.dumps(monitor), encoding="utf-8")
    text = write_report(run).read_text(encoding="utf-8")
    assert "The HackMonitor was off" in text and "The monitor raised no alarms." in text


def test_without_matplotlib_the_error_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = make_run(tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # what an absent package looks like to import
    with pytest.raises(pytest_rlgate.UsageError, match=r"pip install 'pytest-rlgate\[report\]'"):
        write_report(run)
    assert not (run / "report.html").exists()


# --------------------------------------------------------------------------- bad folders


@pytest.mark.parametrize("missing", ["config.json", "metrics.jsonl"])
def test_missing_required_file_names_it(tmp_path: Path, missing: str) -> None:
    run = make_run(tmp_path)
    (run / missing).unlink()
    with pytest.raises(DataError, match=f"missing required run file {re.escape(missing)}") as info:
        write_report(run)
    assert info.value.path == str(run / missing)


def test_corrupt_metrics_line_names_file_and_line(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    lines = (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2][:15]  # a writer killed mid-line
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="not valid JSON") as info:
        write_report(run)
    assert (info.value.path, info.value.line) == (str(run / "metrics.jsonl"), 3)


@pytest.mark.parametrize(
    ("name", "content", "message", "line"),
    [
        ("metrics.jsonl", '{"step": 1, "reward": 0.5}\n{"reward": 0.6}\n', "'step' must be a number", 2),
        ("metrics.jsonl", "[1, 2]\n", "one JSON object per line", 1),
        ("config.json", "{\n  \"steps\": 40,\n}", "not valid JSON", 3),
        ("config.json", "[]", "expected a JSON object", None),
        ("gate.json", '{"passed": true, "comparisons": [{"metric": "pass@1", "group": "no_id"}]}',
         "comparisons\\[0\\] lacks the string field 'verdict'", None),
        ("gate.json", '{"passed": "yes", "comparisons": []}', "a boolean 'passed'", None),
        ("gate.json", '{"passed": true, "comparisons": [{"metric": "pass@1", "group": "x", "verdict": "flat", '
                      '"delta": "big"}]}', "comparisons\\[0\\].delta must be a number", None),
        ("monitor.json", '{"alarms": [{"kind": "length"}]}', "alarms\\[0\\] needs a numeric 'step'", None),
        ("monitor.json", '{"alarms": [', "not valid JSON", 1),
        ("monitor.json", '{"alarms": [], "history": [{"length": 3}]}', "'history' must be a list", None),
        ("holdout_after.jsonl", ROW + "\n" + ROW.replace('"reward": 1', '"reward": 0.5') + "\n",
         "'reward' must be 0 or 1", 2),
        ("holdout_before_seed18.jsonl", ROW.replace('"category": "no_id", ', "") + "\n", "missing field 'category'",
         1),
    ],
)
def test_corrupt_files_name_file_field_and_line(tmp_path: Path, name: str, content: str, message: str,
                                                line: int | None) -> None:
    run = make_run(tmp_path)
    (run / name).write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=message) as info:
        write_report(run)
    assert (info.value.path, info.value.line) == (str(run / name), line)
    assert not (run / "report.html").exists(), "no half-written report"


def test_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not a run folder"):
        write_report(tmp_path / "nope")


# --------------------------------------------------------------------------- numbers


def test_levels_are_mean_of_unit_means_with_a_band_around_them() -> None:
    rows = [{"category": "a", "unit": "u1", "reward": r} for r in (1, 1, 1, 0)]
    rows += [{"category": "a", "unit": "u2", "reward": r} for r in (0, 0)]
    rows += [{"category": "b", "unit": f"v{i}", "reward": float(i % 3 == 0)} for i in range(30)]
    levels = _levels(rows)
    assert levels["a"].value == pytest.approx((0.75 + 0.0) / 2) and levels["a"].n_units == 2
    assert levels["b"].value == pytest.approx(10 / 30)
    assert levels["overall"].value == pytest.approx((0.75 + 0 + 10) / 32) and levels["overall"].n_units == 32
    b = levels["b"]
    assert b.low is not None and b.high is not None and b.low < b.value < b.high
    # a percentile bootstrap of a mean of 30 Bernoulli(1/3) units: about ±1.96·sqrt(p(1-p)/n) = ±0.17
    assert b.high - b.low == pytest.approx(2 * 1.96 * np.sqrt(1 / 3 * 2 / 3 / 30), rel=0.2)
    one = _levels([{"category": "c", "unit": "only", "reward": 1.0}])["c"]
    assert (one.value, one.low, one.high) == (1.0, None, None)


def test_load_reads_every_base_run_first_one_first(tmp_path: Path) -> None:
    folder = make_run(tmp_path)
    (folder / "holdout_before_seed100.jsonl").write_bytes((folder / "holdout_before_seed19.jsonl").read_bytes())
    run = load_report_data(folder)
    assert list(run.before) == ["holdout_before.jsonl", "holdout_before_seed18.jsonl",
                                "holdout_before_seed19.jsonl", "holdout_before_seed100.jsonl"]
    assert run.verdict == "failed" and run.name == "refund-grpo" and len(run.alarms) == 2


def test_before_levels_pool_the_base_runs_as_the_gate_does(tmp_path: Path) -> None:
    run = load_report_data(make_run(tmp_path))
    pooled = _levels([r for rows in run.before.values() for r in rows])
    after = _levels(run.after or [])
    for c in (run.gate or {})["comparisons"]:
        if c["metric"] == "pass@1":
            assert pooled[c["group"]].value == pytest.approx(c["before"])
            assert after[c["group"]].value == pytest.approx(c["after"])
            assert pooled[c["group"]].n_units == c["n_units"]


# --------------------------------------------------------------------------- index and text


def test_index_links_every_run_with_its_verdict(tmp_path: Path) -> None:
    make_run(tmp_path, "grpo-unbalanced")
    make_run(tmp_path, "grpo-balanced", passed=True, monitor=False)
    (tmp_path / "prompts").mkdir()  # not a run folder: skipped
    make_run(tmp_path, ".grpo-x.partial-123")  # a run still being written: skipped
    index = write_index(tmp_path)
    assert index == tmp_path / "index.html"
    page = _Page(index.read_text(encoding="utf-8"))
    rows = {r[0]: r for r in page.tables["index"][1:]}
    assert set(rows) == {"grpo-balanced", "grpo-unbalanced"}
    assert not (tmp_path / ".grpo-x.partial-123" / "report.html").exists()
    assert rows["grpo-unbalanced"][1] == "FAILED" and rows["grpo-unbalanced"][2] == "no_id"
    assert re.fullmatch(r"overall\s\+0\.\d\d, no_id\s-0\.\d\d, off_topic\s[+-]0\.\d\d, with_id\s\+0\.\d\d",
                        rows["grpo-unbalanced"][3])
    assert rows["grpo-unbalanced"][4] == "feature tool_call@20, length@30"
    assert rows["grpo-balanced"][1] == "PASSED" and rows["grpo-balanced"][2] == "–"
    assert rows["grpo-balanced"][4] == "–", "no monitor.json"
    for href in set(page.links) | set(page.images):
        assert not Path(href).is_absolute() and (tmp_path / href).is_file(), href


def test_index_rewrites_only_stale_reports(tmp_path: Path) -> None:
    run = make_run(tmp_path, "r")
    write_index(tmp_path)
    report = run / "report.html"
    built = report.stat().st_mtime_ns
    write_index(tmp_path)
    assert report.stat().st_mtime_ns == built, "fresh report left alone"
    gate = json.loads((run / "gate.json").read_text(encoding="utf-8"))
    gate["passed"] = True
    (run / "gate.json").write_text(json.dumps(gate), encoding="utf-8")
    import os

    os.utime(run / "gate.json", ns=(built + 10**9, built + 10**9))
    write_index(tmp_path)
    assert "PASSED" in report.read_text(encoding="utf-8")


def test_index_of_a_folder_without_runs_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no run folders here"):
        write_index(tmp_path)


def test_text_report_has_the_table_curves_and_alarms(tmp_path: Path) -> None:
    text = report_text(make_run(tmp_path))
    assert text.splitlines()[0] == "run refund-grpo: gate FAILED"
    assert re.search(r"pass@1\s+no_id\s+8×4\s+0\.\d{3}\s+0\.\d{3}\s+-0\.\d{3}\s+\[-0\.\d{3}, -0\.\d{3}\]"
                     r"\s+0\.\d{3}\s+regressed", text)
    assert re.search(r"reward: [\d.]+ at step 1 -> [\d.]+ at step 40", text)
    assert "step 20: feature - the reward pays most for tool_call" in text and "step 30: length" in text
    assert "FAIL: pass@1 regressed in no_id" in text and "rule: fail if pass@1" in text
    quiet = report_text(make_run(tmp_path, "quiet", monitor=False, gate=False))
    assert "gate NO GATE" in quiet and "alarms: no monitor.json" in quiet


def test_public_names() -> None:
    facade = importlib.import_module("pytest_rlgate.report")
    assert facade.write_report is write_report and facade.write_index is write_index
    assert facade.report_text is report_text


def test_import_does_not_load_matplotlib() -> None:
    code = "import sys, pytest_rlgate.report, pytest_rlgate.cli.report; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------- CLI


def test_cli_writes_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = make_run(tmp_path)
    assert main(["report", str(run), "--text"]) == 0, "a failed gate is on the page, not in the exit code"
    out = capsys.readouterr().out
    assert "run refund-grpo: gate FAILED" in out and out.strip().endswith(f"wrote {run / 'report.html'}")
    _assert_png(run / "report-curves.png")


def test_cli_out_and_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_run(tmp_path / "runs", "one")
    make_run(tmp_path / "runs", "two", passed=True)
    assert main(["report", str(tmp_path / "runs" / "one"), "--out", str(tmp_path / "x" / "one.html")]) == 0
    assert (tmp_path / "x" / "one-curves.png").is_file()
    assert main(["report", "--index", str(tmp_path / "runs")]) == 0
    assert (tmp_path / "runs" / "index.html").is_file() and (tmp_path / "runs" / "two" / "report.html").is_file()
    assert capsys.readouterr().out.strip().endswith("index.html")


def test_cli_index_text_reports_the_runs_the_index_links(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    make_run(tmp_path, "one", monitor=False)
    make_run(tmp_path, "arith", monitor=False, **ARITH)
    (tmp_path / ".two.partial-1").mkdir()  # a run still being written: no report, no text
    (tmp_path / ".two.partial-1" / "config.json").write_text("{", encoding="utf-8")
    assert main(["report", "--index", "--text", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if line.startswith("run ")] == ["run arith: gate FAILED",
                                                                              "run one: gate FAILED"]


@pytest.mark.parametrize(("damage", "expected"), [
    ("config.json", "config.json: missing required run file config.json"),
    ("gate.json", "gate.json:1: not valid JSON"),
])
def test_cli_bad_run_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str,
                                           expected: str) -> None:
    run = make_run(tmp_path)
    if damage == "config.json":
        (run / damage).unlink()
    else:
        (run / damage).write_text('{"passed": tr', encoding="utf-8")
    assert main(["report", str(run)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and expected in err and err.startswith("rlgate report: error: ")


def test_console_script_exit_codes(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    ok = subprocess.run([sys.executable, "-m", "pytest_rlgate.cli", "report", str(run)], capture_output=True,
                        text=True)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([sys.executable, "-m", "pytest_rlgate.cli", "report", str(tmp_path / "missing")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "not a run folder" in bad.stderr and "Traceback" not in bad.stderr


# -- pictures a person can read ---------------------------------------------------------------------


def test_the_category_bars_are_drawn_at_the_gates_level_not_a_level_of_their_own(tmp_path: Path) -> None:
    """The bars beside the gate's 98.7 % intervals were 95 % bootstrap bands; now each group's band
    is at its comparison's two-sided level (1 - 2 level), so the picture and the table agree."""
    run = load_report_data(make_run(tmp_path))
    confidence = gate_confidence(run.gate)
    table = {c["group"]: 1 - 2 * c["level"] for c in run.gate["comparisons"] if c["metric"] == "pass@1"}
    assert confidence == pytest.approx(table) and all(v > 0.97 for v in confidence.values())
    pooled = [r for rows in run.before.values() for r in rows]
    wide, narrow = _levels(pooled, confidence)["overall"], _levels(pooled)["overall"]
    assert LEVEL_CONFIDENCE == 0.95 and wide.high - wide.low > narrow.high - narrow.low


def test_the_index_names_alarms_by_what_fired_them_and_shortens_the_prompt_digest(tmp_path: Path) -> None:
    run = make_run(tmp_path, "unbalanced")
    monitor = json.loads((run / "monitor.json").read_text(encoding="utf-8"))
    monitor["alarms"] = [{"kind": "feature", "step": 10, "top_feature": "lookup_order", "category": c}
                         for c in ("no_id", "with_id")]
    (run / "monitor.json").write_text(json.dumps(monitor), encoding="utf-8")
    config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    config["prompts"]["fingerprint"] = "sha256:" + "c9" * 32
    (run / "config.json").write_text(json.dumps(config), encoding="utf-8")
    page = html.unescape(write_index(tmp_path).read_text(encoding="utf-8"))
    assert "feature lookup_order@10 (no_id), feature lookup_order@10 (with_id)" in page
    assert "feature@10, feature@10" not in page
    assert "sha256:c9c9c9c9c9c9…" in page and "c9" * 32 not in page
    report = html.unescape(write_report(run).read_text(encoding="utf-8"))
    assert "(in no_id)" in report and "(in with_id)" in report  # the alarm table's rows differ
