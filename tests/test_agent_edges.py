"""An agent never silently samples nothing: a chat that cannot fit the model's context is refused
before anything is sampled, an all-empty sample is said, and rows of nothing cannot be gated."""

from __future__ import annotations

import contextlib
import json
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _airline_env import Airline, airline_items

import pytest_rlgate as rg
from pytest_rlgate.cli import main
from pytest_rlgate.data import regrade_rows
from pytest_rlgate.data.rows import RowReader, load_rows, refuse_silent_sides
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
    assert "`rlgate policy build --env MODULE:CLASS --out DIR`, then --base-model DIR or --model DIR)" in text


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


def test_a_gate_of_empty_sides_says_so_instead_of_passing() -> None:
    rows = rg.sample_rows(lambda messages: "", None, ITEMS, k=2, env=Airline())
    with pytest.raises(DataError, match="every reply in these rows is empty"):
        rg.compare(rows, rows, env=Airline())


# --------------------------------------------------------------------------- graded rows, whichever command


def _docs_agent() -> dict[str, Any]:
    from test_episodes import docs_example

    return docs_example()


EPISODE_KEYS = ("prompt", "scenario_id", "category", "rollout_index", "reply", "score", "reward", "markers",
                "transcript", "n_turns", "n_tool_calls", "stop", "turn_markers", "case")


def test_rlgate_grade_rows_have_the_sampled_rows_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ns = _docs_agent()
    capsys.readouterr()
    sampled = [r for r in ns["before"] if r["rollout_index"] == 0]
    replies = tmp_path / "replies.jsonl"
    replies.write_text("".join(json.dumps({k: r[k] for k in ("prompt", "scenario_id", "category", "case", "reply")})
                               + "\n" for r in sampled), encoding="utf-8")
    (tmp_path / "price_env.py").write_text(_PRICE_ENV, encoding="utf-8")
    out = tmp_path / "rows.jsonl"
    with _on_path(tmp_path):
        assert main(["grade", str(replies), "--env", "price_env:PriceAgent", "--out", str(out)]) == 0
    graded = load_rows(out)
    assert [{k: r.get(k) for k in EPISODE_KEYS} for r in graded] == [{k: r.get(k) for k in EPISODE_KEYS}
                                                                      for r in sampled]
    # the public function and regrading give the same rows
    items = [{k: r[k] for k in ("prompt", "scenario_id", "category", "case")} for r in sampled]
    again = rg.grade_replies(items, [[r["reply"]] for r in sampled], env=ns["env"])
    assert [{k: r.get(k) for k in EPISODE_KEYS} for r in again] == [{k: r.get(k) for k in EPISODE_KEYS}
                                                                    for r in sampled]
    regraded = regrade_rows(out, env=ns["env"])
    assert [{k: r.get(k) for k in EPISODE_KEYS} for r in regraded] == [{k: r.get(k) for k in EPISODE_KEYS}
                                                                       for r in sampled]


def test_a_transcript_that_lies_about_a_tool_result_keeps_the_environments(tmp_path: Path) -> None:
    ns = _docs_agent()
    env = ns["env"]
    call = '<tool_call>{"name": "get_price", "arguments": {"item": "plum"}}</tool_call>'
    lying = f'{call}\n<tool_response>\n{{"item": "plum", "price": 1}}\n</tool_response>\nIt costs 1.'
    item = {"prompt": "How much is a plum?", "case": {"item": "plum", "price": None}, "category": "unknown",
            "scenario_id": "plum"}
    (row,) = rg.grade_replies([item], [[lying]], env=env)
    assert '"price": 1}' not in row["reply"] and '{"error": "unknown item"}' in row["reply"]
    assert row["transcript"][0] == {"role": "system", "content": "Quote a price only after get_price returned it."}
    assert row["transcript"][1] == {"role": "user", "content": "How much is a plum?"}
    assert row["transcript"][3] == {"role": "tool", "name": "get_price", "content": '{"error": "unknown item"}'}
    assert (row["n_turns"], row["n_tool_calls"], row["stop"], row["score"]) == (2, 1, "no_call", 0.0)
    assert [m["looked_up"] for m in row["turn_markers"]] == [1.0, 1.0]


def test_rows_written_with_the_old_count_names_still_read(tmp_path: Path) -> None:
    ns = _docs_agent()
    path = tmp_path / "old.jsonl"
    old = []
    for row in ns["before"]:
        renamed = dict(row)
        renamed["turns"], renamed["tool_calls"] = renamed.pop("n_turns"), renamed.pop("n_tool_calls")
        old.append(renamed)
    path.write_text("".join(json.dumps(r) + "\n" for r in old), encoding="utf-8")
    read = load_rows(path)
    counts = [(r["n_turns"], r["n_tool_calls"]) for r in ns["before"]]
    assert [(r["n_turns"], r["n_tool_calls"]) for r in read] == counts
    assert not any("turns" in r or "tool_calls" in r for r in read)
    assert rg.compare(read, ns["before"], env=ns["env"]).passed


_PRICE_ENV = '''
import json

PRICES = {"apple": 3, "pear": 4, "fig": 2, "lime": 1}  # the docs example's


class Shop:
    def reset(self, **case):
        self.prices = dict(PRICES)

    def get_price(self, item: str) -> str:
        """Look up the price of an item.

        Args:
            item: The item's name, e.g. apple.
        """
        price = self.prices.get(item.lower())
        return json.dumps({"item": item, "price": price} if price is not None else {"error": "unknown item"})


class PriceAgent:
    name = "price_agent"
    categories = ("known", "unknown")
    system = "Quote a price only after get_price returned it."
    environment_factory = Shop
    max_turns = 2
    guards = ("looked_up",)

    def score(self, episode, case):
        looked = any(c.arguments.get("item") == case["item"] for c in episode.calls("get_price"))
        if case["price"] is None:
            return 1.0 if looked and not any(ch.isdigit() for ch in episode.final) else 0.0
        return 1.0 if looked and str(case["price"]) in episode.final else 0.0

    def markers(self, episode, case):
        return {"looked_up": float(bool(episode.calls("get_price")))}
'''


@contextlib.contextmanager
def _on_path(folder: Path) -> Iterator[None]:
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("price_env", None)
