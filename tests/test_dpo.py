"""DPO: knobs, TRL wiring, the reference (base with the adapter off), round-two reference.

These use a random-init tiny Llama (``tests/_tiny_model.py``): they test the training
machinery, not what the tiny policy learns; ``test_dpo_run.py`` runs the real policy.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from _calc_env import CalcEnv  # noqa: E402
from _tiny_model import build_tiny  # noqa: E402

from pytest_rlgate.environment.contract import load_env  # noqa: E402
from pytest_rlgate.envs import refund  # noqa: E402
from pytest_rlgate.envs.refund.negatives import invented_call  # noqa: E402
from pytest_rlgate.errors import RlgateWarning, UsageError  # noqa: E402
from pytest_rlgate.train.adapters import merge_adapter  # noqa: E402
from pytest_rlgate.train.dpo import (  # noqa: E402
    build_dpo_trainer,
    check_enough_pairs,
    dpo_dataset,
    dpo_metrics_recorder,
)
from pytest_rlgate.train.dpo_config import MIN_PAIRS, DPOKnobs  # noqa: E402
from pytest_rlgate.train.pairs import Pair, PairSet  # noqa: E402

torch.set_num_threads(1)

ASK = "Could you share your order id?"
PROMPTS = ["I want a refund for my purchase", "Where is my delivery?", "My payment went through twice",
           "Can I return my order?"]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("tiny-dpo")
    build_tiny(folder, seed=0)
    return folder


def _load(folder):
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(str(folder))
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(str(folder))
    return model, tok


def _pairs(n: int = 8) -> list[Pair]:
    return [
        Pair(prompt=PROMPTS[i % len(PROMPTS)], chosen=ASK, rejected=invented_call(f"ORD-{1000 + i}"),
             chosen_score=1.0, rejected_score=0.2, origin="sampled", category="no_id", scenario_id=f"s{i}",
             item_index=i)
        for i in range(n)
    ]


def _knobs(folder, **kw) -> DPOKnobs:
    settings = dict(base_model=str(folder), steps=4, pairs_per_step=4, pairs_per_device=4, learning_rate=5e-3,
                    max_length=512, lora_rank=4, lora_alpha=8, monitor_every=0)
    settings.update(kw)
    return DPOKnobs(**settings).resolve()


def _logits(model, tok) -> torch.Tensor:
    text = tok.apply_chat_template(refund.messages_for(PROMPTS[0]), tokenize=False, add_generation_prompt=True)
    ids = tok(text + ASK, return_tensors="pt")
    model.eval()
    with torch.no_grad():
        return model(**ids).logits.clone()


# --- knobs -----------------------------------------------------------------------------------
def test_tiny_defaults_are_cpu_sized_and_recorded() -> None:
    knobs = DPOKnobs().resolve()
    assert (knobs.steps, knobs.pairs_per_step, knobs.beta) == (60, 8, 0.1)
    assert (knobs.pairs_per_device, knobs.gradient_accumulation, knobs.max_length) == (8, 1, 128)
    assert (knobs.learning_rate, knobs.loss_type) == (3e-4, ("sigmoid", "sft"))
    assert {"learning_rate", "loss_type", "pairs_per_device", "max_length", "max_new_tokens"} <= set(
        knobs.auto)
    assert DPOKnobs(loss_type="ipo").resolve().loss_type == ("ipo",)  # named by the user: not replaced
    record = knobs.to_dict()
    assert record["method"] == "dpo" and record["constructed_cap"] == 0.3 and record["pair_samples"] == 8
    assert record["lora_rank"] == 16 and record["lora_alpha"] == 32  # the same LoRA as GRPO


def test_hub_defaults_are_the_seed_recipe(tmp_path) -> None:
    knobs = DPOKnobs(base_model="Qwen/Qwen2.5-0.5B-Instruct").resolve()
    assert (knobs.pairs_per_device, knobs.gradient_accumulation, knobs.learning_rate, knobs.max_length) == (
        2, 4, 5e-6, 896)
    assert knobs.loss_type == ("sigmoid",)
    assert knobs.run_name == "refund-dpo-s0"
    assert DPOKnobs(constructed_negatives=True).resolve().run_name == "refund-dpo-cn-s0"


@pytest.mark.parametrize(("override", "flag"), [
    ({"loss_type": "sigmoid,nope"}, "--loss-type"),
    ({"beta": 0.0}, "--beta"),
    ({"steps": 0}, "--steps"),
    ({"pairs_per_step": 8, "pairs_per_device": 3}, "--pairs-per-device"),
    ({"pair_samples": 1}, "--pair-samples"),
    ({"min_margin": 0.0}, "--min-margin"),
    ({"max_pairs_per_prompt": 0}, "--max-pairs-per-prompt"),
    ({"constructed_cap": -0.5}, "--constructed-cap"),
    ({"balance": 1.5}, "--balance"),
])
def test_bad_knobs_name_the_flag(override: dict, flag: str) -> None:
    with pytest.raises(UsageError, match=flag):
        DPOKnobs(**override).resolve()


def test_loss_type_accepts_every_trl_dpo_loss_as_a_comma_list() -> None:
    knobs = DPOKnobs(loss_type="sigmoid, sft").resolve()
    assert knobs.loss_type == ("sigmoid", "sft")


def test_unknown_api_keyword_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown DPO knob.*stepz"):
        DPOKnobs().with_overrides(stepz=3)


def test_too_few_pairs_says_how_many_and_what_to_change() -> None:
    found = PairSet(pairs=_pairs(5), stats={"sampled_pairs": 5, "prompts_with_pairs": 4, "prompts": 95})
    with pytest.raises(UsageError) as info:
        check_enough_pairs(found, DPOKnobs().resolve())
    message = str(info.value)
    for part in ("found 5 preference pair(s)", f"at least {MIN_PAIRS}", "4 of 95 train prompts",
                 "--pair-samples", "--min-margin", "--constructed-negatives"):
        assert part in message
    check_enough_pairs(PairSet(pairs=_pairs(8)), DPOKnobs().resolve())  # 8 is enough


def test_too_few_pairs_suggests_constructed_negatives_only_where_the_environment_builds_them() -> None:
    found = PairSet(pairs=_pairs(5), stats={"sampled_pairs": 5, "prompts_with_pairs": 4, "prompts": 95})
    with pytest.raises(UsageError) as info:
        check_enough_pairs(found, DPOKnobs(env=CalcEnv(), base_model="x/y").resolve())
    assert "--constructed-negatives" not in str(info.value) and "--pair-samples" in str(info.value)
    assert DPOKnobs(env=CalcEnv(), base_model="x/y", constructed_negatives=True).resolve().run_name == "calc-dpo-cn-s0"


# --- TRL -----------------------------------------------------------------------------------
def test_dataset_rows_are_conversational_with_the_samplers_prompt() -> None:
    row = dpo_dataset(_pairs(1), load_env("refund"))[0]
    assert row["prompt"] == refund.messages_for(PROMPTS[0])
    assert row["chosen"] == [{"role": "assistant", "content": ASK}]
    assert row["rejected"][0]["content"].startswith("<tool_call>")


def test_dpo_trains_against_the_adapter_off_base(tiny_dir, tmp_path) -> None:
    model, tok = _load(tiny_dir)
    base = _logits(model, tok)
    recorder = dpo_metrics_recorder()
    trainer = build_dpo_trainer(model, tok, _pairs(8), _knobs(tiny_dir), output_dir=str(tmp_path / "trl"),
                                callbacks=[recorder])
    assert trainer.ref_model is None  # no second model: the reference is the adapter switched off
    trainer.train()
    assert trainer.state.global_step == 4
    assert [r["step"] for r in recorder.rows] == [1, 2, 3, 4]
    assert recorder.rows[-1]["rewards/margins"] > recorder.rows[0]["rewards/margins"]
    policy = trainer.model
    with policy.disable_adapter():
        assert torch.equal(_logits(policy, tok), base)
    assert not torch.allclose(_logits(policy, tok), base)
    policy.save_pretrained(str(tmp_path / "adapter"))


def test_round_two_reference_is_the_merged_policy(tiny_dir, tmp_path) -> None:
    model, tok = _load(tiny_dir)
    first = build_dpo_trainer(model, tok, _pairs(8), _knobs(tiny_dir), output_dir=str(tmp_path / "r1"))
    first.train()
    first.model.save_pretrained(str(tmp_path / "adapter1"))

    base_model, tok = _load(tiny_dir)
    base = _logits(base_model, tok)
    merged = merge_adapter(base_model, tmp_path / "adapter1")
    merged_logits = _logits(merged, tok)
    assert not torch.allclose(merged_logits, base)
    second = build_dpo_trainer(merged, tok, _pairs(8), _knobs(tiny_dir, sample_seed=18),
                               output_dir=str(tmp_path / "r2"))
    second.train()
    with second.model.disable_adapter():
        assert torch.equal(_logits(second.model, tok), merged_logits)


def test_same_seed_same_adapter_bytes(tiny_dir, tmp_path) -> None:
    def run(name: str) -> bytes:
        model, tok = _load(tiny_dir)
        trainer = build_dpo_trainer(model, tok, _pairs(8), _knobs(tiny_dir, steps=2),
                                    output_dir=str(tmp_path / name))
        trainer.train()
        trainer.model.save_pretrained(str(tmp_path / name / "adapter"))
        return (tmp_path / name / "adapter" / "adapter_model.safetensors").read_bytes()

    assert run("a") == run("b")


# --- the fixture marker --------------------------------------------------------------------
def test_marker_method_dpo_trains_through_the_fixtures(pytester: pytest.Pytester, tiny_dir, monkeypatch) -> None:
    # A random policy rarely shows a 0.5 score gap; a 0.3 margin and a hot sampler give it pairs.
    monkeypatch.setenv("RLGATE_CACHE_DIR", str(pytester.path / "cache"))
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.rlgate(method="dpo", size="small", steps=2, base_runs=1, monitor_every=0, k=2,
                            min_margin=0.3, temperature=1.2, max_new_tokens=24, max_length=512)
        def test_gate(rlgate_adapter, rlgate_before_rows, rlgate_after_rows):
            config = rlgate_adapter.run.config
            assert config["method"] == "dpo" and config["knobs"]["steps"] == 2
            assert (rlgate_adapter.run.path / "pairs.jsonl").is_file()
            assert (rlgate_adapter.adapter / "adapter_model.safetensors").is_file()
            assert {r["category"] for r in rlgate_after_rows} == {"no_id", "off_topic", "with_id"}
            assert len(rlgate_before_rows) == len(rlgate_after_rows)
        """
    )
    result = pytester.runpytest("--rlgate-base-model", str(tiny_dir), "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_pairs_truncated_away_by_max_length_are_a_usage_error(tiny_dir, tmp_path) -> None:
    model, tok = _load(tiny_dir)
    with pytest.raises(UsageError, match=r"--max-length 64: 8 of 8 pairs have a prompt of at least 64 tokens"):
        build_dpo_trainer(model, tok, _pairs(8), _knobs(tiny_dir, max_length=64), output_dir=str(tmp_path))


def test_some_pairs_truncated_away_warn_with_the_count(tiny_dir, tmp_path) -> None:
    model, tok = _load(tiny_dir)
    lengths = {p: len(tok(tok.apply_chat_template(refund.messages_for(p), tokenize=False, add_generation_prompt=True),
                          add_special_tokens=False)["input_ids"]) for p in PROMPTS}
    longest = max(lengths.values())
    dropped = sum(lengths[p.prompt] >= longest for p in _pairs(16))
    assert 0 < dropped <= 8
    with pytest.warns(RlgateWarning, match=rf"--max-length {longest}: {dropped} of 16 pairs"):
        trainer = build_dpo_trainer(model, tok, _pairs(16), _knobs(tiny_dir, max_length=longest),
                                    output_dir=str(tmp_path))
    assert len(trainer.train_dataset) == 16 - dropped
