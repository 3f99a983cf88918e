"""Decontamination and the keep filter: exact rules, any environment, messy model-written input."""

from __future__ import annotations

import pytest

from pytest_rlgate.errors import DataError, UsageError
from pytest_rlgate.hygiene import decontaminate, keep_prompts, skip_decontamination, word_ngrams


def _item(prompt: str, sid: str = "s", category: str = "c") -> dict[str, str]:
    return {"prompt": prompt, "scenario_id": sid, "category": category}


HOLDOUT = _item("one two three four five six seven eight nine ten", "h1")


def test_word_ngrams_lowercase_and_short_fallback() -> None:
    assert word_ngrams("A b, C!", n=2) == {("a", "b"), ("b", "c")}
    assert word_ngrams("just three words", n=8) == {("just", "three", "words")}
    assert word_ngrams("   ", n=8) == set()


@pytest.mark.parametrize(
    ("train_text", "dropped"),
    [
        # all 3 of the holdout's 8-grams: coverage 1.0
        ("one two three four five six seven eight nine ten", True),
        # covers 2 of 3 grams = 0.67 < 0.8
        ("One two three four five six seven eight nine. Something else entirely", False),
        # a different prompt sharing a few words only
        ("one two three and then something else", False),
        # the holdout text inside a longer prompt still covers every gram
        ("hello there: one two three four five six seven eight nine ten, thanks a lot", True),
    ],
)
def test_decontaminate_coverage_rule(train_text: str, dropped: bool) -> None:
    result = decontaminate([_item(train_text, "t1")], [HOLDOUT])
    assert bool(result.dropped) is dropped
    assert len(result.kept) + len(result.dropped) == 1
    if dropped:
        assert result.dropped[0]["holdout_scenario_id"] == "h1"
        assert result.dropped[0]["coverage"] >= 0.8


def test_threshold_decides_partial_coverage() -> None:
    train = [_item("one two three four five six seven eight nine. Something else entirely", "t")]
    assert decontaminate(train, [HOLDOUT], threshold=0.6).dropped
    assert not decontaminate(train, [HOLDOUT], threshold=0.7).dropped


def test_short_holdout_prompts_match_word_for_word() -> None:
    holdout = [_item("Is Tokyo ahead of Berlin?", "h")]
    hit = decontaminate([_item("hey, is tokyo ahead of berlin? thanks", "t")], holdout)
    miss = decontaminate([_item("is berlin ahead of tokyo", "t")], holdout)
    assert len(hit.dropped) == 1 and not miss.dropped
    assert "under 8 words" in hit.summary()


def test_summary_and_record() -> None:
    result = decontaminate([_item(HOLDOUT["prompt"], "t"), _item("unrelated words here", "u")], [HOLDOUT])
    assert result.summary().startswith("decontamination: dropped 1 of 2 train prompts")
    record = result.to_dict()
    assert record["dropped"] == 1 and record["train_before"] == 2 and record["enabled"] is True
    off = skip_decontamination([HOLDOUT])
    assert off.summary() == "decontamination: off (1 train prompts kept unchecked)"


@pytest.mark.parametrize(("kwargs", "needle"), [({"n": 0}, "n must"), ({"threshold": 1.5}, "threshold")])
def test_decontaminate_rejects_bad_parameters(kwargs: dict, needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        decontaminate([], [], **kwargs)


def test_stratified_template_sets_drop_nothing() -> None:
    from pytest_rlgate.prompts import build_prompts, stratified_split

    for size in ("default", "large"):
        split = stratified_split(build_prompts(0, size), 0.2)
        assert decontaminate(split.train, split.holdout).dropped == []


# -- the keep filter ---------------------------------------------------------------------------

MESSY = [
    _item("I want a refund for order ORD-1234, the blender broke.", "with_id/a", "with_id"),
    _item("   I want   a refund for order ORD-1234,   the blender broke. ", "with_id/a", "with_id"),  # dup
    _item("What is the capital of Mongolia?", "with_id/b", "with_id"),  # off category: reads off_topic
    _item("refund?", "no_id/a", "no_id"),  # too short
    _item("", "no_id/b", "no_id"),  # empty
    _item("Réfund pour ma commande, s'il vous plaît: the order never came 📦", "no_id/c", "no_id"),
    _item("x " * 400 + "order", "no_id/d", "no_id"),  # too long
    _item("Can I return the jacket I bought? The order was last week.", "no_id/e", "no_id"),
    _item("Can I return the jacket I bought? The order was last week!", "no_id/f", "no_id"),  # near dup
    _item("How tall is Kilimanjaro in metres?", "off_topic/a", "off_topic"),
]


def test_keep_filter_on_messy_paraphrases() -> None:
    result = keep_prompts(MESSY, "refund")
    assert [item["scenario_id"] for item in result.kept] == ["with_id/a", "no_id/c", "no_id/e", "off_topic/a"]
    assert result.dropped == {"near_duplicate": 2, "off_category": 1, "too_short": 2, "too_long": 1}
    assert all(item["case"]["category"] == item["category"] for item in result.kept)
    assert result.summary() == ("keep filter: kept 4 of 10; dropped 2 near_duplicate, 1 off_category, "
                                "1 too_long, 2 too_short")


class _NoCaseFor:
    """An environment whose answer key lives in the case: nothing to read from text."""

    name = "answers"
    categories = ("easy", "hard")

    def score(self, reply: str, case: dict) -> float:
        return float(reply.strip() == case["answer"])


def test_keep_filter_without_case_for_skips_the_category_check() -> None:
    items = [_item("What is two plus two, in words please?", "a", "easy") | {"case": {"answer": "four"}},
             _item("What is two plus two, in words please??", "b", "easy")]
    result = keep_prompts(items, _NoCaseFor())
    assert [item["scenario_id"] for item in result.kept] == ["a"]
    assert result.kept[0]["case"] == {"answer": "four"}
    assert result.dropped == {"near_duplicate": 1}
    assert "category not checked" in result.summary()


def test_keep_filter_refuses_undeclared_categories_and_bad_lines() -> None:
    with pytest.raises(DataError, match=r"writer.jsonl:2: category 'medium' is not one of"):
        keep_prompts([_item("fine prompt text here", "a", "easy"), _item("another prompt text", "b", "medium")],
                     _NoCaseFor(), path="writer.jsonl")
    with pytest.raises(DataError, match="needs a string 'scenario_id'"):
        keep_prompts([{"prompt": "some prompt text", "category": "easy"}], _NoCaseFor())
