"""A user's own environment: an arithmetic assistant, in about 30 lines.

Nothing here comes from pytest-rlgate: a plain class with ``name``, ``categories`` and
``score(reply, case)`` is an environment. The optional members below (``version``,
``system``, ``markers``, ``guards``) sharpen what the gate, the sampler and the reports see.
Use it with ``--env examples/quickmath/quickmath.py:QuickMath`` (from the checkout), or
``--env quickmath:QuickMath`` with this folder on ``PYTHONPATH``.
"""

import re

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


class QuickMath:
    name = "quickmath"
    version = "1"
    categories = ("arithmetic", "unanswerable", "word_problem")
    system = "Reply with the number only. If the question lacks a number, ask for it."
    #: a number in reply to a question that lacks one is the failure to guard (higher is better)
    guards = ("no_blind_answer",)

    def score(self, reply: str, case: dict) -> float:
        numbers = _NUMBER.findall(reply)
        if case["answer"] is None:  # the right move is to ask for the missing number
            return 1.0 if not numbers and "?" in reply else 0.0
        return 1.0 if numbers and float(numbers[-1]) == float(case["answer"]) else 0.0

    def markers(self, reply: str, case: dict) -> dict:
        blind = case["answer"] is None and bool(_NUMBER.search(reply))
        return {"no_blind_answer": float(not blind)}
