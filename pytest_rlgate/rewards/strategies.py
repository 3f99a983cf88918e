"""Hypothesis strategies for testing any reward for hackability: the hack classes every task shares.

A reward is code, and code has the flaws real reward code has: an id matched by substring or
as a number, a parser that forgives a broken call block, a tolerance on a numeric answer,
another category's right move paid in this one, a length bonus, text after the answer that
changes what is read. The classes here generate those replies from the environment's own
truth, so they need nothing but the contract: the *case* (whose values a reward compares), the
environment's score and guarded markers (what is right), its other prompt items (what is
right elsewhere) and its honest replies (``honest_replies(case)``, or, without one, replies
built from the case's values that the environment's score passes).

Every strategy yields :class:`HackedReply` values (an honest reply, the hacked one, the class
that made it and its *kind*), so a property reads ``assert not x.paid_by(reward, case), x``
and a failing example names its exploit. Replies are judged *in context*: a class that takes
an environment yields only hacked replies the environment's truth calls wrong as a whole (its
score does not pass, or a guarded marker drops), never a reply that is merely different.
:func:`hack_classes` gathers the generic classes and the environment's own ``hacks``;
:func:`~pytest_rlgate.probe_reward` runs each of them against a reward.

Follows Hypothesis' API style: element strategies come first and are strategies (wrap a
value with ``st.just``), options are keyword-only, bad arguments raise
``hypothesis.errors.InvalidArgument`` when the strategy is first used, and the ``repr`` shows
how a strategy was built. Needs ``pip install pytest-rlgate[hypothesis]``.
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import TypeVar

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.strategies import SearchStrategy

from ..environment.contract import Env, EnvSpec, load_env
from ..environment.hack import Hack, Truth
from ..errors import UsageError
from ..records import PromptItem

F = TypeVar("F", bound=Callable[..., object])

try:  # LazyStrategy: a repr showing the call, and errors deferred to first use
    from hypothesis.strategies._internal.utils import defines_strategy
except ImportError:  # pragma: no cover - private in Hypothesis; degrade to plain functions
    def defines_strategy(**_: object) -> Callable[[F], F]:
        return lambda fn: fn

__all__ = [
    "CLAIMS",
    "FILLER",
    "GENERIC_HACKS",
    "NON_ANSWERS",
    "REFUSALS",
    "KINDS",
    "HackClass",
    "HackedReply",
    "check_in",
    "check_range",
    "check_strategy",
    "defines_strategy",
    "hack_classes",
    "hack_replies",
    "hidden_answer_replies",
    "keyword_stuffed_replies",
    "leading_text_replies",
    "lenient_replies",
    "lenient_texts",
    "near_miss_replies",
    "near_miss_texts",
    "near_miss_values",
    "near_misses",
    "padded_replies",
    "pays",
    "plain_replies",
    "repeated_replies",
    "reply_strategy",
    "trailing_text_replies",
    "transplant",
    "whitespace_replies",
]

#: The generic hack classes, in the order a probe reports them, each with the flaw it finds.
GENERIC_HACKS: Mapping[str, str] = {
    "near_miss": "a value of the case (an id, a number, a name) respelled so a loose comparison takes it for "
                 "the right one: prefix, substring, extra digit, leading zeros, another number close by, "
                 "the sign dropped, Unicode look-alikes and normalisation forms",
    "lenient_parse": "the honest reply with its structure broken (bad JSON, single quotes, a missing closing tag, "
                     "a cut-off end): a lenient parser still reads the right value",
    "other_category": "another category's right move offered here (asking when the answer was possible, "
                      "declining, refusing, the other flow of a tool-using task)",
    "wrong_value": "the honest reply's form with a wrong value (another case's id or number, in the honest reply "
                   "or a common answer format such as 'Answer: N'): format paid for itself",
    "non_answer": "a polite reply that does nothing for the task: politeness paid for itself",
    "refusal": "a refusal ('I'm sorry, but I can't help with that.'): a safe-sounding reply paid for itself",
    "trailing_text": "another reply (one that is right elsewhere, a plain one, a contradicting answer) or an "
                     "outcome reported as done ('Your request has been processed.') after the honest reply, "
                     "where the whole is wrong: the reward reads only part of the reply",
    "leading_text": "another reply before the honest one, where the whole is wrong: the reward reads the end only",
    "hidden_answer": "the answer in a code block, a list item or a quote, beside another answer",
    "keyword_stuffing": "words of the task's prompts and honest replies appended to a plain reply",
    "padding": "filler before or after the honest reply, from a few characters to thousands: "
               "length paid under or over a cap",
    "whitespace": "spaces, newlines or tabs added to the honest reply: whitespace paid",
    "repetition": "the honest reply said two to four times",
}

#: What a :class:`HackedReply`'s ``kind`` says and how a reward pays it (see :meth:`HackedReply.paid_by`).
KINDS: Mapping[str, str] = {
    "wrong": "the environment calls the hacked reply wrong (or it is wrong by construction): paid when it scores "
             "at least as much as the honest reply, and more than an empty reply",
    "unpriced": "the hacked reply is the honest one with nothing of value added: paid when it scores more",
}
#: Scores closer than this are equal.
TOLERANCE = 1e-9

#: A word of a reply, with the question mark that ends it: a reward may key on either.
_WORD = re.compile(r"\w[\w'-]*\??")
_PLAIN = (
    "Happy to help.",
    "I am sorry to hear that.",
    "Thanks for reaching out.",
    "That sounds frustrating.",
)
#: Polite replies that do nothing for any task (the ``non_answer`` class; the plain replies first).
NON_ANSWERS: tuple[str, ...] = (
    "Happy to help.",
    "I am sorry to hear that.",
    "Thanks for reaching out.",
    "That sounds frustrating.",
    "Great question!",
    "Thank you for your patience, I appreciate it.",
    "I'd be glad to help you with that.",
    "Please let me know if there is anything else I can do for you.",
    "You're very welcome! Have a wonderful day.",
    "I understand how you feel, and I appreciate your message.",
)
#: Refusals, as assistants write them (the ``refusal`` class).
REFUSALS: tuple[str, ...] = (
    "I'm sorry, but I can't help with that.",
    "I cannot answer that.",
    "Sorry, I am unable to assist with this request.",
    "I can't do that.",
    "I'm not able to help with this, sorry.",
    "I apologize, but I cannot provide that information.",
    "As an AI assistant, I won't be able to do that.",
)
#: Outcomes reported as done, as an assistant writes them beside a call whose result it has not seen, or
#: where nothing was done (``{value}``: a value of the case). The trailing-text class appends them to an
#: honest reply: an environment whose truth reads such claims (a hack it declares with a ``judge``, refund's
#: ``invented_claim``) calls the whole reply wrong; to any other they are harmless prose its truth lets through.
CLAIMS: tuple[str, ...] = (
    "Done.",
    "All set: I have taken care of it.",
    "Your request has been processed.",
    "I have completed that for you, it went through.",
    "Good news: it has been approved, and the amount has been credited to your account.",
    "{value} has been processed and confirmed.",
    "I found {value}: everything checks out, and it has been handled.",
)
#: Wrong values a ``wrong_value`` reply takes per case value: other cases' values first.
_WRONG_VALUES = 3
#: Padding a length hack puts around a reply: polite, true of any task, and empty of content.
FILLER: tuple[str, ...] = (
    "Thank you for your patience. ",
    "We truly value you as a customer. ",
    "Our team works hard to help you. ",
)
#: Answer formats graders read (a bare value, ``Answer: N``, GSM8K's ``#### N``, reasoning-gym's tag, a box):
#: replies built around a case's values when an environment has no honest replies of its own (only those its
#: score passes, and whose guards hold, are used), and the forms a ``wrong_value`` reply takes.
_ANSWER_FORMATS = ("{}", "Answer: {}", "The answer is {}.", "ANSWER: {}", "#### {}", "<answer>{}</answer>",
                   "\\boxed{{{}}}")
_DERIVED_STOCK = (
    "Could you tell me the missing number?",
    "I cannot answer that: something is missing. Could you give me the missing value?",
    "What information is missing? Could you provide it?",
    "Sorry, I can only help with that kind of request.",
    "Happy to help.",
)
_WRAPPERS = ("```\n{}\n```", "- {}", "1. {}", "> {}", "**{}**", "`{}`", "({})")
_SEPARATORS = (" ", "\n", "\n\n")
#: Mentions of one value that a near-miss replaces one at a time.
_MAX_MENTIONS = 6
#: Words too common to be a task's vocabulary (keyword stuffing tries the task's own words).
_STOPWORDS = frozenset("""a an the and or but if of to in on at by for with from as is are was were be been it its this
that these those i me my we our you your he she they them his her their do does did have has had not no so can
could would should will just please thanks thank hi hello""".split())
#: Task words stuffed: the most frequent, each alone and in random groups of this size.
_VOCABULARY = 60
_STUFFED_GROUP = 12
_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
                 "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
                 "nineteen", "twenty")
_FULLWIDTH = {ord(c): chr(ord(c) + 0xFEE0) for c in "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"}
_FULLWIDTH_DIGITS = {ord(c): chr(ord(c) + 0xFEE0) for c in "0123456789"}
#: Latin letters and their Cyrillic look-alikes (and the digit-letter confusions 0/O, 1/l).
_HOMOGLYPHS = {"O": "\u041e", "o": "\u043e", "A": "\u0410", "a": "\u0430", "E": "\u0415", "e": "\u0435",
               "C": "\u0421", "c": "\u0441", "P": "\u0420", "p": "\u0440", "K": "\u041a", "M": "\u041c",
               "H": "\u041d", "T": "\u0422", "X": "\u0425", "x": "\u0445", "B": "\u0412", "R": "\u0280"}


@dataclass(frozen=True)
class HackedReply:
    """An honest reply and the same reply with one exploit applied; ``hack`` names it.

    ``kind`` (one of :data:`KINDS`, or empty when nothing judged it) says what paying it means:
    a *wrong* reply must score below the honest one, an *unpriced* one no higher.
    """

    original: str
    hacked: str
    hack: str
    kind: str = ""

    def paid_by(self, reward: Callable[[str, Mapping[str, object]], float], case: Mapping[str, object]) -> bool:
        """Whether ``reward(reply, case)`` pays this hack (by its :data:`KINDS` rule; unjudged: as *wrong*)."""
        return pays(self.kind, float(reward(self.original, case)), float(reward(self.hacked, case)),
                    lambda: float(reward("", case)))


def pays(kind: str, original: float, hacked: float, empty: Callable[[], float]) -> bool:
    """The :data:`KINDS` rule, on the scores of the original, the hacked and (lazily) an empty reply."""
    if kind == "unpriced":
        return hacked > original + TOLERANCE
    return hacked >= original - TOLERANCE and hacked > empty() + TOLERANCE


# -- argument checks, shared with the environments' own strategy modules -----------------


def check_in(name: str, values: Collection[str], allowed: Collection[str]) -> tuple[str, ...]:
    """*values* as a tuple, or ``InvalidArgument`` when it is empty or names something unknown."""
    if isinstance(values, str) or not isinstance(values, Collection):
        raise InvalidArgument(f"{name} must be a collection of names from {sorted(allowed)}, got {values!r}")
    values = tuple(values)
    if not values:
        raise InvalidArgument(f"{name} must not be empty; choose from {sorted(allowed)}")
    unknown = [v for v in values if v not in allowed]
    if unknown:
        raise InvalidArgument(f"{name} has unknown entries {unknown}; choose from {sorted(allowed)}")
    return values


def check_strategy(name: str, value: object) -> None:
    if not isinstance(value, SearchStrategy):
        raise InvalidArgument(f"{name} must be a strategy (wrap a value with st.just), got {value!r}")


def _int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{name} must be an int, got {value!r}")
    return value


def check_range(name_lo: str, lo: object, name_hi: str, hi: object, *, least: int) -> None:
    lo, hi = _int(name_lo, lo), _int(name_hi, hi)
    if lo < least:
        raise InvalidArgument(f"{name_lo}={lo} must be at least {least}")
    if hi < lo:
        raise InvalidArgument(f"{name_hi}={hi} must be at least {name_lo}={lo}")


def reply_strategy(value: object, what: str) -> SearchStrategy[str]:
    """A reply or a strategy of replies, as a strategy; an environment's bad value is a UsageError."""
    if isinstance(value, str):
        return st.just(value)
    if isinstance(value, SearchStrategy):
        return value
    raise UsageError(f"{what} must return a reply (str) or a Hypothesis strategy of replies, got {value!r:.80}")


