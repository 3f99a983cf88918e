"""Seeded sampling: per-reply determinism, batch independence, exact temperature/top-p, adapters."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from _calc_env import CalcEnv, calc_items

from pytest_rlgate.data import prompts
from pytest_rlgate.environment.contract import load_env
from pytest_rlgate.errors import UsageError
from pytest_rlgate.policy import generate, sampling
from pytest_rlgate.policy.load import load_policy
from pytest_rlgate.policy.tiny import build as tiny_build
from pytest_rlgate.policy.tiny.spec import spec_of
from pytest_rlgate.policy.tiny.warmstart import TrainSchedule

#: A barely trained policy of the default environment: random enough that replies vary, so
#: equality means something.
MINI = dataclasses.replace(spec_of(load_env(None)), schedule=TrainSchedule(steps=3, batch_size=4, warmup_steps=1))
PROMPTS = [
    "Please refund ORD-4017.",
    "Where is my order?",
    "Tell me a joke.",
    "I was charged twice for ORD-5120, fix it",
    "Can I return the headphones? They broke.",
]
FAST = {"max_new_tokens": 12, "progress": False}


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("mini-policy")
    tiny_build.build_policy(out, load_env(None), MINI)
    return load_policy(out, device="cpu")


def test_shape_and_variety(policy) -> None:
    model, tok = policy
    replies = sampling.sample(model, tok, PROMPTS, k=3, **FAST)
    assert [len(r) for r in replies] == [3] * len(PROMPTS)
    assert all(isinstance(text, str) for r in replies for text in r)
    assert len({text for r in replies for text in r}) > len(PROMPTS)  # samples, not one greedy path


def test_same_seed_same_replies_other_seed_other_replies(policy) -> None:
    model, tok = policy
    a = sampling.sample(model, tok, PROMPTS, k=2, seed=17, **FAST)
    b = sampling.sample(model, tok, PROMPTS, k=2, seed=17, **FAST)
    c = sampling.sample(model, tok, PROMPTS, k=2, seed=18, **FAST)
    assert a == b
    assert a != c


def test_a_prompts_replies_do_not_depend_on_its_batch(policy) -> None:
    model, tok = policy
    alone = sampling.sample(model, tok, [PROMPTS[3]], k=4, **FAST)[0]
    together = sampling.sample(model, tok, PROMPTS, k=4, batch_size=5, **FAST)[3]
    shifted = sampling.sample(model, tok, PROMPTS[::-1] + PROMPTS[:2], k=4, batch_size=2, **FAST)[1]
    items = [{"prompt": p, "case": {}, "category": "x", "scenario_id": str(i)} for i, p in enumerate(PROMPTS)]
    as_items = sampling.sample(model, tok, items, k=4, batch_size=3, **FAST)[3]
    assert alone == together == shifted == as_items
    # more replies extend, never reshuffle, the first ones
    assert sampling.sample(model, tok, [PROMPTS[3]], k=6, **FAST)[0][:4] == alone


def test_temperature_zero_is_greedy_generate(policy) -> None:
    model, tok = policy
    replies = sampling.sample(model, tok, PROMPTS[:2], k=2, temperature=0.0, **FAST)
    for prompt, (first, second) in zip(PROMPTS[:2], replies):
        text = tok.apply_chat_template(load_env(None).messages_for(prompt), add_generation_prompt=True,
                                       tokenize=False)
        enc = tok(text, return_tensors="pt", add_special_tokens=False)
        out = model.generate(**enc, do_sample=False, max_new_tokens=12, pad_token_id=tok.pad_token_id)
        assert first == second == tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)


@pytest.mark.parametrize("temperature,top_p", [(0.8, 0.95), (1.0, 1.0), (0.5, 0.7)])
def test_the_sampler_draws_from_generates_distribution(temperature: float, top_p: float) -> None:
    """Inverse-CDF draws match softmax(logits / T) restricted to the top-p nucleus (chi-square)."""
    from scipy import stats
    from transformers import TemperatureLogitsWarper, TopPLogitsWarper

    logits = torch.tensor([[2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -3.0]])
    expected = torch.softmax(TopPLogitsWarper(top_p)(None, TemperatureLogitsWarper(temperature)(None, logits)), -1)[0]
    n = 20000
    uniforms = torch.rand(n, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    processor = generate._InverseCdfSampler(uniforms, temperature, top_p, prompt_width=0)
    picks = processor(torch.zeros((n, 0), dtype=torch.long), logits.expand(n, -1)).argmax(-1)
    counts = torch.bincount(picks, minlength=logits.shape[1]).double()
    support = expected > 0
    assert counts[~support].sum() == 0  # nothing outside the nucleus
    probs = expected[support].double().numpy()
    result = stats.chisquare(counts[support].numpy(), probs / probs.sum() * n)
    assert result.pvalue > 1e-3


def test_adapter_on_and_off(policy, tmp_path: Path) -> None:
    from peft import LoraConfig, get_peft_model

    model, tok = policy
    base_replies = sampling.sample(model, tok, PROMPTS, k=2, **FAST)
    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "o_proj"],
                                                  task_type="CAUSAL_LM"))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 1.0)
    try:
        off = sampling.sample(peft_model, tok, PROMPTS, k=2, adapter=False, **FAST)
        on = sampling.sample(peft_model, tok, PROMPTS, k=2, adapter=True, **FAST)
        assert off == base_replies
        assert on != off
        # the switch is scoped to the call: the adapter is active again afterwards
        assert sampling.sample(peft_model, tok, PROMPTS, k=2, **FAST) == on
    finally:
        peft_model.unload()


def test_sample_rows_grades_every_reply(policy) -> None:
    model, tok = policy

    items = prompts.build_prompts(seed=0)[:3]
    rows = sampling.sample_rows(model, tok, items, k=2, seed=18, policy="mini", **FAST)
    assert len(rows) == 6
    assert {r["rollout_index"] for r in rows} == {0, 1}
    assert all(r["sample_seed"] == 18 and r["policy"] == "mini" for r in rows)
    assert [r["reply"] for r in rows[:2]] == sampling.sample(model, tok, items[:1], k=2, seed=18, **FAST)[0]


def test_the_environment_renders_the_chat_and_grades_the_rows(policy) -> None:
    model, tok = policy
    question = "What is 2 + 3?"
    [calc] = generate.render(tok, [question], load_env(CalcEnv))
    assert calc == tok.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True,
                                           tokenize=False)  # no system prompt of its own: the user turn only
    [default] = generate.render(tok, [question], load_env(None))
    assert default != calc and load_env(None).system in default
    rows = sampling.sample_rows(model, tok, calc_items(1), k=2, env=CalcEnv, **FAST)
    assert [r["category"] for r in rows] == ["arithmetic"] * 2 + ["word_problem"] * 2 + ["unanswerable"] * 2
    assert all(set(r["markers"]) == {"concise"} for r in rows)


def test_progress_bar_can_be_switched_off(policy, capsys: pytest.CaptureFixture[str]) -> None:
    model, tok = policy
    sampling.sample(model, tok, PROMPTS[:1], k=1, max_new_tokens=2, progress=False)
    assert capsys.readouterr().err == ""
    sampling.sample(model, tok, PROMPTS[:1], k=1, max_new_tokens=2, progress=True)
    assert "sampling" in capsys.readouterr().err


@pytest.mark.parametrize(
    "options,message",
    [({"k": 0}, "k=0"), ({"temperature": -1}, "temperature"), ({"top_p": 0}, "top_p"),
     ({"max_new_tokens": 0}, "max_new_tokens"), ({"backend": "onnx"}, "backend")],
)
def test_bad_options_are_usage_errors(policy, options: dict, message: str) -> None:
    model, tok = policy
    with pytest.raises(UsageError, match=message):
        sampling.sample(model, tok, PROMPTS[:1], **{"progress": False, **options})


def test_bad_prompt_is_a_usage_error(policy) -> None:
    model, tok = policy
    with pytest.raises(UsageError, match="'prompt' string"):
        sampling.sample(model, tok, [{"text": "hi"}], progress=False)


def test_vllm_backend_without_vllm_is_a_usage_error(policy) -> None:
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(UsageError, match="pip install vllm"):
            sampling.sample("some/model", None, PROMPTS[:1], backend="vllm")
    else:  # pragma: no cover - GPU machines
        pytest.skip("vllm is installed here")


def test_constants_are_the_seed_recipes() -> None:
    assert (sampling.SAMPLE_TEMPERATURE, sampling.SAMPLE_TOP_P, sampling.SAMPLE_SEED) == (0.8, 0.95, 17)
    assert sampling.BASE_RUN_SEEDS == (17, 18, 19)


def test_tokenizer_without_pad_token_is_a_usage_error(policy) -> None:
    import copy

    model, tok = policy
    bare = copy.deepcopy(tok)
    bare.pad_token = None
    with pytest.raises(UsageError, match="pad token"):
        sampling.sample(model, bare, PROMPTS[:1], progress=False)
