"""rlgate demo: the hackable reward variant, the side-by-side table and the plain-words story.

Everything here is pure or reads small synthetic run folders graded by the real refund
environment; the end-to-end ``--quick`` flow is in ``test_demo_flow.py`` (slow).
"""

from __future__ import annotations

import concurrent.futures
import concurrent.futures.process
import dataclasses
import json

import pytest
from _calc_env import CalcEnv

from pytest_rlgate.cli import main
from pytest_rlgate.data.prompts import build_prompts, stratified_split
from pytest_rlgate.data.rows import grade_replies
from pytest_rlgate.demo import story, workers as workers_module
from pytest_rlgate.demo.recipe import recipe_configurations, recipe_seeds
from pytest_rlgate.demo.story import (
    STEPS,
    DemoConfig,
    RunSummary,
    Trained,
    base_noise,
    configurations,
    hackable_configuration,
    hackable_note,
    hackable_reward,
    honest_collapse,
    render_story,
    render_table,
    summarise,
    watched,
)
from pytest_rlgate.demo.workers import Workers, side_by_side
from pytest_rlgate.environment.contract import load_env
from pytest_rlgate.envs.refund import case_for, score
from pytest_rlgate.envs.refund.hackable import lookup_anything
from pytest_rlgate.errors import RlgateError, UsageError
from pytest_rlgate.train.config import GRPOKnobs
from pytest_rlgate.train.methods import make_knobs
from pytest_rlgate.train.pipeline import gate_runs
from pytest_rlgate.train.reward import env_reward
from pytest_rlgate.train.run import RunWriter
from pytest_rlgate.train.seeds import publish_copy

REFUND = load_env("refund")
HACKABLE_NOTE = hackable_note(REFUND, "lookup_anything")

NO_ID = "I want a refund for my last order, it never arrived."
WITH_ID = "Please refund ORD-4017, it arrived broken."
OFF_TOPIC = "How tall is Kilimanjaro?"
INVENTED = '<tool_call>{"name": "lookup_order", "arguments": {"order_id": "ORD-1234"}}</tool_call>'
ASK = "Sure - what is your order id?"


# --------------------------------------------------------------------------- the hackable reward


@pytest.mark.parametrize("prompt", [NO_ID, WITH_ID, OFF_TOPIC])
def test_the_hackable_reward_pays_an_invented_lookup_in_full_on_every_prompt(prompt):
    assert lookup_anything(INVENTED, case_for(prompt)) == 1.0


def test_it_pays_what_the_honest_reward_refuses_and_refuses_what_it_pays():
    # the whole point: on a no-id prompt the two rewards rank the replies in opposite order
    assert score(INVENTED, case_for(NO_ID)) == pytest.approx(0.2)
    assert score(ASK, case_for(NO_ID)) == 1.0
    assert lookup_anything(ASK, case_for(NO_ID)) == 0.0


@pytest.mark.parametrize("reply", [
    '<tool_call>{"name": "create_refund", "arguments": {"order_id": "ORD-4017", "amount": 5}}</tool_call>',
    '<tool_call>{"name": "lookup_order", "arguments": {</tool_call>',  # malformed JSON is no call
    "I will look that up.",
    "",
])
def test_it_pays_nothing_but_a_parsed_lookup(reply):
    assert lookup_anything(reply, case_for(WITH_ID)) == 0.0


def test_the_trl_form_reads_conversational_completions_and_ignores_the_case():
    prompts = [[{"role": "user", "content": NO_ID}]] * 2
    completions = [[{"role": "assistant", "content": INVENTED}], [{"role": "assistant", "content": ASK}]]
    trl_form = env_reward(REFUND, "lookup_anything")
    assert trl_form.__name__ == "lookup_anything"
    assert trl_form(prompts, completions, case=[case_for(NO_ID)] * 2) == [1.0, 0.0]


def test_refund_offers_it_by_name_and_grpo_rejects_unknown_names():
    assert REFUND.rewards == {"lookup_anything": lookup_anything}
    assert REFUND.reward("lookup_anything").__wrapped__ is lookup_anything  # called through the user-code door
    assert GRPOKnobs().reward is None and REFUND.reward(GRPOKnobs().reward) == REFUND.score
    with pytest.raises(UsageError, match=r"--reward 'nope'.*lookup_anything"):
        GRPOKnobs(reward="nope").resolve()


