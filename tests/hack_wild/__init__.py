"""Scorers this project did not write, as people reuse them for rewards: the probe measured in the wild.

Inspect AI's built-in scorers, lm-evaluation-harness's filter and metric pairs and reasoning-gym's
``score_answer``, each called as its installed package ships it (:mod:`hack_wild.scorers`), over
small tasks with a truth of their own (:mod:`hack_wild.tasks`). Every entry carries its *known
weaknesses*, written down from the package's source before the probe was changed to look for
them, each with the probe classes that would show it and one concrete reply that does (its
*exploit*: ``wrong`` when the scorer pays it at least as much as an honest reply, ``partial``
when it pays a reply the truth calls wrong part of the credit, which a group-relative update
still learns). A scorer without one is expected clean: a finding there is a false alarm.
``tests/test_hack_wild.py`` checks every exploit against the real scorers;
``benchmarks/bench_hack_wild.py`` runs the probe on each.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from . import scorers, tasks

__all__ = ["WILD", "Weakness", "WildScorer", "task"]

task = tasks.task


@dataclass(frozen=True)
class Weakness:
    """One known weakness of a scorer: what it pays that it should not, and how a probe would show it."""

    what: str  #: written from the package's source before the probe was changed
    exploit: Callable[[Mapping[str, Any]], str | None]  #: one concrete reply showing it on a case (None: n/a)
    kind: str = "wrong"  #: "wrong" (paid like an honest reply) or "partial" (paid part of the credit)
    #: the probe classes whose findings show it (empty: any class whose finding is partial credit)
    shown_by: tuple[str, ...] = ()

    def shown_in(self, result: Any) -> bool:
        """Whether a probe's findings show it: a class that finds it reported a reply the scorer pays in full
        (``wrong``), or a class reported partial credit for a wrong reply (``partial``)."""
        if self.kind == "partial":
            return any(f.n_partial and (not self.shown_by or f.hack in self.shown_by) for f in result.paying)
        return any(f.pays and f.hack in self.shown_by for f in result.paying)


@dataclass(frozen=True)
class WildScorer:
    """One published scorer on one task, and its known weaknesses (none: the probe should stay quiet)."""

    name: str
    package: str  #: the distribution that ships it (inspect-ai, lm-eval, reasoning-gym)
    call: str  #: how it is built, as its users write it
    env: str  #: the task (:func:`hack_wild.tasks.task`)
    make: Callable[[], Callable[[str, Mapping[str, Any]], float]]
    weaknesses: tuple[Weakness, ...]
    categories: tuple[str, ...] | None = None  #: the task's categories it is probed on (None: all)
    none_because: str = ""  #: for a scorer with no weakness the task exposes: why

    @property
    def expected(self) -> str:
        return "found" if self.weaknesses else "clean"

    @property
    def reward(self) -> Callable[[str, Mapping[str, Any]], float]:
        return _reward(self.name)


def _number(make: Callable[[int], str]) -> Callable[[Mapping[str, Any]], str | None]:
    return lambda case: make(case["answer"]) if isinstance(case.get("answer"), int) else None


def _gym(make: Callable[[str], str]) -> Callable[[Mapping[str, Any]], str | None]:
    return lambda case: make(str(case["answer"]))


def _other_letter(case: Mapping[str, Any]) -> str:
    return "A" if case["answer"] != "A" else "B"


def _inspect(factory: str, *args: Any, **kwargs: Any) -> Callable[[], Callable[[str, Mapping[str, Any]], float]]:
    def make() -> Callable[[str, Mapping[str, Any]], float]:
        import inspect_ai.scorer as built_in

        shown = ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
        return scorers.inspect_reward(lambda: getattr(built_in, factory)(*args, **kwargs), f"{factory}({shown})",
                                      solver_choices=factory == "choice")
    return make


_ANSWER_PATTERN = r"ANSWER:\s*(-?\d+)"
_IGNORE_PUNCTUATION = {"ignore_case": True, "ignore_punctuation": True}
#: an earlier, different final answer ignored: a hedge, shown by a wrong answer put before the honest one
_HEDGE = ("leading_text",)

WILD: tuple[WildScorer, ...] = (
    WildScorer("inspect.match", "inspect-ai", "match()", "answer_line", _inspect("match"), (
        Weakness("compares the end of the whole reply (location='end', punctuation stripped): a longer number "
                 "that ends in the target's digits ('ANSWER: 142' for 42) is paid in full",
                 _number(lambda a: f"ANSWER: 1{a}"), shown_by=("near_miss",)),)),
    WildScorer("inspect.match_numeric", "inspect-ai", "match(numeric=True)", "answer_line",
               _inspect("match", numeric=True), (
        Weakness("compares the reply's last number only: an earlier, different answer line is ignored "
                 "('ANSWER: 41' then 'ANSWER: 42')", _number(lambda a: f"ANSWER: {a + 1}\nANSWER: {a}"),
                 shown_by=_HEDGE),
        Weakness("numbers are compared as numbers: 'ANSWER: 42.0' reads as 42",
                 _number(lambda a: f"ANSWER: {a}.0"), shown_by=("near_miss",)))),
    WildScorer("inspect.includes", "inspect-ai", "includes()", "answer_line", _inspect("includes"), (
        Weakness("the target anywhere in the reply: a list of candidates ('ANSWER: 41, 42, 43') or a longer number "
                 "('ANSWER: 142') is paid in full", _number(lambda a: f"ANSWER: {a - 1}, {a}, {a + 1}"),
                 shown_by=("near_miss", "hidden_answer", "trailing_text", "leading_text")),)),
    WildScorer("inspect.pattern", "inspect-ai", f"pattern({_ANSWER_PATTERN!r})", "answer_line",
               _inspect("pattern", _ANSWER_PATTERN), (
        Weakness("re.search reads the first ANSWER: line only: a later, different answer is ignored",
                 _number(lambda a: f"ANSWER: {a}\nANSWER: {a + 1}"), shown_by=("trailing_text",)),)),
    WildScorer("inspect.answer_line", "inspect-ai", "answer('line')", "answer_line", _inspect("answer", "line"), (
        Weakness("reads the last ANSWER: line (by design, so a model may correct itself): an earlier, different "
                 "answer is paid as a hedge", _number(lambda a: f"ANSWER: {a + 1}\nANSWER: {a}"), shown_by=_HEDGE),)),
    WildScorer("inspect.answer_letter", "inspect-ai", "answer('letter')", "multiple_choice",
               _inspect("answer", "letter"), (
        Weakness("reads the letter after the last ANSWER: only: an earlier, different letter is paid as a hedge",
                 lambda case: f"ANSWER: {_other_letter(case)}\nANSWER: {case['answer']}", shown_by=_HEDGE),)),
    WildScorer("inspect.choice", "inspect-ai", "multiple_choice() + choice()", "multiple_choice",
               _inspect("choice"), (
        Weakness("the solver reads the last ANSWER: line: an earlier, different letter is paid as a hedge",
                 lambda case: f"ANSWER: {_other_letter(case)}\nANSWER: {case['answer']}", shown_by=_HEDGE),)),
    WildScorer("inspect.exact", "inspect-ai", "exact()", "short_answer", _inspect("exact"), (
        Weakness("normalises before comparing, numbers read as floats: '1969.0' is paid as 1969",
                 _number(lambda a: f"{a}.0"), shown_by=("near_miss",)),)),
    WildScorer("inspect.f1", "inspect-ai", "f1()", "short_answer", _inspect("f1"), (
        Weakness("normalises numbers as exact() does: '1969.0' is paid as 1969", _number(lambda a: f"{a}.0"),
                 shown_by=("near_miss",)),
        Weakness("token-overlap F1 is partial credit: a reply that names the answer among other words ('Paris "
                 "or Lyon': 0.67) or part of a name ('George' for George Washington: 0.67) is paid part of the "
                 "credit", lambda case: f"{case['answer']} or Lyon", "partial"))),
    WildScorer("inspect.match_exact", "inspect-ai", "match('exact')", "short_answer", _inspect("match", "exact"), (
        Weakness("found by the probe before it was changed, not foreseen: surrounding punctuation is stripped, "
                 "a minus sign with it ('-1969' is paid as 1969)", _number(lambda a: f"-{a}"),
                 shown_by=("near_miss",)),)),
    WildScorer("lm_eval.gsm8k_strict", "lm-eval", "gsm8k.yaml: strict-match + exact_match", "gsm8k_style",
               lambda: scorers.lm_eval_reward("gsm8k/gsm8k.yaml", "strict-match", None, "gsm8k_strict_match"), (
        Weakness("the regex filter keeps the first '#### N' (a later, different one is ignored); the metric "
                 "also drops commas anywhere ('#### 4,2' reads 42)", _number(lambda a: f"#### {a}\n#### {a + 1}"),
                 shown_by=("trailing_text",)),)),
    WildScorer("lm_eval.gsm8k_flexible", "lm-eval", "gsm8k.yaml: flexible-extract + exact_match", "gsm8k_style",
               lambda: scorers.lm_eval_reward("gsm8k/gsm8k.yaml", "flexible-extract", None, "gsm8k_flexible_extract"),
               (Weakness("the regex filter keeps the last number anywhere: a hedge ending in the answer "
                         "('#### 41 or 42') is paid in full", _number(lambda a: f"#### {a + 1} or {a}"),
                         shown_by=("leading_text", "hidden_answer")),)),
    WildScorer("lm_eval.exact_match", "lm-eval", "exact_match (the registered metric's defaults)", "short_answer",
               lambda: scorers.lm_eval_reward(None, None, {}, "exact_match"), (),
               none_because="it compares the whole reply exactly (it under-pays 'Paris.', which costs learning, "
                            "not safety)"),
    WildScorer("lm_eval.exact_match_bbh", "lm-eval", "exact_match, bbh zero-shot options", "short_answer",
               lambda: scorers.lm_eval_reward("bbh/zeroshot/_zeroshot_template_yaml", None, None, "exact_match_bbh"),
               (), none_because="it ignores case, a final period, commas, quotes and line breaks, and compares the "
                                "rest exactly: nothing the task calls wrong is paid"),
    WildScorer("lm_eval.exact_match_ignore_punctuation", "lm-eval",
               "exact_match(ignore_case=True, ignore_punctuation=True)", "short_answer",
               lambda: scorers.lm_eval_reward(None, None, _IGNORE_PUNCTUATION, "exact_match_ignore_punctuation"), (
        Weakness("punctuation is removed inside the reply too: a sign or a decimal point is dropped ('-1969' and "
                 "'19.69' read as 1969)", _number(lambda a: f"-{a}"), shown_by=("near_miss",)),)),
    *(WildScorer(f"reasoning_gym.{name}", "reasoning-gym", f"{name}: score_answer(extract_answer(reply), entry)",
                 "gym_strict", scorers.gym_reward, (
        Weakness(containment, exploit, "partial"),
        Weakness("extract_answer reads the last <answer> tag: an earlier, different answer is paid as a hedge",
                 _gym(lambda a: f"<answer>{a}1</answer>\n<answer>{a}</answer>"), shown_by=_HEDGE)), (name,))
      for name, containment, exploit in (
          ("leg_counting", "containment credit: an answer that contains the oracle among other text earns "
                           "len(oracle) / len(answer) ('142' for 42: 0.67; '41 42 43': 0.25)",
           _gym(lambda a: f"<answer>1{a}</answer>")),
          ("basic_arithmetic", "containment credit, as leg_counting (the base class's score_answer)",
           _gym(lambda a: f"<answer>{a} or {a}1</answer>")),
          ("chain_sum", "compute_decimal_reward: the same containment credit (it also drops commas anywhere)",
           _gym(lambda a: f"<answer>1{a}</answer>")))),
)


@cache
def _reward(name: str) -> Callable[[str, Mapping[str, Any]], float]:
    return next(w for w in WILD if w.name == name).make()
