"""DPO pair rules (pure): margin, per-prompt cap, length matching, spacing-only drop, constructed
negatives from the environment (refund's, and an environment that has none) and their cap."""

from __future__ import annotations

import functools
import json
import random

import pytest
from _calc_env import CalcEnv, calc_items, calc_reply
from hypothesis import given, settings, strategies as st

from pytest_rlgate.environment.contract import load_env
from pytest_rlgate.envs import refund
from pytest_rlgate.envs.refund.negatives import invented_call, invented_order_id
from pytest_rlgate.errors import DataError, RlgateWarning, UsageError
from pytest_rlgate.train import pairs as pair_rules
from pytest_rlgate.train.pairs import (
    CONSTRUCTED_CAP,
    Pair,
    build_pairs,
    cap_constructed,
    read_pairs,
    turn_key,
    write_pairs,
)

#: the pair builders inside build_pairs take a resolved environment: refund's, here
REFUND = load_env("refund")
sampled_pairs = functools.partial(pair_rules.sampled_pairs, env=REFUND)
constructed_candidates = functools.partial(pair_rules.constructed_candidates, env=REFUND)

ASK = "Could you share your order id?"
PLAIN = "I can help with that."


def call(order_id: str, tail: str = "", spacing: str = " ") -> str:
    body = f'{{"name":{spacing}"lookup_order",{spacing}"arguments":{spacing}{{"order_id":{spacing}"{order_id}"}}}}'
    return f"<tool_call>{body}</tool_call>{tail}"


def item(prompt: str, scenario: str = "s0") -> dict:
    case = refund.case_for(prompt)
    return {"prompt": prompt, "case": case, "category": case["category"], "scenario_id": scenario}


NO_ID = item("I want a refund for my purchase", "no1")
WITH_ID = item("Please refund ORD-4017, it arrived broken", "w1")
OFF = item("What is the capital of France?", "off1")


def test_the_fixtures_score_as_the_design_table_says() -> None:
    # The other tests lean on these values; pin them so a reward change is caught here first.
    assert [refund.score(r, NO_ID["case"]) for r in (ASK, PLAIN, call("ORD-1234"))] == [1.0, 0.4, 0.2]
    replies = (call("ORD-4017"), call("ORD-1"), ASK, PLAIN)
    assert [refund.score(r, WITH_ID["case"]) for r in replies] == [1.0, 0.3, 0.3, 0.0]


def test_margin_is_inclusive_at_half_and_excludes_smaller_gaps() -> None:
    replies = [["a", "bb"]]
    assert len(sampled_pairs([NO_ID], replies, scores=[[1.0, 0.5]])) == 1
    assert sampled_pairs([NO_ID], replies, scores=[[1.0, 0.51]]) == []
    # real scores: with_id ask (0.3) vs nothing (0.0) is below the margin, a right call vs ask is not
    assert sampled_pairs([WITH_ID], [[ASK, PLAIN]]) == []
    (pair,) = sampled_pairs([WITH_ID], [[ASK, call("ORD-4017")]])
    assert (pair.chosen_score, pair.rejected_score, pair.margin) == (1.0, 0.3, 0.7)
    assert pair.chosen == call("ORD-4017") and pair.origin == "sampled"


def test_at_most_two_pairs_per_prompt_and_each_reply_used_once() -> None:
    replies = [[ASK, f"{ASK} thanks", f"{ASK}!", f"{ASK}!!", PLAIN, PLAIN + " ok", call("ORD-1111"), call("ORD-2222")]]
    pairs = sampled_pairs([NO_ID], replies)
    assert len(pairs) == 2
    used = [p.chosen for p in pairs] + [p.rejected for p in pairs]
    assert len(set(used)) == 4
    assert len(sampled_pairs([NO_ID], replies, max_per_prompt=3)) == 3
    assert len(sampled_pairs([NO_ID], replies, max_per_prompt=8)) == 4  # only 4 passing replies to choose


def test_rejected_is_the_eligible_reply_closest_in_length() -> None:
    chosen = "x" * 30
    replies = [[chosen, "y" * 10, "y" * 29, "y" * 60, "z" * 30]]
    scores = [[1.0, 0.0, 0.2, 0.0, 0.7]]  # "z"*30 is the same length but only 0.3 below: not eligible
    (pair,) = sampled_pairs([NO_ID], replies, scores=scores, max_per_prompt=1)
    assert pair.rejected == "y" * 29
    # equal distance: the earlier sample wins
    (pair,) = sampled_pairs([NO_ID], [["x" * 20, "y" * 18, "y" * 22]], scores=[[1.0, 0.0, 0.0]])
    assert pair.rejected == "y" * 18


