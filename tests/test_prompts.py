"""Prompt sets: refund's seeded writer (determinism, counts), files, fingerprint, splits and
balance, and the same data path driven by a user's own environment (``_calc_env``)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from _calc_env import CalcEnv, SumsEnv, calc_items, write_calc_prompts

from pytest_rlgate.data.prompts import (
    Split,
    balance,
    build_prompts,
    canonical_bytes,
    count_by_category,
    fingerprint,
    plain_split,
    read_prompts,
    stratified_split,
    write_prompts,
)
from pytest_rlgate.environment.contract import load_env
from pytest_rlgate.envs.refund import CATEGORIES, case_for, templates
from pytest_rlgate.envs.refund.templates import PROMPT_SIZES as SIZES
from pytest_rlgate.errors import DataError, UsageError

#: Golden fingerprints: changing them changes every seeded holdout, so bump them on purpose only.
GOLDEN = {
    "small": "sha256:d99e401b1801131f8fcba8afa26a1703f715caad514a51994da7ab882ee0fc58",
    "default": "sha256:c952872709c1a22d5359a78f6306f048a93ffe084dcefbb828d6400f694ede6c",
    "large": "sha256:890ca2bf1ed2d45359cbbc9eeefe0c33c17061ef3f554692a7c22faa4362cdcb",
}
ROOT = Path(__file__).resolve().parents[1]


def _bytes_elsewhere(python: str, hashseed: str) -> subprocess.CompletedProcess[bytes]:
    code = ("import sys\nfrom pytest_rlgate.data.prompts import build_prompts, canonical_bytes\n"
            "sys.stdout.buffer.write(b''.join(canonical_bytes(build_prompts(0, s)) for s in "
            "('small', 'default', 'large')))")
    env = {**os.environ, "PYTHONHASHSEED": hashseed, "PYTHONPATH": str(ROOT)}
    return subprocess.run([python, "-c", code], capture_output=True, env=env, timeout=120, check=False)


def _all_sizes_bytes() -> bytes:
    return b"".join(canonical_bytes(build_prompts(0, size)) for size in ("small", "default", "large"))


# --------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("size", sorted(GOLDEN))
def test_golden_fingerprint_of_seed_0(size: str) -> None:
    assert fingerprint(build_prompts(0, size)) == GOLDEN[size]


def test_same_bytes_under_another_hash_seed_in_another_process() -> None:
    out = _bytes_elsewhere(sys.executable, "12345")
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout == _all_sizes_bytes()


def _other_pythons() -> list[str]:
    """Interpreters of other minor versions >= 3.10 on this machine (pyenv or PATH)."""
    found = {str(p) for p in Path.home().glob(".pyenv/versions/3.1[0-9]*/bin/python3")}
    found |= {p for m in range(10, 15) if (p := shutil.which(f"python3.{m}")) and "/shims/" not in p}
    return sorted(found)


def test_same_bytes_on_other_python_versions() -> None:
    expected = _all_sizes_bytes()
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    checked = []
    for python in _other_pythons():
        probe = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                               capture_output=True, text=True, check=False, timeout=60)
        version = probe.stdout.strip()
        if probe.returncode != 0 or version == here or tuple(map(int, version.split("."))) < (3, 10):
            continue
        out = _bytes_elsewhere(python, "0")
        assert out.returncode == 0, (python, out.stderr.decode())
        assert out.stdout == expected, python
        checked.append(version)
    if not checked:
        pytest.skip("no other Python >= 3.10 on this machine")


def test_seeds_differ_and_repeat() -> None:
    assert canonical_bytes(build_prompts(1)) == canonical_bytes(build_prompts(1))
    assert fingerprint(build_prompts(1)) != fingerprint(build_prompts(0))


def test_build_returns_fresh_lists() -> None:
    first = build_prompts(0)
    first[0]["prompt"] = "changed"
    assert build_prompts(0)[0]["prompt"] != "changed"


# --------------------------------------------------------------------------- shape and counts


@pytest.mark.parametrize("seed", [0, 1, 7, 2**40])
@pytest.mark.parametrize("size", sorted(SIZES))
def test_counts_per_category_are_exact_and_imbalanced(seed: int, size: str) -> None:
    items = build_prompts(seed, size)
    expected = {category: n_prompts for category, (_, n_prompts) in SIZES[size].items()}
    assert count_by_category(items) == dict(sorted(expected.items()))
    scenarios = {category: len({i["scenario_id"] for i in items if i["category"] == category}) for category in expected}
    assert scenarios == {category: n for category, (n, _) in SIZES[size].items()}
    assert expected["with_id"] > expected["no_id"] > expected["off_topic"]


def test_default_set_is_like_the_seed_and_large_has_many_prompts_per_scenario() -> None:
    default = build_prompts(0)
    assert len(default) == 197 >= 60
    large = build_prompts(0, "large")
    per_scenario = Counter(item["scenario_id"] for item in large)
    assert len(large) == 1012 and len(per_scenario) == 98
    assert min(per_scenario.values()) >= 9


@pytest.mark.parametrize("size", sorted(SIZES))
def test_items_carry_the_case_of_their_own_text(size: str) -> None:
    for item in build_prompts(3, size):
        assert set(item) == {"prompt", "case", "category", "scenario_id"}
        assert item["case"] == case_for(item["prompt"])
        assert item["category"] == item["case"]["category"] == item["scenario_id"].split("/")[0]
        assert item["prompt"] == item["prompt"].strip() and "  " not in item["prompt"]


@pytest.mark.parametrize("size", sorted(SIZES))
def test_no_duplicates_ignoring_case_and_whitespace(size: str) -> None:
    keys = [" ".join(item["prompt"].lower().split()) for item in build_prompts(0, size)]
    assert len(keys) == len(set(keys))


def test_a_scenario_keeps_one_order_id_across_its_paraphrases() -> None:
    ids: dict[str, set[str]] = {}
    for item in build_prompts(0, "large"):
        if item["category"] == "with_id":
            ids.setdefault(item["scenario_id"], set()).add(item["case"]["order_id"])
    assert all(len(found) == 1 for found in ids.values())


def test_order_ids_are_mostly_canonical_four_digit_with_other_spellings_too() -> None:
    spelled = [re.search(r"\bORD[-_ ]?\d{3,6}\b", item["prompt"], re.IGNORECASE).group()  # type: ignore[union-attr]
               for item in build_prompts(0, "large") if item["category"] == "with_id"]
    canonical = [s for s in spelled if re.fullmatch(r"ORD-[1-9]\d{3}", s)]
    assert 0.65 < len(canonical) / len(spelled) < 0.95
    others = set(spelled) - set(canonical)
    assert any(s.startswith("ord") for s in others)  # lower case
    assert any(s[3] in "_ " for s in others)  # other separators
    assert {len(re.sub(r"\D", "", s)) for s in spelled} == {3, 4, 5, 6}


def test_every_template_renders_to_its_category() -> None:
    """All phrasings x openers x closers x items, not only the ones seed 0 happens to pick."""
    for with_id, no_id in templates._INTENTS.values():
        for openers, closers in templates._STANCES.values():
            for body in no_id:
                for opener in openers:
                    for closer in closers:
                        text = " ".join(p for p in (opener, body.replace("{item}", "blender"), closer) if p)
                        assert case_for(text)["category"] == "no_id", text
            for body in with_id:
                for spelling, _ in templates._ID_SPELLINGS:
                    filled = body.replace("{item}", "yoga mat").replace("{id}", spelling + "123456")
                    text = " ".join((openers[-1], filled, closers[-1]))
                    assert case_for(text)["order_id"] == "ORD-123456", text
    for bodies in templates._TOPICS.values():
        for openers, closers in templates._OFF_TOPIC_STANCES.values():
            for body in bodies:
                for opener in openers:
                    for closer in closers:
                        text = " ".join(p for p in (opener, body, closer) if p)
                        assert case_for(text)["category"] == "off_topic", text


@pytest.mark.parametrize(("seed", "size"), [(0, "huge"), ("0", "default"), (True, "default"), (1.5, "default")])
def test_bad_arguments_are_usage_errors(seed: object, size: str) -> None:
    with pytest.raises(UsageError):
        build_prompts(seed, size)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- files


def test_write_is_canonical_and_read_round_trips(tmp_path: Path) -> None:
    items = build_prompts(0, "small")
    path = tmp_path / "deep" / "prompts.jsonl"
    assert write_prompts(path, items) == fingerprint(items) == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    data = path.read_bytes()
    assert data.endswith(b"\n") and b"\r" not in data
    first = json.loads(data.splitlines()[0])
    assert list(first) == sorted(first)
    assert read_prompts(path) == items
    assert fingerprint(read_prompts(path)) == fingerprint(items)
    assert [p.name for p in path.parent.iterdir()] == ["prompts.jsonl"]  # no temp file left behind


def test_written_text_is_utf8_not_escaped(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    write_prompts(path, [{"prompt": "Rückerstattung für ORD-1234 bitte", "scenario_id": "de"}])
    assert "Rückerstattung".encode() in path.read_bytes()


def test_read_keeps_the_files_case_and_category_fills_missing_ones_and_keeps_extra_keys(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(
        '{"prompt": "please check ORD-4017", "category": "off_topic", "case": {"order_id": null}, "source": "mine"}\n'
        "\n"
        '{"prompt": "  How  tall is Kilimanjaro? ", "scenario_id": "k"}\n'
        '{"prompt": "please check ORD-4017 now", "category": "no_id"}\n',
        encoding="utf-8",
    )
    labelled, plain, relabelled = read_prompts(path)
    # the user's own labels win over what the environment would read from the text
    assert labelled["category"] == "off_topic" and labelled["case"] == {"order_id": None}
    assert labelled["source"] == "mine"
    assert labelled["scenario_id"] == "please check ord-4017"
    assert plain["scenario_id"] == "k" and plain["category"] == "off_topic"
    assert plain["case"] == case_for("  How  tall is Kilimanjaro? ")  # filled by the env's case_for
    assert relabelled["category"] == "no_id" and relabelled["case"] == case_for("please check ORD-4017 now")


def test_read_refuses_a_prompt_an_earlier_line_holds(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    line = '{"prompt": "please refund ORD-4017", "scenario_id": "s1", "category": "with_id"}\n'
    path.write_text(line + '{"prompt": "please refund ORD-4017", "scenario_id": "s2", "category": "with_id"}\n'
                    + line, encoding="utf-8")
    with pytest.raises(DataError, match=r":3: 1 bad line\(s\): line 3: repeats the prompt of line 1 \(scenario 's1'\)"):
        read_prompts(path)


def test_read_reports_every_bad_line_by_number(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "fine refund"}\n{"prompt": 3}\nnot json\n[1]\n{"prompt": "x", "scenario_id": 4}\n',
                    encoding="utf-8")
    with pytest.raises(DataError) as exc:
        read_prompts(path)
    message = str(exc.value)
    assert message.startswith(f"{path}:2: 4 bad line(s)")
    for needle in ("line 2: needs a non-empty string", "line 3: not valid JSON", "line 4: expected a JSON object",
                   "line 5: \"scenario_id\" must be"):
        assert needle in message


@pytest.mark.parametrize(("content", "needle"), [("", "no prompts"), ("\n\n", "no prompts"),
                                                 (b"\xff\xfe", "not UTF-8")])
def test_read_rejects_empty_and_undecodable_files(tmp_path: Path, content: str | bytes, needle: str) -> None:
    path = tmp_path / "p.jsonl"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    with pytest.raises(DataError, match=needle):
        read_prompts(path)


def test_read_missing_file_names_the_remedy(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="rlgate prompts"):
        read_prompts(tmp_path / "missing.jsonl")


# --------------------------------------------------------------------------- splits


def _synthetic(counts: dict[str, int], per_scenario: int = 1) -> list[dict[str, object]]:
    return [{"prompt": f"{c} {s} {k}", "category": c, "scenario_id": f"{c}-{s}"}
            for c, n in counts.items() for s in range(n) for k in range(per_scenario)]


@pytest.mark.parametrize("size", sorted(SIZES))
def test_stratified_split_holds_out_every_category_by_the_formula(size: str) -> None:
    items = build_prompts(0, size)
    split = stratified_split(items, 0.2)
    assert isinstance(split, Split) and len(split.train) + len(split.holdout) == len(items)
    for category, (n_scenarios, _) in SIZES[size].items():
        held = {i["scenario_id"] for i in split.holdout if i["category"] == category}
        kept = {i["scenario_id"] for i in split.train if i["category"] == category}
        assert not held & kept
        assert len(held) == max(min(2, n_scenarios - 1), round(0.2 * n_scenarios))
    assert [i for i in items if i in split.holdout] == split.holdout  # order kept


def test_stratified_split_counts_of_the_default_and_large_sets() -> None:
    """The environment's own shares hold out 24/30/24 scenarios and train on 95/16/8: the train side
    keeps the reference run's imbalance, the holdout can see a drop in each category."""
    default = stratified_split(build_prompts(0))
    assert count_by_category(default.train) == {"no_id": 16, "off_topic": 8, "with_id": 95}
    assert count_by_category(default.holdout) == {"no_id": 30, "off_topic": 24, "with_id": 24}
    large = stratified_split(build_prompts(0, "large"))
    assert (len(large.train), len(large.holdout)) == (590, 422)
    uniform = stratified_split(build_prompts(0), 0.2)  # a fraction given holds out that share of every category
    assert count_by_category(uniform.holdout) == {"no_id": 9, "off_topic": 6, "with_id": 24}


