"""The tiny-policy builder (corpus, tokenizer, copy head, deterministic build), the shipped
policies (hash-checked, never built on the default path) and load_policy's errors."""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from pytest_rlgate import load_env  # noqa: E402
from pytest_rlgate.cli import main  # noqa: E402
from pytest_rlgate.data.prompts import stratified_split  # noqa: E402
from pytest_rlgate.envs import refund  # noqa: E402
from pytest_rlgate.envs.refund.tiny import ORDER_ID_TOKENS  # noqa: E402
from pytest_rlgate.errors import UsageError  # noqa: E402
from pytest_rlgate.policy import load as policy  # noqa: E402
from pytest_rlgate.policy.sampling import sample_rows  # noqa: E402
from pytest_rlgate.policy.tiny import build as tiny_build  # noqa: E402
from pytest_rlgate.policy.tiny.copyhead import CopyHead  # noqa: E402
from pytest_rlgate.policy.tiny.corpus import Dialogue, ReplyMix, dialogues  # noqa: E402
from pytest_rlgate.policy.tiny.manifest import BUILD_INFO, content_hash, file_digests, verify  # noqa: E402
from pytest_rlgate.policy.tiny.model import ModelShape, new_model  # noqa: E402
from pytest_rlgate.policy.tiny.spec import spec_of  # noqa: E402
from pytest_rlgate.policy.tiny.tokenizer import build_tokenizer  # noqa: E402
from pytest_rlgate.policy.tiny.warmstart import TrainSchedule, encode_dialogues, warm_start  # noqa: E402

REFUND = load_env("refund")
ARITH = load_env("arith")
#: A few warm-start steps: enough to exercise every stage of a build in seconds.
FEW_STEPS = TrainSchedule(steps=3, batch_size=4, warmup_steps=1)
MINI = dataclasses.replace(refund.tiny_policy, schedule=FEW_STEPS)


@pytest.fixture(scope="module")
def mini_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mini-policy")
    tiny_build.build_policy(out, REFUND, MINI)
    return out