def test_best_reply_chooses_first_ties_by_sample_order() -> None:
    replies = [[PLAIN, ASK + " a", ASK + " b"]]
    (pair,) = sampled_pairs([NO_ID], replies, max_per_prompt=1)
    assert pair.chosen == ASK + " a" and pair.rejected == PLAIN


def test_turn_key_collapses_spacing_only() -> None:
    assert turn_key("  Could  you\nshare it? ") == "Could you share it?"
    assert turn_key(call("ORD-1")) != turn_key(call("ORD-2"))
    assert turn_key(call("ORD-1", spacing="")) != turn_key(call("ORD-1", spacing="   "))  # inside a token: kept


def test_replies_that_differ_only_in_spacing_are_never_paired() -> None:
    # Same words, different scores (as a scorer that counts characters could give):
    same_a, same_b = "Could you share it?", "Could  you\nshare   it? "
    other = "No."
    assert sampled_pairs([NO_ID], [[same_a, same_b]], scores=[[1.0, 0.0]]) == []
    (pair,) = sampled_pairs([NO_ID], [[same_a, same_b, other]], scores=[[1.0, 0.0, 0.0]], max_per_prompt=1)
    assert pair.rejected == other  # same_b is closer in length but differs only in spacing


def test_refund_scores_the_same_first_call_alike_so_the_margin_keeps_them_apart() -> None:
    plain, tailed = call("ORD-4017"), call("ORD-4017", tail="\nThen I refund it.")
    assert refund.score(plain, WITH_ID["case"]) == refund.score(tailed, WITH_ID["case"])
    assert sampled_pairs([WITH_ID], [[plain, tailed]]) == []


def test_each_copy_of_a_balanced_prompt_is_its_own_prompt() -> None:
    pairs = sampled_pairs([NO_ID, NO_ID], [[ASK, PLAIN], [ASK, PLAIN]])
    assert [p.item_index for p in pairs] == [0, 1]


def test_bad_shapes_and_knobs_are_named_errors() -> None:
    with pytest.raises(DataError, match="one list of replies per prompt"):
        sampled_pairs([NO_ID, OFF], [[ASK]])
    with pytest.raises(DataError, match="same shape"):
        sampled_pairs([NO_ID], [[ASK, PLAIN]], scores=[[1.0]])
    with pytest.raises(UsageError, match="min_margin"):
        sampled_pairs([NO_ID], [[ASK]], min_margin=0)
    with pytest.raises(UsageError, match="constructed-cap"):
        cap_constructed([], 10, -0.1)


reply_st = st.sampled_from([ASK, PLAIN, call("ORD-4017"), call("ORD-1234"), "", "?" * 3, PLAIN * 3,
                            '<tool_call>{"name": "create_refund", "arguments": {}}</tool_call>'])
items_st = st.lists(st.sampled_from([NO_ID, WITH_ID, OFF]), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), items=items_st, cap=st.integers(1, 3))
def test_every_sampled_pair_obeys_the_rules(data: st.DataObject, items: list[dict], cap: int) -> None:
    replies = [data.draw(st.lists(reply_st, min_size=0, max_size=8)) for _ in items]
    pairs = sampled_pairs(items, replies, max_per_prompt=cap)
    for index, group in enumerate(replies):
        mine = [p for p in pairs if p.item_index == index]
        assert len(mine) <= cap
        for p in mine:
            case = items[index]["case"]
            assert p.chosen_score == refund.score(p.chosen, case)
            assert p.rejected_score == refund.score(p.rejected, case)
            assert p.margin >= 0.5
            assert turn_key(p.chosen) != turn_key(p.rejected)
        # no sample serves in two pairs: count multiset use against availability
        for text in {*(p.chosen for p in mine), *(p.rejected for p in mine)}:
            uses = sum((p.chosen == text) + (p.rejected == text) for p in mine)
            assert uses <= group.count(text)
    assert sampled_pairs(items, replies, max_per_prompt=cap) == pairs  # deterministic


