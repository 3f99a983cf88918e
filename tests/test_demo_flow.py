"""``rlgate demo --quick``: the whole flow end to end on the tiny policy (slow: real training).

Very few steps on the small prompt set, so the verdicts mean nothing here; what is checked is
that the story runs, exits 0, leaves finished run folders, reports and an index, and that
every number it prints is the one in the run folders.
"""

from __future__ import annotations

import json
import re

import pytest

from pytest_rlgate.cli import main
from pytest_rlgate.demo.story import hackable_note
from pytest_rlgate.environment.contract import load_env
from pytest_rlgate.train.run import RunFolder

pytest.importorskip("trl")

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::pytest_rlgate.errors.RlgateWarning")]


def _quick_demo(folder, *args):
    """(exit code, stdout, runs dir) of ``rlgate demo --quick`` from an empty cache of its own."""
    import contextlib
    import io

    import torch

    torch.set_num_threads(1)
    runs = folder / "runs"
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out):
        patch.setenv("RLGATE_CACHE_DIR", str(folder / "cache"))
        code = main(["demo", "--quick", "--runs-dir", str(runs), *args])
    return code, out.getvalue(), runs


@pytest.fixture(scope="module")
def quick_demo(tmp_path_factory):
    """The quick demo as it runs by default: its runs side by side (two workers at least)."""
    return _quick_demo(tmp_path_factory.mktemp("demo"), "--jobs", "2")


@pytest.fixture(scope="module")
def serial_quick_demo(tmp_path_factory):
    """The same, one run after the other in this process."""
    return _quick_demo(tmp_path_factory.mktemp("serial-demo"), "--jobs", "1")


def test_the_quick_demo_exits_0_and_prints_the_table_and_the_story(quick_demo):
    code, out, _ = quick_demo
    assert code == 0, out
    assert "base (3 runs)" in out and "GRPO --balance 0.25" in out
    assert "with_id" in out and "no_id" in out and "off_topic" in out
    assert "demo finished in" in out
    assert "`rlgate demo --seeds 3` trains honest GRPO and the balanced one at 3 trainer seeds" in out


def test_it_leaves_finished_run_folders_prompt_files_reports_and_an_index(quick_demo):
    _, _, runs = quick_demo
    folders = [p for p in runs.iterdir() if p.is_dir() and not p.name.startswith(".") and p.name != "prompts"]
    assert {"grpo", "grpo-balance-0.25"} <= {p.name for p in folders}
    for folder in folders:
        run = RunFolder.open(folder)
        assert (folder / "report.html").is_file()
        assert len(run.before_files) == 3  # the noise floor: three base runs
    assert (runs / "index.html").is_file() and (runs / "prompts" / "holdout.jsonl").is_file()


def test_the_printed_numbers_are_the_run_folders_numbers(quick_demo):
    _, out, runs = quick_demo
    for name in ("grpo", "grpo-balance-0.25"):
        gate = json.loads((runs / name / "gate.json").read_text())
        for c in gate["comparisons"]:
            if c["metric"] == "pass@1" and c["group"] != "overall":
                assert f"{c['before']:.2f} → {c['after']:.2f}" in out


def test_the_hackable_run_appears_only_when_honest_grpo_left_no_id_alone(quick_demo):
    note = hackable_note(load_env("refund"), "lookup_anything")
    _, out, runs = quick_demo
    gate = json.loads((runs / "grpo" / "gate.json").read_text())
    no_id = next(c for c in gate["comparisons"] if c["metric"] == "pass@1" and c["group"] == "no_id")
    hackable = (runs / "grpo-hackable-reward").is_dir()
    assert hackable == (no_id["verdict"] != "regressed")
    assert (note in out) == hackable


def test_the_story_says_when_the_hackable_run_did_not_collapse_either(quick_demo):
    _, out, runs = quick_demo
    if not (runs / "grpo-hackable-reward").is_dir():
        pytest.skip("honest GRPO regressed no_id in this run: no hackable run to describe")
    gate = json.loads((runs / "grpo-hackable-reward" / "gate.json").read_text())
    no_id = next(c for c in gate["comparisons"] if c["metric"] == "pass@1" and c["group"] == "no_id")
    assert ("did not collapse no-id either" in out) == (no_id["verdict"] != "regressed")


def _told(out, runs):
    return [re.sub(r"\b\d+ s\b", "N s", line.replace(str(runs), "<runs>")) for line in out.splitlines()]


def test_side_by_side_and_one_at_a_time_tell_the_same_story_from_the_same_files(quick_demo, serial_quick_demo):
    (code, out, runs), (serial_code, serial_out, serial_runs) = quick_demo, serial_quick_demo
    assert code == serial_code == 0
    assert _told(out, runs) == _told(serial_out, serial_runs)
    names = sorted(p.name for p in runs.iterdir() if (p / "config.json").is_file())
    assert names == sorted(p.name for p in serial_runs.iterdir() if (p / "config.json").is_file()) and names
    for name in names:  # every row file, gate and adapter byte for byte (metrics.jsonl holds step times)
        for file in ("holdout_after.jsonl", "holdout_before.jsonl", "gate.json", "monitor.json",
                     "adapter/adapter_model.safetensors"):
            assert (runs / name / file).read_bytes() == (serial_runs / name / file).read_bytes(), f"{name}/{file}"
