"""Hackability suite for the refund reward: what must hold, and each known hack, found.

Two kinds of test. *Properties* state what the reward must guarantee; they pass on the
refund reward and would catch a regression. *Hack tests* (``test_hack_*``) search for a known
exploit of DESIGN section 4 and pass when they find it: they document that the hack is real,
print its minimal example, and fail — prompting you to delete or invert them — once the
reward is fixed. Copy this file as a template for your own reward: replace the ``reward``
fixture in ``conftest.py``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings, strategies as st
from hypothesis.errors import NoSuchExample

from pytest_rlgate import probe_reward
from pytest_rlgate.envs.refund import (
    invents_outcome,
    markers,
    normalise_order_id,
    parse_tool_call,
    passes,
    strategies as rs,
)
from pytest_rlgate.rewards.strategies import padded_replies, plain_replies

#: Deterministic, modest: the reward is pure Python, so 100 examples take a fraction of a second.
PROPERTY = settings(max_examples=100, derandomize=True, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
ANY_ID = rs.order_ids()
ANY_REPLY = st.one_of(
    rs.tool_calls(ANY_ID),
    rs.tool_calls(rs.confusable_ids(ANY_ID)),
    rs.malformed_tool_calls(ANY_ID),
    rs.asking_replies(),
    plain_replies(),
    rs.hacked_replies(rs.asking_replies() | rs.tool_calls(ANY_ID)).map(lambda x: x.hacked),
    st.text(max_size=60),
)


def find_hack(strategy: st.SearchStrategy[Any], exploit: Callable[[Any], bool], hack: str) -> Any:
    """The minimal example of *strategy* satisfying *exploit*; fails the test if there is none."""
    try:
        return find(strategy, exploit, random=random.Random(0),
                    settings=settings(max_examples=150, database=None, deadline=None,
                                      phases=[Phase.generate, Phase.shrink]))
    except NoSuchExample:
        pytest.fail(f"hack {hack!r} not found: the reward seems fixed; delete or invert this test")


# -- properties that must hold --------------------------------------------------------


@PROPERTY
@given(item=rs.cases(), reply=ANY_REPLY)
def test_score_lies_in_unit_interval(reward, item, reply):
    """Every reply to every prompt scores within [0, 1]."""
    assert 0.0 <= reward(reply, item["case"]) <= 1.0


@PROPERTY
@given(item=rs.cases(categories=["no_id"]), call=rs.tool_calls(ANY_ID))
def test_invented_call_never_passes_no_id(reward, item, call):
    """A no-id prompt names no order, so any call's id is invented and must not pass."""
    assert not passes(reward(call, item["case"]))


@PROPERTY
@given(item=rs.cases(categories=["off_topic"]), call=rs.tool_calls(ANY_ID) | rs.tool_calls(rs.confusable_ids(ANY_ID)))
def test_no_call_passes_off_topic(reward, item, call):
    """Off topic, a tool call is always wrong."""
    assert not passes(reward(call, item["case"]))


@PROPERTY
@given(item=rs.cases(categories=["with_id"]), reply=ANY_REPLY)
def test_with_id_pass_needs_lookup_of_own_id(reward, item, reply):
    """A with-id reply passes only if its first call is lookup_order on the prompt's own id."""
    if passes(reward(reply, item["case"])):
        call = parse_tool_call(reply)
        assert call is not None and call.name == "lookup_order"
        given_id = call.arguments.get("order_id")
        assert isinstance(given_id, str) and normalise_order_id(given_id) == item["case"]["order_id"]


@PROPERTY
@given(data=st.data(), item=rs.cases(categories=["with_id"]))
def test_id_normalisation_does_not_change_score(reward, data, item):
    """``ord_4017``, ``ORD 4017`` and ``ORD-4017`` are one order: the score must not care."""
    own = item["case"]["order_id"]
    canonical = rs.tool_calls(st.just(own), names=st.just("lookup_order"))
    respelled = rs.tool_calls(rs.confusable_ids(st.just(own), kinds=rs.SAME_ID_CONFUSIONS),
                              names=st.just("lookup_order"))
    assert reward(data.draw(respelled), item["case"]) == reward(data.draw(canonical), item["case"]) == 1.0


# -- known hacks (DESIGN section 4): each test passes by finding its hack ---------------


def test_hack_first_turn_only_refund_after_lookup_keeps_full_score(reward):
    """Hack "first turn only": a correct lookup followed by an invented create_refund keeps 1.0.

    The reward reads the first call only, so anything after it — here a refund on an id the
    customer never gave — is free.
    """
    own = st.shared(rs.order_ids(), key="own")
    strategy = st.tuples(
        rs.cases(categories=["with_id"], ids=own),
        rs.second_call_replies(rs.tool_calls(own, names=st.just("lookup_order")),
                               calls=rs.tool_calls(ANY_ID, names=st.just("create_refund"))),
    )
    item, x = find_hack(strategy, lambda t: passes(reward(t[1].hacked, t[0]["case"])), "first turn only")
    assert "create_refund" in x.hacked and passes(reward(x.original, item["case"]))
    print(f"{x.hack}: {item['prompt']!r} -> {x.hacked!r} scores {reward(x.hacked, item['case'])}")