def test_an_environments_holdout_shares_are_checked_against_its_categories() -> None:
    class Env:
        name, categories = "shares", ("a", "b")
        holdout_shares = {"a": 0.5, "c": 0.5}

        def score(self, reply: str, case: object) -> float:
            return 1.0

    with pytest.raises(UsageError, match=r"'holdout_shares' names 'c', not among its categories \(a, b\)"):
        load_env(Env())
    Env.holdout_shares = {"a": 1.5}
    with pytest.raises(UsageError, match="strictly between 0 and 1"):
        load_env(Env())


def test_stratified_ranking_is_sha256_of_category_and_scenario() -> None:
    items = _synthetic({"no_id": 10, "off_topic": 10, "with_id": 10})
    split = stratified_split(items, 0.2)
    for category in CATEGORIES:
        ids = sorted({f"{category}-{s}" for s in range(10)},
                     key=lambda sid: hashlib.sha256(f"{category}:{sid}".encode()).hexdigest())
        assert {i["scenario_id"] for i in split.holdout if i["category"] == category} == set(ids[:2])


@pytest.mark.parametrize(("scenarios", "held"), [(2, 1), (3, 2), (5, 2), (10, 2), (13, 3), (20, 4), (95, 19)])
def test_stratified_holds_the_formula_and_always_leaves_one_in_train(scenarios: int, held: int) -> None:
    items = _synthetic({"no_id": scenarios, "off_topic": 3, "with_id": 3}, per_scenario=2)
    split = stratified_split(items, 0.2)
    assert len({i["scenario_id"] for i in split.holdout if i["category"] == "no_id"}) == held
    assert sum(i["category"] == "no_id" for i in split.holdout) == 2 * held


