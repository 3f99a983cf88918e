"""The training fixtures through pytest itself: train once per configuration, then a cache hit;
a handed-in adapter gated with --rlgate-adapter; bad options as one-line usage errors."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

# pytester's in-process runs drop modules first imported inside them; datasets cannot be
# imported twice (pyarrow extension types), so the training stack is imported out here.
import datasets  # noqa: E402,F401
import peft  # noqa: E402,F401
from _tiny_model import build_tiny  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402,F401

from pytest_rlgate.train.cached import run_key  # noqa: E402
from pytest_rlgate.train.methods import make_knobs  # noqa: E402

torch.set_num_threads(1)

KNOBS = 'size="small", steps=2, max_new_tokens=16, monitor_every=0, base_runs=2'

SUITE = f'''
import json, os, pytest
from pytest_rlgate.gate import compare

@pytest.mark.rlgate(method="grpo", base_model=os.environ["TINY_BASE"], {KNOBS})
def test_gate(rlgate_adapter, rlgate_before_rows, rlgate_after_rows):
    assert (rlgate_adapter.adapter / "adapter_model.safetensors").is_file()
    assert {{r["sample_seed"] for r in rlgate_before_rows}} == {{17, 18}}
    assert {{r["sample_seed"] for r in rlgate_after_rows}} == {{17}}
    result = compare(rlgate_before_rows, rlgate_after_rows, by="category", guards=("well_formed",))
    print("REPORT", json.dumps({{"hit": rlgate_adapter.from_cache, "handed_in": rlgate_adapter.handed_in,
                               "adapter": str(rlgate_adapter.adapter), "rows": len(rlgate_after_rows),
                               "passed": result.passed}}))

@pytest.mark.rlgate(method="grpo", base_model=os.environ["TINY_BASE"], {KNOBS})
def test_same_configuration_same_adapter(rlgate_adapter, rlgate_adapter_factory):
    again = rlgate_adapter_factory("grpo", base_model=os.environ["TINY_BASE"], {KNOBS})
    assert again is rlgate_adapter
'''


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-fixtures")
    build_tiny(folder, seed=0)
    return str(folder)


@pytest.fixture
def env(pytester, monkeypatch, tiny_base, tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("RLGATE_CACHE_DIR", str(cache))
    monkeypatch.setenv("TINY_BASE", tiny_base)
    pytester.makepyfile(test_gated=SUITE)
    return cache


def _report(result) -> dict:
    import json

    lines = [line.split("REPORT ", 1)[1] for line in result.outlines if "REPORT " in line]
    assert lines, result.stdout.str()
    return json.loads(lines[0].rstrip("."))


def test_the_adapter_is_trained_once_then_served_from_the_cache(pytester, env):
    first = pytester.runpytest_inprocess("-s", "-p", "no:cacheprovider")
    first.assert_outcomes(passed=2)
    one = _report(first)
    assert one["hit"] is False and one["handed_in"] is False and one["rows"] > 0
    assert str(env) in one["adapter"]

    second = pytester.runpytest_inprocess("-s", "-p", "no:cacheprovider")
    second.assert_outcomes(passed=2)
    two = _report(second)
    assert two["hit"] is True and two["adapter"] == one["adapter"]
    assert len(list((env / "runs-grpo").iterdir())) == 2  # one run folder and its lock file


def test_a_changed_knob_is_a_different_cache_entry(pytester, env):
    base = __import__("os").environ["TINY_BASE"]
    a = run_key(make_knobs("grpo", base_model=base, size="small", steps=2))
    assert a == run_key(make_knobs("grpo", base_model=base, size="small", steps=2, run_name="elsewhere"))
    assert a != run_key(make_knobs("grpo", base_model=base, size="small", steps=3))
    assert a != run_key(make_knobs("grpo", base_model=base, size="small", steps=2, balance=0.25))


def _row_entries(cache) -> set[str]:
    folder = cache / "rows"
    return {p.name for p in folder.iterdir() if not p.name.endswith(".lock")} if folder.is_dir() else set()


def test_a_handed_in_adapter_is_gated_with_rows_sampled_once(pytester, env, tiny_base):
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=2)
    adapter = next((env / "runs-grpo").glob("*/run/adapter"))
    args = ["-s", "-p", "no:cacheprovider", f"--rlgate-adapter={adapter}", f"--rlgate-base-model={tiny_base}"]
    known = _row_entries(env)
    first = pytester.runpytest_inprocess(*args)
    first.assert_outcomes(passed=2)
    report = _report(first)
    assert report["handed_in"] is True and report["adapter"] == str(adapter)
    sampled = _row_entries(env) - known
    assert len(sampled) == 2  # before (every base run) and after, each sampled once
    pytester.runpytest_inprocess(*args).assert_outcomes(passed=2)
    assert _row_entries(env) - known == sampled  # the second session reads them back


def test_a_missing_adapter_folder_is_a_usage_error(pytester, env, tmp_path):
    result = pytester.runpytest_inprocess(f"--rlgate-adapter={tmp_path / 'nowhere'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--rlgate-adapter*nowhere*no such folder*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_a_bad_marker_knob_fails_the_test_with_one_line(pytester, env):
    pytester.makepyfile(test_bad='''
import pytest

@pytest.mark.rlgate(method="grpo", loss_type="nonsense")
def test_x(rlgate_adapter):
    pass
''')
    result = pytester.runpytest_inprocess("test_bad.py", "-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*rlgate: --loss-type 'nonsense': the installed TRL accepts*"])
    assert "Traceback" not in result.stdout.str()


def test_the_marker_is_registered(pytester):
    result = pytester.runpytest_inprocess("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.rlgate(method='grpo', env=None, **knobs):*"])


CALC_SUITE = '''
import os, pytest

KNOBS = dict(base_model=os.environ["TINY_BASE"], prompts_file=os.environ["CALC_PROMPTS"], holdout=0.4, steps=1,
             max_new_tokens=8, monitor_every=0, base_runs=1)

@pytest.mark.rlgate(method="grpo", **KNOBS)
def test_session_env(rlgate_adapter, rlgate_before_rows, rlgate_after_rows, rlgate_env):
    assert rlgate_env.name == "calc" and rlgate_adapter.run.config["env"] == rlgate_env.describe()
    assert {r["category"] for r in rlgate_after_rows} == {"arithmetic", "word_problem", "unanswerable"}
    assert rlgate_adapter.run.name == "run" and rlgate_adapter.knobs.run_name.startswith("calc-grpo")

@pytest.mark.rlgate(method="grpo", env="_calc_env:CalcEnv", **KNOBS)
def test_marker_env(rlgate_adapter, rlgate_adapter_factory):
    assert rlgate_adapter is rlgate_adapter_factory("grpo", **KNOBS)  # the same environment, the same run
'''


def test_the_fixtures_train_and_grade_on_the_session_or_marker_environment(pytester, env, tmp_path, monkeypatch):
    from _calc_env import write_calc_prompts

    monkeypatch.setenv("CALC_PROMPTS", str(write_calc_prompts(tmp_path / "calc.jsonl")))
    pytester.makepyfile(test_calc=CALC_SUITE)
    result = pytester.runpytest_inprocess("test_calc.py", "-p", "no:cacheprovider", "--rlgate-env=_calc_env:CalcEnv")
    result.assert_outcomes(passed=2)
