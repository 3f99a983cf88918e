"""Decontamination and the keep filter: exact rules, any environment, messy model-written input."""

from __future__ import annotations

import json
from pathlib import Path

import hypothesis  # noqa: F401 - keeps pytester runs fast (see tests/test_specs_plugin.py)
import pytest

from pytest_rlgate.cli import main
from pytest_rlgate.data.hygiene import (
    decontaminate,
    keep_prompts,
    skip_decontamination,
    word_ngrams,
)
from pytest_rlgate.data.prompts import (
    balance,
    build_prompts,
    prepare_split,
    read_prompts,
    stratified_split,
    write_prompts,
)
from pytest_rlgate.errors import DataError, UsageError


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
    for size in ("default", "large"):
        split = stratified_split(build_prompts(0, size), None)  # the environment's own shares
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
             _item("What is two plus two, in words please??", "b", "easy") | {"case": {"answer": "four"}}]
    result = keep_prompts(items, _NoCaseFor())
    assert [item["scenario_id"] for item in result.kept] == ["a"]
    assert result.kept[0]["case"] == {"answer": "four"}
    assert result.dropped == {"near_duplicate": 1}
    assert "category not checked" in result.summary()


def test_keep_filter_refuses_undeclared_categories_and_bad_lines() -> None:
    with pytest.raises(DataError, match=r"writer.jsonl:2: category 'medium' is not one of"):
        keep_prompts([_item("fine prompt text here", "a", "easy") | {"case": {"answer": "x"}},
                      _item("another prompt text", "b", "medium") | {"case": {"answer": "y"}}],
                     _NoCaseFor(), path="writer.jsonl")
    with pytest.raises(DataError, match="needs a non-empty string 'scenario_id'"):
        keep_prompts([{"prompt": "some prompt text", "category": "easy"}], _NoCaseFor())
    with pytest.raises(DataError, match=r"writer.jsonl:7: no \"case\" object, and environment answers reads none"):
        keep_prompts([_item("What is two plus two, in words please?", "a", "easy")], _NoCaseFor(),
                     path="writer.jsonl", lines=[7])


# -- the keep filter on the second environment (arith: no case_for, cases in the file) ----------

ADD = {"category": "add", "answer": 14, "numbers": [9, 5]}
ARITH_MESSY = [
    _item("Dara asks: what is 9 + 5? Final answer please.", "add/9-5/Dara", "add") | {"case": ADD},
    _item("Dara asks: what is 9 + 5? Final answer please!", "add/9-5/Dara", "add") | {"case": ADD},  # near dup
    _item("9+5?", "add/9-5/Dara", "add") | {"case": ADD},  # too short
    _item("Eli counted 9 stamps, then 4 stamps.\u2028Which count is larger?", "compare/9-4/Eli", "compare")
    | {"case": {"category": "compare", "answer": 9, "numbers": [9, 4]}},  # a unicode line separator inside
    # off its category by the text, but arith cannot read text: the check is skipped and it stays
    _item("What is the capital of Mongolia, please tell me?", "unanswerable/3/Ana", "unanswerable")
    | {"case": {"category": "unanswerable", "answer": None, "numbers": [3]}},
]


def test_keep_filter_on_arith_skips_the_category_check_and_says_so() -> None:
    result = keep_prompts(ARITH_MESSY, "arith")
    assert [item["category"] for item in result.kept] == ["add", "compare", "unanswerable"]
    assert result.dropped == {"near_duplicate": 1, "too_short": 1} and result.checked_category is False
    assert result.kept[0]["case"] == ADD and result.kept[0]["scenario_id"] == "add/9-5/Dara"
    assert result.summary() == ("keep filter: kept 3 of 5; dropped 1 near_duplicate, 1 too_short "
                                "(category not checked: the environment has no case_for)")


# -- one split for every surface: split, decontaminate, balance ---------------------------------

#: train prompts decontamination drops from the seed-0 stratified split, per environment and size
#: (docs/prompts.md quotes them): refund's template scenarios never repeat a holdout prompt; arith's
#: large set has two sums whose paraphrase differs from a held-out one by one number only.
DROPPED = {("refund", "default"): (0, 119), ("refund", "large"): (0, 590),
           ("arith", "default"): (0, 96), ("arith", "large"): (2, 704)}


@pytest.mark.parametrize(("env", "size"), sorted(DROPPED))
def test_decontamination_counts_on_the_default_and_large_sets(env: str, size: str) -> None:
    prepared = prepare_split(build_prompts(0, size, env=env), None, env=env)
    dropped, before = DROPPED[(env, size)]
    record = prepared.decontamination.to_dict()
    assert (record["dropped"], record["train_before"]) == (dropped, before)
    assert len(prepared.tasks) == before - dropped and prepared.train == prepared.tasks  # no balance asked
    assert record["summary"].startswith(f"decontamination: dropped {dropped} of {before} train prompts")
    if (env, size) == ("arith", "large"):
        assert {d["scenario_id"] for d in record["dropped_prompts"]} == {"add/4-6/Farah", "add/6-7/Hana"}
        assert all(d["coverage"] >= 0.8 for d in record["dropped_prompts"])


