"""promptfoo, verifiers and NeMo Evaluator outputs, as files written from their published schemas.

The harnesses themselves are not installed here (promptfoo is a Node tool; verifiers and NeMo
Evaluator call model endpoints), so these files follow the schemas their sources publish:

* promptfoo: ``EvaluateResult`` / ``EvaluateSummaryV3`` in promptfoo's ``src/types/index.ts``
  (``promptIdx``, ``testIdx``, ``testCase``, ``provider {id, label}``, ``prompt {raw}``,
  ``vars``, ``response {output}``, ``success``, ``score``, ``namedScores``, ``failureReason``
  0/1/2), in the ``-o results.json`` envelope ``{evalId, results: {version: 3, results: [...]},
  config}`` and in the outputs page's ``{version: 3, results: {prompts, outputs: [...]}}``
  (promptfoo.dev/docs/configuration/outputs).
* verifiers: ``RolloutOutput`` (``verifiers/legacy/types.py``, written by ``save_utils.py``:
  ``example_id``, ``prompt``, ``completion``, ``answer``, ``info``, ``reward``, ``metrics``,
  ``error``) in ``results.jsonl`` beside ``metadata.json``; v1 ``Trace``
  (``verifiers/v1/trace.py``: ``task {type, data, key, hash}``, ``rewards {name: {score,
  weight}}``, ``metrics``, ``errors``, ``root_reply``) in ``traces.jsonl``.
* NeMo Evaluator: the bundle of ``engine/artifacts.py`` (``run_id``, ``config_hash``,
  ``sdk_version``, ``config``, ``benchmark {name, samples, repeats, scores}``) as
  ``eval-<run_id>.json`` beside ``results.jsonl`` lines from ``engine/eval_loop.py``
  (``problem_idx``, ``repeat``, ``reward``, ``model_response``, ``expected_answer``,
  ``scoring_details``, ``metadata``), one folder per benchmark as ``nel gate`` reads them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _harness import gate_deltas, paired_category_deltas

from pytest_rlgate import DataError, compare, read_rows
from pytest_rlgate.cli import main
from pytest_rlgate.data import detect_format

TOPICS = ("billing", "shipping", "smalltalk")


def _pf_result(test: int, provider: str, passed: bool, *, error: bool = False, prompt_idx: int = 0) -> dict:
    topic = TOPICS[test % 3]
    return {
        "id": f"r{test}-{provider}", "promptIdx": prompt_idx, "testIdx": test, "promptId": "p0",
        "provider": {"id": provider, "label": provider},
        "prompt": {"raw": f"Answer the customer: question {test}", "label": "support prompt"},
        "vars": {"question": f"question {test}", "_conversation": []},
        "testCase": {"vars": {"question": f"question {test}"}, "metadata": {"topic": topic},
                     "assert": [{"type": "contains", "value": f"a{test}", "metric": "accuracy"}]},
        "response": {"output": "" if error else (f"a{test}" if passed else "no idea")},
        "error": "provider timed out" if error else None,
        "failureReason": 2 if error else (0 if passed else 1),
        "success": passed and not error, "score": 1.0 if passed and not error else 0.0, "latencyMs": 12,
        "namedScores": {} if error else {"accuracy": 1.0 if passed else 0.0, "tone": 0.8 if passed else 0.4},
        "gradingResult": None if error else {"pass": passed, "score": 1.0 if passed else 0.0, "reason": "ok"},
    }


def _promptfoo_results(n: int = 24) -> list[dict]:
    out = []
    for test in range(n):
        out.append(_pf_result(test, "openai:base", passed=test % 5 != 0))
        out.append(_pf_result(test, "openai:ft", passed=(test % 5 != 0) and TOPICS[test % 3] != "shipping",
                              error=test == 4))
    return out


def _write(path: Path, payload) -> Path:
    path.write_text(json.dumps(payload, indent=2))
    return path


def write_promptfoo(folder: Path) -> Path:
    """``folder/results.json``: both providers in the ``-o results.json`` envelope (gated in docs/harnesses.md)."""
    return _write(folder / "results.json", {
        "evalId": "eval-2026-12-01", "results": {"version": 3, "timestamp": "2026-12-01T09:00:00Z",
                                                 "results": _promptfoo_results(), "prompts": [], "stats": {}},
        "config": {"description": "support bot"}, "shareableUrl": None, "metadata": {"promptfooVersion": "0.118.0"}})


@pytest.fixture
def promptfoo_file(tmp_path: Path) -> Path:
    return write_promptfoo(tmp_path)


def _reference_promptfoo(results: list[dict], provider: str) -> dict[tuple[str, str], list[float]]:
    return {(r["testCase"]["metadata"]["topic"], str(r["testIdx"])): [float(r["success"])]
            for r in results if r["provider"]["id"] == provider and r["failureReason"] != 2}


def test_promptfoo_two_providers_in_one_file_are_two_sides(promptfoo_file: Path, capsys) -> None:
    assert detect_format(promptfoo_file) == "promptfoo"
    with pytest.raises(DataError, match=r"holds 2 providers \(openai:base, openai:ft\): one side each; pick one "
                                        r"with .*#provider=ID"):
        read_rows(promptfoo_file)
    before = read_rows(f"{promptfoo_file}#provider=openai:base", category="testCase.metadata.topic")
    after = read_rows(f"{promptfoo_file}#provider=openai:ft", category="testCase.metadata.topic")
    result = compare(before, after, n_resamples=500, shared_units_only=True)
    reference = paired_category_deltas(*(
        {k: v for k, v in _reference_promptfoo(_promptfoo_results(), p).items() if k[1] != "4"}
        for p in ("openai:base", "openai:ft")))
    assert gate_deltas(result) == pytest.approx(reference)
    (note,) = after.notes
    assert "1 error result(s) (failureReason 2) not gated (test 4): provider timed out" in note
    assert after.errors == 1
    code = main(["gate", f"{promptfoo_file}#provider=openai:base", f"{promptfoo_file}#provider=openai:ft",
                 "--category-key", "testCase.metadata.topic", "--shared-units-only", "--resamples", "500"])
    assert code == 1 and "FAIL: pass@1 regressed in shipping" in capsys.readouterr().out


def test_promptfoo_the_documented_envelope_and_named_scores(tmp_path: Path) -> None:
    results = [r for r in _promptfoo_results() if r["provider"]["id"] == "openai:base"]
    path = _write(tmp_path / "docs-shape.json", {"version": 3, "timestamp": "2026-12-01T09:00:00Z",
                                                  "results": {"prompts": [], "outputs": results, "stats": {}}})
    assert detect_format(path) == "promptfoo"
    rows = list(read_rows(path))
    assert {r["category"] for r in rows} == {"all"} and len(rows) == 24
    named = list(read_rows(path, category="namedScores", pass_threshold=0.5))
    assert {r["category"] for r in named} == {"accuracy", "tone"} and len(named) == 48
    assert [r["reward"] for r in named if r["category"] == "tone"] == [int(t % 5 != 0) for t in range(24)]
    with pytest.raises(DataError, match=r"metric 'tone' is 0\.[48], not 0 or 1"):
        list(read_rows(path, score="tone"))


def _verifiers_v0(folder: Path, *, regress: bool) -> Path:
    folder.mkdir(parents=True)
    (folder / "metadata.json").write_text(json.dumps({"env_id": "math-env", "model": "policy", "num_examples": 12,
                                                      "rollouts_per_example": 3}))
    lines = []
    for example in range(12):
        task = ("algebra", "geometry")[example % 2]
        for rollout in range(3):
            good = (example + rollout) % 4 != 0 and not (regress and task == "geometry" and rollout > 0)
            lines.append({"example_id": example, "prompt": [{"role": "user", "content": f"solve {example}"}],
                          "completion": [{"role": "assistant", "content": "42" if good else "7"}],
                          "answer": "42", "info": {"task": task}, "reward": 1.0 if good else 0.0,
                          "metrics": {"correct": 1.0 if good else 0.0, "length": 0.3}, "error": None,
                          "is_completed": True, "is_truncated": False, "stop_condition": "max_turns"})
    (folder / "results.jsonl").write_text("\n".join(map(json.dumps, lines)) + "\n")
    return folder


def _reference_lines(path: Path, category, unit) -> dict[tuple[str, str], list[float]]:
    out: dict[tuple[str, str], list[float]] = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        out.setdefault((category(rec), str(unit(rec))), []).append(float(rec["reward"] >= 0.5))
    return out


def test_verifiers_results_jsonl_rollouts_share_an_example(tmp_path: Path, capsys) -> None:
    before, after = _verifiers_v0(tmp_path / "base", regress=False), _verifiers_v0(tmp_path / "ft", regress=True)
    assert detect_format(before) == "verifiers"
    rows = list(read_rows(before, category="info.task"))
    assert len(rows) == 36 and {r["rollout_index"] for r in rows} == {0, 1, 2}
    result = compare(read_rows(before, category="info.task"), read_rows(after, category="info.task"),
                     n_resamples=500)
    reference = paired_category_deltas(
        *(_reference_lines(p / "results.jsonl", lambda r: r["info"]["task"], lambda r: r["example_id"])
          for p in (before, after)))
    assert gate_deltas(result) == pytest.approx(reference)
    assert main(["gate", str(before), str(after), "--category-key", "info.task", "--resamples", "500"]) == 1
    assert "FAIL: pass@1 regressed in geometry" in capsys.readouterr().out
    assert {r["category"] for r in read_rows(before)} == {"math-env"}
    with pytest.raises(DataError, match="metric 'length' is 0.3, not 0 or 1"):
        list(read_rows(before, score="length"))


def test_verifiers_v1_traces_and_errored_rollouts(tmp_path: Path) -> None:
    lines = []
    for task in range(6):
        for rollout in range(2):
            failed = task == 5 and rollout == 1
            lines.append({"version": 1, "id": f"t{task}-{rollout}",
                          "task": {"type": "MathTask", "data": {"prompt": f"solve {task}", "level": f"L{task % 2}"},
                                   "key": f"key-{task}", "hash": f"hash-{task}"},
                          "rewards": {"correct": None} if failed else {"correct": {"score": 1.0, "weight": 0.5},
                                                                        "format": {"score": 1.0, "weight": 0.5}},
                          "metrics": {}, "info": {}, "root_reply": "42",
                          "errors": [{"type": "ProviderError", "message": "rate limited"}] if failed else []})
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(map(json.dumps, lines)) + "\n")
    source = read_rows(path, category="task.data.level")
    rows = list(source)
    assert detect_format(path) == "verifiers" and len(rows) == 11
    assert {r["scenario_id"] for r in rows} == {f"key-{t}" for t in range(6)}
    assert {r["score"] for r in rows} == {1.0} and {r["category"] for r in rows} == {"L0", "L1"}
    assert source.errors == 1 and "1 errored rollout(s) not gated (line 12): " in source.notes[0]


def _nemo_bundle(root: Path, benchmark: str, rewards: list[list[float]], *, model: str) -> None:
    folder = root / benchmark
    folder.mkdir(parents=True)
    bundle = {"run_id": f"eval-20261201T090000Z-{benchmark}", "config_hash": f"sha256:{model}{benchmark}",
              "sdk_version": "0.3.0", "timestamp": "2026-12-01T09:00:00+00:00",
              "config": {"model": model, "benchmark": benchmark, "repeats": len(rewards[0])},
              "benchmark": {"name": benchmark, "samples": len(rewards), "repeats": len(rewards[0]), "scores": {}},
              "n_results": len(rewards) * len(rewards[0])}
    (folder / f"{bundle['run_id']}.json").write_text(json.dumps(bundle))
    lines = [{"problem_idx": idx, "repeat": rep, "reward": value, "scorer_rewards": {},
              "model_response": "x", "extracted_answer": "x", "expected_answer": f"ans{idx}",
              "scoring_details": {"error": "sandbox died", "error_category": "infra_error"} if value < 0 else {},
              "metadata": {"category": f"c{idx % 2}"}, "tokens": 5, "latency_ms": 3.0}
             for idx, reps in enumerate(rewards) for rep, value in enumerate(reps)]
    for line in lines:
        line["reward"] = max(line["reward"], 0.0)
    (folder / "results.jsonl").write_text("\n".join(map(json.dumps, lines)) + "\n")


def write_nemo_sides(root: Path) -> None:
    """``root/baseline`` and ``root/candidate``, two benchmarks each; the candidate fails half of
    mmlu_pro, six of its solves after a sandbox error (docs/harnesses.md shows them gated)."""
    good = [[1.0, 1.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]] * 3
    _nemo_bundle(root / "baseline", "gsm8k", good, model="base")
    _nemo_bundle(root / "baseline", "mmlu_pro", good, model="base")
    _nemo_bundle(root / "candidate", "gsm8k", good, model="ft")
    _nemo_bundle(root / "candidate", "mmlu_pro", [[0.0, -1.0]] * 6 + good[6:], model="ft")


def test_nemo_bundles_one_category_per_benchmark(tmp_path: Path, capsys) -> None:
    write_nemo_sides(tmp_path)
    before, after = read_rows(tmp_path / "baseline"), read_rows(tmp_path / "candidate")
    assert detect_format(tmp_path / "baseline") == "nemo"
    result = compare(before, after, n_resamples=500)
    reference = paired_category_deltas(*(
        _reference_lines_nemo(tmp_path / side) for side in ("baseline", "candidate")))
    assert gate_deltas(result) == pytest.approx(reference)
    assert after.errors == 6 and "6 result(s) NeMo Evaluator graded 0 after a failed solve" in after.notes[0]
    assert main(["gate", str(tmp_path / "baseline"), str(tmp_path / "candidate"), "--resamples", "500"]) == 1
    assert "FAIL: pass@1 regressed in mmlu_pro" in capsys.readouterr().out
    assert {r["category"] for r in read_rows(tmp_path / "baseline" / "gsm8k", category="metadata.category")} == {
        "c0", "c1"}
    assert len(list(read_rows(tmp_path / "baseline" / "gsm8k"))) == 24


def _reference_lines_nemo(root: Path) -> dict[tuple[str, str], list[float]]:
    out: dict[tuple[str, str], list[float]] = {}
    for folder in sorted(root.iterdir()):
        for line in (folder / "results.jsonl").read_text().splitlines():
            rec = json.loads(line)
            out.setdefault((folder.name, str(rec["problem_idx"])), []).append(float(rec["reward"] > 0))
    return out


def test_nemo_refuses_a_folder_of_stale_bundles(tmp_path: Path) -> None:
    _nemo_bundle(tmp_path / "run", "gsm8k", [[1.0]] * 4, model="base")
    (tmp_path / "run" / "gsm8k" / "eval-older-gsm8k.json").write_text("{}")
    with pytest.raises(DataError, match="holds 2 eval bundles"):
        read_rows(tmp_path / "run" / "gsm8k")