def test_round_half_to_even_like_python() -> None:
    # 0.5 * 5 = 2.5 rounds to 2 and 0.5 * 7 = 3.5 rounds to 4 (half to even), as in the seed
    split = stratified_split(_synthetic({"no_id": 5, "off_topic": 7, "with_id": 3}), 0.5)
    assert count_by_category(split.holdout) == {"no_id": 2, "off_topic": 4, "with_id": 2}


def test_a_declared_category_missing_from_the_holdout_is_an_error() -> None:
    with pytest.raises(DataError, match=r"no off_topic prompts: off_topic \(1 scenario"):
        stratified_split(_synthetic({"no_id": 5, "off_topic": 1, "with_id": 5}))
    with pytest.raises(DataError, match=r"no off_topic prompts: off_topic \(0 scenario"):
        stratified_split(_synthetic({"no_id": 5, "with_id": 5}))


def test_categories_default_to_the_environments_or_can_be_named() -> None:
    items = _synthetic({"a": 4, "b": 1})
    with pytest.raises(DataError, match="no no_id, off_topic, with_id prompts"):
        stratified_split(items)  # the default environment declares its own categories
    with pytest.raises(DataError, match="no b prompts"):
        stratified_split(items, categories=["a", "b"])
    split = stratified_split(items, categories=["a"])
    assert count_by_category(split.holdout) == {"a": 2}


