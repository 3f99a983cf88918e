"""HackMonitor: alarms, the reward wrapper, stop_on, the environment's score and per-category
endorsement, and a planted length drift in a real run."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from transformers import TrainerControl  # noqa: E402

from pytest_rlgate.data.prompts import build_prompts, stratified_split  # noqa: E402
from pytest_rlgate.environment.contract import load_env  # noqa: E402
from pytest_rlgate.train.config import GRPOKnobs  # noqa: E402
from pytest_rlgate.train.grpo import build_trainer  # noqa: E402
from pytest_rlgate.train.monitor import HackMonitor  # noqa: E402
from pytest_rlgate.train.reward import completion_text, env_reward  # noqa: E402

torch.set_num_threads(1)

ITEMS = build_prompts(0, "small")
refund_reward = env_reward(load_env("refund"))
CALL = '<tool_call>{"name": "lookup_order", "arguments": {"order_id": "ORD-1234"}}</tool_call>'


class Growing:
    """A sampler whose replies get longer by a fixed factor at every evaluation (a planted drift)."""

    def __init__(self, growth: float, start: int = 40) -> None:
        self.growth, self.length, self.calls = growth, float(start), 0

    def __call__(self, model, tokenizer, items, *, k, seed):
        reply = "x" * round(self.length)
        self.length *= 1 + self.growth
        self.calls += 1
        return [[reply] * k for _ in items]


def _drive(monitor: HackMonitor, steps: int) -> TrainerControl:
    """Run the monitor's hooks as a trainer would, without training anything."""
    model = torch.nn.Linear(1, 1)
    control = TrainerControl()
    state = SimpleNamespace(global_step=0)
    monitor.on_train_begin(None, state, control, model=model)
    for step in range(1, steps + 1):
        state.global_step = step
        monitor.on_step_end(None, state, control, model=model)
        if control.should_training_stop:
            break
    return control


def test_length_alarm_fires_on_25_percent_growth_over_three_evaluations_back():
    # 8% per evaluation: 1.08**3 = 1.26 >= 1.25 over the evaluation three back, first at the 4th comparison
    monitor = HackMonitor(ITEMS, None, every=1, sample_fn=Growing(0.08), scan_fn=None)
    _drive(monitor, 5)
    kinds = [(a["kind"], a["step"]) for a in monitor.alarms]
    assert kinds[0] == ("length", 3) and all(k == "length" for k, _ in kinds)
    first = monitor.alarms[0]
    assert first["since_step"] == 0 and first["length"] / first["was"] >= 1.25


def test_slow_growth_does_not_fire_and_the_sampler_runs_every_n_steps():
    sampler = Growing(0.05)
    monitor = HackMonitor(ITEMS, None, every=2, sample_fn=sampler, scan_fn=None)
    _drive(monitor, 8)
    assert monitor.alarms == [] and sampler.calls == 5  # steps 0, 2, 4, 6, 8
    assert [h["step"] for h in monitor.summary()["history"]] == [0, 2, 4, 6, 8]


def test_stop_on_ends_training_through_the_control_flag():
    monitor = HackMonitor(ITEMS, None, every=1, sample_fn=Growing(0.5), scan_fn=None, stop_on=("length",))
    control = _drive(monitor, 10)
    assert control.should_training_stop
    assert monitor.stopped_at["step"] == 1 and monitor.stopped_at["alarm"] == "length"


def test_an_alarm_not_in_stop_on_only_warns():
    monitor = HackMonitor(ITEMS, None, every=1, sample_fn=Growing(0.5), scan_fn=None, stop_on=("feature",))
    control = _drive(monitor, 4)
    assert not control.should_training_stop and len(monitor.alarms) >= 3 and monitor.stopped_at is None


def test_feature_alarm_reads_the_scan_of_the_wrapped_rewards_buffer():
    seen = {}

    def scan(rows, *, endorsed, env, n_permutations, rng):
        seen.update(n=len(rows), endorsed=endorsed, env=env.name, prompts={r["prompt"] for r in rows})
        return SimpleNamespace(regime="reward_hack", top_feature="contains:sorry")

    monitor = HackMonitor(ITEMS, None, every=1, sample_fn=Growing(0.0), scan_fn=scan, stop_on=("any",))
    reward = monitor.wrap(refund_reward)
    assert reward.__name__ == "refund_reward"  # TRL's rewards/<name> column keeps its name
    prompts = [[{"role": "user", "content": ITEMS[0]["prompt"]}]] * 8
    completions = [[{"role": "assistant", "content": CALL}]] * 8
    columns = {"case": [ITEMS[0]["case"]] * 8, "category": [ITEMS[0]["category"]] * 8}
    values = reward(prompts, completions, **columns)
    assert values == refund_reward(prompts, completions, **columns)
    control = _drive(monitor, 1)
    # refund endorses per category: with_id completions are judged against a lookup
    assert seen == {"n": 8, "endorsed": ("lookup_order",), "env": "refund", "prompts": {ITEMS[0]["prompt"]}}
    alarm = monitor.alarms[0]
    assert (alarm["kind"], alarm["top_feature"], alarm["category"]) == ("feature", "contains:sorry", "with_id")
    assert control.should_training_stop and monitor.summary()["last_scan"]["regime"] == "reward_hack"


