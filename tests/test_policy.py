"""The tiny policy (tokenizer, copy head, deterministic build) and load_policy's errors."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from pytest_rlgate import policy
from pytest_rlgate.envs import refund
from pytest_rlgate.errors import UsageError
from pytest_rlgate.tiny import build as tiny_build
from pytest_rlgate.tiny.corpus import Dialogue
from pytest_rlgate.tiny.model import CopyHead, ModelShape, new_model
from pytest_rlgate.tiny.tokenizer import ID_TOKENS, build_tokenizer
from pytest_rlgate.tiny.warmstart import TrainSchedule, encode_dialogues

#: A few warm-start steps: enough to exercise every stage of a build in seconds.
MINI = dataclasses.replace(tiny_build.RECIPE, schedule=TrainSchedule(steps=3, batch_size=4, warmup_steps=1))


@pytest.fixture(scope="module")
def mini_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mini-policy")
    tiny_build.build_policy(out, MINI)
    return out


@pytest.fixture(scope="module")
def tokenizer(mini_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(mini_dir)


# -- tokenizer ---------------------------------------------------------------------------


def test_a_canonical_order_id_is_one_ordinary_token(tokenizer) -> None:
    pieces = tokenizer.tokenize("please check ORD-4017 (ORD-9999)")
    assert "ORD-4017" in pieces and "ORD-9999" in pieces
    assert tokenizer.convert_tokens_to_ids("ORD-4017") not in tokenizer.all_special_ids
    assert tokenizer.decode(tokenizer("ORD-4017")["input_ids"], skip_special_tokens=True) == "ORD-4017"


@pytest.mark.parametrize("spelling", ["ord_4017", "ord-4017", "ORD 4017", "ORD-123", "ORD-40170", "XORD-4017"])
def test_other_spellings_fall_back_to_digits(tokenizer, spelling: str) -> None:
    pieces = tokenizer.tokenize(spelling)
    assert not set(pieces) & set(ID_TOKENS)
    assert tokenizer.decode(tokenizer(spelling)["input_ids"]) == spelling


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "lookup_order", "arguments": {"order_id": "ORD-4017"}}</tool_call>',
        "Could you please share your order id? (ORD-1234)",
        "naïve café — 100% ✓\n\ttabs",
        refund.SYSTEM,
    ],
)
def test_decode_round_trips(tokenizer, text: str) -> None:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids, skip_special_tokens=True) == text


def test_the_system_prompt_costs_one_position(tokenizer) -> None:
    assert len(tokenizer(refund.SYSTEM, add_special_tokens=False)["input_ids"]) == 1
    other = refund.SYSTEM.replace("refund assistant", "returns assistant")
    assert len(tokenizer(other, add_special_tokens=False)["input_ids"]) > 100  # plain BPE, still works


def test_chat_rendering_is_chatml_and_the_reply_ends_the_turn(tokenizer) -> None:
    text = tokenizer.apply_chat_template(refund.messages_for("Refund ORD-4017"), add_generation_prompt=True,
                                         tokenize=False)
    assert text == (f"<|im_start|>system\n{refund.SYSTEM}<|im_end|>\n<|im_start|>user\nRefund ORD-4017<|im_end|>\n"
                    "<|im_start|>assistant\n")
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|pad|>"
    assert tokenizer.padding_side == "left"


def test_warm_start_targets_are_the_rendered_chat_plus_reply(tokenizer) -> None:
    dialogue = Dialogue("Please refund ORD-4017.", '<tool_call>{"name": "lookup_order", "arguments": '
                        '{"order_id": "ORD-4017"}}</tool_call>', "with_id", "copy")
    [(ids, start)] = encode_dialogues(tokenizer, [dialogue])
    full = tokenizer.apply_chat_template(
        [*refund.messages_for(dialogue.prompt), {"role": "assistant", "content": dialogue.reply}], tokenize=False)
    assert ids == tokenizer(full.removesuffix("\n"), add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids[start:]) == dialogue.reply + "<|im_end|>"


def test_tokenizer_survives_save_and_reload(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    lines = ["Please refund ORD-4017.", "Tell me a joke.", "Where is my order?"] * 20
    tok = build_tokenizer(lines, vocab_size=300)
    tok.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path)
    probe = ["Refund ORD-5555 now", refund.SYSTEM, "ord_991 and ORD-40170"]
    assert again(probe)["input_ids"] == tok(probe)["input_ids"]
    assert again.padding_side == "left" and again.chat_template == tok.chat_template


# -- the copy head -------------------------------------------------------------------------


def test_copy_head_ranks_the_prompt_id_first_before_any_training(tokenizer) -> None:
    model = new_model(tokenizer, ModelShape(), seed=0)
    head = CopyHead(tokenizer.convert_tokens_to_ids(list(ID_TOKENS)), [t[4:] for t in ID_TOKENS], seed=0)
    head.install(model)
    head.remove()
    id_ids = torch.tensor(tokenizer.convert_tokens_to_ids(list(ID_TOKENS)))
    hits = 0
    for order_id in ["ORD-1000", "ORD-4017", "ORD-7391", "ORD-9999", "ORD-5050"]:
        text = tokenizer.apply_chat_template(refund.messages_for(f"Please refund {order_id}."),
                                             add_generation_prompt=True, tokenize=False)
        ids = tokenizer(text + '<tool_call>{"name": "lookup_order", "arguments": {"order_id": "',
                        return_tensors="pt", add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = model(ids).logits[0, -1, id_ids]
        hits += ID_TOKENS[int(logits.argmax())] == order_id
    assert hits == 5


def test_frozen_copy_weights_do_not_move_in_training(tokenizer) -> None:
    from pytest_rlgate.tiny.warmstart import warm_start

    model = new_model(tokenizer, ModelShape(), seed=1)
    id_ids = tokenizer.convert_tokens_to_ids(list(ID_TOKENS))
    head = CopyHead(id_ids, [t[4:] for t in ID_TOKENS], seed=1)
    head.install(model)
    before = model.get_input_embeddings().weight[id_ids[:50]].clone()
    k_before = model.model.layers[0].self_attn.k_proj.weight[15].clone()
    data = encode_dialogues(tokenizer, [Dialogue("Refund ORD-4017", "Could you share the order id?", "with_id", "ask")])
    warm_start(model, data, TrainSchedule(steps=3, batch_size=2, warmup_steps=1), seed=0,
               pad_id=tokenizer.pad_token_id, after_step=head.after_step)
    head.remove()
    assert torch.equal(model.get_input_embeddings().weight[id_ids[:50]], before)
    assert torch.equal(model.model.layers[0].self_attn.k_proj.weight[15], k_before)


# -- builds and loading -------------------------------------------------------------------------


def test_a_build_is_deterministic(mini_dir: Path, tmp_path: Path) -> None:
    tiny_build.build_policy(tmp_path, MINI)
    for name in ("model.safetensors", "tokenizer.json", "config.json", "chat_template.jinja"):
        assert (tmp_path / name).read_bytes() == (mini_dir / name).read_bytes(), name
    info = json.loads((mini_dir / tiny_build.BUILD_INFO).read_text())
    assert info["recipe"]["schedule"]["steps"] == 3 and info["versions"]["torch"] == torch.__version__


def test_load_policy_from_a_folder_goes_through_auto_classes(mini_dir: Path) -> None:
    from transformers import LlamaForCausalLM, PreTrainedTokenizerBase

    model, tok = policy.load_policy(mini_dir, device="cpu")
    assert isinstance(model, LlamaForCausalLM) and isinstance(tok, PreTrainedTokenizerBase)
    assert not model.training and model.dtype == torch.float32
    assert tok.padding_side == "left" and tok.pad_token_id is not None
    assert len(tok) == model.config.vocab_size == 9000 + 512 + 1


def test_missing_base_folder_is_a_fast_usage_error(tmp_path: Path) -> None:
    started = time.perf_counter()
    with pytest.raises(UsageError, match="does not exist") as info:
        policy.load_policy(tmp_path / "no" / "such" / "model")
    assert str(tmp_path / "no") in str(info.value)
    assert time.perf_counter() - started < 5  # never falls through to hub retries


def test_folder_without_config_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="config.json"):
        policy.load_policy(tmp_path)


def test_hub_id_that_cannot_load_offline_names_the_model_and_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UsageError, match=r"rlgate-nobody/no-such-model.*offline.*hf download"):
        policy.load_policy("rlgate-nobody/no-such-model")


def _save_adapter(mini_dir: Path, out: Path, *, scale: float = 0.0) -> Path:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(mini_dir)
    peft_model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                                 task_type="CAUSAL_LM"))
    if scale:
        torch.manual_seed(0)
        with torch.no_grad():
            for name, p in peft_model.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, scale)
    peft_model.save_pretrained(out)
    return out


def test_adapter_loads_as_a_peft_model(mini_dir: Path, tmp_path: Path) -> None:
    from peft import PeftModel

    adapter = _save_adapter(mini_dir, tmp_path / "adapter", scale=0.5)
    model, _ = policy.load_policy(mini_dir, adapter=adapter, device="cpu")
    assert isinstance(model, PeftModel) and not model.training
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        on = model(ids).logits
        with model.disable_adapter():
            off = model(ids).logits
    assert not torch.allclose(on, off)


def test_missing_adapter_folder_names_the_path(mini_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="adapter folder does not exist") as info:
        policy.load_policy(mini_dir, adapter=tmp_path / "runs" / "x" / "adapter")
    assert info.value.path == str(tmp_path / "runs" / "x" / "adapter")


def test_folder_without_adapter_files_names_the_path(mini_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="adapter_config.json") as info:
        policy.load_policy(mini_dir, adapter=tmp_path)
    assert info.value.path == str(tmp_path)


def test_corrupt_adapter_names_the_path(mini_dir: Path, tmp_path: Path) -> None:
    adapter = _save_adapter(mini_dir, tmp_path / "adapter")
    (adapter / "adapter_model.safetensors").write_bytes(b"\x00garbage")
    with pytest.raises(UsageError, match="cannot be loaded") as info:
        policy.load_policy(mini_dir, adapter=adapter)
    assert info.value.path == str(adapter)
    (adapter / "adapter_config.json").write_text("{not json")
    with pytest.raises(UsageError) as info:
        policy.load_policy(mini_dir, adapter=adapter)
    assert info.value.path == str(adapter)


# -- the real tiny policy (built once per machine, then cached) ----------------------------------


@pytest.fixture(scope="module")
def tiny_dir() -> Iterator[Path]:
    yield policy.tiny_policy_dir(progress=False)


def test_tiny_policy_is_published_with_its_build_info(tiny_dir: Path) -> None:
    from pytest_rlgate import cache

    assert cache.is_complete(tiny_dir) and tiny_dir.name == policy.tiny_policy_key()
    info = json.loads((tiny_dir / tiny_build.BUILD_INFO).read_text())
    assert info["recipe"] == tiny_build.RECIPE.as_dict()
    assert info["loss_last"] < info["loss_first"] / 4
    started = time.perf_counter()
    again = policy.tiny_policy_dir()
    assert again == tiny_dir and time.perf_counter() - started < 5


def test_tiny_policy_loads_by_name(tiny_dir: Path) -> None:
    from transformers import LlamaForCausalLM

    started = time.perf_counter()
    model, _ = policy.load_policy(policy.TINY_POLICY)
    assert time.perf_counter() - started < 10
    assert isinstance(model, LlamaForCausalLM)
    assert model.config.num_hidden_layers == tiny_build.RECIPE.shape.layers


def test_tiny_policy_has_the_seed_like_mixed_behaviour(tiny_dir: Path) -> None:
    """Deterministic given the build: with_id is low but not zero, the rest mostly right."""
    from pytest_rlgate import prompts
    from pytest_rlgate.sampling import sample

    model, tok = policy.load_policy(tiny_dir)
    holdout = prompts.stratified_split(prompts.build_prompts(seed=0, size="large")).holdout
    replies = sample(model, tok, holdout, k=2, max_new_tokens=64, progress=False)
    rates: dict[str, list[bool]] = {}
    for item, sampled in zip(holdout, replies):
        for reply in sampled:
            rates.setdefault(item["category"], []).append(refund.passes(refund.score(reply, item["case"])))
    share = {c: sum(v) / len(v) for c, v in rates.items()}
    assert 0.02 <= share["with_id"] <= 0.5, share
    assert share["no_id"] >= 0.6 and share["off_topic"] >= 0.6, share


def test_tiny_policy_copies_ids_it_never_saw_when_it_calls(tiny_dir: Path) -> None:
    """Teacher-forced up to the argument, the prompt's id (from the held-out pool) ranks first."""
    from pytest_rlgate.tiny.build import BUILD_INFO

    model, tok = policy.load_policy(tiny_dir)
    heldout = json.loads((tiny_dir / BUILD_INFO).read_text())["heldout_ids"][:40]
    id_ids = torch.tensor(tok.convert_tokens_to_ids(list(ID_TOKENS)))
    top1 = 0
    for order_id in heldout:
        text = tok.apply_chat_template(refund.messages_for(f"Please refund {order_id}, it arrived broken."),
                                       add_generation_prompt=True, tokenize=False)
        enc = tok(text + '<tool_call>{"name": "lookup_order", "arguments": {"order_id": "',
                  return_tensors="pt", add_special_tokens=False)
        with torch.no_grad():
            logits = model(**enc).logits[0, -1]
        top1 += ID_TOKENS[int(logits[id_ids].argmax())] == order_id
    assert top1 >= 36, f"{top1}/40 held-out ids copied"
