"""Adapters that would load as a no-op are refused (issue 11): "after" never silently equals the base.

A folder with ``adapter_config.json`` and an unrelated tensor used to pass every check; PEFT
then loaded it with a warning and zero LoRA weights, and the gate compared the base with
itself. ``pytest_rlgate.policy.lora`` checks the weights before (LoRA matrices, paired, on the
targeted modules, not all zero) and after attaching (no matrix of the model missing).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from _tiny_model import build_tiny

from pytest_rlgate.errors import RlgateWarning, UsageError
from pytest_rlgate.policy.load import load_policy
from pytest_rlgate.policy.lora import ADAPTER_CONFIG, ADAPTER_WEIGHTS, attach_adapter, check_adapter

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("base")
    build_tiny(folder)
    return folder


@pytest.fixture(scope="module")
def trained(base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A LoRA adapter on q_proj/v_proj whose B matrices moved (as training leaves them)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = get_peft_model(AutoModelForCausalLM.from_pretrained(base),
                           LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.5)
    out = tmp_path_factory.mktemp("adapters") / "trained"
    model.save_pretrained(out)
    return out


def _variant(trained: Path, tmp_path: Path, tensors=None, config=None) -> Path:
    """A copy of *trained* with its weights replaced by ``tensors(weights)`` and/or config edited."""
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "variant"
    shutil.copytree(trained, folder)
    if tensors is not None:
        save_file(tensors(load_file(str(trained / ADAPTER_WEIGHTS))), str(folder / ADAPTER_WEIGHTS))
    if config is not None:
        path = folder / ADAPTER_CONFIG
        path.write_text(json.dumps(config(json.loads(path.read_text()))))
    return folder


def _base_model(base: Path) -> Any:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(base)


@pytest.mark.parametrize(
    ("tensors", "config", "says"),
    [
        (lambda w: {"unrelated": torch.ones(2)}, None,
         "its weights hold no LoRA matrices (lora_A/lora_B), only unrelated"),
        (lambda w: {k: v for k, v in w.items() if "lora_B" not in k}, None, "lora_A and lora_B do not pair up"),
        (None, lambda c: {**c, "target_modules": ["q_proj"]}, "which its config does not target (q_proj)"),
        (None, lambda c: {**c, "peft_type": "IA3"}, "peft_type 'IA3': only LoRA adapters are supported"),
    ],
)
def test_weights_that_would_load_as_a_no_op_are_refused(trained, tmp_path, tensors, config, says) -> None:
    folder = _variant(trained, tmp_path, tensors, config)
    with pytest.raises(UsageError) as info:
        check_adapter(folder, flag="--rlgate-adapter")
    message = str(info.value)
    assert message.startswith("--rlgate-adapter ") and str(folder) in message and says in message
    assert "\n" not in message


def test_an_adapter_that_changes_nothing_loads_with_a_warning_that_says_so(trained, tmp_path) -> None:
    folder = _variant(trained, tmp_path, lambda w: {k: torch.zeros_like(v) if "lora_B" in k else v
                                                    for k, v in w.items()})
    with pytest.warns(RlgateWarning, match="every lora_B matrix is zero, so the adapter changes nothing: 'after' is "
                                           "the base model"):
        assert check_adapter(folder, flag="--run") == folder


def test_weights_missing_for_part_of_the_model_are_refused_after_attaching(base, trained, tmp_path) -> None:
    folder = _variant(trained, tmp_path, lambda w: {k: v for k, v in w.items() if ".layers.1." not in k})
    assert check_adapter(folder) == folder  # what is there is fine: only attaching shows what is missing
    with pytest.warns(UserWarning), pytest.raises(UsageError) as info:  # PEFT's own warning, then our refusal
        attach_adapter(_base_model(base), folder, flag="--run")
    assert "its weights lack 4 LoRA matrices its config puts on this base model" in str(info.value)
    assert "layers.1." in str(info.value)


def test_a_trained_adapter_attaches_and_changes_the_model(base, trained) -> None:
    ids = torch.tensor([[1, 2, 3, 4]])
    model = attach_adapter(_base_model(base), trained)
    with torch.no_grad():
        on = model(ids).logits
        with model.disable_adapter():
            off = model(ids).logits
    assert not torch.allclose(on, off)


def test_load_policy_applies_the_same_check(base, trained, tmp_path) -> None:
    folder = _variant(trained, tmp_path, lambda w: {"unrelated": torch.ones(2)})
    with pytest.raises(UsageError, match="no LoRA matrices"):
        load_policy(base, adapter=folder, device="cpu")


def test_the_plugin_refuses_such_an_adapter_at_startup(pytester: pytest.Pytester, trained, tmp_path) -> None:
    folder = _variant(trained, tmp_path, lambda w: {"unrelated": torch.ones(2)})
    pytester.makepyfile("def test_never_runs():\n    pass\n")
    result = pytester.runpytest_subprocess(f"--rlgate-adapter={folder}", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--rlgate-adapter '{folder}': not a usable LoRA adapter: its weights hold no LoRA*"])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()
