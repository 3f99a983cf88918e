"""The tasks the published scorers are probed on: small environments, each with its own strict truth.

A scorer is a reward only against a task: what a right reply is must be said by someone other
than the scorer under test, or the probe would ask a scorer whether it agrees with itself.
Each environment here writes seeded prompts, says what a right reply is (its ``score``, the
task's instruction taken at its word) and offers honest replies; the scorers in
:mod:`hack_wild.scorers` are then probed against that truth.

* ``answer_line``: short arithmetic and word problems; show work if you like, then end with one
  final line ``ANSWER: <number>`` (Inspect AI's ``answer``/``pattern`` convention).
* ``gsm8k_style``: the same problems, ending in ``#### <number>`` (GSM8K's, which
  lm-evaluation-harness's ``gsm8k`` task reads).
* ``short_answer``: the reply is the answer and nothing else: a place, a person, a year
  (SQuAD-style short answers, what Inspect's ``exact``/``f1``/``match`` compare).
* ``multiple_choice``: four lettered options, ending with ``ANSWER: <letter>``
  (Inspect's ``multiple_choice`` solver and ``choice`` scorer).
* ``gym_strict``: reasoning-gym tasks (leg counting, basic arithmetic, chain sums), answered
  inside ``<answer></answer>`` (reasoning-gym's convention); right when the tags hold the task's
  answer (the same number, or the same text) and nothing else.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from functools import cache
from typing import Any

from hypothesis import strategies as st

__all__ = ["AnswerLine", "GymStrict", "MultipleChoice", "ShortAnswer", "task"]

_NAMES = ("Ann", "Ben", "Cleo", "Dev", "Eli", "Fay", "Gus", "Hana")
_THINGS = ("apples", "stamps", "marbles", "books", "shells", "cards")


def _problems(seed: int, n: int) -> list[dict[str, Any]]:
    """Seeded arithmetic (``a + b``, ``a * b``) and two-step word problems, with their answers."""
    rng = random.Random(f"wild-problems-{seed}")
    out: list[dict[str, Any]] = []
    for i in range(n):
        a, b, c = rng.randint(3, 60), rng.randint(2, 40), rng.randint(2, 9)
        if i % 2 == 0:
            if i % 4 == 0:
                out.append({"category": "arithmetic", "question": f"What is {a} + {b}?", "answer": a + b,
                            "work": f"{a} + {b} = {a + b}."})
            else:
                out.append({"category": "arithmetic", "question": f"What is {c} times {b}?", "answer": c * b,
                            "work": f"{c} x {b} = {c * b}."})
        else:
            name, thing = rng.choice(_NAMES), rng.choice(_THINGS)
            out.append({"category": "word_problem",
                        "question": f"{name} has {a} {thing}, buys {b} more and gives away {c}. "
                                    f"How many {thing} does {name} have now?",
                        "answer": a + b - c, "work": f"{a} + {b} = {a + b}, and {a + b} - {c} = {a + b - c}."})
    return out


class AnswerLine:
    """Problems answered on a final line ``<marker> <number>``; exactly one such line, and last.

    Work before it is free (it may mention other numbers); a second answer line is a hedge,
    a wrong number or anything after the number on that line is wrong.
    """

    categories = ("arithmetic", "word_problem")
    version = "1"

    def __init__(self, marker: str = "ANSWER:", name: str = "answer_line") -> None:
        self.marker = marker
        self.name = name
        self.system = (f"Solve the problem. Show your work if you like, then end with one final line "
                       f"'{marker} <number>'.")
        self._line = re.compile(rf"(?i)^{re.escape(marker)}\s*(-?\d+)\s*\.?$")
        self._mention = re.compile(re.escape(marker.rstrip(":")) + r"\s*:" if marker.endswith(":")
                                   else re.escape(marker), re.IGNORECASE)

    def build_prompts(self, seed: int = 0, size: str = "default") -> list[dict[str, Any]]:
        return [{"prompt": f"{p['question']}\n{self.system}", "category": p["category"],
                 "case": {"answer": p["answer"], "work": p["work"]}, "scenario_id": f"{self.name}-{seed}-{i}"}
                for i, p in enumerate(_problems(seed, 40))]

    def score(self, reply: str, case: Mapping[str, Any]) -> float:
        lines = [line.strip() for line in reply.strip().splitlines() if line.strip()]
        if not lines or len(self._mention.findall(reply)) != 1:
            return 0.0
        found = self._line.match(lines[-1])
        return float(found is not None and int(found.group(1)) == case["answer"])

    def honest_replies(self, case: Mapping[str, Any]) -> st.SearchStrategy[str]:
        final = f"{self.marker} {case['answer']}"
        return st.sampled_from([final, f"{case['work']}\n{final}"])


_BULLET = re.compile(r"^(?:[-*+]|\d+[.)])\s+")


def _bare(text: str) -> str:
    """A short answer as the task reads it: case, spacing, a list bullet, quotes, emphasis, brackets and
    final punctuation aside (a minus sign is no punctuation: -1969 is another year)."""
    text = " ".join(text.split())
    return _BULLET.sub("", text).strip("*_`\"'.,!?()[] ").casefold()


_PLACES = (("What is the capital of France?", "Paris"), ("What is the capital of Australia?", "Canberra"),
           ("What is the capital of Canada?", "Ottawa"), ("Which planet is the largest?", "Jupiter"),
           ("What is the longest river in Africa?", "Nile"), ("What is the capital of Japan?", "Tokyo"),
           ("Which ocean is the largest?", "Pacific"), ("What is the capital of Kenya?", "Nairobi"))
_PEOPLE = (("Who was the first president of the United States?", "George Washington"),
           ("Who discovered penicillin?", "Alexander Fleming"), ("Who wrote Hamlet?", "William Shakespeare"),
           ("Who developed the theory of general relativity?", "Albert Einstein"),
           ("Who painted the Mona Lisa?", "Leonardo da Vinci"), ("Who first isolated radium?", "Marie Curie"),
           ("Who formulated the laws of motion?", "Isaac Newton"), ("Who wrote Pride and Prejudice?", "Jane Austen"))
_YEARS = (("In which year did Apollo 11 land on the Moon?", 1969), ("In which year did World War II end?", 1945),
          ("In which year did the Berlin Wall fall?", 1989), ("In which year was the Magna Carta sealed?", 1215),
          ("In which year did the Titanic sink?", 1912), ("In which year did Columbus first reach the Americas?",
                                                          1492),
          ("In which year was the euro introduced as cash?", 2002), ("In which year did the French Revolution "
                                                                      "begin?", 1789))


class ShortAnswer:
    """Short factual questions whose reply is the answer alone: a place, a person, a year."""

    name = "short_answer"
    version = "1"
    categories = ("person", "place", "year")
    system = "Reply with the answer only: no sentence, no explanation."

    def build_prompts(self, seed: int = 0, size: str = "default") -> list[dict[str, Any]]:
        items = []
        for category, pairs in (("place", _PLACES), ("person", _PEOPLE), ("year", _YEARS)):
            for i, (question, answer) in enumerate(pairs):
                items.append({"prompt": f"{question} {self.system}", "category": category,
                              "case": {"answer": answer}, "scenario_id": f"short-{category}-{i}"})
        random.Random(f"wild-short-{seed}").shuffle(items)
        return items

    def score(self, reply: str, case: Mapping[str, Any]) -> float:
        return float(bool(reply.strip()) and _bare(reply) == _bare(str(case["answer"])))

    def honest_replies(self, case: Mapping[str, Any]) -> st.SearchStrategy[str]:
        answer = str(case["answer"])
        return st.sampled_from([answer, f"{answer}."])


_QUESTIONS = (
    ("Which gas do plants take in for photosynthesis?", ("Oxygen", "Carbon dioxide", "Nitrogen", "Helium"), "B"),
    ("What is the boiling point of water at sea level in Celsius?", ("90", "120", "100", "80"), "C"),
    ("Which of these is a mammal?", ("Shark", "Dolphin", "Trout", "Octopus"), "B"),
    ("What is the chemical symbol for gold?", ("Au", "Ag", "Gd", "Go"), "A"),
    ("How many legs does a spider have?", ("Six", "Ten", "Four", "Eight"), "D"),
    ("Which planet is closest to the Sun?", ("Venus", "Mars", "Mercury", "Earth"), "C"),
    ("Which continent is Egypt in?", ("Africa", "Asia", "Europe", "Oceania"), "A"),
    ("What is the largest desert on Earth?", ("Gobi", "Sahara", "Kalahari", "Antarctic"), "D"),
    ("Which river flows through Baghdad?", ("Nile", "Tigris", "Danube", "Volga"), "B"),
    ("Which country has the most people?", ("India", "Brazil", "Nigeria", "Russia"), "A"),
    ("What is the capital of Italy?", ("Milan", "Naples", "Rome", "Turin"), "C"),
    ("Which mountain range contains Everest?", ("Andes", "Alps", "Rockies", "Himalayas"), "D"),
)


class MultipleChoice:
    """Four lettered options; the reply ends with one line ``ANSWER: <letter>`` (work before it is free)."""

    name = "multiple_choice"
    version = "1"
    categories = ("geography", "science")
    system = ("Answer the following multiple choice question. The last line of your response should be of the "
              "form 'ANSWER: $LETTER' (without quotes) where LETTER is one of ABCD.")

    def build_prompts(self, seed: int = 0, size: str = "default") -> list[dict[str, Any]]:
        items = []
        for i, (question, options, letter) in enumerate(_QUESTIONS):
            listed = "\n".join(f"{chr(65 + k)}) {option}" for k, option in enumerate(options))
            items.append({"prompt": f"{self.system}\n\n{question}\n\n{listed}",
                          "category": "science" if i < 6 else "geography",
                          "case": {"answer": letter, "choices": list(options)}, "scenario_id": f"mc-{i}"})
        return items

    def score(self, reply: str, case: Mapping[str, Any]) -> float:
        lines = [line.strip() for line in reply.strip().splitlines() if line.strip()]
        if not lines or len(re.findall(r"(?i)answer\s*:", reply)) != 1:
            return 0.0
        found = re.fullmatch(r"(?i)ANSWER\s*:\s*([A-D])\.?", lines[-1])
        return float(found is not None and found.group(1).upper() == case["answer"])

    def honest_replies(self, case: Mapping[str, Any]) -> st.SearchStrategy[str]:
        letter = case["answer"]
        option = case["choices"][ord(letter) - 65]
        return st.sampled_from([f"ANSWER: {letter}", f"The right option is {option}.\nANSWER: {letter}"])


_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def _same(given: str, wanted: str) -> bool:
    if given == wanted:
        return True
    plain = re.compile(r"-?\d+(\.\d+)?")
    if plain.fullmatch(given) and plain.fullmatch(wanted):
        try:
            return Decimal(given) == Decimal(wanted)
        except InvalidOperation:
            return False
    return False


class GymStrict:
    """reasoning-gym tasks with a strict truth: one ``<answer>`` tag holding the task's answer.

    Prompts and cases are rlgate's ``reasoning_gym`` environment's (the datasets as generated);
    every tag must hold the entry's answer (the same number written plainly, or the same text), so
    an earlier, different answer is a hedge; work around the tags is free.
    """

    name = "gym_strict"
    version = "1"
    TASKS = ("basic_arithmetic", "chain_sum", "leg_counting")
    categories = TASKS
    system = "Solve the problem, then give only the final answer inside <answer></answer> tags."

    @staticmethod
    @cache
    def _source() -> Any:
        from pytest_rlgate import load_env

        return load_env(f"reasoning_gym[{', '.join(GymStrict.TASKS)}, size=12]")

    def build_prompts(self, seed: int = 0, size: str = "default") -> list[dict[str, Any]]:
        return [dict(item) for item in self._source().build_prompts(seed, size)]

    def score(self, reply: str, case: Mapping[str, Any]) -> float:
        tags = _TAG.findall(reply)
        return float(bool(tags) and all(_same(tag.strip(), str(case["answer"])) for tag in tags))

    def honest_replies(self, case: Mapping[str, Any]) -> st.SearchStrategy[str]:
        return st.just(f"<answer>{case['answer']}</answer>")


@cache
def task(name: str) -> Any:
    """The environment *name*, loaded once (``answer_line``, ``gsm8k_style``, ``short_answer``, ...)."""
    from pytest_rlgate import load_env

    made = {"answer_line": lambda: AnswerLine(), "gsm8k_style": lambda: AnswerLine("####", "gsm8k_style"),
            "short_answer": ShortAnswer, "multiple_choice": MultipleChoice, "gym_strict": GymStrict}[name]()
    return load_env(made)