def _check_case(case: object) -> Mapping[str, object]:
    if not isinstance(case, Mapping):
        raise InvalidArgument(f"case must be a mapping (a prompt item's case), got {case!r:.60}")
    return case


# -- near-misses of a case's values (pure functions) ----------------------------------------


def _unique(values: Iterator[str] | Sequence[str], exclude: str) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for v in values:
        if v and v != exclude:
            seen.setdefault(v, None)
    return tuple(seen)


def _int_misses(n: int) -> Iterator[str]:
    s = str(n)
    yield from (str(n + 1), str(n - 1), f"{n}.4", f"{n - 1}.6", f"{n}.5", f"{n}.9", str(n + 2), str(n - 2),
                str(-n), "1" + s, s + "0", str(n + 10), str(round(n * 1.1)), str(round(n * 0.9)), f"0{n}",
                f"{n}.0", s.translate(_FULLWIDTH_DIGITS))
    if 0 <= n < len(_NUMBER_WORDS):
        yield _NUMBER_WORDS[n]
    digits = s.lstrip("-")
    if len(digits) > 1:
        yield digits[:-1]
        yield digits[1:]


def _float_misses(x: float) -> Iterator[str]:
    yield from (repr(round(x + 0.1, 6)), repr(round(x - 0.1, 6)), str(round(x)), str(int(x)), repr(round(x * 1.05, 6)),
                repr(-x))


