"""Your own environment, as docs/environments.md walks it: the commands of the page run offline.

The one-turn walkthrough ("Run every surface on it", quickmath on the shipped tiny policy) and
the tool walkthrough ("Train your own tool environment offline", the airline agent on a tiny
agent built for it) are read from the page and run as a user pastes them, in a folder holding
the examples, with two training steps instead of forty (and one base run): the `rlgate` lines
only (the page's `pytest` lines need the user's own tests). A fast test checks the recipe the
tool walkthrough builds: any tool environment, its system turn one token, its tools called.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _airline_env import Airline, airline_items

import pytest_rlgate as rg
from pytest_rlgate.errors import UsageError
from pytest_rlgate.policy.load import build_tiny_policy
from pytest_rlgate.policy.tiny.agent import agent_spec, system_turn
from pytest_rlgate.policy.tiny.manifest import read_build_info
from pytest_rlgate.policy.tiny.warmstart import TrainSchedule
from pytest_rlgate.train.tools import tool_trainer_options

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "environments.md"
QUICK = {"--steps": "2", "--base-runs": "1", "--k": "2"}


def _section_commands(heading: str) -> list[list[str]]:
    """The shell lines of the first bash block under *heading*: exports and variables applied,
    continuations joined, comments dropped."""
    section = PAGE.read_text(encoding="utf-8").split(heading, 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.DOTALL)
    assert block is not None, heading
    variables: dict[str, str] = {}
    commands = []
    for line in block.group(1).replace("\\\n", " ").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        for name, value in variables.items():
            line = line.replace(f"${name}", value)
        words = shlex.split(line)
        if words[0] == "export" or re.fullmatch(r"[A-Z_]+=\S+", words[0]):
            name, value = words[-1].split("=", 1)
            variables[name] = value
            continue
        commands.append(words)
    return [[*words, f"<env>{variables.get('PYTHONPATH', '')}"] for words in commands]


def _quick(words: list[str]) -> list[str]:
    """A training command with two steps (and one base run) instead of the page's forty."""
    if words[:3] != ["rlgate", "train", "grpo"]:
        return words
    out, skip = [], False
    for word in words:
        if skip:
            skip = False
            continue
        if word in QUICK:
            skip = True
            continue
        out.append(word)
    return out + [part for flag, value in QUICK.items() for part in (flag, value)]


def _run_page(heading: str, folder: Path) -> list[subprocess.CompletedProcess[str]]:
    shutil.copytree(ROOT / "examples", folder / "examples")
    done = []
    for words in _section_commands(heading):
        pythonpath = words.pop()[len("<env>"):]
        if words[0] != "rlgate":
            continue
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([pythonpath, str(ROOT)]), "OMP_NUM_THREADS": "1"}
        argv = [sys.executable, "-m", "pytest_rlgate.cli", *_quick(words)[1:]]
        result = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=1800)
        assert result.returncode in (0, 1), (words, result.stdout[-2000:], result.stderr[-2000:])
        assert "Traceback" not in result.stderr, result.stderr
        done.append(result)
    return done


@pytest.mark.slow
def test_the_one_turn_walkthrough_trains_offline(tmp_path: Path) -> None:
    done = _run_page("## Run every surface on it", tmp_path)
    assert [r.args[3] for r in done] == ["prompts", "train", "gate", "report"]
    assert (tmp_path / "runs" / "qm-grpo" / "COMPLETE").is_file()
    config = json.loads((tmp_path / "runs" / "qm-grpo" / "config.json").read_text())
    assert config["env"]["name"] == "quickmath" and config["base_model"] == "rlgate/tiny-refund"
    assert "run qm-grpo: gate" in done[-1].stdout


@pytest.mark.slow
def test_the_tool_walkthrough_builds_a_tiny_agent_and_trains_offline(tmp_path: Path) -> None:
    done = _run_page("### Train your own tool environment offline", tmp_path)
    assert [r.args[3] for r in done] == ["policy", "train", "sample", "report"]
    assert read_build_info(tmp_path / "tiny-airline")["name"] == "rlgate/tiny-airline-agent"
    run = tmp_path / "runs" / "air-grpo"
    assert (run / "COMPLETE").is_file()
    rows = rg.load_rows(tmp_path / "air.jsonl")
    assert len(rows) == 4 * len(airline_items())
    assert any(r["n_tool_calls"] for r in rows) and any(r["reply"].strip() for r in rows)
    assert {c["name"] for r in rows for m in r["transcript"] for c in m.get("tool_calls", [])
            for c in [c["function"]]} <= {"get_booking", "rebook"}
    assert "run air-grpo: gate" in done[-1].stdout


def test_the_tiny_agent_recipe_fits_any_tool_environment(tmp_path: Path) -> None:
    env = rg.load_env(Airline())
    items = airline_items()
    spec = agent_spec(env, items, schedule=TrainSchedule(steps=6, batch_size=4))
    assert spec.name == "rlgate/tiny-airline-agent" and spec.phrases == (system_turn(env, items[0]["prompt"]),)
    assert '"name": "get_booking"' in spec.phrases[0] and '"name": "rebook"' in spec.phrases[0]
    folder = build_tiny_policy(env, tmp_path / "tiny", spec=spec, progress=False)
    model, tokenizer = rg.load_policy(str(folder), device="cpu")
    chat = tokenizer.apply_chat_template(env.messages_for(items[0]["prompt"]), tools=env.tool_functions(),
                                         add_generation_prompt=True, tokenize=False)
    width = len(tokenizer(chat, add_special_tokens=False)["input_ids"])
    assert width < 64, width  # the system turn and both schemas are one token: the prompt is what remains
    assert width + 48 * 3 < model.config.max_position_embeddings
    # the warm-start episodes call the environment's own tools, with what the tools really returned
    writer = spec.corpus.writer(0)
    import random

    rng = random.Random(0)
    episode = writer.turns(rng, "call", items[2])
    assert episode[0][1].startswith('<tool_call>\n{"name": "') and episode[-1][0][-1]["role"] == "tool"
    assert json.loads(episode[-1][0][-1]["content"])  # a real result (or the tool's error), as JSON
    info = read_build_info(folder)
    assert info["recipe"]["corpus"]["kind"] == "ToolCorpus" and info["recipe"]["corpus"]["prompts"] == len(items)


def test_a_one_turn_environment_is_pointed_at_the_shipped_policies() -> None:
    with pytest.raises(UsageError, match="a one-turn environment trains on a shipped tiny policy"):
        agent_spec(rg.load_env("arith"), [])
    with pytest.raises(UsageError, match="no prompts to warm the tiny agent up on"):
        agent_spec(rg.load_env(Airline()), [{"prompt": 3}])


def test_the_errors_name_what_works_for_a_tool_environment(tmp_path: Path) -> None:
    knobs = rg.GRPOKnobs(env=Airline(), base_model=None)
    with pytest.raises(UsageError, match=r"a tiny agent built for it \(`rlgate policy build --env SPEC --out DIR`"):
        knobs.resolve()


def test_training_a_tool_environment_on_a_one_turn_policy_names_what_works() -> None:
    _model, tokenizer = rg.load_policy("rlgate/tiny-refund", device="cpu")
    with pytest.raises(UsageError, match=r"cannot render tool calls and results; .*a tiny agent built for it "
                                         r"offline \(`rlgate policy build --env SPEC --out DIR`"):
        tool_trainer_options(rg.load_env(Airline()), tokenizer)