@settings(max_examples=80, deadline=None)
@given(prompt=st.text(alphabet="0123456789 abcORD-", max_size=80), seed=st.integers(0, 2**31))
def test_invented_id_is_well_formed_deterministic_and_absent_from_the_prompt(prompt: str, seed: int) -> None:
    order_id = invented_order_id(prompt, random.Random(seed))
    assert refund.normalise_order_id(order_id) == order_id
    assert 1000 <= int(order_id[4:]) <= 9999
    assert order_id[4:] not in prompt
    assert invented_order_id(prompt, random.Random(seed)) == order_id


def test_invented_id_moves_with_the_seed() -> None:
    made = constructed_candidates  # the builder seeds each prompt's rng from (seed, prompt)
    ids = {made([NO_ID], [[ASK]], seed=seed)[0].rejected for seed in range(20)}
    assert len(ids) >= 15


def test_refund_offers_a_negative_only_where_any_call_is_wrong() -> None:
    rng = random.Random(0)
    assert refund.rejected_reply(WITH_ID, rng) is None
    for item_ in (NO_ID, OFF):
        parsed = refund.parse_tool_call(refund.rejected_reply(item_, rng))
        assert parsed is not None and parsed.name == "lookup_order"


def test_constructed_pair_is_own_shortest_passing_reply_against_an_invented_lookup() -> None:
    malformed_ask = "<tool_call>{id?"  # shorter than ASK; passes no_id but breaks the guarded well_formed
    assert refund.passes(refund.score(malformed_ask, NO_ID["case"]))
    replies = [[PLAIN, ASK + " please, I need it", ASK, call("ORD-1234"), malformed_ask], [ASK + "?"], [PLAIN]]
    items = [NO_ID, WITH_ID, OFF]
    made = constructed_candidates(items, replies, seed=3)
    assert [p.category for p in made] == ["no_id", "off_topic"]  # never for with_id
    no_id, off = made
    assert no_id.chosen == ASK and off.chosen == PLAIN  # the shorter malformed ask is no clean pass
    parsed = refund.parse_tool_call(no_id.rejected)
    assert parsed is not None and parsed.name == "lookup_order"
    assert parsed.arguments["order_id"] == invented_order_id(NO_ID["prompt"], random.Random(f"3\x00{NO_ID['prompt']}"))
    marks = refund.markers(no_id.rejected, NO_ID["case"], prompt=NO_ID["prompt"])
    assert marks == {"well_formed": 1.0, "tool_call": 1.0, "argument_grounding": 0.0}
    assert (no_id.chosen_score, no_id.rejected_score, no_id.origin) == (1.0, 0.2, "constructed")


def test_no_constructed_pair_without_an_own_passing_reply_and_once_per_distinct_prompt() -> None:
    failing = [[PLAIN, call("ORD-1234")]]  # no_id: PLAIN scores 0.4, the call 0.2
    assert constructed_candidates([NO_ID], failing, seed=0) == []
    shouting = dict(NO_ID, prompt="  I WANT a refund for my   purchase ")
    made = constructed_candidates([NO_ID, shouting, NO_ID], [[ASK], [ASK], [ASK]], seed=0)
    assert len(made) == 1


def test_cap_is_a_floor_share_of_sampled_pairs_with_an_even_stride() -> None:
    candidates = [
        Pair(f"p{i}", ASK, invented_call("ORD-1000"), 1.0, 0.2, "constructed", "no_id", f"s{i}", i) for i in range(10)
    ]
    kept, limit = cap_constructed(candidates, n_sampled=10, cap=CONSTRUCTED_CAP)
    assert limit == 3 and [p.item_index for p in kept] == [0, 3, 6]
    assert cap_constructed(candidates, n_sampled=9, cap=0.3)[1] == 2  # floor(2.7)
    assert cap_constructed(candidates, n_sampled=3, cap=0.3) == ([], 0)  # 0.9 rounds down: never over the share
    assert cap_constructed(candidates, n_sampled=100, cap=0.3) == (candidates, 30)  # fewer candidates than the cap