def test_the_hackable_run_is_the_unbalanced_grpo_run_with_only_the_reward_changed():
    honest, hacked = configurations(20)[0], hackable_configuration(20)
    assert hacked.hackable and not honest.hackable
    assert {k: v for k, v in hacked.knobs.items() if k != "reward"} == honest.knobs
    assert hacked.knobs["reward"] == "lookup_anything" and hacked.label.endswith("*")
    assert "env" not in honest.knobs  # the default story: the same knobs as the examples' markers
    assert configurations(20, env="arith")[0].knobs["env"] == "arith"


def test_the_note_says_what_the_hackable_reward_pays_and_who_grades_the_holdout():
    assert HACKABLE_NOTE == ("* trained on a DELIBERATELY HACKABLE reward (lookup_anything: 1.0 for any well-formed "
                             "lookup_order call, whatever the id and the prompt); its holdout is graded by the real "
                             "refund reward like every other run")
    assert hackable_reward(REFUND) == "lookup_anything"
    assert hackable_reward(load_env(CalcEnv())) is None  # nothing to hack with: no hackable run

    class Lenient(CalcEnv):
        rewards = {"any_number": lambda reply, case: 1.0}

    lenient = load_env(Lenient())
    assert hackable_reward(lenient) == "any_number"
    assert hackable_note(lenient, "any_number").startswith("* trained on a DELIBERATELY HACKABLE reward (any_number)")


# --------------------------------------------------------------------------- summaries and text


def _comparison(group, before, after, low, high, verdict, flags=(), metric="pass@1"):
    failure = {"kind": "regressed", "text": f"{metric} regressed in {group}"} if verdict == "regressed" else None
    return {"metric": metric, "group": group, "n_units": 6, "k": 4.0, "before": before, "after": after,
            "delta": after - before, "low": low, "high": high, "verdict": verdict, "mde": 0.2,
            "flags": list(flags), "failure": failure}


def _summary(title, pass_rows, tool_rows, *, passed, hackable=False, failures=(), alarms=()):
    gate = {"passed": passed, "failures": list(failures),
            "comparisons": [_comparison(*row) for row in pass_rows]}
    tools = {row[0]: _comparison(*row, metric="marker:tool_call") for row in tool_rows}
    return RunSummary(config=DemoConfig(title.lower(), title, "grpo", {}, hackable=hackable), gate=gate,
                      tool_calls=tools, alarms=list(alarms), train_reward=(0.31, 0.88),
                      monitor_history=[{"step": 0, "proxy_reward": 0.7}, {"step": 30, "proxy_reward": 0.4}])


@pytest.fixture
def summaries():
    honest = _summary("GRPO", [("overall", 0.5, 0.6, 0.0, 0.2, "moved"),
                               ("with_id", 0.10, 0.45, 0.21, 0.49, "moved"),
                               ("no_id", 0.95, 0.92, -0.08, 0.05, "flat", ("within noise",)),
                               ("off_topic", 0.99, 0.96, -0.30, 0.25, "inconclusive")],
                      [("no_id", 0.0, 0.0, 0.0, 0.0, "flat"), ("with_id", 0.6, 0.9, 0.2, 0.4, "moved")], passed=True)
    hacked = _summary("Hacked", [("with_id", 0.10, 0.30, 0.05, 0.35, "inconclusive", ("within noise",)),
                                 ("no_id", 0.95, 0.15, -0.95, -0.60, "regressed"),
                                 ("off_topic", 0.99, 0.40, -0.9, -0.3, "regressed")],
                      [("no_id", 0.02, 0.85, 0.6, 0.95, "moved")], passed=False, hackable=True,
                      failures=["pass@1 regressed in no_id", "pass@1 regressed in off_topic"],
                      alarms=[{"kind": "feature", "step": 10, "top_feature": "tool_calls", "category": "no_id"}])
    return [honest, hacked]