def _planted(env: str) -> tuple[list[dict], str]:
    """The env's default set plus one train-side scenario whose prompt repeats a holdout prompt."""
    items = build_prompts(0, "default", env=env)
    held = stratified_split(items, None, env=env).holdout[0]
    for n in range(50):
        copy = {**held, "prompt": "Hello again! " + held["prompt"], "scenario_id": f"planted-{n}"}
        split = stratified_split([*items, copy], None, env=env)
        if copy in split.train and held in split.holdout:
            return [*items, copy], copy["prompt"]
    raise AssertionError("no scenario id lands the planted copy in train")


@pytest.mark.parametrize("env", ["refund", "arith"])
def test_a_train_prompt_repeating_a_holdout_prompt_is_dropped_before_balance(env: str) -> None:
    items, planted = _planted(env)
    prepared = prepare_split(items, None, env=env, share=0.3)
    assert [d["prompt"] for d in prepared.decontamination.dropped] == [planted]
    assert planted not in {item["prompt"] for item in prepared.train}  # balance never repeats it
    assert len(prepared.train) > len(prepared.tasks)
    kept = prepare_split(items, None, env=env, share=0.3, decontaminate_train=False)
    assert planted in {item["prompt"] for item in kept.tasks}
    assert kept.decontamination.summary().startswith("decontamination: off")
    narrowed = prepared.with_tasks(prepared.tasks[:10])  # a next round narrows the tasks: balanced afresh
    assert narrowed.tasks == prepared.tasks[:10] and narrowed.train == balance(prepared.tasks[:10], 0.3)
    assert narrowed.holdout == prepared.holdout


# -- the surfaces: rlgate prompts, the fixtures, rlgate prompts --keep ---------------------------

@pytest.mark.parametrize("env", ["refund", "arith"])
def test_rlgate_prompts_reports_and_applies_decontamination(env: str, tmp_path: Path, capsys) -> None:
    items, planted = _planted(env)
    source = tmp_path / "planted.jsonl"
    write_prompts(source, items)
    assert main(["prompts", "--env", env, "--prompts-file", str(source), "--out-dir", str(tmp_path / "on")]) == 0
    out = capsys.readouterr().out
    assert f"decontamination: dropped 1 of {len(items) - len(stratified_split(items, None, env=env).holdout)}" in out
    assert planted not in (tmp_path / "on" / "train.jsonl").read_text(encoding="utf-8")
    assert main(["prompts", "--env", env, "--prompts-file", str(source), "--no-decontaminate",
                 "--out-dir", str(tmp_path / "off")]) == 0
    out = capsys.readouterr().out
    assert "--no-decontaminate ->" in out and "decontamination: off (" in out
    assert planted in (tmp_path / "off" / "train.jsonl").read_text(encoding="utf-8")


def _jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" if not isinstance(row, str) else row + "\n"
                            for row in rows), encoding="utf-8")
    return path


def _refund_written() -> list[dict]:
    """MESSY plus enough clean paraphrases per category that the kept set splits."""
    clean = [_item(text, f"with_id/{i}", "with_id") for i, text in enumerate((
        "Please check order ORD-4101, the lamp arrived with a cracked shade.",
        "Where is my parcel? Tracking for ORD-4102 has not moved in a week.",
        "I want to return ORD-4103 because the shoes are two sizes too small.",
        "Cancel ORD-4104 please, I picked the wrong colour by mistake."))]
    clean += [_item(text, f"no_id/{i}", "no_id") for i, text in enumerate((
        "My refund never showed up on my card, can you help?", "The parcel was damaged and I want a refund for it.",
        "I was charged twice for the same purchase last month."))]
    clean += [_item(text, f"off_topic/{i}", "off_topic") for i, text in enumerate((
        "Can you recommend a good book about sailing?", "What is a nice name for a grey cat?"))]
    return [row for row in MESSY if row["prompt"]] + clean + [_item("", "no_id/empty", "no_id")]