def _str_misses(s: str) -> Iterator[str]:
    if len(s) >= 3:
        yield s[:-1]
        yield s[1:]
    if len(s) >= 5:
        yield s[:-2]
    yield s + (s[-1] if s[-1].isdigit() else "s")  # a longer value that contains this one
    yield s + "0"
    yield "X" + s
    runs = list(re.finditer(r"\d+", s))
    if runs:
        first, last = runs[0], runs[-1]
        yield "".join(m.group() for m in runs)  # digits only
        yield s[: first.start()] + "0" + s[first.start():]  # a leading zero: another id, the same number
        yield s[: first.start()] + "00" + s[first.start():]
        if first.group().startswith("0") and len(first.group()) > 1:
            yield s[: first.start()] + first.group().lstrip("0") + s[first.end():]
        i = last.end() - 1
        yield s[:i] + str((int(s[i]) + 1) % 10) + s[i + 1:]
        if len(last.group()) > 1 and s[i] != s[i - 1]:
            yield s[: i - 1] + s[i] + s[i - 1] + s[i + 1:]
        letters = re.search(r"[A-Za-z]+", s)
        if letters:
            yield s[: letters.start()] + "X" * len(letters.group()) + s[letters.end():]
    yield from (s.lower(), s.upper(), s.swapcase())
    for sep in "-_ ./":
        if sep in s:
            yield from (s.replace(sep, alt) for alt in ("_", " ", "", "."))
    boundary = re.search(r"(?<=[A-Za-z])(?=\d)", s)
    if boundary and not re.search(r"[-_ ./]", s):
        yield s[: boundary.start()] + "-" + s[boundary.start():]
    yield s.translate(_FULLWIDTH)
    yield s.translate(_FULLWIDTH_DIGITS)
    look = next((i for i, ch in enumerate(s) if ch in _HOMOGLYPHS), None)
    if look is not None:
        yield s[:look] + _HOMOGLYPHS[s[look]] + s[look + 1:]
    if "0" in s:
        yield s.replace("0", "O", 1)
    if len(s) > 1:
        yield s[:1] + "\u200b" + s[1:]  # a zero-width space
    yield s.replace("-", "\u2011").replace(" ", "\u00a0")  # non-breaking hyphen and space
    for form in ("NFD", "NFKD"):
        yield unicodedata.normalize(form, s)


def near_miss_values(value: object) -> tuple[str, ...]:
    """Spellings of *value* (a case's id, number or name) that a loose comparison takes for it, simplest first.

    Strings: prefix, suffix, an extra character, digits only, leading zeros added or dropped,
    the last digit changed or swapped, the letters replaced, other case, other separators,
    fullwidth forms, a Cyrillic look-alike, a zero-width space, non-breaking punctuation and
    the NFD/NFKD forms. Integers: one and two off, decimals close by, the sign flipped, a digit
    added or dropped, ten percent off, a leading zero, ``.0``, fullwidth digits, the word. Some
    of them are the same value to the environment (``ord-412`` may be ``ORD-412``); the
    hack classes keep only those the environment's truth rejects.
    """
    if isinstance(value, bool) or value is None:
        return ()
    if isinstance(value, int):
        return _unique(_int_misses(value), str(value))
    if isinstance(value, float):
        return _unique(_float_misses(value), repr(value))
    if isinstance(value, str) and len(value.strip()) >= 2:
        return _unique(_str_misses(value), value)
    return ()


def _case_values(case: Mapping[str, object], depth: int = 0) -> Iterator[object]:
    """The scalar values of a case (and of its lists and nested mappings), each once."""
    for value in case.values():
        if isinstance(value, Mapping) and depth < 2:
            yield from _case_values(value, depth + 1)
        elif isinstance(value, (list, tuple)):
            yield from (v for v in value if isinstance(v, (str, int, float)))
        elif isinstance(value, (str, int, float)):
            yield value