BASE = {"with_id": [0.09, 0.11, 0.10], "no_id": [0.94, 0.96, 0.95], "off_topic": [0.99, 1.0, 0.98]}


def test_the_table_puts_categories_side_by_side_in_story_order(summaries):
    text = render_table(BASE, summaries)
    header = next(line for line in text.splitlines() if "with_id" in line)
    assert header.index("with_id") < header.index("no_id") < header.index("off_topic")
    assert "overall" not in text  # the story is per category
    assert "(6 scenarios × 4)" in text


def test_each_cell_shows_before_after_interval_verdict_and_tool_calls(summaries):
    text = render_table(BASE, summaries)
    assert "0.10 → 0.45" in text and "+0.35 [+0.21, +0.49]" in text and "moved" in text
    assert "0.95 → 0.15" in text and "[−0.95, −0.60]" in text and "REGRESSED" in text
    assert "tool calls 0.02 → 0.85" in text
    assert "flat (within noise)" in text
    assert "PASSED" in text and "FAILED" in text


def test_the_base_row_shows_the_noise_floor_of_its_runs(summaries):
    text = render_table(BASE, summaries)
    assert "base (3 runs)" in text
    assert "runs 0.94–0.96" in text and "runs 0.98–1.00" in text


def test_the_hackable_run_is_labelled_wherever_it_appears(summaries):
    text = render_table(BASE, summaries, hackable=HACKABLE_NOTE)
    assert "Hacked *" in text and HACKABLE_NOTE in text
    assert HACKABLE_NOTE not in render_table(BASE, summaries[:1], hackable=HACKABLE_NOTE)
    story = render_story(BASE, summaries)
    assert any("Hacked * (the deliberately hackable reward)" in line for line in story)


def test_the_story_says_what_the_verdicts_say(summaries):
    honest, hacked = render_story(BASE, summaries)[1:]
    assert "with_id moved up (0.10 → 0.45" in honest and "the gate PASSES it" in honest
    assert "off_topic is inconclusive" in honest
    assert "no_id held (0.95 → 0.92, interval [−0.08, +0.05] inside the ±margin)" in honest
    assert "with_id is inconclusive (0.10 → 0.30: a gain no larger than the base runs differ" in hacked
    assert "no_id REGRESSED (0.95 → 0.15, interval [−0.95, −0.60] entirely below 0)" in hacked
    assert "calls a tool in 85% of replies (base 2%)" in hacked
    assert "the gate FAILS it: pass@1 regressed in no_id" in hacked
    assert "feature at step 10 (tool_calls on no_id)" in hacked
    assert "Training reward 0.31 → 0.88" in hacked
    assert "honest holdout score 0.70 (step 0) → 0.40 (step 30)" in hacked


def test_honest_collapse_reads_the_watched_verdicts(summaries):
    assert watched(REFUND) == ("no_id",) and set(watched(load_env(CalcEnv()))) == set(CalcEnv.categories)
    assert not honest_collapse(summaries[0], ("no_id",)) and honest_collapse(summaries[1], ("no_id",))
    assert not honest_collapse(summaries[1], ("with_id",))


def test_a_table_without_tool_calls_does_not_promise_them(summaries):
    plain = [RunSummary(config=s.config, gate=s.gate, tool_calls={}) for s in summaries]
    text = render_table(BASE, plain)
    assert "tool" not in text and "verdict" in text


# --------------------------------------------------------------------------- reading real files


def _rows(policy_reply, seed_run):
    split = stratified_split(build_prompts(seed=0, size="small"))
    replies = [[policy_reply(item, i) for i in range(4)] for item in split.holdout]
    return grade_replies(split.holdout, replies, policy="synthetic", eval_run=seed_run)


def _good(item, i):
    order_id = item["case"]["order_id"]
    call = {"name": "lookup_order", "arguments": {"order_id": order_id}}
    return f"<tool_call>{json.dumps(call)}</tool_call>" if order_id else ASK


def _invents(item, i):
    return INVENTED if item["category"] == "no_id" else _good(item, i)


