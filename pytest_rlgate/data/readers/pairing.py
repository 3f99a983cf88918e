"""Whether two sides may be compared at all: same harness, same tasks, same items.

A paired delta means something only when both sides answered the same items of the same
task. The headers say which harness, tasks and task versions a side came from; two that
differ are refused before any row is read, naming both. Item by item, lm-eval records the
hash of each document, target and prompt (Inspect's samples carry their input and target):
a different document or target is a different item, always refused; a different prompt
over the same item is a changed prompt or chat template, refused unless the reader was
told ``allow_prompt_change`` (then counted and reported).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Protocol

from ...errors import DataError, hide_user_errors
from ...options import ReadOptions
from .hashes import unpack

__all__ = ["check_items", "check_sources", "describe"]

#: a bad log read in a user's test fails it with one line naming file:line, not these frames
__tracebackhide__ = hide_user_errors

_WHAT = ("document", "target", "prompt")
_FIELDS = ("doc_hash", "target_hash", "prompt_hash")


def describe(header: Mapping[str, object] | None) -> str:
    """One side in words: ``an lm-eval 0.4.13 log of rg_refund v2.0`` / ``rlgate rows graded by refund``."""
    if header is None:
        return "foreign rows (no header)"
    source = header.get("source")
    if not isinstance(source, Mapping):
        return f"rlgate rows graded by {header.get('env')}"
    tasks = source.get("tasks")
    listed = ", ".join(f"{t} v{v}" if v is not None else str(t) for t, v in tasks.items()) if isinstance(
        tasks, Mapping) else ""
    listed = listed or "no task"
    version = f" {source['version']}" if source.get("version") else ""
    return f"the {source.get('harness')}{version} log of {listed}"


Side = tuple[str, "Mapping[str, object] | None"]


def check_sources(before: Side, after: Side) -> list[str]:
    """Refuse sides from different harnesses, tasks, task versions or read options; else the notes.

    Each side is ``(label, header)``. Rows without a ``source`` (rlgate's own) pair only with
    rows without one; the gate's provenance check takes it from there.
    """
    (before_label, b), (after_label, a) = before, after
    sb = b.get("source") if b else None
    sa = a.get("source") if a else None
    if not isinstance(sb, Mapping) and not isinstance(sa, Mapping):
        return []

    def refuse(why: str, fix: str) -> DataError:
        return DataError(f"{before_label} is {describe(b)} but {after_label} is {describe(a)}: {why}; {fix}")

    if not isinstance(sb, Mapping) or not isinstance(sa, Mapping) or sb.get("harness") != sa.get("harness"):
        return _raise(refuse("the sides come from different harnesses and do not pair",
                             "evaluate both with the same harness and task"))
    tb, ta = dict(sb.get("tasks") or {}), dict(sa.get("tasks") or {})
    if set(tb) != set(ta):
        only = sorted(set(tb) ^ set(ta))
        return _raise(refuse(f"the sides ran different tasks ({', '.join(only)} on one side only)",
                             "run the same tasks on both sides"))
    changed = sorted(t for t in tb if tb[t] != ta[t])
    if changed:
        return _raise(refuse(f"task version changed ({', '.join(f'{t}: {tb[t]} -> {ta[t]}' for t in changed)})",
                             "evaluate both sides with the same task version"))
    ob, oa = sb.get("options") or {}, sa.get("options") or {}
    if ob != oa:
        diff = sorted(k for k in set(ob) | set(oa) if ob.get(k) != oa.get(k))
        shown = ", ".join(f"{k} {ob.get(k)!r} vs {oa.get(k)!r}" for k in diff)
        return _raise(refuse(f"the sides were read with different options ({shown})",
                             "read both with the same --score-key/--filter/--category-key/--unit-key/--pass-threshold"))
    notes = []
    if sb.get("version") != sa.get("version"):
        notes.append(f"{sb.get('harness')} version differs: {before_label} {sb.get('version')}, "
                     f"{after_label} {sa.get('version')}")
    return notes


def _raise(error: DataError) -> list[str]:
    raise error


class Streamed(Protocol):
    """What the item check reads of a side that has been read (a :class:`~.source.RowSource`):
    its name, its read options, and the items' packed hashes its last pass recorded."""

    @property
    def label(self) -> str: ...

    @property
    def options(self) -> ReadOptions: ...

    @property
    def pairs(self) -> Mapping[Hashable, str]: ...


def check_items(before: Streamed, after: Streamed) -> list[str]:
    """Compare the item hashes both sides recorded while streaming; raise on different items.

    Called when the second side finishes. Items on one side only are the gate's business
    (it names unpaired units); here only items on both sides are checked.
    """
    allow = before.options.allow_prompt_change or after.options.allow_prompt_change
    prompt_changes: list[Hashable] = []
    mine = before.pairs
    for item, packed in after.pairs.items():
        found = mine.get(item)
        if found is None or found == packed:
            continue
        ours, theirs = unpack(found), unpack(packed)
        for position in (0, 1):
            if ours[position] is not None and theirs[position] is not None and ours[position] != theirs[position]:
                raise DataError(
                    f"item {_item(item)} is another {_WHAT[position]} in {before.label} ({_FIELDS[position]} "
                    f"{ours[position]}) than in {after.label} ({theirs[position]}): the sides evaluated different "
                    "data; evaluate both on the same dataset revision")
        if ours[2] is not None and theirs[2] is not None and ours[2] != theirs[2]:
            if not allow:
                raise DataError(
                    f"the prompt of item {_item(item)} changed between {before.label} (prompt_hash {ours[2]}) and "
                    f"{after.label} ({theirs[2]}): a prompt or chat-template change, not only a model change; "
                    "pass --allow-prompt-change to gate it anyway")
            prompt_changes.append(item)
    if prompt_changes:
        return [f"prompts changed on {len(prompt_changes)} item(s) between {before.label} and {after.label} "
                f"(first: {_item(prompt_changes[0])}; compared anyway: --allow-prompt-change)"]
    return []


def _item(item: object) -> str:
    if isinstance(item, tuple):
        return " ".join(map(str, item))
    return str(item)
