"""The sampling settings are one object: ``SampleOptions`` declares them, checks them and
gives their defaults; the public samplers' keywords are its fields."""

from __future__ import annotations

import dataclasses
import inspect
import typing

import pytest

import pytest_rlgate as rg
from pytest_rlgate.policy.episode import sample_episodes
from pytest_rlgate.policy.handles import SampleKeywords


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
    assert (base.k, base.temperature, base.top_p, base.seed) == (4, rg.SAMPLE_TEMPERATURE, rg.SAMPLE_TOP_P,
                                                                 rg.SAMPLE_SEED)
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