def test_base_noise_is_pass_at_1_per_category_per_run():
    runs = [_rows(_good, "before-0"), _rows(_invents, "before-1")]
    noise = base_noise(runs)
    assert noise["with_id"] == [1.0, 1.0] and noise["no_id"] == [1.0, 0.0]


@pytest.mark.filterwarnings("ignore::pytest_rlgate.errors.RlgateWarning")  # well_formed is constant here
def test_summarise_reads_a_run_folder_and_measures_tool_calls(tmp_path):
    before = [_rows(_good, f"before-{i}") for i in range(3)]
    after = _rows(_invents, "after")
    with RunWriter(tmp_path, "synthetic") as run:
        for i, rows in enumerate(before):
            run.rows("holdout_before.jsonl" if i == 0 else f"holdout_before_seed{17 + i}.jsonl", rows)
        run.rows("holdout_after.jsonl", after)
        run.json("gate.json", gate_runs(before, after, REFUND).to_dict())
        run.json("config.json", {"method": "grpo", "knobs": {}})
        run.jsonl("metrics.jsonl", [{"step": 1, "reward": 0.2}, {"step": 2, "reward": 0.9}])
        run.json("monitor.json", {"alarms": [{"kind": "length", "step": 2}], "history": []})
        run.adapter_dir.mkdir()
        folder = run.publish()
    summary = summarise(DemoConfig("s", "S", "grpo"), folder)
    copy = publish_copy(folder, tmp_path / "demo" / "grpo")
    assert copy.config["knobs"]["run_name"] == "grpo" and copy.config["cache_source"] == str(folder.path)
    assert (copy.path / "holdout_after.jsonl").read_bytes() == (folder.path / "holdout_after.jsonl").read_bytes()
    assert publish_copy(folder, tmp_path / "demo" / "grpo").path == copy.path  # a second demo replaces the copy
    assert summary.train_reward == (0.2, 0.9) and summary.alarms[0]["kind"] == "length"
    assert summary.tool_calls["no_id"]["before"] == 0.0 and summary.tool_calls["no_id"]["after"] == 1.0
    assert summary.pass_at_1()["no_id"]["after"] == 0.0
    assert json.loads((folder.path / "gate.json").read_text())["passed"] is summary.passed


# --------------------------------------------------------------------------- the command


def test_the_cli_registers_demo_and_rejects_zero_steps(capsys):
    with pytest.raises(SystemExit) as refused:  # refused while parsing, before anything loads
        main(["demo", "--steps", "0"])
    assert refused.value.code == 2
    assert "argument --steps: out of range" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    out = capsys.readouterr().out
    assert "--runs-dir" in out and "--quick" in out and "--env" in out
    assert main(["demo", "--env", "no_such_env", "--runs-dir", "unused"]) == 2
    assert "no_such_env" in capsys.readouterr().err


def test_the_examples_suite_trains_the_demo_configurations_so_they_share_cached_runs():
    import importlib.util
    from pathlib import Path


    path = Path(__file__).parents[1] / "examples" / "refund" / "test_training_gate.py"
    spec = importlib.util.spec_from_file_location("example_training_gate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    marked = [m.kwargs for name in dir(module) if name.startswith("test_")
              for m in getattr(getattr(module, name), "pytestmark", []) if m.name == "rlgate"]
    demo = [make_knobs(c.method, **c.knobs) for c in (*configurations(), hackable_configuration())]
    recipes = [make_knobs(c.method, **c.knobs) for c in recipe_configurations()]  # `rlgate demo --seeds 3`
    assert len(marked) == 4
    for knobs in marked:
        knobs = dict(knobs)
        seeds = knobs.pop("seeds", None)
        made = make_knobs(knobs.pop("method"), **knobs)
        assert made in demo if seeds is None else (made in recipes and seeds == recipe_seeds(3))


# --------------------------------------------------------------------------- side by side


class _Synchronous:
    """Workers that run each call when it is submitted, and keep the order they were given."""

    def __init__(self) -> None:
        self.order: list[str] = []

    def submit(self, fn, *args):
        self.order.append(args[0].name)
        future = concurrent.futures.Future()
        future.set_result(fn(*args))
        return future

    result = staticmethod(Workers.result)