def test_build_pairs_respects_and_reports_the_cap() -> None:
    # 10 with-id prompts give 10 sampled pairs; 8 no-id prompts could give 8 constructed ones.
    with_id = [item(f"Refund ORD-{4000 + i} please", f"w{i}") for i in range(10)]
    no_id = [item(f"My order number {i} never came, refund it", f"n{i}") for i in range(8)]
    items = with_id + no_id
    replies = [[call(it["case"]["order_id"]), PLAIN] for it in with_id] + [[ASK, ASK + " please"] for _ in no_id]
    plain = build_pairs(items, replies, seed=0)
    assert plain.stats["sampled_pairs"] == 10 and plain.constructed == []
    assert plain.stats["constructed_limit"] is None
    built = build_pairs(items, replies, seed=0, constructed=True)
    assert len(built.sampled) == 10 and len(built.constructed) == 3
    for key, value in {"constructed_candidates": 8, "constructed_limit": 3, "constructed_pairs": 3,
                       "constructed_share": 0.3, "constructed_cap": 0.3, "pairs": 13}.items():
        assert built.stats[key] == value, key
    assert built.stats["pairs_by_category"] == {"sampled": {"with_id": 10}, "constructed": {"no_id": 3}}
    uncapped = build_pairs(items, replies, seed=0, constructed=True, constructed_cap=10.0)
    assert len(uncapped.constructed) == 8
    assert build_pairs(items, replies, seed=0, constructed=True).pairs == built.pairs
    other_seed = build_pairs(items, replies, seed=1, constructed=True)
    assert [p.rejected for p in other_seed.constructed] != [p.rejected for p in built.constructed]


def test_pairs_file_round_trips_and_bad_lines_name_the_line(tmp_path) -> None:
    built = build_pairs([NO_ID, OFF], [[ASK, PLAIN], [PLAIN, call("ORD-1234")]], seed=0)
    path = write_pairs(tmp_path / "pairs.jsonl", built.pairs)
    first = json.loads(path.read_text().splitlines()[0])
    assert {"prompt", "chosen", "rejected", "chosen_score", "rejected_score", "origin", "margin"} <= set(first)
    assert read_pairs(path) == built.pairs
    path.write_text(path.read_text() + '{"prompt": "x"}\n')
    with pytest.raises(DataError, match=r"pairs.jsonl:3: pair is missing"):
        read_pairs(path)


# --------------------------------------------------------------------------- any environment


class WithNegatives(CalcEnv):
    """The calc environment plus a constructed negative: a confident number where none can be told."""

    def rejected_reply(self, item: dict, rng: random.Random) -> str | None:
        return f"There are {rng.randrange(2, 9)} left." if item["category"] == "unanswerable" else None


CALC = calc_items(4)


def _calc_replies() -> list[list[str]]:
    """One right and one wrong reply per prompt, the right one first."""
    return [[calc_reply(it, True), calc_reply(it, False)] for it in CALC]


def test_pairs_of_any_environment_are_scored_by_its_own_score() -> None:
    built = build_pairs(CALC, _calc_replies(), seed=0, env=CalcEnv())
    assert len(built.sampled) == len(CALC)
    for pair in built.pairs:
        assert (pair.chosen_score, pair.rejected_score) == (1.0, 0.0)
        assert pair.category in CalcEnv.categories and pair.origin == "sampled"


def test_an_environment_without_rejected_reply_builds_no_constructed_pairs_and_says_so() -> None:
    env = load_env(CalcEnv())
    assert not env.has_rejected_reply
    with pytest.warns(RlgateWarning, match="environment calc has no rejected_reply"):
        built = build_pairs(CALC, _calc_replies(), seed=0, constructed=True, env=env)
    assert built.constructed == [] and built.stats["constructed_pairs"] == 0
    assert "--constructed-negatives adds no pairs" in built.stats["constructed_note"]


def test_an_environment_with_rejected_reply_gets_capped_constructed_pairs_where_it_offers_one() -> None:
    env = load_env(WithNegatives())
    assert env.has_rejected_reply
    built = build_pairs(CALC, _calc_replies(), seed=0, constructed=True, constructed_cap=10.0, env=env)
    assert [p.category for p in built.constructed] == ["unanswerable"] * 4
    for pair in built.constructed:
        assert pair.chosen == "I cannot tell from that." and pair.rejected_score == 0.0
        assert pair.rejected.startswith("There are ")
    assert "constructed_note" not in built.stats
    again = build_pairs(CALC, _calc_replies(), seed=0, constructed=True, constructed_cap=10.0, env=env)
    assert again.pairs == built.pairs  # each prompt's rng is seeded from (seed, prompt)
