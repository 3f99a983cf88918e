"""Graded rows: one JSON line per sampled reply, the input of every gate.

A row is a plain dict::

    {"prompt": str, "scenario_id": str | None, "category": str, "rollout_index": int,
     "reply": str, "score": float, "reward": 0 | 1, "markers": {name: number},
     "case": {...}?, "policy": str?, "sample_seed": int?, "eval_run": int | str?}

``final_text`` (the reference SDK's name) is accepted for ``reply``; ``case`` (written by
:func:`grade_replies`) is what the reply was scored against, so :func:`regrade_rows` can
re-score stored replies when the reward changes. A file written here starts with one
header object saying who graded and sampled the rows (:mod:`pytest_rlgate.data.provenance`);
files without one are read too. ``.jsonl.gz`` files are read and written transparently
(:mod:`pytest_rlgate.data.rowfile`).

Files are read as a stream (one line at a time, validated, never held whole) so a gate
over millions of rows runs in memory that grows with the number of prompts, not rows.
Every problem is a :class:`~pytest_rlgate.errors.DataError` naming ``file:line``, the field
and the fix.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypedDict, TypeGuard, cast

from ..environment.contract import Env, EnvSpec, load_env
from ..errors import DataError, UsageError, hide_user_errors
from ..options import FILE_NUMBER
from ..records import Case, Header, Markers, Row
from .episodes import OLD_NAMES, replayed_fields
from .grading import naming_the_row
from .jsonl import iter_checked_lines
from .provenance import HEADER_KEY, check_header, is_header, row_header
from .rowfile import ROW_FILE, ROW_FILE_FIX, write_lines

__all__ = ["CHANGED", "NEW", "REQUIRED_FIELDS", "SAME", "RowReader", "Rows", "grade_replies", "header_of",
           "iter_checked", "iter_rows", "load_rows", "read_header", "read_rows",
           "refuse_silent_sides", "regrade_rows", "validate_row", "write_rows"]

#: a bad row file read from a user's test fails it with one line naming file:line, not these frames
__tracebackhide__ = hide_user_errors

#: fields every row must carry (``reply`` may be spelled ``final_text``)
REQUIRED_FIELDS: tuple[str, ...] = ("prompt", "category", "rollout_index", "reply", "score", "reward", "markers")

#: what every ``source`` parameter accepts: a row file's path, or rows in memory (each checked
#: by :func:`validate_row`, so anything may come in and only a :class:`Row` goes out)
RowInput = str | os.PathLike[str] | Iterable[object]


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _type_name(value: object) -> str:
    return {type(None): "null", bool: "boolean", str: "string", list: "array", dict: "object"}.get(
        type(value), "number" if _is_number(value) else type(value).__name__
    )


def validate_row(obj: object, *, path: str | None = None, line: int | None = None) -> Row:
    """Check one row and return it normalised (``final_text`` -> ``reply``, ``reward`` int).

    Raises :class:`DataError` at ``path:line`` naming the field that is wrong.
    """

    def fail(message: str) -> DataError:
        return DataError(message, path=path or "<rows>", line=line)

    if type(obj) is dict and _fast_row(obj):
        return obj if type(obj["reward"]) is int else {**obj, "reward": int(obj["reward"])}
    if not isinstance(obj, Mapping):
        raise fail(f"expected a JSON object per line, got {_type_name(obj)}")
    if HEADER_KEY in obj:
        raise fail(f"a row-file header ({HEADER_KEY!r}) is allowed on the first line only (were two row files "
                   "concatenated? gate them with the header of one, or write them again with write_rows)")
    row: dict[str, Any] = dict(obj)  # a user's mapping, checked field by field below
    for old, new in OLD_NAMES.items():  # an episode row written before the counts were named n_*
        if old in row and new not in row and _is_number(row[old]):
            row[new] = row.pop(old)
    if "reply" not in row and "final_text" in row:
        row["reply"] = row.pop("final_text")
    elif "final_text" in row and row["final_text"] != row["reply"]:
        raise fail("'reply' and 'final_text' disagree; keep one of them")
    missing = [name for name in REQUIRED_FIELDS if name not in row]
    if missing:
        raise fail(f"missing field{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))} "
                   "(a graded row needs prompt, category, rollout_index, reply, score, reward, markers; "
                   "grade replies with pytest_rlgate.grade_replies)")
    for name in ("prompt", "category"):
        if not isinstance(row[name], str) or not row[name]:
            raise fail(f"'{name}' must be a non-empty string, got {_type_name(row[name])} {row[name]!r}")
    if not isinstance(row["reply"], str):
        raise fail(f"'reply' must be a string, got {_type_name(row['reply'])}")
    scenario = row.get("scenario_id")
    if scenario is not None and not (isinstance(scenario, str) and scenario):
        raise fail(f"'scenario_id' must be a non-empty string or null, got {_type_name(scenario)} {scenario!r}")
    index = row["rollout_index"]
    if not (isinstance(index, int) and not isinstance(index, bool)) or index < 0:
        raise fail(f"'rollout_index' must be a non-negative integer, got {_type_name(index)} {index!r}")
    score = row["score"]
    if not _is_number(score):
        raise fail(f"'score' must be a number, got {_type_name(score)} {_cut(score)}")
    problem = FILE_NUMBER.problem(score)
    if problem is not None:
        raise fail(f"'score' must be finite and at most 2**53 in size: {problem}, got {_cut(score)}")
    reward = row["reward"]
    if not _is_number(reward) or reward not in (0, 1):
        raise fail(f"'reward' must be 0 or 1 (1 = the reply passes), got {_type_name(reward)} {reward!r}")
    row["reward"] = int(reward)
    markers = row["markers"]
    if not isinstance(markers, Mapping):
        raise fail(f"'markers' must be an object {{name: number}}, got {_type_name(markers)}")
    for name, value in markers.items():
        if not _is_number(value) or FILE_NUMBER.problem(value) is not None:
            raise fail(f"marker {name!r} must be a finite number at most 2**53 in size, got {_type_name(value)} "
                       f"{_cut(value)}")
    if row.get("case") is not None and not isinstance(row["case"], Mapping):
        raise fail(f"'case' must be an object (what the reply was scored against), got {_type_name(row['case'])}")
    if row.get("policy") is not None and not isinstance(row["policy"], str):
        raise fail(f"'policy' must be a string, got {_type_name(row['policy'])}")
    seed = row.get("sample_seed")
    if seed is not None and not (isinstance(seed, int) and not isinstance(seed, bool)):
        raise fail(f"'sample_seed' must be an integer, got {_type_name(seed)} {seed!r}")
    run = row.get("eval_run")
    if run is not None and not (isinstance(run, str) or isinstance(run, int) and not isinstance(run, bool)):
        raise fail(f"'eval_run' must be an integer or a string, got {_type_name(run)} {run!r}")
    return cast(Row, row)  # every field checked above


_NUMBERS = (int, float)
_LOW, _HIGH = FILE_NUMBER.low, FILE_NUMBER.high


def _cut(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def _fast_row(row: object) -> TypeGuard[Row]:
    """True for a plain, valid row (exact built-in types): the common case, checked cheaply.

    Every check :func:`validate_row` makes, in the fewest bytecodes: it runs once per row
    of a million-row gate. Anything else (a bad row, numpy numbers, ``final_text``, an
    empty optional string, a misplaced header) returns False and takes the slow path,
    which accepts what is valid and names what is not.
    """
    if type(row) is not dict:
        return False
    try:
        prompt, category, index, reply = row["prompt"], row["category"], row["rollout_index"], row["reply"]
        score, reward, markers = row["score"], row["reward"], row["markers"]
    except KeyError:
        return False
    if not (type(prompt) is str and prompt and type(category) is str and category
            and type(reply) is str and type(index) is int and index >= 0
            and type(score) in _NUMBERS and _LOW <= score <= _HIGH  # NaN compares False
            and (reward == 0 or reward == 1) and type(reward) in _NUMBERS
            and type(markers) is dict and "final_text" not in row and HEADER_KEY not in row
            and "tool_calls" not in row):  # an episode row of the old names: validate_row renames its counts
        return False
    for value in markers.values():
        if type(value) not in _NUMBERS or not _LOW <= value <= _HIGH:
            return False
    get = row.get
    value = get("scenario_id")
    if value is not None and (type(value) is not str or not value):
        return False
    value = get("policy")
    if value is not None and (type(value) is not str or not value):
        return False
    value = get("eval_run")
    if value is not None and type(value) is not int and (type(value) is not str or not value):
        return False
    value = get("sample_seed")
    if value is not None and type(value) is not int:
        return False
    value = get("case")
    return value is None or type(value) is dict


def _short(text: str, width: int = 40) -> str:
    return repr(text if len(text) <= width else text[: width - 1] + "…")


def _duplicate(key: _Key, index: int, path: str, line: int) -> DataError:
    where = f"scenario {key[0]!r}, " if key[0] is not None else ""
    run = f", eval_run {key[2]!r}" if key[2] is not None else ""
    return DataError(f"duplicate row: {where}prompt {_short(key[1])}, rollout_index {index}{run} appears twice "
                     "(each rollout of a prompt is one row; give re-runs distinct eval_run values)",
                     path=path, line=line)


#: what makes a row unique with its rollout index: (scenario_id, prompt, eval_run), hashed and compared only
_Key = tuple[object, str, object]


class Rows(list[Row]):  # plus where they came from
    """Rows in memory with the provenance header of the file they came from.

    A plain list everywhere a list of rows is expected; ``header`` is None for foreign rows
    (a file without a header, rows built in memory). :func:`write_rows` writes it back, and
    the gate checks it against the other side's (:class:`~pytest_rlgate.data.provenance.Provenance`).
    """

    def __init__(self, rows: Iterable[Row] = (), header: Mapping[str, object] | None = None, *,
                 label: str | None = None) -> None:
        super().__init__(rows)
        self.header: Header | None = None if header is None else dict(header)
        #: the file they were read from, when a gate's messages and hints should name it (else ``<before rows>``)
        self.label = label


def iter_rows(source: RowInput, *, name: str | None = None) -> Iterator[tuple[Row, int | None]]:
    """Yield ``(row, line)`` from a JSONL path or an iterable of dicts, validated, streaming.

    ``line`` is the 1-based file line (or the 1-based position for in-memory rows). A
    file's header line is checked and skipped. An empty source, bad JSON, a bad field or a
    duplicate rollout raises :class:`DataError`.
    """
    for row, line, _new in iter_checked(source, name=name):
        yield row, line


#: how a row's (scenario, prompt, eval_run) relates to the previous row's (:func:`iter_checked`)
SAME, CHANGED, NEW = 0, 1, 2


def iter_checked(source: RowInput, *, name: str | None = None) -> Iterator[tuple[Row, int, int]]:
    """:func:`iter_rows` plus the row's (scenario, prompt, eval_run) key state.

    ``SAME`` as the previous row's, ``CHANGED`` to one seen before, or ``NEW``: a consumer
    counts prompts on ``NEW`` and needs to look at a row's other keys only when it is not
    ``SAME`` (rows of one prompt usually come together). The file is opened on the first
    ``next()``; a caller that needs the header first opens a :class:`RowReader` itself.
    """
    if isinstance(source, Mapping):
        raise UsageError("expected rows (a list of dicts) or a row-file path, got a single dict")
    return _stream(source, name)


def _stream(source: RowInput, name: str | None) -> Iterator[tuple[Row, int, int]]:
    with RowReader(source, name=name) as reader:
        yield from reader


#: one line of a row source: (line, value, checked); the value is a :class:`Row` when
#: ``checked`` (it passed the fast check as it was parsed), else anything, for validate_row
_Line = tuple[int, Any, bool]


class RowReader:
    """One row source, opened once: its provenance header on opening, then its rows from the same handle.

    A file's first non-blank line is read (and checked, once) when the reader is made:
    ``header`` is that header, or None for a file without one; the rows stream when the
    reader is iterated, which it may be once. In-memory rows have the header of a
    :class:`Rows` (else None). A context manager: leaving it closes the file, read or not.

    A source that makes its rows afresh on each pass (``fresh_rows`` true: a reader of
    another tool's format) owns them, so a plain valid row is checked in place, as a file's
    row is, instead of copied; anything else is validated in full.
    """

    def __init__(self, source: RowInput, *, name: str | None = None) -> None:
        if isinstance(source, Mapping):
            raise UsageError("expected rows (a list of dicts) or a row-file path, got a single dict")
        self.is_file = isinstance(source, (str, os.PathLike))
        self.label = os.fspath(source) if isinstance(source, (str, os.PathLike)) else name or "<rows>"
        #: what was opened: a path, or the rows themselves
        self.source = source
        #: the file's lines as (line, value, checked) from the one JSONL reader, None for rows in memory
        self._lines: Generator[_Line, None, None] | None = None
        self._first: list[_Line] = []  #: the first row's line when the file has no header
        self._used = False
        #: after a whole pass: True when every row read had an empty reply (rlgate's own rows; an
        #: eval harness's reader may leave replies out, and is never called silent)
        self.silent = False
        self._watch = not getattr(source, "fresh_rows", False)
        self.header: Header | None
        if isinstance(source, (str, os.PathLike)):
            self._lines = lines = iter_checked_lines(source, what=ROW_FILE, fix=ROW_FILE_FIX, check=_fast_row)
            try:
                self.header = self._read_header(lines)
            except BaseException:
                self.close()
                raise
        else:
            self.header = getattr(source, "header", None)

    def _read_header(self, lines: Iterator[_Line]) -> Header | None:
        for line, obj, checked in lines:
            if not checked and is_header(obj):
                return check_header(obj, path=self.label, line=line)
            self._first = [(line, obj, checked)]
            return None
        return None

    def __iter__(self) -> Iterator[tuple[Row, int, int]]:
        """``(row, line, state)`` for every row (``state`` as :func:`iter_checked` says), then the file is closed."""
        if self._used:
            raise UsageError(f"{self.label}: rows already read (a RowReader streams once)")
        self._used = True
        if self._lines is None:
            source = cast("Iterable[object]", self.source)  # not a path: the constructor opened those
            rows: Iterator[_Line]
            if getattr(source, "fresh_rows", False):
                rows = ((line, row, _fast_row(row)) for line, row in enumerate(source, 1))
            else:  # the caller's rows: validate_row copies what it normalises, so they stay as they were
                rows = ((line, row, False) for line, row in enumerate(source, 1))
            return _checked(rows, self.label, file=False, handle=None, reader=self)
        return _checked(itertools.chain(self._first, self._lines), self.label, file=True, handle=self._lines,
                        reader=self)

    def close(self) -> None:
        if self._lines is not None:
            self._lines.close()  # a generator: closing it closes the file

    def __enter__(self) -> RowReader:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()


def _checked(lines: Iterable[_Line], label: str, *, file: bool, handle: Generator[_Line, None, None] | None,
             reader: RowReader | None = None) -> Iterator[tuple[Row, int, int]]:
    """The one loop every row passes through: validate, refuse duplicates, stream.

    *lines* are (line number, value, checked) of a file after its header, as the JSONL
    reader (:func:`~pytest_rlgate.data.jsonl.iter_checked_lines`) gives them, ``checked``
    when the row passed the fast check as it was parsed; or (position, row, False) of
    in-memory rows. A row is unique per (scenario, prompt, eval_run) and rollout index: several prompts may
    share a scenario (paraphrases of one situation), and re-runs of the same policy
    (``eval_run``) legitimately repeat a rollout index. Each key keeps one int bitmask of the
    indices it had, filed under the key's hash: ints, so the table neither holds a million
    prompt strings nor gives the garbage collector anything to walk. Rows of one prompt
    usually come together, so the previous key and mask stay in locals and the table is
    touched only when the prompt changes. One loop, with no helper generators, because at a
    million rows every call and generator hop shows.
    """
    seen: dict[int, int] = {}
    large: set[tuple[int, int]] = set()
    key: _Key | None = None
    mask = count = slot = 0
    spoke = reader is None or not reader._watch  # a row with a reply that is not empty was seen
    obj: Row  # a checked line's value is a Row (the fast check said so); validate_row makes the others one
    try:
        for line, obj, checked in lines:
            if checked:  # a plain valid row, as the fast parser read it
                if type(obj["reward"]) is not int:
                    obj["reward"] = int(obj["reward"])
            else:  # copies what it normalises: the caller's rows stay
                obj = validate_row(obj, path=label, line=line)
            get = obj.get
            here = (get("scenario_id"), obj["prompt"], get("eval_run"))
            state = SAME
            if here != key:
                if key is not None:
                    seen[slot] = mask
                key, slot = here, hash(here)
                mask = seen.get(slot, -1)
                state = CHANGED
                if mask < 0:
                    state, mask = NEW, 0
            index = obj["rollout_index"]
            if index < 256:
                bit = 1 << index
                if mask & bit:
                    raise _duplicate(here, index, label, line)
                mask |= bit
            elif (slot, index) in large:
                raise _duplicate(here, index, label, line)
            else:
                large.add((slot, index))
            count += 1
            if not spoke:
                spoke = bool(obj["reply"].strip())
            yield obj, line, state
    finally:
        if handle is not None:
            handle.close()
    if reader is not None:
        reader.silent = count > 0 and not spoke
    if count == 0:
        raise DataError("empty row file (no rows; grade some replies first)" if file else
                        "no rows (an empty gate proves nothing; grade some replies first)", path=label)


def refuse_silent_sides(readers: Iterable[object]) -> None:
    """After a gate has read its sides: a side whose every reply is empty is a :class:`DataError`.

    Rows of nothing (a policy that wrote no word, an agent whose chat never fitted its
    context) would otherwise compare as two equal sides and pass. Readers of other tools'
    formats are never called silent (a harness may keep no reply text).
    """
    for reader in readers:
        if getattr(reader, "silent", False):
            raise DataError("every reply in these rows is empty: the policy sampled nothing (a chat longer than the "
                            "model's context? a broken chat template?), so a gate of them compares nothing; "
                            "re-sample them", path=getattr(reader, "label", None) or "<rows>")


def read_header(path: str | os.PathLike[str]) -> Header | None:
    """The provenance header of a row file (checked), or None for a file without one.

    Reads the first non-blank line only, so it is cheap on any file size.
    """
    with RowReader(path) as reader:
        return reader.header


def read_rows(source: RowInput) -> Iterator[Row]:
    """Stream validated rows from a JSONL(.gz) file (or check an iterable of row dicts).

    A generator: errors surface while iterating, at the line they concern. A file's header
    is skipped (:func:`read_header` returns it; :func:`load_rows` keeps both).
    """
    for row, _line in iter_rows(source):
        yield row


def header_of(source: RowInput) -> Header | None:
    """The provenance header of rows: a file's first line, or a :class:`Rows`' own (else None)."""
    if isinstance(source, (str, os.PathLike)):
        return read_header(source)
    header: Header | None = getattr(source, "header", None)
    return header


def load_rows(source: RowInput) -> Rows:
    """All rows of a file (or an iterable) in memory, with their header."""
    return Rows(read_rows(source), header=header_of(source))


def _encode(row: Mapping[str, object], label: str, line: int) -> str:
    try:
        return json.dumps(row, ensure_ascii=False, allow_nan=False, separators=(", ", ": "))
    except (TypeError, ValueError) as exc:
        raise DataError(f"cannot be written as JSON ({exc}); keep cases and fields to JSON types",
                        path=label, line=line) from None


def write_rows(
    path: str | os.PathLike[str],
    rows: Iterable[Mapping[str, object]],
    *,
    header: Mapping[str, object] | None = None,
) -> Path:
    """Validate and write rows as JSONL (gzip-compressed for a ``.gz`` name), atomically.

    *header* (default: ``rows.header`` for :class:`Rows`) is written first: build it with
    :func:`pytest_rlgate.data.provenance.row_header`; without one the file is foreign (its
    provenance unknown). Readers never see half a file; a bad row raises before anything is
    replaced.
    """
    if header is None:
        header = getattr(rows, "header", None)
    label = "<rows to write>"
    with write_lines(path) as out:
        if header is not None:
            out.write(_encode(check_header(header, path="<header to write>"), label, 0) + "\n")
        for row, line in iter_rows(rows, name=label):
            out.write(_encode(row, label, line or 0))
            out.write("\n")
    return Path(path)


def grade_replies(
    items: Sequence[Mapping[str, object]],
    replies: Sequence[Sequence[str]],
    *,
    env: EnvSpec = None,
    **meta: object,
) -> list[Row]:
    """Grade ``replies[i]`` (the k replies sampled for ``items[i]``) into rows.

    *env* (the default environment when None) scores each reply against the item's own
    ``case`` (its ``case_for`` fills an item without one), decides ``reward`` with
    ``passes`` and adds its ``markers``. An item's category is its own, else its case's, and
    must be one the environment declares. Each row keeps the ``case`` it was scored
    against, so :func:`regrade_rows` can re-score it after the reward changes. *meta*
    (``policy=``, ``sample_seed=``, ``eval_run=``...) is stamped on every row.
    """
    env = load_env(env)
    if len(items) != len(replies):
        raise UsageError(f"got {len(items)} items but {len(replies)} reply lists (replies[i] holds item i's k replies)")
    clash = sorted(set(meta) & {*REQUIRED_FIELDS, "scenario_id", "final_text", "case"})
    if clash:
        raise UsageError(f"meta keys {clash} would overwrite graded fields")
    rows: list[Row] = []
    for position, (item, sampled) in enumerate(zip(items, replies)):
        if isinstance(sampled, str):
            raise UsageError(f"replies[{position}] is a string; expected the list of k replies for that item")
        where = f"<items>[{position}]"
        prompt = item.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise DataError("no 'prompt' string", path=where)
        own = item.get("case")
        case: Case | None = env.case_for(prompt) if own is None else _case(own, where)
        if case is None:
            raise DataError(f"no 'case', and environment {env.name} reads none from the prompt (it has no "
                            "case_for); give the item its case", path=where)
        category = env.category_of({**item, "case": case})
        if category is None:
            raise DataError(f"no 'category' (and its case names none); use one of {', '.join(env.categories)}",
                            path=where)
        env.check_category(category, path=where)
        for index, reply in enumerate(sampled):
            with naming_the_row(prompt, item.get("scenario_id"), index):
                graded = _grade(env, reply, case, prompt)
            rows.append(cast(Row, {  # graded here; the meta keys clash with no graded field
                "prompt": prompt,
                "scenario_id": item.get("scenario_id"),
                "category": category,
                "rollout_index": index,
                "reply": reply,  # an episode's: the replayed text, which *graded* carries
                **graded,
                "case": case,
                **meta,
            }))
    return rows


def _case(value: object, where: str) -> Case:
    """An item's own ``case``: a mapping, or a :class:`DataError` naming the item."""
    if not isinstance(value, Mapping):
        raise DataError(f"'case' must be an object (what the reply is scored against), got {_type_name(value)}",
                        path=where)
    return value


class _Graded(TypedDict):
    score: float
    reward: int
    markers: Markers


def _grade(env: Env, reply: str, case: Case, prompt: str) -> Mapping[str, object]:
    """``score``, ``reward`` and ``markers`` of one reply: the fields a reward change rewrites.

    An episode environment's reply is an episode's text form: it is replayed from the prompt,
    and the row gets what a sampled episode's row has (the replayed ``reply``, ``transcript``,
    counts, ``stop``, ``turn_markers``), with the environment's tool results, never the text's.
    """
    if env.is_episodic:
        return replayed_fields(env, reply, case, prompt)
    value = env.score(reply, case)
    graded: _Graded = {"score": value, "reward": int(env.passes(value)),
                       "markers": env.markers(reply, case, prompt=prompt)}
    return graded


def regrade_rows(source: RowInput, env: EnvSpec = None) -> Rows:
    """Re-score stored replies with *env*: the same prompts, replies, rollouts and eval runs.

    After a reward changes, the rows of a stored baseline no longer compare with rows graded
    now; re-scoring the stored replies (no sampling, no model) makes them compare again.
    Each row is scored against its own ``case`` (rows written by :func:`grade_replies` keep
    it), else the case *env*'s ``case_for`` reads from the prompt; a row with neither is a
    :class:`DataError` naming its line. ``score``, ``reward`` and ``markers`` are replaced;
    the header (kept, or started for foreign rows) names *env* and its fingerprint.
    """
    env = load_env(env)
    label = os.fspath(source) if isinstance(source, (str, os.PathLike)) else "<rows>"
    header = header_of(source)
    cases: dict[str, Case | None] = {}
    out = Rows()
    for row, line in iter_rows(source, name=label):
        case = row.get("case")
        if case is None:
            prompt = row["prompt"]
            if prompt not in cases:
                cases[prompt] = env.case_for(prompt)
            case = cases[prompt]
            if case is None:
                raise DataError(f"the row keeps no 'case', and environment {env.name} reads none from the prompt "
                                "(it has no case_for), so the reply cannot be re-scored; re-sample these rows",
                                path=label, line=line)
        env.check_category(row["category"], path=label, line=line)
        with naming_the_row(row["prompt"], row.get("scenario_id"), row["rollout_index"], path=label, line=line):
            graded = _grade(env, row["reply"], case, row["prompt"])
        out.append(cast(Row, {**row, **graded}))  # the graded fields replace the old ones
    if header is None:
        policies = {row.get("policy") for row in out}
        seeds = {row.get("sample_seed") for row in out}
        header = row_header(env, policy=policies.pop() if len(policies) == 1 else None,
                            seed=seeds.pop() if len(seeds) == 1 else None)
    out.header = {**header, "env": env.name, "env_fingerprint": env.fingerprint}
    return out