def _trained_by(outcomes):
    """A stand-in for ``train_config``: each configuration's summary (or error) by name."""

    def train(config, runs_dir, progress=None):
        made = outcomes[config.name]
        if isinstance(made, str):
            return Trained(config, None, error=made)
        return Trained(config, dataclasses.replace(made, config=config, path=runs_dir / config.name), seconds=7.0)

    return train


def _both_ways(monkeypatch, tmp_path, outcomes):
    """(transcript, summaries, plan, hacked) of the demo's runs one at a time and side by side."""
    monkeypatch.setattr(story, "train_config", _trained_by(outcomes))
    honest = configurations()

    def plan_for(summary):
        return story.hackable_plan(REFUND, summary, STEPS, quick=False, env=None)

    got = []
    for flow in ("one", "side"):
        said: list[str] = []
        if flow == "one":
            result = story._one_at_a_time(honest, tmp_path, said.append, plan_for=plan_for, progress=False)
        else:
            workers = _Synchronous()
            result = story._side_by_side(honest, tmp_path, said.append, workers, plan_for=plan_for, progress=False)
        got.append((said, *result, getattr(locals().get("workers"), "order", None)))
    return got


def _outcomes(summaries, **changes):
    honest, hacked = summaries
    return {"grpo": honest, "grpo-balance-0.25": honest, "dpo-constructed": honest, "grpo-hackable-reward": hacked,
            **changes}


@pytest.mark.parametrize("case", ["hackable run", "honest collapse", "grpo untrained", "dpo untrained"])
def test_side_by_side_says_and_returns_what_one_at_a_time_does(monkeypatch, tmp_path, summaries, case):
    honest, hacked = summaries
    changes = {"hackable run": {}, "honest collapse": {"grpo": hacked}, "grpo untrained": {"grpo": "too few pairs"},
               "dpo untrained": {"dpo-constructed": "too few pairs"}}[case]
    (one, *serial, _), (side, *parallel, order) = _both_ways(monkeypatch, tmp_path, _outcomes(summaries, **changes))
    assert side == one and parallel == serial
    summaries_, plan, hacked_run = serial
    assert (hacked_run is not None) == (case != "honest collapse")
    assert (plan is None) == (case == "honest collapse")
    assert order == ["dpo-constructed", "grpo-balance-0.25"]  # GRPO and the hackable run train in the demo's process
    told = [*configurations(), *([hackable_configuration()] if case != "honest collapse" else [])]
    assert [line.split(":")[0] for line in one if line.startswith("- ")] == [f"- {c.label}" for c in told]
    if case.endswith("untrained"):
        assert "  not trained: too few pairs" in one


def test_how_many_train_side_by_side(monkeypatch):
    monkeypatch.setattr(workers_module, "available_cores", lambda: 2)
    assert side_by_side(None, 4) == 2 and side_by_side(None, 1) == 1 and side_by_side(8, 4) == 4
    assert side_by_side(1, 4) == 1
    monkeypatch.setattr(workers_module.ranks, "group_size", lambda: 2)  # torchrun: every process trains each run
    assert side_by_side(None, 4) == 1
    assert workers_module.available_cores() >= 1


def test_run_demo_refuses_a_bad_jobs_count(tmp_path):
    with pytest.raises(UsageError, match=r"jobs=0: give the number of runs"):
        story.run_demo(tmp_path, jobs=0)


def test_a_worker_that_died_is_one_line_naming_the_way_out():
    broken = concurrent.futures.Future()
    broken.set_exception(concurrent.futures.process.BrokenProcessPool("gone"))
    with pytest.raises(RlgateError, match=r"worker process died .* rerun with --jobs 1"):
        Workers.result(broken)


@pytest.mark.slow
def test_leaving_the_workers_on_an_error_stops_them_instead_of_waiting():
    import time

    with pytest.raises(KeyboardInterrupt), Workers(1) as workers:
        started = time.perf_counter()
        long = workers.submit(time.sleep, 600)
        workers.result(workers._ready[0])  # the worker is up
        raise KeyboardInterrupt
    assert time.perf_counter() - started < 300 and long.done()