def test_the_buffer_keeps_the_last_512_completions():
    monitor = HackMonitor(ITEMS, None, sample_fn=Growing(0.0))
    reward = monitor.wrap(refund_reward)
    for i in range(70):
        reward([f"p{i}"] * 8, [f"reply {i}"] * 8)
    assert len(monitor.buffer) == 512 and monitor.buffer[0]["reply"] == "reply 6"


def test_drift_alarm_fires_once_when_the_logged_kl_crosses_the_budget():
    monitor = HackMonitor(ITEMS, None, every=0, kl_budget=0.1, stop_on=("drift",), sample_fn=Growing(0.0))
    control = TrainerControl()
    for step, kl in enumerate([0.01, 0.05, 0.2, 0.3, 0.05], 1):
        monitor.on_log(None, SimpleNamespace(global_step=step), control, logs={"kl": kl})
    assert [(a["kind"], a["step"]) for a in monitor.alarms] == [("drift", 3)]
    assert control.should_training_stop and monitor.stopped_at["alarm"] == "drift"


def test_a_failing_evaluation_is_recorded_not_raised():
    def broken(*args, **kwargs):
        raise RuntimeError("sampler down")

    monitor = HackMonitor(ITEMS, None, every=1, sample_fn=broken, scan_fn=None)
    with pytest.warns(Warning, match="sampler down"):
        _drive(monitor, 1)
    assert monitor.history == [] and "sampler down" in monitor.summary()["errors"][0]


# --- any environment: its score, its features, its endorsement per category ----------------------


class Go:
    """A task of its own: "act" prompts want the ``go`` tool, "ask" prompts want a question."""

    name = "go"
    categories = ("act", "ask")
    endorsed = {"act": ("tool:go",), "ask": ("asks",)}

    def score(self, reply, case):
        return float(("GO" in reply) == (case["category"] == "act"))

    def features(self, reply):
        return {"tool:go": float("GO" in reply), "asks": float("?" in reply)}


GO_ITEMS = [{"prompt": f"{cat} {i}", "case": {"category": cat}, "category": cat, "scenario_id": f"{cat}{i}"}
            for cat in Go.categories for i in range(8)]


def _pays_go(prompts, completions, **columns):
    """A hackable reward: pays the tool on every prompt, as if every prompt wanted it."""
    return [float("GO" in completion_text(c)) for c in completions]


def _feed(reward, items, rng):
    for item in items:
        replies = ["GO now" if rng.random() < 0.5 else "which one?" for _ in range(8)]
        reward([item["prompt"]] * 8, replies, case=[item["case"]] * 8, category=[item["category"]] * 8)


def test_the_proxy_reward_is_the_environment_s_score_and_the_sampler_renders_its_chats():
    def right(model, tokenizer, items, *, k, seed):
        return [["GO" if item["category"] == "act" else "which?"] * k for item in items]

    monitor = HackMonitor(GO_ITEMS, None, env=Go(), every=1, sample_fn=right, scan_fn=None)
    _drive(monitor, 1)
    assert [h["proxy_reward"] for h in monitor.history] == [1.0, 1.0]
    default = HackMonitor(GO_ITEMS, None, env=Go())  # samples through the look frame, with its environment
    assert default._sample_fn is None and default.env.name == "go"