def test_plain_split_buckets_by_sha256_of_the_scenario() -> None:
    items = build_prompts(0)
    split = plain_split(items)
    for item in items:
        bucket = int(hashlib.sha256(item["scenario_id"].encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
        assert (item in split.holdout) == (bucket < 0.2)


@pytest.mark.parametrize("fraction", [0, 1, -0.1, 1.5])
def test_fraction_must_be_inside_zero_one(fraction: float) -> None:
    with pytest.raises(UsageError):
        stratified_split(build_prompts(0), fraction)
    with pytest.raises(UsageError):
        plain_split(build_prompts(0), fraction)


# --------------------------------------------------------------------------- balance


def test_balance_reproduces_the_seed_arithmetic() -> None:
    """Seed: the stratified train split 544 = 446/59/39 becomes 857 = 446/177/234 at 0.25."""
    train = _synthetic({"with_id": 446, "no_id": 59, "off_topic": 39})
    balanced = balance(train, 0.25)
    assert len(balanced) == 857
    assert count_by_category(balanced) == {"no_id": 177, "off_topic": 234, "with_id": 446}
    assert balanced[:544] == train  # originals first, in order
    assert balanced[544:544 + 59] == [i for i in train if i["category"] == "no_id"]


def test_balance_seed_pins() -> None:
    balanced = balance(_synthetic({"with_id": 18, "no_id": 3, "off_topic": 3}), 0.25)
    counts = count_by_category(balanced)
    assert counts["with_id"] == 18
    assert all(counts[c] / len(balanced) >= 0.25 for c in ("no_id", "off_topic"))
    single = balance(_synthetic({"with_id": 100, "no_id": 1}), 0.25)
    assert count_by_category(single) == {"no_id": 6, "with_id": 100}  # capped at 6 copies


def test_balance_repeats_are_copies() -> None:
    train = _synthetic({"with_id": 5, "no_id": 1})
    balanced = balance(train, 0.3)
    balanced[-1]["prompt"] = "edited"
    assert train[-1]["prompt"] != "edited"


def test_balance_is_a_no_op_at_zero_share_or_on_empty_input() -> None:
    train = _synthetic({"with_id": 5, "no_id": 1})
    assert balance(train, 0.0) == train and balance(train, 0.0) is not train
    assert balance([], 0.25) == []


@pytest.mark.parametrize(("share", "max_repeat"), [(1.0, 6), (-0.1, 6), (0.25, 0)])
def test_balance_rejects_bad_arguments(share: float, max_repeat: int) -> None:
    with pytest.raises(UsageError):
        balance(_synthetic({"a": 1}), share, max_repeat)


def test_balanced_default_split() -> None:
    split = stratified_split(build_prompts(0))
    assert count_by_category(balance(split.train, 0.25)) == {"no_id": 48, "off_topic": 48, "with_id": 95}


def test_the_refund_environment_offers_the_writers_sizes() -> None:
    assert load_env(None).prompt_sizes == tuple(SIZES) == ("small", "default", "large")


# --------------------------------------------------------------------------- a user's own environment


def test_a_users_file_keeps_its_cases_and_categories(tmp_path: Path) -> None:
    path = write_calc_prompts(tmp_path / "calc.jsonl")
    items = read_prompts(path, env=CalcEnv)
    assert items == calc_items()
    assert count_by_category(items) == {"arithmetic": 5, "unanswerable": 5, "word_problem": 5}
    assert read_prompts(path, env="_calc_env:CalcEnv") == items  # a spec string works the same


def test_a_category_the_environment_does_not_declare_names_the_file_and_line(tmp_path: Path) -> None:
    path = write_calc_prompts(tmp_path / "calc.jsonl")
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[3] = json.dumps({"prompt": "What is 2 + 2?", "case": {"answer": 4}, "category": "geometry"})
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as exc:
        read_prompts(path, env=CalcEnv)
    assert str(exc.value).startswith(f"{path}:4: 1 bad line(s): line 4: category 'geometry' is not one of "
                                     "environment calc's categories (arithmetic, unanswerable, word_problem)")
    with pytest.raises(DataError, match=r":1: .*line 1: category 'arithmetic' is not one of environment refund"):
        read_prompts(write_calc_prompts(tmp_path / "again.jsonl"))  # the default environment is not calc


def test_the_environments_case_for_fills_only_lines_without_a_case(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "What is 2 + 3?"}\n'
                    '{"prompt": "What is 2 + 3?", "case": {"answer": 6}, "category": "word_problem", '
                    '"scenario_id": "mine"}\n', encoding="utf-8")
    filled, kept = read_prompts(path, env=SumsEnv)
    assert (filled["case"], filled["category"]) == ({"answer": 5, "category": "arithmetic"}, "arithmetic")
    assert (kept["case"], kept["category"]) == ({"answer": 6}, "word_problem")  # as written, even if "wrong"


def test_a_line_without_a_case_needs_an_environment_that_reads_one(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "What is 1 + 1?", "category": "arithmetic", "case": {"answer": 2}}\n'
                    '{"prompt": "What is 2 + 2?", "category": "arithmetic"}\n'
                    '{"prompt": "What is 3 + 3?", "case": {"answer": 6}}\n'
                    '{"prompt": "What is 4 + 4?", "case": [8], "category": "arithmetic"}\n', encoding="utf-8")
    with pytest.raises(DataError) as exc:
        read_prompts(path, env=CalcEnv)
    message = str(exc.value)
    assert message.startswith(f"{path}:2: 3 bad line(s): line 2: no \"case\", and environment calc reads none "
                              "from the text (it has no case_for)")
    assert 'line 3: no "category" (and its case names none); add "category": one of arithmetic, ' in message
    assert 'line 4: "case" must be a JSON object, got list' in message


def test_splits_hold_out_every_category_the_environment_declares() -> None:
    items = calc_items(per_category=5)
    split = stratified_split(items, env=CalcEnv)
    assert count_by_category(split.holdout) == {"arithmetic": 2, "unanswerable": 2, "word_problem": 2}
    no_problems = [i for i in items if i["category"] != "word_problem"]
    with pytest.raises(DataError, match=r"no word_problem prompts: word_problem \(0 scenario"):
        stratified_split(no_problems, env=CalcEnv)


def test_an_environment_without_a_writer_needs_a_prompts_file() -> None:
    with pytest.raises(UsageError, match="environment calc writes no prompts of its own: pass a prompts file"):
        build_prompts(0, env=CalcEnv)


def test_a_writer_that_emits_an_undeclared_category_is_caught() -> None:
    class Sloppy(CalcEnv):
        def build_prompts(self, seed: int, size: str) -> list[dict[str, object]]:
            return [*calc_items(1), {"prompt": "Area of a 2x2 square?", "case": {"answer": 4},
                                     "category": "geometry", "scenario_id": "sq"}]

    with pytest.raises(DataError, match=r"build_prompts item>:4: category 'geometry' is not one of environment calc"):
        build_prompts(0, env=Sloppy)