@pytest.fixture(scope="module")
def tokenizer(mini_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(mini_dir)


# -- the corpus: an environment's writer driven by the reply mix ---------------------------------


class _CountingWriter:
    """A writer that numbers its prompts, and files every third one under the wrong category."""

    def prompt(self, rng: random.Random, category: str) -> tuple[str, int]:
        n = rng.randrange(10**6)
        return f"{category} {n}" + (" misfiled" if n % 3 == 0 else ""), n

    def reply(self, rng: random.Random, kind: str, context: Any) -> str:
        return f"{kind} for {context}"


MIX = ReplyMix(category_share={"a": 3, "b": 1}, kinds={"a": {"x": 1, "y": 1}, "b": {"z": 1}})


def _category_of(text: str) -> str:
    return "misfiled" if text.endswith("misfiled") else text.split()[0]


def test_the_stream_follows_the_mix_and_is_seeded() -> None:
    def draw(seed: int) -> list[Dialogue]:
        stream = dialogues(_CountingWriter(), MIX, seed=seed, category_of=_category_of)
        return [next(stream) for _ in range(2000)]

    data = draw(0)
    assert data == draw(0) and data != draw(1)
    kinds = Counter((d.category, d.kind) for d in data)
    assert set(kinds) == {("a", "x"), ("a", "y"), ("b", "z")}
    assert 0.70 < (kinds["a", "x"] + kinds["a", "y"]) / len(data) < 0.80  # category share 3:1
    assert all(d.reply == f"{d.kind} for {d.prompt.split()[1]}" for d in data)


def test_prompts_the_environment_files_elsewhere_are_dropped() -> None:
    data = [d for d, _ in zip(dialogues(_CountingWriter(), MIX, seed=0, category_of=_category_of), range(500))]
    assert not any(d.prompt.endswith("misfiled") for d in data)
    unchecked = [d for d, _ in zip(dialogues(_CountingWriter(), MIX, seed=0), range(500))]
    assert any(d.prompt.endswith("misfiled") for d in unchecked)


@pytest.mark.parametrize(("share", "kinds", "message"), [
    ({"a": 1, "b": 1}, {"a": {"x": 1}}, "'b' has a share but no reply kinds"),
    ({"a": 1}, {"a": {"x": -1, "y": 2}}, r"kinds\['a'\]: weights must be non-negative"),
    ({"a": 0}, {"a": {"x": 1}}, "category_share: weights must be non-negative numbers with a positive sum"),
])
def test_a_bad_mix_is_one_error_naming_the_fix(share: Mapping[str, float], kinds: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ReplyMix(category_share=share, kinds=kinds)


def test_a_recipe_names_itself_like_a_hub_id_and_its_copy_head_needs_words() -> None:
    with pytest.raises(ValueError, match="rlgate/tiny-<environment>"):
        dataclasses.replace(MINI, name="tiny-refund")
    with pytest.raises(ValueError, match="copy_head=True needs words"):
        dataclasses.replace(ARITH.raw.tiny_policy, copy_head=True)


def test_an_environment_without_a_build_spec_is_told_how_to_add_one() -> None:
    class Plain:
        name, categories = "plain", ("a",)

        def score(self, reply: str, case: Mapping[str, Any]) -> float:
            return 1.0

    with pytest.raises(UsageError, match="environment plain has no tiny policy spec.*--base-model"):
        spec_of(load_env(Plain()))


def test_the_recipe_records_as_json_with_token_lists_by_digest() -> None:
    record = refund.tiny_policy.as_dict()
    assert json.loads(json.dumps(record)) == record
    assert record["words"]["count"] == 9000 and record["copy_head"] is True
    assert record["corpus"]["kind"] == "RefundCorpus" and record["mix"]["kinds"]["with_id"]["copy"] == 0.35
    assert ARITH.raw.tiny_policy.as_dict()["words"]["count"] == 0


# -- tokenizer ---------------------------------------------------------------------------


def test_a_canonical_order_id_is_one_ordinary_token(tokenizer) -> None:
    pieces = tokenizer.tokenize("please check ORD-4017 (ORD-9999)")
    assert "ORD-4017" in pieces and "ORD-9999" in pieces
    assert tokenizer.convert_tokens_to_ids("ORD-4017") not in tokenizer.all_special_ids
    assert tokenizer.decode(tokenizer("ORD-4017")["input_ids"], skip_special_tokens=True) == "ORD-4017"


@pytest.mark.parametrize("spelling", ["ord_4017", "ord-4017", "ORD 4017", "ORD-123", "ORD-40170", "XORD-4017"])
def test_other_spellings_fall_back_to_digits(tokenizer, spelling: str) -> None:
    pieces = tokenizer.tokenize(spelling)
    assert not set(pieces) & set(ORDER_ID_TOKENS)
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


@pytest.mark.parametrize("env", [REFUND, ARITH], ids=["refund", "arith"])
def test_warm_start_targets_are_the_environment_chat_plus_reply(tokenizer, env) -> None:
    dialogue = Dialogue("Please refund ORD-4017.", "Answer: 7", "with_id", "copy")
    [(ids, start)] = encode_dialogues(tokenizer, [dialogue], env.messages_for)
    full = tokenizer.apply_chat_template(
        [*env.messages_for(dialogue.prompt), {"role": "assistant", "content": dialogue.reply}], tokenize=False)
    assert ids == tokenizer(full.removesuffix("\n"), add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids[start:]) == dialogue.reply + "<|im_end|>"


def test_tokenizer_survives_save_and_reload(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    lines = ["Please refund ORD-4017.", "Tell me a joke.", "Where is my order?"] * 20
    tok = build_tokenizer(lines, vocab_size=300, words=ORDER_ID_TOKENS, phrases=(refund.SYSTEM,))
    tok.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path)
    probe = ["Refund ORD-5555 now", refund.SYSTEM, "ord_991 and ORD-40170"]
    assert again(probe)["input_ids"] == tok(probe)["input_ids"]
    assert again.padding_side == "left" and again.chat_template == tok.chat_template


def test_without_added_tokens_the_vocabulary_is_the_bpe_alone() -> None:
    tok = build_tokenizer(["What is 4 + 7?", "Answer: 11"] * 20, vocab_size=300)
    assert len(tok) <= 300 and "ORD-4017" not in tok.get_vocab()


# -- the copy head -------------------------------------------------------------------------


def test_copy_head_ranks_the_prompt_id_first_before_any_training(tokenizer) -> None:
    model = new_model(tokenizer, ModelShape(), seed=0)
    head = CopyHead.for_tokens(tokenizer, ORDER_ID_TOKENS, seed=0)
    head.install(model)
    head.remove()
    id_ids = torch.tensor(tokenizer.convert_tokens_to_ids(list(ORDER_ID_TOKENS)))
    hits = 0
    for order_id in ["ORD-1000", "ORD-4017", "ORD-7391", "ORD-9999", "ORD-5050"]:
        text = tokenizer.apply_chat_template(refund.messages_for(f"Please refund {order_id}."),
                                             add_generation_prompt=True, tokenize=False)
        ids = tokenizer(text + '<tool_call>{"name": "lookup_order", "arguments": {"order_id": "',
                        return_tensors="pt", add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = model(ids).logits[0, -1, id_ids]
        hits += ORDER_ID_TOKENS[int(logits.argmax())] == order_id
    assert hits == 5


def test_the_value_head_copies_the_amount_a_tool_result_showed_before_any_training() -> None:
    amounts = ("20", "25", "40", "50", "75", "99")
    lines = ['{"order_id": "ORD-4017", "amount": 40}', "Refund ORD-4017 please."] * 30
    tok = build_tokenizer(lines, vocab_size=300, words=ORDER_ID_TOKENS + amounts)
    model = new_model(tok, ModelShape(), seed=0)
    head = CopyHead.for_tokens(tok, ORDER_ID_TOKENS, seed=0, values=amounts)
    head.install(model)
    head.remove()
    value_ids = torch.tensor(tok.convert_tokens_to_ids(list(amounts)))
    picked = []
    for order_id, amount in [("ORD-4017", "75"), ("ORD-1000", "20"), ("ORD-9999", "99"), ("ORD-5050", "25")]:
        text = (f'Refund {order_id}. {{"order_id": "{order_id}", "amount": {amount}}} '
                f'{{"order_id": "{order_id}", "amount": ')
        ids = tok(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = model(ids).logits[0, -1]
        picked.append((amounts[int(logits[value_ids].argmax())], ORDER_ID_TOKENS[int(logits[id_ids(tok)].argmax())]))
    assert picked == [("75", "ORD-4017"), ("20", "ORD-1000"), ("99", "ORD-9999"), ("25", "ORD-5050")]
    with pytest.raises(ValueError, match="not single tokens"):
        CopyHead.for_tokens(tok, ORDER_ID_TOKENS, seed=0, values=("12345",))


def id_ids(tok) -> torch.Tensor:
    return torch.tensor(tok.convert_tokens_to_ids(list(ORDER_ID_TOKENS)))


def test_frozen_copy_weights_do_not_move_in_training(tokenizer) -> None:
    model = new_model(tokenizer, ModelShape(), seed=1)
    head = CopyHead.for_tokens(tokenizer, ORDER_ID_TOKENS, seed=1)
    head.install(model)
    id_ids = tokenizer.convert_tokens_to_ids(list(ORDER_ID_TOKENS[:50]))
    before = model.get_input_embeddings().weight[id_ids].clone()
    k_before = model.model.layers[0].self_attn.k_proj.weight[15].clone()
    data = encode_dialogues(tokenizer, [Dialogue("Refund ORD-4017", "Could you share the order id?", "with_id", "ask")],
                            refund.messages_for)
    warm_start(model, data, TrainSchedule(steps=3, batch_size=2, warmup_steps=1), seed=0,
               pad_id=tokenizer.pad_token_id, after_step=head.after_step)
    head.remove()
    assert torch.equal(model.get_input_embeddings().weight[id_ids], before)
    assert torch.equal(model.model.layers[0].self_attn.k_proj.weight[15], k_before)


def test_the_copy_head_refuses_words_without_four_digits(tokenizer) -> None:
    with pytest.raises(ValueError, match="must end in 4 digits.*'Answer'"):
        CopyHead.for_tokens(tokenizer, ["ORD-4017", "Answer"], seed=0)


# -- builds, their record, and the hash check ---------------------------------------------------


def test_a_build_is_deterministic_and_records_every_file_hash(mini_dir: Path, tmp_path: Path) -> None:
    tiny_build.build_policy(tmp_path, REFUND, MINI)
    assert file_digests(tmp_path) == file_digests(mini_dir)
    info = json.loads((mini_dir / BUILD_INFO).read_text())
    assert info["recipe"] == MINI.as_dict() and info["environment"] == REFUND.describe()
    assert info["recipe"]["schedule"]["steps"] == 3 and info["versions"]["torch"] == torch.__version__
    assert set(info["files"]) >= {"model.safetensors", "tokenizer.json", "config.json", "chat_template.jinja"}
    assert info["content_sha256"] == content_hash(info["files"]) == verify(mini_dir)["content_sha256"]


def test_a_changed_file_is_caught_by_name(mini_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "policy"
    shutil.copytree(mini_dir, copy)
    with (copy / "config.json").open("a", encoding="utf-8") as handle:
        handle.write(" ")
    corrupt = "tiny policy is corrupt: config.json does not match.*rlgate policy build"
    with pytest.raises(UsageError, match=corrupt) as info:
        verify(copy)
    assert info.value.path == str(copy / "config.json")
    (copy / BUILD_INFO).unlink()
    with pytest.raises(UsageError, match="build info is missing or unreadable"):
        verify(copy)


def test_building_into_a_non_empty_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(UsageError, match="output folder is not empty") as info:
        policy.build_tiny_policy("refund", tmp_path, spec=MINI)
    assert info.value.path == str(tmp_path)


def test_a_cached_build_is_built_once(tmp_path: Path) -> None:
    arith_mini = dataclasses.replace(ARITH.raw.tiny_policy, schedule=FEW_STEPS)
    first = policy.build_tiny_policy("arith", spec=arith_mini, root=tmp_path)
    started = time.perf_counter()
    assert policy.build_tiny_policy("arith", spec=arith_mini, root=tmp_path) == first
    assert time.perf_counter() - started < 5 and first.parent == tmp_path / "policy"
    assert verify(first)["recipe"]["name"] == "rlgate/tiny-arith"


# -- loading --------------------------------------------------------------------------------


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
    with pytest.raises(UsageError, match="no such folder") as info:
        policy.load_policy(mini_dir, adapter=tmp_path / "runs" / "x" / "adapter")
    assert str(tmp_path / "runs" / "x" / "adapter") in str(info.value)


def test_folder_without_adapter_files_names_the_path(mini_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="adapter_config.json") as info:
        policy.load_policy(mini_dir, adapter=tmp_path)
    assert str(tmp_path) in str(info.value)


def test_corrupt_adapter_names_the_path(mini_dir: Path, tmp_path: Path) -> None:
    adapter = _save_adapter(mini_dir, tmp_path / "adapter")
    (adapter / "adapter_model.safetensors").write_bytes(b"\x00garbage")
    with pytest.raises(UsageError, match="corrupt adapter weights") as info:
        policy.load_policy(mini_dir, adapter=adapter)
    assert str(adapter) in str(info.value)
    (adapter / "adapter_config.json").write_text("{not json")
    with pytest.raises(UsageError, match="corrupt adapter config") as info:
        policy.load_policy(mini_dir, adapter=adapter)
    assert str(adapter) in str(info.value)


# -- the shipped policies (package data: verified, never built) ----------------------------------


SHIPPED = [(REFUND, "rlgate/tiny-refund"), (ARITH, "rlgate/tiny-arith"),
           (load_env("refund_agent"), "rlgate/tiny-refund_agent")]


def test_every_builtin_recipe_is_shipped() -> None:
    assert policy.tiny_policy_names() == ["rlgate/tiny-arith", "rlgate/tiny-refund", "rlgate/tiny-refund_agent"]
    assert REFUND.base_model == policy.TINY_POLICY and ARITH.base_model == "rlgate/tiny-arith"


@pytest.mark.parametrize(("env", "name"), SHIPPED, ids=["refund", "arith", "refund_agent"])
def test_a_shipped_policy_records_the_recipe_that_made_it(env, name: str) -> None:
    """The recorded recipe is the code's: a changed corpus, mix or writer needs a rebuild
    (`rlgate policy build --env ENV --out pytest_rlgate/policy/shipped/tiny-ENV`)."""
    started = time.perf_counter()
    folder = policy.tiny_policy_dir(name)
    assert time.perf_counter() - started < 5  # hashes checked, nothing built
    info = verify(folder)
    assert info["name"] == name == spec_of(env).name
    assert info["recipe"] == spec_of(env).as_dict()
    assert policy.tiny_policy_key(name) == info["content_sha256"]
    assert info["loss_last"] < info["loss_first"] / 4


def test_an_unknown_tiny_policy_lists_the_shipped_ones_and_never_builds() -> None:
    with pytest.raises(UsageError, match=r"no shipped tiny policy 'rlgate/tiny-nope'; shipped: rlgate/tiny-arith, "
                                         r"rlgate/tiny-refund, rlgate/tiny-refund_agent.*rlgate policy build"):
        policy.load_policy("rlgate/tiny-nope")


def test_the_refund_policy_loads_by_name() -> None:
    from transformers import LlamaForCausalLM

    model, _ = policy.load_policy(policy.TINY_POLICY)
    assert isinstance(model, LlamaForCausalLM)
    assert model.config.num_hidden_layers == refund.tiny_policy.shape.layers


# -- behaviour: what the shipped policies do, and what a rebuild from nothing must do --------------


def pass_rates(folder: Path, env, *, size: str = "large", k: int = 2) -> dict[str, float]:
    """Base pass@1 per category on the seed-0 stratified holdout (k samples, seed 17)."""
    model, tok = policy.load_policy(folder)
    holdout = stratified_split(env.build_prompts(0, size), env=env).holdout
    rows = sample_rows(model, tok, holdout, k=k, env=env, max_new_tokens=48, progress=False)
    by_category: dict[str, list[int]] = {}
    for row in rows:
        by_category.setdefault(row["category"], []).append(row["reward"])
    return {c: sum(v) / len(v) for c, v in sorted(by_category.items())}


def heldout_copies(folder: Path, n: int = 40) -> int:
    """How many of *n* ids no warm-start prompt contained the policy ranks first, teacher-forced
    up to the lookup's argument."""
    model, tok = policy.load_policy(folder)
    recipe = refund.tiny_policy
    heldout = recipe.corpus.heldout(recipe.seed)[:n]
    id_ids = torch.tensor(tok.convert_tokens_to_ids(list(ORDER_ID_TOKENS)))
    top1 = 0
    for order_id in heldout:
        text = tok.apply_chat_template(refund.messages_for(f"Please refund {order_id}, it arrived broken."),
                                       add_generation_prompt=True, tokenize=False)
        enc = tok(text + '<tool_call>{"name": "lookup_order", "arguments": {"order_id": "',
                  return_tensors="pt", add_special_tokens=False)
        with torch.no_grad():
            logits = model(**enc).logits[0, -1]
        top1 += ORDER_ID_TOKENS[int(logits[id_ids].argmax())] == order_id
    return top1


#: The base behaviour each shipped policy is built for (docs/policy.md has the measured values):
#: something for RL to learn, something for it to break.
BOUNDS = {
    "refund": {"with_id": (0.02, 0.5), "no_id": (0.6, 1.0), "off_topic": (0.6, 1.0)},
    "arith": {"add": (0.5, 1.0), "compare": (0.05, 0.7), "unanswerable": (0.6, 1.0)},
}


def check_behaviour(folder: Path, env) -> None:
    rates = pass_rates(folder, env)
    for category, (low, high) in BOUNDS[env.name].items():
        assert low <= rates[category] <= high, (category, rates)
    if env.name == "refund":
        assert heldout_copies(folder) >= 36


@pytest.mark.parametrize(("env", "name"), SHIPPED[:2], ids=["refund", "arith"])  # the agent's: test_agent_training
def test_the_shipped_policy_has_its_mixed_base_behaviour(env, name: str) -> None:
    check_behaviour(policy.tiny_policy_dir(name), env)


@pytest.mark.slow
@pytest.mark.parametrize("env", [REFUND, ARITH], ids=["refund", "arith"])
def test_a_rebuild_from_nothing_behaves_like_the_shipped_policy(env, tmp_path: Path) -> None:
    """Behaviour, not bytes: another CPU, BLAS or torch may build other weights (minutes)."""
    check_behaviour(policy.build_tiny_policy(env, tmp_path / "built"), env)


# -- the CLI ----------------------------------------------------------------------------------


def test_policy_build_refuses_a_non_empty_out_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:

    (tmp_path / "keep.txt").write_text("mine")
    assert main(["policy", "build", "--env", "arith", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("rlgate policy: error:") and "output folder is not empty" in err and "\n" not in err


def test_policy_build_needs_an_environment_with_a_recipe(capsys: pytest.CaptureFixture[str]) -> None:

    assert main(["policy", "build", "--env", "_calc_env:CalcEnv"]) == 2
    assert "has no tiny policy spec" in capsys.readouterr().err