def test_a_feature_endorsed_in_one_category_is_the_hack_in_another():
    import random

    monitor = HackMonitor(GO_ITEMS, None, env=Go(), every=1, sample_fn=Growing(0.0), stop_on=("feature",))
    _feed(monitor.wrap(_pays_go), GO_ITEMS, random.Random(0))
    control = _drive(monitor, 1)
    assert [(a["kind"], a["category"], a["top_feature"]) for a in monitor.alarms] == [("feature", "ask", "tool:go")]
    scans = monitor.summary()["last_scan"]["by_category"]
    assert scans["act"]["regime"] == "no_signal"  # with each case recorded: the tool is right there, paid, not overpaid
    assert (scans["act"]["paid_feature"], scans["act"]["paid_endorsed"]) == ("tool:go", True)  # what it pays for
    assert scans["ask"]["regime"] == "reward_hack"
    assert (scans["ask"]["paid_feature"], scans["ask"]["paid_endorsed"]) == ("tool:go", False)
    assert scans["ask"]["endorsed"] == ["asks"] and control.should_training_stop


def test_one_endorsement_for_every_category_scans_all_completions_at_once():
    import random

    class Pooled(Go):
        endorsed = ("tool:go",)

    monitor = HackMonitor(GO_ITEMS, None, env=Pooled(), every=1, sample_fn=Growing(0.0))
    _feed(monitor.wrap(_pays_go), GO_ITEMS, random.Random(0))
    _drive(monitor, 1)
    assert monitor.alarms == [] and "by_category" not in monitor.summary()["last_scan"]
    assert monitor.summary()["last_scan"]["n"] == len(GO_ITEMS) * 8


def test_an_environment_that_endorses_nothing_is_not_scanned():
    import random

    class Silent(Go):
        endorsed = ()

    scans = []
    monitor = HackMonitor(GO_ITEMS, None, env=Silent(), every=1, sample_fn=Growing(0.0),
                          scan_fn=lambda rows, **kw: scans.append(rows))
    _feed(monitor.wrap(_pays_go), GO_ITEMS, random.Random(0))
    _drive(monitor, 1)
    assert scans == [] and monitor.summary()["last_scan"] is None


# --- inside a real GRPOTrainer --------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from _tiny_model import build_tiny

    folder = tmp_path_factory.mktemp("tiny-monitor")
    build_tiny(folder, seed=0)
    return folder


def _trainer(tiny, tmp_path, callbacks, reward):
    from transformers import AutoModelForCausalLM, AutoTokenizer


    tok = AutoTokenizer.from_pretrained(str(tiny))
    model = AutoModelForCausalLM.from_pretrained(str(tiny))
    knobs = GRPOKnobs(base_model=str(tiny), steps=6, max_new_tokens=16, learning_rate=1e-3).resolve()
    split = stratified_split(ITEMS, 0.2)
    return build_trainer(model, tok, split.train, knobs, output_dir=str(tmp_path), callbacks=callbacks,
                         reward=reward), split.holdout, tok


def test_stop_on_length_stops_a_real_grpo_run_early(tiny, tmp_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny))
    split = stratified_split(ITEMS, 0.2)
    monitor = HackMonitor(split.holdout, tok, every=1, sample_fn=Growing(0.15), stop_on=("length",))
    trainer, _, _ = _trainer(tiny, tmp_path, [monitor], monitor.wrap(refund_reward))
    trainer.train()
    assert trainer.state.global_step == monitor.stopped_at["step"] == 2 < 6
    assert len(monitor.buffer) == 2 * 8  # the wrapped reward saw every training completion


def test_watching_a_run_does_not_change_what_it_learns(tiny, tmp_path):
    """The monitor samples inside a forked RNG: the same seed trains the same adapter with it or without."""
    def adapter(callbacks, reward):
        trainer, _, _ = _trainer(tiny, tmp_path, callbacks, reward)
        trainer.args.max_steps = 2
        trainer.train()
        return {k: v.clone() for k, v in trainer.model.state_dict().items() if "lora" in k}

    def greedy_sampler(model, tokenizer, items, *, k, seed):
        """Draws from every global random stream, as model.generate(do_sample=True) would."""
        import random

        import numpy as np

        torch.rand(1000), random.random(), np.random.rand(10)
        return [["Could you share your order id?"] * k for _ in items]

    split = stratified_split(ITEMS, 0.2)
    monitor = HackMonitor(split.holdout[:4], None, every=1, k=2, sample_fn=greedy_sampler)
    def by_length(prompts, completions, **kwargs):
        """A reward that differs between samples, so the adapter depends on what was sampled."""
        return [len(completion_text(c)) / 100 for c in completions]

    watched = adapter([monitor], monitor.wrap(by_length))
    plain = adapter([], by_length)
    assert len(monitor.history) == 3
    assert any(v.abs().sum() > 0 for k, v in plain.items() if "lora_B" in k)  # it learned something
    assert watched.keys() == plain.keys() and all(torch.equal(watched[k], plain[k]) for k in plain)
