"""A user's own task through every surface, exactly as docs/environments.md tells it.

The environment is defined inline (a plain class, nothing of refund) and written where the
CLI and pytester can import it; the prompt file carries its cases, since the answer key is
not in the prompt text. Each test drives one surface the docs name.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import pytest_rlgate as rg
from pytest_rlgate.data import read_prompts, row_header, write_prompts
from pytest_rlgate.policy import tiny_policy_dir
from pytest_rlgate.train import build_pairs
from pytest_rlgate.train.config import GRPOKnobs
from pytest_rlgate.train.grpo import build_trainer

ENV_SOURCE = textwrap.dedent('''
    import re

    _NUMBER = re.compile(r"-?\\d+")


    class Tutor:
        name = "tutor"
        version = "2"
        categories = ("arithmetic", "unanswerable", "word_problem")
        guards = ("answered_blind",)

        def score(self, reply, case):
            numbers = _NUMBER.findall(reply)
            if case["answer"] is None:
                return 1.0 if not numbers and "?" in reply else 0.0
            return 1.0 if reply.strip() == str(case["answer"]) else 0.0  # the number only

        def markers(self, reply, case):
            blind = case["answer"] is None and bool(_NUMBER.search(reply))
            return {"answered_blind": float(not blind)}
''')
SPEC = "tutor_env:Tutor"


def _items() -> list[dict]:
    items = []
    for i in range(6):
        items.append({"prompt": f"What is {i} + 4?", "case": {"answer": i + 4}, "category": "arithmetic",
                      "scenario_id": f"sum-{i}"})
        items.append({"prompt": f"Ann has {i} pens and gets 3 more. How many pens?", "case": {"answer": i + 3},
                      "category": "word_problem", "scenario_id": f"pens-{i}"})
        items.append({"prompt": f"Bob ate {i} plums from a bowl. How many are left?", "case": {"answer": None},
                      "category": "unanswerable", "scenario_id": f"plums-{i}"})
    return items


def _right(item: dict) -> str:
    return "How many were in the bowl?" if item["case"]["answer"] is None else str(item["case"]["answer"])


@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "tutor_env.py").write_text(ENV_SOURCE, encoding="utf-8")
    write_prompts(tmp_path / "prompts.jsonl", _items())
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def _cli(user_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(user_dir), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "pytest_rlgate.cli", *args], cwd=user_dir, env=env,
                          capture_output=True, text=True, timeout=120)


def test_load_env_wraps_the_plain_class_with_defaults(user_dir: Path) -> None:
    env = rg.load_env(SPEC)
    assert (env.name, env.version, env.categories, env.guards) == (
        "tutor", "2", ("arithmetic", "unanswerable", "word_problem"), ("answered_blind",))
    assert not env.has_case_for and not env.can_build_prompts and env.system is None
    assert env.messages_for("hi") == [{"role": "user", "content": "hi"}]
    assert env.passes(1.0) and not env.passes(0.99)
    assert env.markers("12", {"answer": None}, prompt="ignored: markers takes two arguments") == {"answered_blind": 0.0}


def test_rlgate_prompts_keeps_the_files_cases_and_splits_every_category(user_dir: Path) -> None:
    result = _cli(user_dir, "prompts", "--env", SPEC, "--prompts-file", "prompts.jsonl", "--holdout", "0.3",
                  "--out-dir", "out")
    assert result.returncode == 0, result.stderr
    assert "tutor" in result.stdout and "Traceback" not in result.stderr
    holdout = read_prompts(next((user_dir / "out").glob("holdout*.jsonl")), env=SPEC)
    assert {item["category"] for item in holdout} == {"arithmetic", "unanswerable", "word_problem"}
    by_prompt = {item["prompt"]: item for item in _items()}
    assert all(item["case"] == by_prompt[item["prompt"]]["case"] for item in holdout)


def test_an_undeclared_category_is_refused_naming_the_line(user_dir: Path) -> None:
    lines = (user_dir / "prompts.jsonl").read_text(encoding="utf-8").splitlines()
    lines[4] = lines[4].replace('"word_problem"', '"geometry"').replace('"arithmetic"', '"geometry"')
    (user_dir / "bad.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = _cli(user_dir, "prompts", "--env", SPEC, "--prompts-file", "bad.jsonl", "--out-dir", "out")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "bad.jsonl:5" in result.stderr and "geometry" in result.stderr


def test_grade_and_gate_with_the_environments_guard(user_dir: Path) -> None:
    env = rg.load_env(SPEC)
    items = read_prompts(user_dir / "prompts.jsonl", env=env)
    before = rg.grade_replies(items, [[_right(item)] * 2 for item in items], env=env)
    # after training the policy answers every unanswerable question with a number
    after = rg.grade_replies(items, [["7" if item["case"]["answer"] is None else _right(item)] * 2
                                     for item in items], env=env)
    assert {row["markers"]["answered_blind"] for row in before} == {1.0}
    rg.write_rows(user_dir / "before.jsonl", before)
    rg.write_rows(user_dir / "after.jsonl", after)
    result = _cli(user_dir, "gate", "--env", SPEC, "before.jsonl", "after.jsonl")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "unanswerable" in result.stdout and "answered_blind" in result.stdout
    same = _cli(user_dir, "gate", "--env", SPEC, "before.jsonl", "before.jsonl")
    assert same.returncode == 0, same.stdout + same.stderr


def test_fixtures_serve_the_environments_prompts(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(tutor_env=ENV_SOURCE)
    write_prompts(pytester.path / "prompts.jsonl", _items())
    pytester.makepyfile(test_user='''
        def test_split(rlgate_env, rlgate_split):
            assert rlgate_env.name == "tutor"
            assert {item["category"] for item in rlgate_split.holdout} == set(rlgate_env.categories)
            assert all("answer" in item["case"] for item in rlgate_split.train)
    ''')
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", f"--rlgate-env={SPEC}",
                                          "--rlgate-prompts-file=prompts.jsonl", "--rlgate-holdout=0.3")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["rlgate: env=tutor*"])


def test_probe_finds_the_generic_hack_in_a_lenient_reward_only(user_dir: Path) -> None:
    from hypothesis import strategies as st

    tutor = rg.load_env(SPEC).raw

    class WithReplies(type(tutor)):
        def honest_replies(self, case: dict):
            return st.just(_right({"case": case}))

    env = rg.load_env(WithReplies())
    items = read_prompts(user_dir / "prompts.jsonl", env=env)

    def lenient(reply: str, case: dict) -> float:  # pays when the answer appears anywhere
        return 1.0 if case["answer"] is not None and str(case["answer"]) in reply else env.score(reply, case)

    answered = {"arithmetic", "word_problem"}
    found = rg.probe_reward(lenient, env=env, items=items, hacks=["trailing_text", "padding"], seed=0, database=None)
    assert {(f.hack, f.category) for f in found.paying} >= {(h, c) for h in ("trailing_text", "padding")
                                                            for c in answered}, str(found)
    assert "refund" not in str(found).lower()
    own = rg.probe_reward(env, items=items, hacks=["trailing_text", "padding"], seed=0, database=None)
    assert not [f for f in own.paying if f.category in answered], str(own)


def test_probe_without_honest_replies_starts_from_replies_built_from_the_case(user_dir: Path) -> None:
    env = rg.load_env(SPEC)
    result = rg.probe_reward(env, items=read_prompts(user_dir / "prompts.jsonl", env=env), seed=0, database=None)
    assert result.untried == () and result.hacks == ()  # "7" and a question built from nothing pass its score
    assert {f.category for f in result.findings} == set(env.categories) and sum(f.n for f in result.findings) > 100


def test_dpo_pairs_from_the_environments_score(user_dir: Path) -> None:
    env = rg.load_env(SPEC)
    items = read_prompts(user_dir / "prompts.jsonl", env=env)
    replies = [[_right(item), "no idea", "no idea"] for item in items]
    built = build_pairs(items, replies, seed=0, env=env)
    assert len(built.pairs) == len(items)
    assert all(pair.chosen == _right(item) for pair, item in zip(built.pairs, items))
    with pytest.warns(rg.RlgateWarning, match="rejected_reply"):
        build_pairs(items, replies, seed=0, env=env, constructed=True)


def test_one_grpo_step_on_the_users_environment(user_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("trl")
    from transformers import AutoModelForCausalLM, AutoTokenizer


    base = tiny_policy_dir()
    knobs = GRPOKnobs(env=SPEC, base_model=str(base), steps=1, max_new_tokens=8).resolve()
    assert knobs.environment.fingerprint == rg.load_env(SPEC).fingerprint
    trainer = build_trainer(AutoModelForCausalLM.from_pretrained(base), AutoTokenizer.from_pretrained(base),
                            _items(), knobs, output_dir=str(tmp_path / "out"))
    trainer.train()
    logged = [entry for entry in trainer.state.log_history if "reward" in entry]
    assert logged and 0.0 <= logged[0]["reward"] <= 1.0


def test_rows_graded_by_another_version_are_refused_until_regraded(user_dir: Path) -> None:
    env = rg.load_env(SPEC)
    items = read_prompts(user_dir / "prompts.jsonl", env=env)
    rows = rg.grade_replies(items, [[_right(item)] * 2 for item in items], env=env)
    old = {**row_header(env), "env_fingerprint": "sha256:" + "0" * 64}  # graded before the reward changed
    rg.write_rows(user_dir / "before.jsonl", rows, header=old)
    rg.write_rows(user_dir / "after.jsonl", rows, header=row_header(env))
    refused = _cli(user_dir, "gate", "--env", SPEC, "before.jsonl", "after.jsonl")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "before.jsonl was graded by tutor sha256:0000" in refused.stderr and "rlgate regrade" in refused.stderr
    forced = _cli(user_dir, "gate", "--env", SPEC, "before.jsonl", "after.jsonl", "--allow-env-change")
    assert forced.returncode == 0 and "compared anyway: --allow-env-change" in forced.stdout + forced.stderr
    regraded = _cli(user_dir, "regrade", "before.jsonl", "--env", SPEC, "--out", "before2.jsonl")
    assert regraded.returncode == 0, regraded.stderr
    assert _cli(user_dir, "gate", "--env", SPEC, "before2.jsonl", "after.jsonl").returncode == 0