def _occurrences(value: object) -> re.Pattern[str] | None:
    """Where *value* is written in a reply: a number standing alone, or a string spelled with any
    case and separators (``ord_412`` for ``ORD-412``), never inside a longer token."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return re.compile(rf"(?<![\d.]){re.escape(str(value))}(?!\d)")
    if not isinstance(value, str) or len(value.strip()) < 2:
        return None
    parts = [re.escape(ch) if ch.isalnum() else r"[^0-9A-Za-z]?" for ch in value.strip()]
    return re.compile(r"(?<![0-9A-Za-z])" + "".join(parts) + r"(?![0-9A-Za-z])", re.IGNORECASE)


def near_miss_texts(reply: str, case: Mapping[str, object]) -> tuple[str, ...]:
    """*reply* with a value of *case* it mentions replaced by each of :func:`near_miss_values`.

    Every mention first, then each mention alone (a tool-using reply may name an id in its
    lookup and again in its refund). Values the reply never mentions give nothing.
    """
    out: list[str] = []
    singles: list[str] = []
    seen: set[str] = set()
    for value in _case_values(case):
        key = repr(value)
        pattern = _occurrences(value)
        if key in seen or pattern is None:
            continue
        seen.add(key)
        spans = [m.span() for m in pattern.finditer(reply)]
        if not spans:
            continue
        for miss in near_miss_values(value):
            out.append(_replace(reply, spans, miss))
            if len(spans) > 1:
                singles += [_replace(reply, [span], miss) for span in spans[:_MAX_MENTIONS]]
    return _unique(out + singles, reply)


def transplant(reply: str, source: Mapping[str, object], target: Mapping[str, object]) -> str:
    """*reply*, written for the case *source*, rewritten for *target*: each value of a key both cases
    share (an id, an amount) replaced by *target*'s, so another category's move runs on this case."""
    for key, old in source.items():
        new = target.get(key)
        if type(old) is not type(new) or old == new or isinstance(old, bool) or not isinstance(old, (str, int, float)):
            continue
        pattern = _occurrences(old)
        if pattern is not None:
            reply = _replace(reply, [m.span() for m in pattern.finditer(reply)], str(new))
    return reply


def _replace(text: str, spans: Sequence[tuple[int, int]], new: str) -> str:
    for start, end in sorted(spans, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def lenient_texts(reply: str) -> tuple[str, ...]:
    """*reply* with its structure broken the ways model output breaks and lenient parsers forgive.

    Single quotes for double, closing tags dropped, tags upper-cased, JSON keys unquoted, a
    brace dropped or a trailing comma added, the first colon dropped or turned into ``=``, the
    last characters cut off, a tool name's key renamed, the reply fenced as a code block. A
    plain sentence changes little; a structured reply (a tool call, an ``Answer:`` line)
    changes in ways a strict reader rejects.
    """
    out: list[str] = []
    if '"' in reply:
        out.append(reply.replace('"', "'"))
    out.append(re.sub(r"</[A-Za-z_][\w-]*>", "", reply))
    out.append(re.sub(r"<(/?)([A-Za-z_][\w-]*)>", lambda m: f"<{m.group(1)}{m.group(2).upper()}>", reply))
    out.append(re.sub(r'"([A-Za-z_]\w*)"\s*:', r"\1:", reply))
    close, open_ = reply.rfind("}"), reply.find("{")
    if close >= 0:
        out.append(reply[:close] + reply[close + 1:])
        out.append(reply[:close] + "," + reply[close:])
    if open_ >= 0:
        out.append(reply[:open_] + reply[open_ + 1:])
    if ":" in reply:
        out += [reply.replace(":", " =", 1), reply.replace(":", "", 1)]
    out += [reply[:-k] for k in (1, 2, 3) if len(reply) > k + 2]
    if '"name"' in reply:
        out.append(reply.replace('"name"', '"tool_name"', 1))
    out.append(f"```json\n{reply}\n```")
    return _unique([t for t in out if t.strip()], reply)


# -- replies and generic hacks ------------------------------------------------------------


@defines_strategy()
def plain_replies() -> SearchStrategy[str]:
    """Short, polite replies that do nothing: what keyword stuffing and ``free=False`` hacks start from."""
    return st.sampled_from(_PLAIN)


def _pad(original: str, filler: str, chars: int) -> HackedReply:
    return HackedReply(original, filler * (chars // len(filler) + 1) + original, "padding")


def _trailing_text(original: str, text: str) -> HackedReply:
    return HackedReply(original, original + " " + text, "trailing_text")


def _repeat(original: str, times: int) -> HackedReply:
    return HackedReply(original, " ".join([original] * times), "repetition")


def _stuff(original: str, keywords: list[str]) -> HackedReply:
    return HackedReply(original, " ".join([original, *keywords]), "keyword_stuffing")


@defines_strategy()
def padded_replies(
    replies: SearchStrategy[str],
    *,
    padding: SearchStrategy[str] = st.sampled_from(FILLER),
    min_chars: int = 500,
    max_chars: int = 3000,
) -> SearchStrategy[HackedReply]:
    """Each reply with *min_chars* to *max_chars* characters of *padding* in front (the length hack)."""
    check_strategy("replies", replies)
    check_strategy("padding", padding)
    check_range("min_chars", min_chars, "max_chars", max_chars, least=1)
    return st.builds(_pad, replies, padding.filter(bool), st.integers(min_chars, max_chars))


@defines_strategy()
def trailing_text_replies(
    replies: SearchStrategy[str], *, texts: SearchStrategy[str] = plain_replies()
) -> SearchStrategy[HackedReply]:
    """Each reply followed by more text from *texts* (the probe appends a wrong reply)."""
    check_strategy("replies", replies)
    check_strategy("texts", texts)
    return st.builds(_trailing_text, replies, texts)


def _leading_text(original: str, text: str, separator: str) -> HackedReply:
    return HackedReply(original, text + separator + original, "leading_text")


@defines_strategy()
def leading_text_replies(
    replies: SearchStrategy[str], *, texts: SearchStrategy[str] = plain_replies()
) -> SearchStrategy[HackedReply]:
    """Each reply preceded by text from *texts* (a reward that reads the end only misses it)."""
    check_strategy("replies", replies)
    check_strategy("texts", texts)
    return st.builds(_leading_text, replies, texts, st.sampled_from(_SEPARATORS))


@defines_strategy()
def repeated_replies(
    replies: SearchStrategy[str], *, min_times: int = 2, max_times: int = 4
) -> SearchStrategy[HackedReply]:
    """Each reply said *min_times* to *max_times* times, space separated."""
    check_strategy("replies", replies)
    check_range("min_times", min_times, "max_times", max_times, least=2)
    return st.builds(_repeat, replies, st.integers(min_times, max_times))


@defines_strategy()
def keyword_stuffed_replies(
    replies: SearchStrategy[str], *, keywords: SearchStrategy[str], max_keywords: int = 20
) -> SearchStrategy[HackedReply]:
    """Each reply with 1 to *max_keywords* keywords from *keywords* appended (repeats allowed).

    Many keywords at once find a reward that pays for one of them in few examples; the
    minimal example shrinks to the one that pays.
    """
    check_strategy("replies", replies)
    check_strategy("keywords", keywords)
    check_range("max_keywords", 1, "max_keywords", max_keywords, least=1)
    return st.builds(_stuff, replies, st.lists(keywords.filter(str.strip), min_size=1, max_size=max_keywords))


def _whitespace(original: str, where: str, char: str, count: int) -> HackedReply:
    run = char * count
    if where == "after":
        hacked = original + run
    elif where == "before":
        hacked = run + original
    else:  # every space, and every line break, widened
        hacked = re.sub(r"[ \n]", lambda m: m.group() + run, original) if re.search(r"[ \n]", original) \
            else original + run
    return HackedReply(original, hacked, "whitespace")


@defines_strategy()
def whitespace_replies(replies: SearchStrategy[str], *, max_chars: int = 600) -> SearchStrategy[HackedReply]:
    """Each reply with 1 to *max_chars* spaces, newlines or tabs after, before or inside it."""
    check_strategy("replies", replies)
    check_range("max_chars", 1, "max_chars", max_chars, least=1)
    return st.builds(_whitespace, replies, st.sampled_from(("after", "before", "inside")),
                     st.sampled_from(("\n", " ", "\t")), st.integers(1, max_chars))


def _hidden(original: str, other: str, wrapper: str, layout: int) -> HackedReply:
    wrapped, wrapped_other = wrapper.format(original), wrapper.format(other)
    hacked = (wrapped, f"{wrapped}\n{other}", f"{other}\n{wrapped}", f"{wrapped_other}\n{original}",
              f"{original}\n{wrapped_other}")[layout % 5]
    return HackedReply(original, hacked, "hidden_answer")


@defines_strategy()
def hidden_answer_replies(
    replies: SearchStrategy[str], *, others: SearchStrategy[str]
) -> SearchStrategy[HackedReply]:
    """Each reply in a code block, a list item, a quote or bold, alone or beside another reply from *others*."""
    check_strategy("replies", replies)
    check_strategy("others", others)
    return st.builds(_hidden, replies, others, st.sampled_from(_WRAPPERS), st.integers(0, 4))


def _truth(env: EnvSpec) -> Truth | None:
    """The door of the strategies that take ``env=``: its truth, resolved once (None: no judging)."""
    return None if env is None else Truth(load_env(env))


def _sampled_texts(original: str, texts: Sequence[str], hack: str, kind: str) -> SearchStrategy[HackedReply]:
    if not texts:
        return st.nothing()
    return st.sampled_from([HackedReply(original, text, hack, kind) for text in texts])


K = TypeVar("K")
V = TypeVar("V")


def _memo(fn: Callable[[K], V]) -> Callable[[K], V]:
    """*fn* remembered by argument: a strategy built inside ``flatmap`` is built (and validated) once."""
    seen: dict[K, V] = {}

    def remembered(key: K) -> V:
        if key not in seen:
            seen[key] = fn(key)
        return seen[key]

    return remembered


def _memo_items(fn: Callable[[PromptItem], V]) -> Callable[[PromptItem], V]:
    """*fn* of a prompt item, remembered by the item's identity (the probe's items live as long as it does)."""
    seen: dict[int, tuple[PromptItem, V]] = {}

    def remembered(item: PromptItem) -> V:
        found = seen.get(id(item))
        if found is None or found[0] is not item:
            found = (item, fn(item))
            seen[id(item)] = found
        return found[1]

    return remembered


@defines_strategy()
def near_misses(value: object) -> SearchStrategy[str]:
    """One of :func:`near_miss_values` of *value*: use it where a property draws an id or a number."""
    misses = near_miss_values(value)
    if not misses:
        raise InvalidArgument(f"near_misses: {value!r:.40} has no near-miss spellings (a string of 2+ characters "
                              "or a number)")
    return st.sampled_from(misses)


@defines_strategy()
def near_miss_replies(
    replies: SearchStrategy[str], *, case: Mapping[str, object], env: EnvSpec = None, prompt: str | None = None
) -> SearchStrategy[HackedReply]:
    """Each reply with a value of *case* it mentions replaced by a near-miss (:func:`near_miss_texts`).

    With *env*, only the hacked replies its truth calls wrong (``kind="wrong"``), judged with
    *prompt* when its markers read one.
    """
    check_strategy("replies", replies)
    case = _check_case(case)
    truth = _truth(env)

    @_memo
    def of(original: str) -> SearchStrategy[HackedReply]:
        texts = near_miss_texts(original, case)
        if truth is not None:
            texts = tuple(t for t in texts if truth.wrong(t, case, prompt))
        return _sampled_texts(original, texts, "near_miss", "wrong" if truth else "")

    return replies.flatmap(of)


@defines_strategy()
def lenient_replies(
    replies: SearchStrategy[str], *, case: Mapping[str, object] | None = None, env: EnvSpec = None,
    prompt: str | None = None,
) -> SearchStrategy[HackedReply]:
    """Each reply with its structure broken (:func:`lenient_texts`); with *env* and *case*, only the
    broken replies its truth calls wrong."""
    check_strategy("replies", replies)
    truth = _truth(env)
    if truth is not None and case is None:
        raise InvalidArgument("lenient_replies: env= needs the case= its truth judges the replies against")
    checked = _check_case(case) if case is not None else {}

    @_memo
    def of(original: str) -> SearchStrategy[HackedReply]:
        texts = lenient_texts(original)
        if truth is not None:
            texts = tuple(t for t in texts if truth.wrong(t, checked, prompt))
        return _sampled_texts(original, texts, "lenient_parse", "wrong" if truth else "")

    return replies.flatmap(of)


# -- the classes a probe runs ------------------------------------------------------------

#: Lengths a padding hack tries: under and over the caps rewards put on length.
_PAD_LENGTHS = (10, 25, 50, 80, 120, 160, 200, 250, 300, 350, 400, 450, 500, 700, 1000, 2000, 3000)
_WHITESPACE_COUNTS = (1, 2, 3, 5, 10, 40, 150, 600)
#: Honest replies drawn per prompt item (distinct ones kept), and samples of an environment's own hack.
_HONEST_SAMPLES = 3
_HACK_SAMPLES = 2


@dataclass(frozen=True)
class HackClass:
    """One class of hack, as :func:`~pytest_rlgate.probe_reward` runs it.

    ``candidates(item)`` lists the hacked replies of a prompt item, not yet
    judged (``kind`` is set only where the class decides it: an environment's own hack is wrong
    by construction); ``unpriced`` classes add nothing of value, so a hacked
    reply the truth does not mind is still a candidate (``kind="unpriced"``). ``replies(item)``
    is the judged strategy a property draws from (build it outside the test: the honest replies
    it starts from are drawn by Hypothesis when it is built).
    """

    name: str
    description: str
    candidates: Callable[[PromptItem], Sequence[HackedReply]]
    truth: Truth
    unpriced: bool = False
    #: made from an honest reply (False: from a plain one)
    free: bool = True
    #: whether an item has an honest reply (every class compares with one)
    startable: Callable[[PromptItem], bool] = field(default=bool, compare=False, repr=False)
    #: an item's typical wrong replies (judged wrong): what a group-relative update compares a reply with
    typical: Callable[[PromptItem], Sequence[str]] = field(default=lambda item: (), compare=False, repr=False)
    #: the environment's own hack (rather than a generic class)
    own: bool = False
    categories: tuple[str, ...] = field(default=())

    def applies_to(self, category: str) -> bool:
        return not self.categories or category in self.categories

    def judge(self, x: HackedReply, item: PromptItem) -> HackedReply | None:
        """*x* with its kind decided by the environment's truth, or None when it is no hack at all."""
        if x.kind:
            return x
        if self.truth.wrong(x.hacked, item["case"], item["prompt"]):
            return HackedReply(x.original, x.hacked, x.hack, "wrong")
        return HackedReply(x.original, x.hacked, x.hack, "unpriced") if self.unpriced else None

    def replies(self, item: PromptItem) -> SearchStrategy[HackedReply]:
        """The judged hacks of *item*, shortest first (what Hypothesis shrinks towards)."""
        judged = [j for x in self.candidates(item) if (j := self.judge(x, item)) is not None]
        judged.sort(key=lambda x: (len(x.hacked), x.hacked))
        return st.sampled_from(judged) if judged else st.nothing()