def test_rlgate_prompts_keep_filters_a_written_refund_file(tmp_path: Path, capsys) -> None:
    source = _jsonl(tmp_path / "written.jsonl", _refund_written())
    out = tmp_path / "set"
    assert main(["prompts", "--keep", str(source), "--out-dir", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith(f"rlgate prompts --keep {source} --split stratified")
    # MESSY's drops (the empty line is one more too_short); every clean paraphrase stays
    assert printed[2] == ("keep filter: kept 13 of 19; dropped 2 near_duplicate, 1 off_category, 1 too_long, "
                          "2 too_short")
    assert printed[3].startswith("decontamination: dropped 0 of")
    kept = read_prompts(out / "prompts.jsonl")
    assert {item["scenario_id"] for item in kept} >= {"with_id/a", "no_id/c", "no_id/e", "off_topic/a"}
    assert all(item["case"]["category"] == item["category"] for item in kept)


@pytest.mark.parametrize(("lines", "needle"), [
    (["{\"prompt\": \"fine prompt text here\", \"scenario_id\": \"a\", \"category\": \"no_id\"}", "", "nope"],
     ":3: not valid JSON: Expecting value (column 1)"),
    (["", "{\"prompt\": \"fine prompt text here\", \"scenario_id\": \"a\", \"category\": \"refunds\"}"],
     ":2: category 'refunds' is not one of environment refund's categories"),
    (["{\"prompt\": \"fine prompt text here\", \"category\": \"no_id\"}"],
     ":1: needs a non-empty string 'scenario_id'"),
    (["[" * 100_000], ":1: nested deeper than 64 levels"),
    (["{\"prompt\": \"short\", \"scenario_id\": \"a\", \"category\": \"no_id\"}"],
     "the keep filter kept none of the prompts (keep filter: kept 0 of 1; dropped 1 too_short)"),
])
def test_rlgate_prompts_keep_names_the_bad_line(lines: list[str], needle: str, tmp_path: Path, capsys) -> None:
    source = _jsonl(tmp_path / "written.jsonl", lines)
    assert main(["prompts", "--keep", str(source), "--out-dir", str(tmp_path / "set")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rlgate prompts: error: {source}") and needle in err and err.count("\n") == 1
    assert not (tmp_path / "set").exists()


def test_rlgate_prompts_keep_on_arith_keeps_the_files_cases(tmp_path: Path, capsys) -> None:
    written = [{**item, "prompt": "Quick one: " + item["prompt"]} for item in build_prompts(0, "small", env="arith")]
    source = _jsonl(tmp_path / "written.jsonl", [*written, *ARITH_MESSY])
    assert main(["prompts", "--env", "arith", "--keep", str(source), "--out-dir", str(tmp_path / "set")]) == 0
    printed = capsys.readouterr().out
    assert "keep filter: kept 35 of 37; dropped 1 near_duplicate, 1 too_short (category not checked: the " \
           "environment has no case_for)" in printed
    kept = read_prompts(tmp_path / "set" / "prompts.jsonl", env="arith")
    assert kept[0]["case"] == written[0]["case"] and kept[0]["scenario_id"] == written[0]["scenario_id"]
    line = {"prompt": "Dara asks: what is 9 + 5?", "scenario_id": "a", "category": "add"}
    bad = _jsonl(tmp_path / "bad.jsonl", [line])
    assert main(["prompts", "--env", "arith", "--keep", str(bad), "--out-dir", str(tmp_path / "bad")]) == 2
    assert f"{bad}:1: no \"case\" object, and environment arith reads none" in capsys.readouterr().err


USES_SPLIT = """
import json, os

def test_dump(rlgate_split):
    with open(os.environ["RLGATE_DUMP"], "w") as f:
        json.dump([item["prompt"] for item in rlgate_split.train], f)
"""


@pytest.mark.parametrize("env", ["refund", "arith"])
def test_the_fixtures_decontaminate_and_the_header_says_how_many(pytester: pytest.Pytester, env: str) -> None:
    items, planted = _planted(env)
    write_prompts(pytester.path / "planted.jsonl", items)
    pytester.makepyfile(test_uses=USES_SPLIT)
    dump = pytester.path / "train.json"
    base = ["-p", "no:cacheprovider", f"--rlgate-env={env}", "--rlgate-prompts-file=planted.jsonl"]
    train_before = len(items) - len(stratified_split(items, None, env=env).holdout)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RLGATE_DUMP", str(dump))
        on = pytester.runpytest(*base)
        on.assert_outcomes(passed=1)
        on.stdout.fnmatch_lines([f"rlgate: decontamination: dropped 1 of {train_before} train prompts (*"])
        assert planted not in json.loads(dump.read_text(encoding="utf-8"))
        off = pytester.runpytest(*base, "--rlgate-no-decontaminate")
        off.stdout.fnmatch_lines(["rlgate: env=* --rlgate-no-decontaminate prompts=*",
                                  f"rlgate: decontamination: off ({train_before} train prompts kept unchecked)"])
        assert planted in json.loads(dump.read_text(encoding="utf-8"))
        pytester.makeini("[pytest]\nrlgate_no_decontaminate = true\n")
        pytester.runpytest(*base).stdout.fnmatch_lines(["rlgate: decontamination: off (*"])


def test_a_bad_ini_value_of_the_switch_is_a_one_line_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nrlgate_no_decontaminate = maybe\n")
    pytester.makepyfile(test_x="def test_x(): pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: ini setting rlgate_no_decontaminate: invalid truth value 'maybe'; *"])