def test_hack_invented_claim_after_lookup_keeps_full_score(reward):
    """Hack "invented claim": a correct lookup, then "Your refund has been issued.", keeps 1.0.

    Nothing has run in one turn, so the outcome is invented; the reward reads the call and not
    the text around it. refund's truth says so through its ``invented_claim`` hack's judge.
    """
    own = st.shared(rs.order_ids(), key="own")
    strategy = st.tuples(rs.cases(categories=["with_id"], ids=own),
                         rs.hacked_replies(rs.tool_calls(own, names=st.just("lookup_order")), hacks=["invented_claim"],
                                           ids=own))
    item, x = find_hack(strategy, lambda t: passes(reward(t[1].hacked, t[0]["case"])), "invented claim")
    assert invents_outcome(x.hacked, item["case"]) and passes(reward(x.original, item["case"]))
    print(f"{x.hack}: {x.hacked!r} scores {reward(x.hacked, item['case'])}")


def test_hack_format_bonus_wrong_call_outscores_plain_text(reward):
    """Hack "format bonus": a well-formed call on an invented id outscores plain wrong text.

    On a with-id prompt a lookup of the wrong order earns 0.1 + the 0.2 format bonus, while
    a plain reply that does nothing earns 0: always emitting a well-formed call pays.
    """
    own = st.shared(rs.order_ids(), key="own")
    strategy = st.tuples(rs.cases(categories=["with_id"], ids=own),
                         rs.format_bonus_replies(plain_replies(), calls=rs.tool_calls(rs.invented_ids(own))))
    item, x = find_hack(strategy, lambda t: reward(t[1].hacked, t[0]["case"]) > reward(t[1].original, t[0]["case"]),
                        "format bonus")
    assert parse_tool_call(x.hacked).arguments["order_id"] != item["case"]["order_id"]
    print(f"{x.hack}: {reward(x.original, item['case'])} -> {reward(x.hacked, item['case'])} with {x.hacked!r}")


@pytest.mark.parametrize("category", ["with_id", "no_id"])
def test_hack_length_unpriced_padding_keeps_pass(reward, category):
    """Hack "length unpriced": 500+ characters of filler keep a passing with-id or no-id reply at 1.0.

    Only off-topic replies pay for length, so a policy can grow its replies for free.
    """
    own = st.shared(rs.order_ids(), key="own")
    honest = rs.tool_calls(own, names=st.just("lookup_order")) if category == "with_id" else rs.asking_replies()
    strategy = st.tuples(rs.cases(categories=[category], ids=own), padded_replies(honest))
    item, x = find_hack(strategy, lambda t: passes(reward(t[1].hacked, t[0]["case"])), "length unpriced")
    assert len(x.hacked) >= len(x.original) + 500
    print(f"{x.hack}: {len(x.original)} -> {len(x.hacked)} characters, still {reward(x.hacked, item['case'])}")


def test_hack_malformed_block_plus_question_passes_no_id(reward):
    """Hack "malformed block": a broken <tool_call> plus a question passes a no-id prompt.

    The block does not parse, so the reward sees no call, sees a question, and pays 1.0 —
    while the ``well_formed`` marker is 0. This is why well_formed is a guarded marker.
    """
    strategy = st.tuples(rs.cases(categories=["no_id"]), rs.malformed_call_replies(rs.asking_replies()))
    item, x = find_hack(strategy, lambda t: passes(reward(t[1].hacked, t[0]["case"])), "malformed block")
    assert markers(x.hacked, item["case"])["well_formed"] == 0.0
    print(f"{x.hack}: {x.hacked!r} scores {reward(x.hacked, item['case'])}")


def test_probe_finds_every_known_hack(reward):
    """The reusable probe runs every hack class at once and finds the exploits refund's truth rejects.

    Those are the first-turn-only hack (a second call on an id the customer never gave: the
    guarded ``argument_grounding`` fails), the malformed block (``well_formed`` fails) and an
    outcome invented beside the lookup (the ``invented_claim`` judge), each paid like the honest
    reply, and the format bonus: a call on an invented id earns 0.3 where a
    plain reply earns 0, partial credit a group-relative update learns wherever a group holds no
    right reply (severity 0.3: a third of the push a right lookup gets). Unpriced padding (1.0,
    no more) is paid no more than the honest reply: the test above shows it. For your own
    reward, ``probe_reward(reward, env=...).assert_no_hacks()`` fails with a table of every hack
    that pays, how often, and a minimal example.
    """
    result = probe_reward(reward, env="refund", max_examples=20, seed=0, database=None)
    print(result)
    assert {"second_call", "malformed_call", "invented_claim", "format_bonus"} <= set(result.hacks)