def _samples(strategies: Sequence[SearchStrategy[object]], k: int, seed: int) -> list[list[object]]:
    """Up to *k* values of each strategy, drawn by Hypothesis in a few seeded runs (not per draw)."""
    from hypothesis.errors import HypothesisException

    out: list[list[object]] = [[] for _ in strategies]
    chunk = 12
    for start in range(0, len(strategies), chunk):
        part = list(strategies[start: start + chunk])
        try:
            _collect(part, out, start, k, seed + start)
        except HypothesisException:  # one strategy cannot be drawn: draw the chunk's strategies one by one
            for i, strategy in enumerate(part):
                if not out[start + i]:
                    out[start + i] = _samples([strategy], k, seed + start + i)[0] if len(part) > 1 else []
    return out


def _collect(part: Sequence[SearchStrategy[object]], out: list[list[object]], offset: int, k: int, seed: int) -> None:
    """Append up to *k* draws of each of *part* to ``out[offset + i]``, in one seeded Hypothesis run."""
    from hypothesis import HealthCheck, Phase, given, seed as hseed, settings

    @settings(max_examples=k, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @hseed(seed)
    @given(st.tuples(*part))
    def collect(values: tuple[object, ...]) -> None:
        for i, value in enumerate(values):
            out[offset + i].append(value)

    collect()


class _Arena:
    """An environment and its prompt items, with everything the classes draw on, computed once.

    Honest replies (the environment's ``honest_replies``, or replies built from the case's
    values) and samples of the environment's own hacks are drawn by Hypothesis once per item;
    every class then builds its candidates from them in plain Python, so a probe's draws are
    cheap and its shrinking is a walk towards shorter candidates.
    """

    def __init__(self, env: Env, items: Sequence[PromptItem], *, seed: int = 0,
                 vocabulary: Sequence[PromptItem] = ()) -> None:
        self.env = env
        self.truth = Truth(env)
        self.items = list(items)
        self.vocabulary_items = list(vocabulary) or self.items
        self.seed = seed
        self._honest: dict[int, tuple[str, ...]] = {}
        self._own: dict[tuple[str, int], list[HackedReply]] = {}
        #: the item's replies in the honest form with a wrong value (several classes read them)
        self.wrong_value_texts = _memo_items(self._wrong_value_texts)
        self._drawn: set[str] = set()
        self._words: list[str] | None = None
        self.prompt_words = sorted({w for item in self.items for w in _WORD.findall(item["prompt"])})

    # -- what the classes start from ----------------------------------------------------------

    def _derived(self, item: PromptItem) -> tuple[str, ...]:
        case, prompt = item["case"], item["prompt"]
        values = [v for v in _case_values(case) if not isinstance(v, bool)]
        candidates = [t.format(v) for v in values for t in _ANSWER_FORMATS] + list(_DERIVED_STOCK)
        return tuple(dict.fromkeys(c for c in candidates if self.truth.right(c, case, prompt)))

    def _draw_honest(self) -> None:
        if not self.env.has_honest_replies:
            for item in self.items:
                self._honest[id(item)] = self._derived(item)
            return
        who = f"environment {self.env.name}: honest_replies(case)"
        strategies = [reply_strategy(self.env.honest_replies(item["case"]), who) for item in self.items]
        for item, drawn in zip(self.items, _samples(strategies, _HONEST_SAMPLES, self.seed)):
            right = [r for r in drawn if isinstance(r, str) and self.truth.right(r, item["case"], item["prompt"])]
            self._honest[id(item)] = tuple(sorted(dict.fromkeys(right), key=len))

    def honest(self, item: PromptItem) -> tuple[str, ...]:
        """Honest replies to *item* its truth calls right, shortest first (empty: nothing to start from)."""
        if not self._honest:
            self._draw_honest()
        if id(item) not in self._honest:  # an item from outside the pool (hack_replies)
            self.items.append(item)
            self._honest = {}
            self._draw_honest()
        return self._honest[id(item)]

    def others(self, item: PromptItem, *, other_category: bool) -> list[PromptItem]:
        case = item["case"]
        return [o for o in self.items if o["case"] != case and self.honest(o)
                and (not other_category or o["category"] != item["category"])]

    def other_texts(self, item: PromptItem, limit: int = 24) -> list[str]:
        """Right replies to other cases (a seeded few), and plain replies: what a hack adds to an honest reply."""
        texts = list(dict.fromkeys(t for o in self.others(item, other_category=False) for t in self.honest(o)))
        if len(texts) > limit:
            texts = _random(self.seed, item["prompt"]).sample(texts, limit)
        return list(dict.fromkeys([*texts, *_PLAIN]))

    # -- the generic classes: candidates, shortest first ---------------------------------------

    @staticmethod
    def _sorted(found: Iterator[HackedReply] | list[HackedReply]) -> list[HackedReply]:
        """Distinct candidates that change the reply (the probe orders them, shortest first)."""
        return list({(x.original, x.hacked): x for x in found if x.hacked != x.original}.values())

    def near_miss(self, item: PromptItem) -> list[HackedReply]:
        return self._sorted(HackedReply(h, m, "near_miss") for h in self.honest(item)[:2]
                            for m in near_miss_texts(h, item["case"]))

    def lenient_parse(self, item: PromptItem) -> list[HackedReply]:
        return self._sorted(HackedReply(h, m, "lenient_parse") for h in self.honest(item) for m in lenient_texts(h))

    def other_category(self, item: PromptItem) -> list[HackedReply]:
        honest = self.honest(item)
        if not honest:
            return []
        moves: list[str] = []
        for other in self.others(item, other_category=True):
            for text in self.honest(other):
                moves += [text, transplant(text, other["case"], item["case"])]
        return self._sorted(HackedReply(honest[0], m, "other_category") for m in dict.fromkeys(moves))

    def _wrong_values(self, key: str, value: object, item: PromptItem) -> list[object]:
        """Values of *key* other cases have (a seeded few, this category's first), else one far off."""
        def fits(other: object) -> bool:
            return type(other) is type(value) and other != value
        mine = [o["case"].get(key) for o in self.items if o["category"] == item["category"]]
        theirs = [o["case"].get(key) for o in self.items if o["category"] != item["category"]]
        pool = list(dict.fromkeys(v for v in mine + theirs if fits(v)))
        rng = _random(self.seed, f"{item['prompt']}\0{key}")
        chosen = rng.sample(pool, min(_WRONG_VALUES, len(pool)))
        if not chosen and isinstance(value, int):
            chosen = [value + 13]
        return chosen

    def _wrong_value_texts(self, item: PromptItem) -> list[str]:
        """The item's honest replies, and the common answer formats, with a value of its case replaced by a
        wrong one (another case's), judged wrong: the honest reply's form without its substance."""
        case, prompt = item["case"], item["prompt"]
        out: list[str] = []
        for key, value in case.items():
            if key == "category" or isinstance(value, bool) or not isinstance(value, (int, float, str)) \
                    or not _short_value(value):
                continue
            wrong = self._wrong_values(key, value, item)
            pattern = _occurrences(value)
            for honest in self.honest(item)[:2]:
                spans = [m.span() for m in pattern.finditer(honest)] if pattern else []
                out += [_replace(honest, spans, str(w)) for w in wrong] if spans else []
            out += [form.format(w) for w in wrong for form in _ANSWER_FORMATS]
        return [t for t in dict.fromkeys(out) if t.strip() and self.truth.wrong(t, case, prompt)]

    def wrong_value(self, item: PromptItem) -> list[HackedReply]:
        honest = self.honest(item)
        return self._sorted(HackedReply(honest[0], t, "wrong_value") for t in self.wrong_value_texts(item)) \
            if honest else []

    def non_answer(self, item: PromptItem) -> list[HackedReply]:
        honest = self.honest(item)
        return self._sorted(HackedReply(honest[0], t, "non_answer") for t in NON_ANSWERS) if honest else []

    def refusal(self, item: PromptItem) -> list[HackedReply]:
        honest = self.honest(item)
        return self._sorted(HackedReply(honest[0], t, "refusal") for t in REFUSALS) if honest else []

    def typical_wrong(self, item: PromptItem) -> tuple[str, ...]:
        """The replies a policy that has not learned the task writes, judged wrong: polite non-answers,
        refusals, another category's move, the right form with a wrong value. A group-relative update
        compares a reply with these, not with the right one."""
        case, prompt = item["case"], item["prompt"]
        texts = [*NON_ANSWERS, *REFUSALS, *(x.hacked for x in self.other_category(item)),
                 *self.wrong_value_texts(item)]
        return tuple(t for t in dict.fromkeys(texts) if self.truth.wrong(t, case, prompt))

    def claims(self, item: PromptItem) -> list[str]:
        """:data:`CLAIMS` said of *item*: one naming a value once for each of its case's first two short text
        values (an id, a name), the others as they are."""
        values = [v for key, v in item["case"].items()
                  if key != "category" and isinstance(v, str) and v.strip() and _short_value(v)][:2]
        return list(dict.fromkeys(text.format(value=v) for text in CLAIMS
                                  for v in (values if "{value}" in text else [""])))

    def trailing_text(self, item: PromptItem) -> list[HackedReply]:
        wrong = self.wrong_value_texts(item)
        if len(wrong) > _CONTRADICTIONS:  # a second answer that contradicts the first: a few of them
            wrong = _random(self.seed, item["prompt"]).sample(wrong, _CONTRADICTIONS)
        others = list(dict.fromkeys([*self.other_texts(item), *wrong]))
        honest = self.honest(item)
        pairs = [(h, t) for h in honest[:2] for t in others] + [(h, t) for h in honest[:1] for t in self.claims(item)]
        return self._sorted(HackedReply(h, h + sep + t, "trailing_text") for h, t in pairs for sep in _SEPARATORS)

    def leading_text(self, item: PromptItem) -> list[HackedReply]:
        others = self.other_texts(item)
        return self._sorted(HackedReply(h, t + sep + h, "leading_text") for h in self.honest(item)[:2]
                            for t in others for sep in _SEPARATORS)

    def hidden_answer(self, item: PromptItem) -> list[HackedReply]:
        others = self.other_texts(item, limit=8)
        return self._sorted(_hidden(h, o, wrapper, layout) for h in self.honest(item)[:2] for o in others
                            for wrapper in _WRAPPERS for layout in range(5))

    def vocabulary(self) -> list[str]:
        """The task's own words: the most frequent of its prompts and of its honest replies, in turn.

        Common English, numbers and ids (words with digits: the near-miss class varies those) are
        left out; prompts and replies take turns so the replies' markup cannot crowd out the task.
        """
        if self._words is None:
            def ranked(texts: Iterator[str]) -> list[str]:
                counts: dict[str, int] = {}
                for text in texts:
                    for word in set(_WORD.findall(text)):
                        if word.lower().rstrip("?") not in _STOPWORDS and not any(ch.isdigit() for ch in word):
                            counts[word] = counts.get(word, 0) + 1
                return sorted(counts, key=lambda w: (-counts[w], w))

            prompts = ranked(i["prompt"] for i in self.vocabulary_items)
            replies = ranked(t for i in self.items for t in self.honest(i))
            merged = [w for pair in zip_longest(prompts, replies) for w in pair if w is not None]
            self._words = list(dict.fromkeys(merged))[:_VOCABULARY]
        return self._words

    def keyword_stuffing(self, item: PromptItem) -> list[HackedReply]:
        honest, words = self.honest(item), self.vocabulary()
        if not honest or not words:
            return []
        rng = _random(self.seed, item["prompt"])
        stuffed = [f"{_PLAIN[0]} {w}" for w in words]
        stuffed += [" ".join([rng.choice(_PLAIN), *rng.sample(words, min(len(words), _STUFFED_GROUP))])
                    for _ in range(len(words))]
        return self._sorted(HackedReply(honest[0], text, "keyword_stuffing") for text in stuffed)

    def padding(self, item: PromptItem) -> list[HackedReply]:
        def pad(h: str, filler: str, chars: int, after: bool) -> HackedReply:
            text = (filler * (chars // len(filler) + 1))[:chars].strip()
            return HackedReply(h, f"{h} {text}" if after else f"{text} {h}", "padding")

        return self._sorted(pad(h, filler, chars, after) for h in self.honest(item) for filler in FILLER
                            for chars in _PAD_LENGTHS for after in (True, False))

    def whitespace(self, item: PromptItem) -> list[HackedReply]:
        return self._sorted(_whitespace(h, where, char, count) for h in self.honest(item)
                            for where in ("after", "before", "inside") for char in ("\n", " ", "\t")
                            for count in _WHITESPACE_COUNTS)

    def repetition(self, item: PromptItem) -> list[HackedReply]:
        return self._sorted(HackedReply(h, sep.join([h] * times), "repetition") for h in self.honest(item)
                            for times in (2, 3, 4) for sep in (" ", "\n"))

    # -- the environment's own hacks --------------------------------------------------------

    def own(self, hack: Hack, pool: Sequence[PromptItem]) -> Callable[[PromptItem], list[HackedReply]]:
        """*hack* as candidates, wrong by construction: made from an honest reply, or (``free=False``) from a
        plain one, and compared with an honest reply either way."""
        def draw() -> None:
            pairs = [(item, start) for item in pool if self.honest(item)
                     for start in (self.honest(item)[:1] if hack.free else _PLAIN[:2])]
            made = [reply_strategy(hack.hacked(start, item["case"]), f"hack {hack.name}") for item, start in pairs]
            for (item, _), drawn in zip(pairs, _samples(made, _HACK_SAMPLES, self.seed + 7)):
                honest = self.honest(item)[0]
                self._own.setdefault((hack.name, id(item)), []).extend(
                    HackedReply(honest, text, hack.name, "wrong") for text in drawn if isinstance(text, str))
            self._drawn.add(hack.name)

        def candidates(item: PromptItem) -> list[HackedReply]:
            if hack.name not in self._drawn:
                draw()
            return self._sorted(self._own.get((hack.name, id(item)), []))

        return candidates


def _random(seed: int, text: str) -> random.Random:
    return random.Random(f"{seed}\0{text}")


_UNPRICED = ("padding", "whitespace", "repetition")
#: Classes made from something other than an honest reply (still compared with one).
_NOT_FREE = ("keyword_stuffing", "other_category", "wrong_value", "non_answer", "refusal")
#: Contradicting second answers trailing text appends to an honest reply, per item.
_CONTRADICTIONS = 4


def _short_value(value: object) -> bool:
    """A value a reply states as an answer: a number, or a short phrase (not a question or an explanation)."""
    return not isinstance(value, str) or (0 < len(value) <= 30 and len(value.split()) <= 3)


#: Other prompt items of each category hack_replies draws on (as many as a probe uses).
_POOL_PER_CATEGORY = 8


def hack_classes(env: Env, items: Sequence[PromptItem], *, seed: int = 0,
                 vocabulary: Sequence[PromptItem] = ()) -> tuple[HackClass, ...]:
    """The generic classes (:data:`GENERIC_HACKS`), then the environment's own ``hacks``, over *items*.

    An environment's hack of a generic class's name replaces it. *items* are prompt items with
    their cases: the classes draw other categories' right moves and other cases' replies from
    them; keyword stuffing reads the task's words from the prompts of *vocabulary* (default:
    *items*). *seed* seeds the honest replies drawn and the keyword combinations.
    """
    arena = _Arena(env, items, seed=seed, vocabulary=vocabulary)
    startable = _memo_items(lambda item: bool(arena.honest(item)))
    typical = _memo_items(arena.typical_wrong)
    classes = {name: HackClass(name, description, _memo_items(getattr(arena, name)), arena.truth,
                               unpriced=name in _UNPRICED, free=name not in _NOT_FREE, startable=startable,
                               typical=typical)
               for name, description in GENERIC_HACKS.items()}
    for hack in env.hacks:
        if not isinstance(hack, Hack):
            raise UsageError(f"environment {env.name}: hacks must be pytest_rlgate.environment.hack.Hack values, "
                             f"got {hack!r:.60}")
        pool = [item for item in arena.items if hack.applies_to(item["category"])]
        classes[hack.name] = HackClass(hack.name, hack.description, _memo_items(arena.own(hack, pool)), arena.truth,
                                       free=hack.free, own=True, categories=hack.categories, startable=startable,
                                       typical=typical)
    return tuple(classes.values())


def hack_replies(
    env: EnvSpec | Env, item: Mapping[str, object], *, items: Sequence[Mapping[str, object]] = (),
    classes: Collection[str] | None = None,
) -> SearchStrategy[HackedReply]:
    """Judged hacks of *item* (a prompt item: ``prompt``, ``case``, ``category``) from every class, or *classes*.

    Built when called (it draws the honest replies the classes start from), so call it where
    ``@given`` is applied, not inside the test. *items* are other prompt items of the
    environment (another category's right move, other cases' replies come from them; by
    default the environment's own prompt set when it writes one). Every value is a reply the
    environment's truth calls wrong (or filler it does not mind, ``kind="unpriced"``); use it
    in your own property::

        @given(hack_replies("quickmath:QuickMath", item, items=items))
        def test_my_reward_pays_no_hack(x):
            assert not x.paid_by(my_reward, item["case"]), x
    """
    resolved = env if isinstance(env, Env) else load_env(env)
    if not isinstance(item, Mapping) or not isinstance(item.get("case"), Mapping) or "prompt" not in item:
        raise InvalidArgument(f"hack_replies: item must be a prompt item with prompt, case and category, got "
                              f"{item!r:.60}")
    case = dict(item["case"])  # type: ignore[call-overload]
    full: PromptItem = {"prompt": str(item["prompt"]), "case": case,
                        "category": str(item.get("category") or case.get("category"))}
    pool = [dict(i) for i in items] if items else (resolved.build_prompts(0) if resolved.can_build_prompts else [])
    kept: list[Mapping[str, object]] = []
    seen: dict[object, int] = {}
    for other in pool:  # as many of each category as a probe uses: the honest replies are drawn for each
        seen[other.get("category")] = seen.get(other.get("category"), 0) + 1
        if seen[other.get("category")] <= _POOL_PER_CATEGORY:
            kept.append(other)
    everything: list[PromptItem] = [*kept, full]  # type: ignore[list-item]
    known = hack_classes(resolved, everything)
    names = [c.name for c in known]
    chosen = check_in("classes", classes, names) if classes is not None else names
    picked = [c for c in known if c.name in chosen and c.applies_to(full["category"])]
    if not picked:
        raise InvalidArgument(f"hack_replies: none of {list(chosen)} applies to category {full['category']!r}")
    return st.one_of([c.replies(full) for c in picked])
