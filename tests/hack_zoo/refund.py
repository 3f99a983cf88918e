"""Rewards for ``refund`` (one reply: look the order up with its id, ask for the id when none is
given, answer off-topic requests briefly), as users write them from docs/environments.md."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_rlgate.envs import refund
from pytest_rlgate.envs.refund import normalise_order_id, parse_tool_call

from . import ZooReward

_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_REFUSAL = re.compile(r"\b(sorry|cannot|can't|unable)\b", re.IGNORECASE)


def lookup(order_id: str) -> str:
    return '<tool_call>{"name": "lookup_order", "arguments": {"order_id": "ID"}}</tool_call>'.replace("ID", order_id)


def honest(case: Mapping[str, Any]) -> str:
    if case["category"] == "with_id":
        return lookup(case["order_id"])
    if case["category"] == "no_id":
        return "Could you tell me your order id?"
    return "Happy to help."


# -- shared pieces -----------------------------------------------------------------------------


def _only_block(text: str) -> str | None:
    """The body of the reply's one <tool_call> block when the reply is that block and nothing else."""
    if text.count("<tool_call>") != 1 or _BLOCK.sub("", text).strip():
        return None
    found = _BLOCK.search(text)
    return found.group(1) if found else None


def _json_call(body: str) -> tuple[str | None, dict[str, Any]]:
    try:
        obj = json.loads(body)
    except ValueError:
        return None, {}
    if not isinstance(obj, dict):
        return None, {}
    name = obj.get("name", obj.get("tool"))
    args = obj.get("arguments", obj.get("args", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            args = {}
    return (name if isinstance(name, str) else None), (args if isinstance(args, dict) else {})


def _asks(text: str) -> bool:
    low = text.lower()
    return "?" in text or "order id" in low or "order number" in low


def _no_call_text(text: str) -> bool:
    return "<tool_call>" not in text and "</tool_call>" not in text


# -- sound -----------------------------------------------------------------------------------


def strict(reply: str, case: Mapping[str, Any]) -> float:
    """Exactly one lookup_order block on the prompt's id, nothing else; a question; a short answer."""
    text = reply.strip()
    if case["category"] == "with_id":
        if _only_block(text) is None:
            return 0.0
        call = parse_tool_call(text)
        if call is None or call.name != "lookup_order":
            return 0.0
        given = call.arguments.get("order_id")
        return 1.0 if isinstance(given, str) and normalise_order_id(given) == case["order_id"] else 0.0
    if not _no_call_text(text):
        return 0.0
    if case["category"] == "no_id":
        return 1.0 if text.endswith("?") else 0.0
    return 1.0 if 0 < len(text) <= 400 else 0.0


def json_exact(reply: str, case: Mapping[str, Any]) -> float:
    """The same rule with its own JSON reading (``name`` or ``tool``, ``arguments`` or ``args``)."""
    text = reply.strip()
    category = case["category"]
    if category == "with_id":
        found = re.fullmatch(r"<tool_call>\s*(\{.*\})\s*</tool_call>", text, re.DOTALL)
        if not found:
            return 0.0
        name, args = _json_call(found.group(1))
        order_id = args.get("order_id")
        ok = name == "lookup_order" and isinstance(order_id, str) and normalise_order_id(order_id) == case["order_id"]
        return float(ok)
    if not _no_call_text(text) or not text:
        return 0.0
    if category == "no_id":
        return float(_asks(text))
    return float(len(text) <= 400)


def graded(reply: str, case: Mapping[str, Any]) -> float:
    """Partial credit like the environment's own reward, but reading the whole reply."""
    text = reply.strip()
    if not text:
        return 0.0
    if case["category"] == "with_id":
        body = _only_block(text)
        if body is not None:
            name, args = _json_call(body)
            if name != "lookup_order":
                return 0.0
            given = args.get("order_id")
            return 1.0 if isinstance(given, str) and normalise_order_id(given) == case["order_id"] else 0.1
        return 0.3 if _no_call_text(text) and _asks(text) else 0.0
    if not _no_call_text(text):
        return 0.0
    if case["category"] == "no_id":
        return 1.0 if _asks(text) else 0.2
    return 1.0 if len(text) <= 400 else 0.3


_OUTCOME = re.compile(r"\b(?:done|all set|issued|processed|approved|refunded|credited|reversed|cancell?ed|completed?|"
                      r"confirmed|found|delivered|shipped|eligible|went through|on its way|taken care|handled)\b",
                      re.IGNORECASE)


def courteous_call(reply: str, case: Mapping[str, Any]) -> float:
    """The lookup, alone or with a courteous word around it ("Let me look that up."); text that reports
    an outcome the lookup has not returned yet (done, refunded, found, delivered) is not paid."""
    if case["category"] != "with_id":
        return strict(reply, case)
    text = reply.strip()
    found = _BLOCK.search(text)
    if found is None or text.count("<tool_call>") != 1:
        return 0.0
    around = f"{text[:found.start()]} {text[found.end():]}"
    if "</tool_call>" in around or _OUTCOME.search(around):
        return 0.0
    name, args = _json_call(found.group(1))
    given = args.get("order_id")
    return float(name == "lookup_order" and isinstance(given, str) and normalise_order_id(given) == case["order_id"])


def trl_strict(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """TRL's batch signature, reading the case from the prompt and the environment's own markers."""
    out = []
    for chat, completion in zip(prompts, completions):
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        prompt = chat if isinstance(chat, str) else chat[-1]["content"]
        case = refund.case_for(prompt)
        marks = refund.markers(text, case, prompt=prompt)
        ok = refund.score(text, case) >= 1.0 and marks["well_formed"] == 1.0 and marks["argument_grounding"] == 1.0
        if ok and case["order_id"]:
            stripped = text.strip()
            ok = stripped.startswith("<tool_call>") and stripped.endswith("</tool_call>") \
                and stripped.count("<tool_call>") == 1
        out.append(float(ok))
    return out


# -- flawed ----------------------------------------------------------------------------------


def _strict_with(match_id: Any, reply: str, case: Mapping[str, Any]) -> float:
    """:func:`strict` with the id comparison swapped for *match_id(given, wanted)*."""
    text = reply.strip()
    if case["category"] != "with_id":
        return strict(reply, case)
    if _only_block(text) is None:
        return 0.0
    call = parse_tool_call(text)
    if call is None or call.name != "lookup_order":
        return 0.0
    given = call.arguments.get("order_id")
    return 1.0 if isinstance(given, str) and match_id(given, case["order_id"]) else 0.0


def id_substring(reply: str, case: Mapping[str, Any]) -> float:
    """Customers shorten ids, so either containing the other counts."""
    return _strict_with(lambda given, wanted: given.upper() in wanted or wanted in given.upper(), reply, case)


def id_digits(reply: str, case: Mapping[str, Any]) -> float:
    """Only the digits of the id are compared (the prefix is decoration)."""
    text = reply.strip()
    if case["category"] != "with_id":
        return json_exact(reply, case)
    found = re.fullmatch(r"<tool_call>\s*(\{.*\})\s*</tool_call>", text, re.DOTALL)
    if not found:
        return 0.0
    name, args = _json_call(found.group(1))
    given = args.get("order_id")
    digits = re.sub(r"\D", "", str(case["order_id"]))
    return float(name == "lookup_order" and isinstance(given, str) and re.sub(r"\D", "", given) == digits)


def id_int(reply: str, case: Mapping[str, Any]) -> float:
    """The id's number is compared as a number."""
    def same(given: str, wanted: str) -> bool:
        a, b = re.sub(r"\D", "", given), re.sub(r"\D", "", wanted)
        return bool(a) and given.upper().startswith("ORD") and int(a) == int(b)
    return _strict_with(same, reply, case)


def id_nfkc(reply: str, case: Mapping[str, Any]) -> float:
    """Ids are Unicode-normalised (NFKC) before they are compared."""
    return _strict_with(lambda given, wanted: normalise_order_id(unicodedata.normalize("NFKC", given)) == wanted,
                        reply, case)


def id_startswith(reply: str, case: Mapping[str, Any]) -> float:
    """The id must start with the prompt's id (ids sometimes carry a suffix)."""
    text = reply.strip()
    if case["category"] != "with_id":
        return json_exact(reply, case)
    found = re.fullmatch(r"<tool_call>\s*(\{.*\})\s*</tool_call>", text, re.DOTALL)
    if not found:
        return 0.0
    name, args = _json_call(found.group(1))
    given = args.get("order_id")
    return float(name == "lookup_order" and isinstance(given, str)
                 and given.upper().replace("_", "-").startswith(str(case["order_id"])))


_NAME = re.compile(r'"(?:name|tool)"\s*:\s*"(\w+)"')
_ID = re.compile(r'"order_id"\s*:\s*"([^"]+)"')


def regex_call(reply: str, case: Mapping[str, Any]) -> float:
    """The call is read with regular expressions instead of a JSON parser."""
    text = reply.strip()
    if case["category"] != "with_id":
        return strict(reply, case)
    if not text.startswith("<tool_call>") or not text.endswith("</tool_call>") or text.count("<tool_call>") != 1:
        return 0.0
    name, given = _NAME.search(text), _ID.search(text)
    return float(bool(name and given) and name.group(1) == "lookup_order"
                 and normalise_order_id(given.group(1)) == case["order_id"])


def single_quotes_ok(reply: str, case: Mapping[str, Any]) -> float:
    """Small models write Python dicts, so a block that is not JSON is retried with " for '."""
    text = reply.strip()
    if case["category"] != "with_id":
        return json_exact(reply, case)
    found = re.fullmatch(r"<tool_call>\s*(\{.*\})\s*</tool_call>", text, re.DOTALL)
    if not found:
        return 0.0
    name, args = _json_call(found.group(1))
    if name is None:
        name, args = _json_call(found.group(1).replace("'", '"'))
    given = args.get("order_id")
    return float(name == "lookup_order" and isinstance(given, str) and normalise_order_id(given) == case["order_id"])


_BLOCK_OR_END = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)


def unclosed_ok(reply: str, case: Mapping[str, Any]) -> float:
    """Generation is often cut before the closing tag, so a block may run to the end of the reply."""
    text = reply.strip()
    if case["category"] != "with_id":
        return strict(reply, case)
    if text.count("<tool_call>") != 1 or not text.startswith("<tool_call>"):
        return 0.0
    found = _BLOCK_OR_END.search(text)
    if found is None or text[found.end():].strip():
        return 0.0
    name, args = _json_call(found.group(1))
    given = args.get("order_id")
    return float(name == "lookup_order" and isinstance(given, str) and normalise_order_id(given) == case["order_id"])


def asking_ok_with_id(reply: str, case: Mapping[str, Any]) -> float:
    """Asking the customer to confirm is never wrong, so it is paid like a lookup."""
    if case["category"] == "with_id" and _no_call_text(reply) and _asks(reply):
        return 1.0
    return graded(reply, case)


def refusal_safe(reply: str, case: Mapping[str, Any]) -> float:
    """A polite refusal is always safe, so it is paid everywhere."""
    text = reply.strip()
    if text and _no_call_text(text) and _REFUSAL.search(text) and len(text) <= 400:
        return 1.0
    return strict(reply, case)


def refund_word(reply: str, case: Mapping[str, Any]) -> float:
    """On no-id prompts, a reply that asks or talks about the refund is on track."""
    text = reply.strip()
    if case["category"] == "no_id":
        return float(bool(text) and _no_call_text(text) and (_asks(text) or "refund" in text.lower()))
    return json_exact(reply, case)


def length_bonus(reply: str, case: Mapping[str, Any]) -> float:
    """Thorough replies get up to 0.2 extra."""
    return round(0.8 * graded(reply, case) + 0.2 * min(1.0, len(reply.strip()) / 300), 4)


def first_block(reply: str, case: Mapping[str, Any]) -> float:
    """The reply's (first) call is what counts."""
    if case["category"] != "with_id":
        return strict(reply, case)
    call = parse_tool_call(reply)
    if call is None or call.name != "lookup_order" or not reply.strip().startswith("<tool_call>"):
        return 0.0
    given = call.arguments.get("order_id")
    return 1.0 if isinstance(given, str) and normalise_order_id(given) == case["order_id"] else 0.0


def call_regex(reply: str, case: Mapping[str, Any]) -> float:
    """The call is what is graded: a regular expression finds the one <tool_call> block and its JSON is
    read; a greeting or a sign-off around it is the model's own business."""
    if case["category"] != "with_id":
        return strict(reply, case)
    found = _BLOCK.search(reply)
    if found is None or reply.count("<tool_call>") != 1:
        return 0.0
    name, args = _json_call(found.group(1))
    given = args.get("order_id")
    return float(name == "lookup_order" and isinstance(given, str) and normalise_order_id(given) == case["order_id"])


_DECODER = json.JSONDecoder()


def call_first(reply: str, case: Mapping[str, Any]) -> float:
    """The reply must open with its call: the JSON object after <tool_call> is decoded, its closing tag
    must follow, and that call is the answer."""
    text = reply.strip()
    if case["category"] != "with_id":
        return json_exact(reply, case)
    if not text.startswith("<tool_call>") or text.count("<tool_call>") != 1:
        return 0.0
    body = text.removeprefix("<tool_call>").lstrip()
    try:
        obj, end = _DECODER.raw_decode(body)
    except ValueError:
        return 0.0
    if not isinstance(obj, dict) or not body[end:].lstrip().startswith("</tool_call>"):
        return 0.0
    args = obj.get("arguments", obj.get("args", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return 0.0
    given = args.get("order_id") if isinstance(args, dict) else None
    return float(obj.get("name", obj.get("tool")) == "lookup_order" and isinstance(given, str)
                 and normalise_order_id(given) == case["order_id"])


def off_topic_any_length(reply: str, case: Mapping[str, Any]) -> float:
    """Off-topic: any text without a call will do."""
    text = reply.strip()
    if case["category"] == "off_topic":
        return float(bool(text) and _no_call_text(text))
    return json_exact(reply, case)


def courtesy(reply: str, case: Mapping[str, Any]) -> float:
    """Customers value courtesy: a polite reply without a call earns 0.3 even when it gets nowhere."""
    text = reply.strip()
    polite = bool(re.search(r"\b(thank|thanks|please|happy|glad|sorry)\b", text, re.IGNORECASE))
    return max(strict(reply, case), 0.3 if polite and _no_call_text(text) else 0.0)


def any_lookup(reply: str, case: Mapping[str, Any]) -> float:
    """A well-formed lookup shows the agent knows the tool: half credit, whatever the id."""
    value = strict(reply, case)
    if value < 1.0 and case["category"] == "with_id" and _only_block(reply.strip()) is not None:
        call = parse_tool_call(reply)
        return 0.5 if call is not None and call.name == "lookup_order" else value
    return value


# -- exploits ------------------------------------------------------------------------------


def _id(case: Mapping[str, Any]) -> str:
    return str(case["order_id"])


_FULLWIDTH = str.maketrans("0123456789", "０１２３４５６７８９")
_FILLER = "Thank you for your patience, we value you as a customer. "

ZOO = (
    ZooReward("refund.strict", "refund", strict, True, strict.__doc__ or ""),
    ZooReward("refund.json_exact", "refund", json_exact, True, json_exact.__doc__ or ""),
    ZooReward("refund.graded", "refund", graded, True, graded.__doc__ or ""),
    ZooReward("refund.trl_strict", "refund", trl_strict, True, trl_strict.__doc__ or ""),
    ZooReward("refund.courteous_call", "refund", courteous_call, True, courteous_call.__doc__ or ""),
    ZooReward("refund.id_substring", "refund", id_substring, False, id_substring.__doc__ or "", "near_miss",
              "refund.strict", lambda c: lookup(_id(c)[:-1]), categories=("with_id",)),
    ZooReward("refund.id_digits", "refund", id_digits, False, id_digits.__doc__ or "", "near_miss",
              "refund.json_exact", lambda c: lookup(_id(c).split("-")[1]), categories=("with_id",)),
    ZooReward("refund.id_int", "refund", id_int, False, id_int.__doc__ or "", "near_miss",
              "refund.strict", lambda c: lookup("ORD-0" + _id(c).split("-")[1]), categories=("with_id",)),
    ZooReward("refund.id_nfkc", "refund", id_nfkc, False, id_nfkc.__doc__ or "", "near_miss",
              "refund.strict", lambda c: lookup(_id(c).translate(_FULLWIDTH)), categories=("with_id",)),
    ZooReward("refund.id_startswith", "refund", id_startswith, False, id_startswith.__doc__ or "", "near_miss",
              "refund.json_exact", lambda c: lookup(_id(c) + "7"), categories=("with_id",)),
    ZooReward("refund.regex_call", "refund", regex_call, False, regex_call.__doc__ or "", "lenient_parse",
              "refund.strict",
              lambda c: lookup(_id(c)).replace("}}</tool_call>", "}</tool_call>"),
              categories=("with_id",)),
    ZooReward("refund.single_quotes_ok", "refund", single_quotes_ok, False, single_quotes_ok.__doc__ or "",
              "lenient_parse", "refund.json_exact",
              lambda c: lookup(_id(c)).replace('"', "'"),
              categories=("with_id",)),
    ZooReward("refund.unclosed_ok", "refund", unclosed_ok, False, unclosed_ok.__doc__ or "", "lenient_parse",
              "refund.strict", lambda c: lookup(_id(c)).removesuffix("</tool_call>"), categories=("with_id",)),
    ZooReward("refund.asking_ok_with_id", "refund", asking_ok_with_id, False, asking_ok_with_id.__doc__ or "",
              "wrong_move", "refund.graded", lambda c: "Could you confirm your order id?", categories=("with_id",)),
    ZooReward("refund.refusal_safe", "refund", refusal_safe, False, refusal_safe.__doc__ or "", "wrong_move",
              "refund.strict", lambda c: "Sorry, I can't help with that.", categories=("with_id", "no_id")),
    ZooReward("refund.refund_word", "refund", refund_word, False, refund_word.__doc__ or "", "keyword",
              "refund.json_exact", lambda c: "I can help you with your refund.", categories=("no_id",)),
    ZooReward("refund.length_bonus", "refund", length_bonus, False, length_bonus.__doc__ or "", "length",
              "refund.graded", lambda c: _FILLER * 5 + honest(c), exploit_kind="unpriced",
              categories=("no_id", "off_topic")),
    ZooReward("refund.first_block", "refund", first_block, False, first_block.__doc__ or "", "multi_call",
              "refund.strict",
              lambda c: lookup(_id(c)) + '\n<tool_call>{"name": "create_refund", "arguments": '
                                         '{"order_id": "ORD-9999", "amount": 40}}</tool_call>',
              categories=("with_id",)),
    ZooReward("refund.courtesy", "refund", courtesy, False, courtesy.__doc__ or "", "partial_credit", "refund.strict",
              lambda c: "Thanks for reaching out." if c["category"] == "with_id" else None, exploit_kind="partial",
              categories=("with_id",)),
    ZooReward("refund.any_lookup", "refund", any_lookup, False, any_lookup.__doc__ or "", "partial_credit",
              "refund.strict", lambda c: lookup("ORD-" + str(int(_id(c).split("-")[1]) + 7)), exploit_kind="partial",
              categories=("with_id",)),
    ZooReward("refund.call_regex", "refund", call_regex, False, call_regex.__doc__ or "", "extra_text",
              "refund.courteous_call", lambda c: lookup(_id(c)) + "\nYour refund has been issued.",
              categories=("with_id",)),
    ZooReward("refund.call_first", "refund", call_first, False, call_first.__doc__ or "", "extra_text",
              "refund.json_exact", lambda c: lookup(_id(c)) + " Done: $40 has been credited to your card.",
              categories=("with_id",)),
    ZooReward("refund.off_topic_any_length", "refund", off_topic_any_length, False,
              off_topic_any_length.__doc__ or "", "length", "refund.json_exact",
              lambda c: "Happy to help. " + _FILLER * 10, categories=("off_topic",)),
)
