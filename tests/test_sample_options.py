"""The sampling settings are one object: ``SampleOptions`` declares them, checks them and
gives their defaults; the public samplers' keywords are its fields."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import re
import typing
from pathlib import Path

import pytest

import pytest_rlgate as rg
from pytest_rlgate.cli import build_parser
from pytest_rlgate.options import knob_flag
from pytest_rlgate.policy import SAMPLE_SEED, SAMPLE_TEMPERATURE, SAMPLE_TOP_P
from pytest_rlgate.policy.episode import sample_episodes
from pytest_rlgate.policy.generate import SampleKeywords
from pytest_rlgate.train.config import GRPOKnobs


def test_the_keywords_are_the_fields() -> None:
    declared = typing.get_type_hints(rg.SampleOptions)
    assert typing.get_type_hints(SampleKeywords) == declared
    assert list(declared) == [f.name for f in dataclasses.fields(rg.SampleOptions)]
    assert set(SampleKeywords.__optional_keys__) == set(declared)


@pytest.mark.parametrize("sampler", [rg.sample, rg.sample_rows, sample_episodes])
def test_every_public_sampler_takes_them_once(sampler: object) -> None:
    params = inspect.signature(sampler).parameters  # type: ignore[arg-type]
    assert "sampling" in params and params["keywords"].kind is inspect.Parameter.VAR_KEYWORD
    assert not {f.name for f in dataclasses.fields(rg.SampleOptions)} & set(params), "a sampling keyword written out"


def test_defaults_and_keywords_on_top() -> None:
    base = rg.SampleOptions()
    assert (base.k, base.temperature, base.top_p, base.seed) == (4, SAMPLE_TEMPERATURE, SAMPLE_TOP_P,
                                                                 SAMPLE_SEED)
    greedy = rg.SampleOptions(temperature=0.0, k=2)
    assert rg.SampleOptions.of(greedy) is greedy
    assert rg.SampleOptions.of(greedy, seed=5) == rg.SampleOptions(temperature=0.0, k=2, seed=5)
    assert rg.SampleOptions.of(None, k=8) == rg.SampleOptions(k=8)


@pytest.mark.parametrize(("change", "says"), [
    ({"k": 0}, "k=0"), ({"k": True}, "k=True"), ({"temperature": -0.1}, "temperature=-0.1"),
    ({"top_p": 0.0}, "top_p=0.0"), ({"top_p": 1.5}, "top_p=1.5"), ({"max_new_tokens": 0}, "max_new_tokens=0"),
    ({"batch_size": 0}, "batch_size=0"),
])
def test_a_bad_setting_is_one_line_naming_it(change: dict[str, object], says: str) -> None:
    with pytest.raises(rg.UsageError, match=says):
        rg.SampleOptions(**change)  # type: ignore[arg-type]


def test_a_sampler_checks_its_keywords_before_it_draws() -> None:
    def never(messages: object) -> str:
        raise AssertionError("sampled with a bad setting")

    with pytest.raises(rg.UsageError, match="top_p=2"):
        rg.sample(never, None, ["What is 3 + 4?"], env="arith", top_p=2)


@pytest.mark.parametrize("watcher", ["HackMonitor", "GateCallback"])
def test_the_training_callbacks_hold_one_sample_options(watcher: str) -> None:
    cls = getattr(rg, watcher)  # transformers: imported by the test, not at collection
    params = inspect.signature(cls).parameters
    assert "sampling" in params and params["keywords"].kind is inspect.Parameter.VAR_KEYWORD
    assert not {f.name for f in dataclasses.fields(rg.SampleOptions)} & set(params), "a sampling keyword written out"
    items = [{"prompt": "What is 3 + 4?", "case": {"a": 3, "b": 4, "op": "+"}, "category": "add"}]
    args = (items, None) if watcher == "HackMonitor" else (items,)
    held = cls(*args, env="arith", sampling=rg.SampleOptions(k=2, temperature=0.0), seed=5, max_new_tokens=9)
    assert held.sampling == rg.SampleOptions(k=2, temperature=0.0, seed=5, max_new_tokens=9)
    assert (held.k, held.seed) == (2, 5)
    settings = held.summary()["settings"]
    assert (settings["k"], settings["seed"], settings["temperature"], settings["max_new_tokens"]) == (2, 5, 0.0, 9)
    with pytest.raises(rg.UsageError, match="top_p=0"):
        cls(*args, env="arith", top_p=0)  # refused at the door, before a trainer starts


def _names(path: Path, word: str) -> bool:
    """Whether the module at *path* names *word*: a variable, an attribute, a keyword, a parameter or a string."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        found = (node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute)
                 else node.arg if isinstance(node, (ast.keyword, ast.arg)) else node.value
                 if isinstance(node, ast.Constant) and isinstance(node.value, str) else None)
        if found == word:
            return True
    return False


def test_a_new_sampling_setting_touches_only_the_files_the_docs_name() -> None:
    package = Path(rg.__file__).parent
    page = (package.parent / "docs" / "policy.md").read_text(encoding="utf-8")
    listed = page.split("<!-- sampling-files -->")[1].split("<!-- /sampling-files -->")[0]
    documented = set(re.findall(r"^- `pytest_rlgate/([\w/]+\.py)`", listed, flags=re.M))
    naming = {p.relative_to(package).as_posix() for p in package.rglob("*.py") if _names(p, "top_p")}
    assert naming == documented, ("a sampling setting is named outside the files docs/policy.md lists (take a "
                                  "SampleOptions and pass it on, or record SampleOptions.drawn()): "
                                  f"{sorted(naming ^ documented)}")
    assert len(documented) <= 3


def test_the_sampling_flags_are_generated_from_the_fields() -> None:

    fields = [f for f in dataclasses.fields(rg.SampleOptions) if f.name in rg.SampleOptions.flag_names()]
    for command in (["sample"], ["watch"]):
        parser = build_parser(command)
        sub = next(a for a in parser._actions if a.dest == "command").choices[command[0]]
        actions = {a.dest: a for a in sub._actions if a.help is not argparse.SUPPRESS}
        for spec in fields:
            action = actions[spec.name]
            assert action.option_strings == [knob_flag(spec)], (command, spec.name)
            assert action.type is spec.metadata["bound"], (command, spec.name)
    train = next(a for a in build_parser(["train"])._actions if a.dest == "command").choices["train"]
    grpo = next(a for a in train._actions if a.dest == "method").choices["grpo"]
    shown = {flag for a in grpo._actions if a.help is not argparse.SUPPRESS for flag in a.option_strings}
    assert {"--k", "--temperature", "--top-p", "--sample-seed", "--max-new-tokens"} <= shown
    assert not {"--eval-k", "--max-completion-length"} & shown  # old spellings: accepted, not shown
    with pytest.warns(rg.RlgateWarning, match="--eval-k is now --k"):
        assert grpo.parse_args(["--eval-k", "2"]).k == 2


def test_a_run_samples_its_holdout_as_one_sample_options() -> None:

    knobs = GRPOKnobs(k=2, top_p=0.9, sample_seed=5, base_model="rlgate/tiny-refund").resolve()
    assert knobs.sampling() == rg.SampleOptions(k=2, top_p=0.9, seed=5, max_new_tokens=48)
    assert knobs.sampling(seed=6).seed == 6
    with pytest.warns(rg.RlgateWarning, match="'eval_k' is now 'k'"):
        assert GRPOKnobs().with_overrides(eval_k=3, base_model="rlgate/tiny-refund").k == 3
