"""An agent never silently samples nothing: a chat that cannot fit the model's context is refused
before anything is sampled, an all-empty sample is said, and rows of nothing cannot be gated."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from _airline_env import Airline, airline_items

import pytest_rlgate as rg
from pytest_rlgate.data.rows import RowReader, refuse_silent_sides
from pytest_rlgate.errors import DataError, RlgateWarning, UsageError

ITEMS = airline_items()


@pytest.fixture(scope="module")
def tiny_agent() -> tuple[Any, Any]:
    return rg.load_policy("rlgate/tiny-refund_agent", device="cpu")


def test_a_chat_longer_than_the_context_is_refused_before_sampling(tiny_agent: tuple[Any, Any],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("sampled a chat that cannot fit")

    monkeypatch.setattr("pytest_rlgate.policy.episode.generate_batch", never)
    model, tokenizer = tiny_agent
    with pytest.raises(UsageError) as info:
        rg.sample_rows(model, tokenizer, ITEMS[:4], k=2, env=Airline(), max_new_tokens=48)
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith("4 of 4 prompts cannot be sampled: the chat of 'My flight BK-101 was cancelled, can you "
                           "move me to' renders to ")
    width = int(text.split("renders to ")[1].split()[0])
    assert 700 < width < 900  # the system prompt and two tool schemas, byte-level BPE'd
    assert "(the system prompt, 2 tool schemas and the prompt) and a turn may add 48, but the model's context " \
           "is 512 positions" in text
    assert "`rlgate policy build --env MODULE:CLASS --out DIR`, then --base-model DIR" in text


def test_the_fix_is_named_only_when_it_helps(tiny_agent: tuple[Any, Any]) -> None:
    model, tokenizer = tiny_agent
    env = rg.load_env("refund_agent")  # its system turn is one token: 30-odd positions a prompt
    items = rg.build_prompts(0, "small", env=env)[:1]
    with pytest.raises(UsageError, match=r"lower --max-new-tokens \(max_new_tokens\) to 4\d\d or less"):
        rg.sample_rows(model, tokenizer, items, k=1, env=env, max_new_tokens=500)
    rows = rg.sample_rows(model, tokenizer, items, k=1, env=env, max_new_tokens=24)
    assert rows[0]["reply"].strip()


def test_an_all_empty_sample_is_said_and_cannot_be_gated() -> None:
    with pytest.warns(RlgateWarning, match=r"all 8 sampled episodes are empty \(stop: no_call\): the policy wrote "
                                           "nothing"):
        rows = rg.sample_rows(lambda messages: "", None, ITEMS[:4], k=2, env=Airline())
    reader = RowReader(rows)
    assert len(list(reader)) == 8 and reader.silent
    with pytest.raises(DataError, match="every reply in these rows is empty: the policy sampled nothing"):
        refuse_silent_sides([reader])
    # one word anywhere is a sample; nothing is said
    with warnings.catch_warnings():
        warnings.simplefilter("error", RlgateWarning)
        spoken = rg.sample_rows(lambda messages: "" if "BK-101" in str(messages) else "Which booking?", None,
                                ITEMS[:4], k=2, env=Airline())
    reader = RowReader(spoken)
    list(reader)
    assert not reader.silent
    refuse_silent_sides([reader])


def test_a_harness_side_without_reply_text_is_not_silent() -> None:
    class Harness(list):  # what a reader of another tool's format hands the row reader
        fresh_rows = True

    rows = Harness({"prompt": f"p{i}", "category": "a", "rollout_index": 0, "reply": "", "score": 1.0, "reward": 1,
                    "markers": {}} for i in range(3))
    reader = RowReader(rows)
    list(reader)
    assert not reader.silent


@pytest.mark.xfail(strict=True, reason="needs the one-line hook in gate/sides.py read_sides: "
                                       "refuse_silent_sides([before_reader, *after_readers])")
def test_a_gate_of_empty_sides_says_so_instead_of_passing() -> None:
    rows = rg.sample_rows(lambda messages: "", None, ITEMS, k=2, env=Airline())
    with pytest.raises(DataError, match="every reply in these rows is empty"):
        rg.compare(rows, rows, env=Airline())
