"""Reward tables: YAML or JSONL files that pin what a reward pays, row by row.

Pure on purpose (no pytest here): :func:`load_reward_table` turns one file into validated
:class:`RewardRow` objects that remember their file and line, and every mistake becomes a
:class:`~pytest_rlgate.errors.SpecError` that names ``file:line`` and the fix. The pytest
side (``pytest_rlgate.plugin.specs``) only turns rows into items.

A YAML table::

    reward: mypkg.rewards:score                 # module:attr, called as fn(reply, case)
    tolerance: 0.001                            # optional, for every row
    rows:
      - id: unanswerable-says-so
        prompt: Bob has some pears and eats 2. How many are left?
        case: {answer: null, category: unanswerable}
        reply: I cannot tell from that.
        expected: 1.0
        note: saying so is the whole job when the question gives too little

A JSONL table has the same keys: an optional first line without ``reply`` is the header
(``{"reward": "pkg.mod:fn"}``), every other line is one row.

A row without a ``case`` gets one from its prompt: the header's ``case_for``, else the
``case_for`` of the environment the header names (``env: mypkg.envs:Calc``), else the
session's environment (``--rlgate-env``), else the prompt text itself is the case. A table
with ``env:`` and no ``reward:`` is graded by that environment's ``score``.

A table is code: its ``reward``, ``case_for`` and ``env`` name Python that runs when the
table is read, so trust a table as you trust the code it imports. The reader refuses only
what cannot be meant (builtins that evaluate text, like ``builtins:eval``) and bounds what
could hang or flood a test run: nesting depth, YAML alias expansion, number size, message
length. Anything else that goes wrong, including user code raising ``SystemExit`` on
import, is a :class:`~pytest_rlgate.errors.SpecError` for that one table.
"""

from __future__ import annotations

import importlib
import inspect
import math
import numbers
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field as dataclass_field
from pathlib import Path
from typing import Protocol

import yaml

from ..data.jsonl import iter_json_lines
from ..environment.contract import Env, load_env
from ..environment.trust import evaluates_text
from ..errors import DataError, RewardValueError, RlgateError, SpecError, UsageError
from ..options import MAX_DEPTH
from .suffixes import SPEC_SUFFIXES

__all__ = ["SPEC_SUFFIXES", "RewardRow", "RewardValueError", "load_reward_table", "resolve_callable"]

_HEADER_FIELDS = frozenset({"reward", "case_for", "env", "tolerance", "field"})
_ROW_FIELDS = frozenset(
    {"id", "prompt", "case", "reply", "steps", "expected", "tolerance", "note", "category", "reward", "field"}
)
#: Characters ``-k`` expressions understand inside an identifier (pytest's mark/expression.py).
_ID = re.compile(r"[\w.:\-\[\]/]+")
_DEFAULT_TOLERANCE = 1e-6
_FORMAT_HINT = "see docs/specs.md for the table format"
#: Most values YAML aliases may expand to in one table: a shared case a hundred times is
#: a few thousand; an alias bomb is billions.
MAX_ALIAS_EXPANSION = 100_000
#: Longest row id: it becomes the pytest item name.
_MAX_ID = 200
#: Errors raised by user code a table names (its import, ``case_for``, ``env``): all of them
#: are that table's error, ``SystemExit`` included; only ``KeyboardInterrupt`` stops the run.
_USER_CODE_ERRORS = (Exception, SystemExit)
_MERGE_TAG = "tag:yaml.org,2002:merge"


def _short(value: object, limit: int = 80) -> str:
    """``repr`` of a value from a table, cut to *limit* characters (a message stays one short line)."""
    try:
        text = repr(value)
    except (RecursionError, ValueError):  # a self-referencing or oversized value
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, reading ``1e-6`` as a float (YAML 1.1 wants ``1.0e-6``), with
    bounded nesting and alias expansion: a deep or self-multiplying document is refused
    while it is composed, before anything is built from it."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._expanded = 0
        self._sizes: dict[int, int] = {}

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)
            size = self._sizes.get(id(node))
            if size is None:
                raise yaml.composer.ComposerError(None, None, "found an alias to a node that contains it "
                                                  "(a recursive value)", event.start_mark)
            self._expanded += size
            if self._expanded > MAX_ALIAS_EXPANSION:
                raise yaml.composer.ComposerError(None, None, f"YAML aliases expand to more than "
                                                  f"{MAX_ALIAS_EXPANSION:,} values (an alias bomb?)",
                                                  event.start_mark)
            return node
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels",
                                              event.start_mark)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = node.value if isinstance(node, yaml.SequenceNode) else []
        self._sizes[id(node)] = 1 + sum(self._sizes.get(id(child), 0) for child in children)
        return node


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


@dataclass(frozen=True)
class RewardRow:
    """One pinned row: what *reward* must pay for *reply* to this prompt or case."""

    id: str
    path: str
    line: int
    reward_path: str
    reward: Callable[..., object] = dataclass_field(repr=False, compare=False)
    reply: str
    expected: float
    tolerance: float
    prompt: str | None = None
    case: Mapping[str, object] | str | None = None
    steps: list[Mapping[str, object]] | None = None
    category: str | None = None
    note: str | None = None
    field: str | None = None
    #: keyword arguments the callable takes besides (reply, case); decided at load time
    pass_steps: bool = False
    pass_prompt: bool = False

    @property
    def location(self) -> str:
        return f"{self.path}:{self.line}"

    def evaluate(self) -> float:
        """Call the reward on this row and return its number.

        :raises RewardValueError: when the reward returns something that is not a number (or,
            with ``field``, not a mapping holding one).
        """
        kwargs: dict[str, object] = {}
        if self.pass_steps:
            kwargs["steps"] = self.steps
        if self.pass_prompt:
            kwargs["prompt"] = self.prompt
        try:
            value = self.reward(self.reply, self.case, **kwargs)
        except UsageError as exc:  # an environment's score, which checks its own number: the row's failure
            raise RewardValueError(exc.reason) from None
        if self.field is not None:
            if not isinstance(value, Mapping) or self.field not in value:
                raise RewardValueError(f"{self.reward_path} returned {value!r}, which has no field {self.field!r}")
            value = value[self.field]
        return _reward_number(self.reward_path, value)


def _reward_number(member: str, value: object) -> float:
    """What a reward returned, as a finite float: text, a bool, NaN, an infinity or an integer
    beyond a double (``10**400``) is the row's failure, named with the value, never a bare
    ``OverflowError`` (numpy's numbers are numbers)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise RewardValueError(f"{member} returned {_short(value)}; a reward must return "
                               "a number")
    try:
        number = float(value)
    except (OverflowError, TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise RewardValueError(f"{member} returned {_short(value, 40)}; a reward must return a finite number "
                               "(no NaN, no infinity, nothing beyond ±1.8e308)")
    return number


# ---------------------------------------------------------------------------------------
# Resolving module:attr


def resolve_callable(spec: object, *, path: str, line: int | None, what: str = "reward") -> Callable[..., object]:
    """Import ``module:attr`` (``attr`` may be dotted) and check that it is callable."""
    if not isinstance(spec, str) or spec.count(":") != 1 or not all(spec.split(":")):
        raise SpecError(f"{what} must be 'module:attr' (e.g. 'mypkg.rewards:score'), got {spec!r}",
                        path=path, line=line)
    module_name, attr = spec.split(":")
    try:
        obj: object = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise SpecError(f"{what} {spec!r}: cannot import module {module_name!r} ({exc}); check the spelling, "
                        "or add its folder to the `pythonpath` ini setting", path=path, line=line) from None
    except _USER_CODE_ERRORS as exc:  # the user's module failed to import (even by sys.exit): say so, once
        raise SpecError(f"{what} {spec!r}: importing {module_name!r} raised {type(exc).__name__}: {exc}",
                        path=path, line=line) from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            public = sorted(n for n in dir(obj) if not n.startswith("_") and callable(getattr(obj, n, None)))
            hint = f"; callables there: {', '.join(public[:12])}" if public else ""
            raise SpecError(f"{what} {spec!r}: {module_name!r} has no attribute {attr!r}{hint}",
                            path=path, line=line)
        obj = getattr(obj, part)
    if not callable(obj):
        raise SpecError(f"{what} {spec!r} is a {type(obj).__name__}, not a function; name a callable "
                        "like fn(reply, case) -> float", path=path, line=line)
    if evaluates_text(obj):
        raise SpecError(f"{what} {spec!r} evaluates or opens what it is given; a table must name a function "
                        "that scores a reply, like mypkg.rewards:score", path=path, line=line)
    return obj


def _accepts(fn: Callable[..., object], name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # builtins without a signature: assume the plain form
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


# ---------------------------------------------------------------------------------------
# Reading the two formats into (header, [(line, row, {key: line})])

_Raw = tuple[int, object, dict[str, int]]


def _check_nodes(root: yaml.Node, path: str) -> None:
    """Refuse, before anything is built, what PyYAML would accept or misreport: a tag with no
    safe constructor (``!!python/object``), a merge key (``<<``; it would surface as a
    duplicate field), the same key twice in one mapping (PyYAML keeps the last silently)."""
    known = {tag for tag in _Loader.yaml_constructors if tag is not None}
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        line = node.start_mark.line + 1
        if node.tag == _MERGE_TAG:
            raise SpecError("YAML merge key '<<' is not supported in reward tables; write the fields out, "
                            "or share a whole value with an anchor (case: *name)", path=path, line=line)
        if node.tag not in known:
            raise SpecError(f"unsupported YAML tag {_short(node.tag)}: reward tables hold plain data (text, "
                            "numbers, lists, mappings); drop the tag", path=path, line=line)
        if isinstance(node, yaml.MappingNode):
            first: dict[tuple[str, str], int] = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    if (key.tag, key.value) in first:
                        raise SpecError(f"field {_short(key.value, 40)} appears twice in one mapping (first on "
                                        f"line {first[key.tag, key.value]}); keep one", path=path,
                                        line=key.start_mark.line + 1)
                    first[key.tag, key.value] = key.start_mark.line + 1
                stack.extend((key, value))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)


def _load_yaml(path: str, text: str) -> tuple[yaml.Node | None, object]:
    """(root node, data) of a YAML table; every YAML problem is a ``SpecError`` that names its kind."""
    try:
        loader = _Loader(text)  # the reader refuses control characters right here
    except yaml.YAMLError as exc:
        raise SpecError(f"YAML error: {exc}", path=path) from None
    try:
        root = loader.get_single_node()
        if root is None:
            return None, None
        _check_nodes(root, path)
        return root, loader.construct_document(root)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = " ".join(str(p) for p in (exc.context, exc.problem) if p)
        hint = ("check the indentation and quote replies that contain ': ', '#' or start with '{', '[' or '<'"
                if isinstance(exc, (yaml.scanner.ScannerError, yaml.parser.ParserError)) else _FORMAT_HINT)
        kind = "YAML syntax error" if "indentation" in hint else "YAML error"
        raise SpecError(f"{kind}: {problem}; {hint}", path=path, line=None if mark is None else mark.line + 1) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"YAML error: {exc}", path=path) from None
    finally:
        loader.dispose()


def _read_yaml(path: str, text: str) -> tuple[dict[str, object], int, list[_Raw]]:
    root, data = _load_yaml(path, text)
    if root is None or data is None:
        raise SpecError(f"the table is empty; add a 'reward:' and 'rows:' ({_FORMAT_HINT})", path=path, line=1)
    header: dict[str, object]
    rows: object
    if isinstance(data, list):
        header, rows_node, rows = {}, root, data
    elif isinstance(data, dict):
        header = {k: v for k, v in data.items() if k != "rows"}
        rows_node = next((v for k, v in root.value if k.value == "rows"), None)
        rows = data.get("rows")
        if rows_node is None or not isinstance(rows, list):
            raise SpecError(f"no 'rows:' list; put the rows under a top-level 'rows:' key ({_FORMAT_HINT})",
                            path=path, line=root.start_mark.line + 1)
    else:
        raise SpecError(f"expected a mapping with 'reward:' and 'rows:', got a {type(data).__name__}",
                        path=path, line=root.start_mark.line + 1)
    header_line = root.start_mark.line + 1
    if isinstance(root, yaml.MappingNode):
        header_line = next((k.start_mark.line + 1 for k, _ in root.value if k.value == "reward"), header_line)
    raws: list[_Raw] = []
    for node, row in zip(rows_node.value, rows, strict=True):
        keys = ({str(k.value): k.start_mark.line + 1 for k, _ in node.value}
                if isinstance(node, yaml.MappingNode) else {})
        raws.append((node.start_mark.line + 1, row, keys))
    return header, header_line, raws


def _read_jsonl(path: str, file: Path) -> tuple[dict[str, object], int, list[_Raw]]:
    header: dict[str, object] = {}
    header_line = 1
    raws: list[_Raw] = []
    try:
        for number, obj in iter_json_lines(file, what="reward table"):
            if isinstance(obj, dict) and not raws and not header and not {"reply", "expected"} & set(obj):
                header, header_line = obj, number
                continue
            raws.append((number, obj, {key: number for key in obj} if isinstance(obj, dict) else {}))
    except DataError as exc:
        raise SpecError(exc.reason, path=path, line=exc.line) from None
    return header, header_line, raws


# ---------------------------------------------------------------------------------------
# Validation


def _number(value: object, *, name: str, path: str, line: int, minimum: float | None = None) -> float:
    """*value* as a finite float: an infinite tolerance would pass every row, a NaN none."""
    nan = isinstance(value, float) and math.isnan(value)  # math.isnan overflows on a 400-digit int
    if isinstance(value, bool) or not isinstance(value, (int, float)) or nan:
        raise SpecError(f"{name!r} must be a number, got {_short(value)}; write it without quotes, e.g. {name}: 0.2",
                        path=path, line=line)
    try:
        number = float(value)
    except OverflowError:  # an integer beyond float range (hundreds of digits)
        number = math.inf
    if not math.isfinite(number):
        raise SpecError(f"{name!r} must be a finite number, got {_short(value, 40)}", path=path, line=line)
    if minimum is not None and number < minimum:
        raise SpecError(f"{name!r} must be at least {minimum}, got {_short(value)}", path=path, line=line)
    return number


def _check_field_names(fields: Iterable[object], *, path: str, line: int) -> None:
    """Field names are text; a number or list as a key is a typo, and would not sort with the rest."""
    odd = next((key for key in fields if not isinstance(key, str)), None)
    if odd is not None:
        raise SpecError(f"field name {_short(odd, 40)} is not text ({type(odd).__name__}); field names are words "
                        "like 'prompt' or 'expected'", path=path, line=line)


class _Resolve(Protocol):
    """``resolve(spec, line, what)``: the callable a table names, imported once per table."""

    def __call__(self, spec: object, line: int, what: str = ...) -> Callable[..., object]: ...


@dataclass(frozen=True)
class _Source:
    """What the header says every row defaults to."""

    #: the header's ``reward`` and ``case_for`` specs (``module:attr``, checked when resolved)
    reward: object
    case_for: object
    #: whose ``case_for`` reads a row's case: the table's ``env:``, else the session's
    env: Env | None
    #: the table's own ``env:``, whose ``score`` grades a table that names no reward
    table_env: Env | None
    tolerance: float


def _env(spec: object, path: str, line: int) -> Env:
    if not isinstance(spec, str) or not spec.strip():
        raise SpecError(f"'env' must be an environment spec string (a registered name or 'module:attr'), "
                        f"got {spec!r}", path=path, line=line)
    try:
        return load_env(spec)
    except RlgateError as exc:
        raise SpecError(f"env: {exc}", path=path, line=line) from None
    except _USER_CODE_ERRORS as exc:  # the environment's own module broke on import
        raise SpecError(f"env {spec!r}: loading it raised {type(exc).__name__}: {exc}", path=path, line=line) from None


def load_reward_table(
    path: str | Path,
    *,
    default_reward: str | None = None,
    default_env: Env | None = None,
    display_path: str | None = None,
) -> list[RewardRow]:
    """Read and validate one reward table.

    :param path: a ``.yaml``/``.yml`` or ``.jsonl`` file.
    :param default_reward: ``module:attr`` used when the file names none (the plugin passes
        the ``rlgate_reward_function`` ini value).
    :param default_env: the environment whose ``case_for`` reads the case of a row that has
        none, unless the table names its own ``env:`` (the plugin passes the session's).
    :param display_path: how messages name the file (the plugin passes it relative to the
        rootdir); defaults to *path*.
    :raises SpecError: for a syntax error, an unknown or missing field, a reward that cannot
        be imported or called, a non-numeric ``expected``, a duplicate id or an empty file;
        the message names the file, the line and the fix.
    """
    file = Path(path)
    shown = display_path or str(path)
    if file.suffix == ".jsonl":
        header, header_line, raws = _read_jsonl(shown, file)
    elif file.suffix in (".yaml", ".yml"):
        try:
            text = file.read_text(encoding="utf-8-sig")  # a byte-order mark is an editor's habit, not an error
        except UnicodeDecodeError as exc:
            raise SpecError(f"not UTF-8 ({exc.reason} at byte {exc.start}); save the table as UTF-8",
                            path=shown) from None
        except OSError as exc:
            raise SpecError(f"cannot be read ({exc.strerror or exc}); a reward table is a file", path=shown) from None
        header, header_line, raws = _read_yaml(shown, text)
    else:
        raise SpecError(f"unknown table format {file.suffix!r}; use one of {', '.join(SPEC_SUFFIXES)}", path=shown)
    _check_field_names(header, path=shown, line=header_line)
    unknown = sorted(set(header) - _HEADER_FIELDS)
    if unknown:
        raise SpecError(f"unknown top-level field(s) {', '.join(map(repr, unknown))}; allowed: "
                        f"{', '.join(sorted(_HEADER_FIELDS | {'rows'}))}", path=shown, line=header_line)
    if not raws:
        raise SpecError(f"the table has no rows; add at least one row with prompt, reply and expected "
                        f"({_FORMAT_HINT})", path=shown, line=header_line)

    callables: dict[str, Callable[..., object]] = {}

    def resolve(spec: object, line: int, what: str = "reward") -> Callable[..., object]:
        key = f"{what}={spec}"
        if key not in callables:
            callables[key] = resolve_callable(spec, path=shown, line=line, what=what)
        return callables[key]

    file_env = _env(header["env"], shown, header_line) if "env" in header else None
    file_reward = header.get("reward", None if file_env is not None else default_reward)
    file_case_for = header.get("case_for")
    file_tolerance = _DEFAULT_TOLERANCE
    if "tolerance" in header:
        file_tolerance = _number(header["tolerance"], name="tolerance", path=shown, line=header_line, minimum=0)
    if file_reward is not None and "reward" in header:
        resolve(file_reward, header_line)
    if file_case_for is not None:
        resolve(file_case_for, header_line, "case_for")
    source = _Source(reward=file_reward, case_for=file_case_for, env=file_env or default_env,
                     table_env=file_env, tolerance=file_tolerance)

    rows: list[RewardRow] = []
    seen: dict[str, int] = {}
    for line, raw, key_lines in raws:
        rows.append(_row(shown, line, raw, key_lines, header, source, resolve))
        first = seen.setdefault(rows[-1].id, line)
        if first != line:
            raise SpecError(f"duplicate id {rows[-1].id!r} (first used on line {first}); ids must be unique "
                            "within a table because they name the pytest items", path=shown, line=line)
    return rows


def _row(
    path: str,
    line: int,
    raw: object,
    key_lines: Mapping[str, int],
    header: Mapping[str, object],
    source: _Source,
    resolve: _Resolve,
) -> RewardRow:
    if not isinstance(raw, dict):
        raise SpecError(f"a row must be a mapping of fields (prompt, reply, expected, ...), got "
                        f"{type(raw).__name__} {_short(raw)}", path=path, line=line)

    def at(key: str) -> int:
        return key_lines.get(key, line)

    _check_field_names(raw, path=path, line=line)
    unknown = sorted(set(raw) - _ROW_FIELDS)
    if unknown:
        raise SpecError(f"unknown field {unknown[0]!r}; a row may have {', '.join(sorted(_ROW_FIELDS))}",
                        path=path, line=at(unknown[0]))
    for required in ("reply", "expected"):
        if required not in raw:
            raise SpecError(f"row is missing {required!r}; add `{required}: ...` to it", path=path, line=line)
    if "prompt" not in raw and "case" not in raw:
        raise SpecError("row needs a 'prompt' (the case is read from it) or an explicit 'case'",
                        path=path, line=line)
    reply = raw["reply"]
    if not isinstance(reply, str):
        raise SpecError(f"'reply' must be a string, got {reply!r}; quote it", path=path, line=at("reply"))
    prompt = raw.get("prompt")
    if prompt is not None and not isinstance(prompt, str):
        raise SpecError(f"'prompt' must be a string, got {prompt!r}; quote it", path=path, line=at("prompt"))
    case = raw.get("case")
    if case is not None and not isinstance(case, (dict, str)):
        raise SpecError(f"'case' must be a mapping (e.g. {{answer: 4, category: arithmetic}}), got {case!r}",
                        path=path, line=at("case"))
    steps = raw.get("steps")
    if steps is not None and (not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps)):
        raise SpecError(f"'steps' must be a list of mappings like {{tool: lookup_order, arguments: {{...}}}}, "
                        f"got {steps!r}", path=path, line=at("steps"))
    expected = _number(raw["expected"], name="expected", path=path, line=at("expected"))
    tolerance = source.tolerance
    if "tolerance" in raw:
        tolerance = _number(raw["tolerance"], name="tolerance", path=path, line=at("tolerance"), minimum=0)
    for text_field in ("note", "category", "field"):
        value = raw.get(text_field, header.get(text_field) if text_field == "field" else None)
        if value is not None and not isinstance(value, str):
            raise SpecError(f"{text_field!r} must be a string, got {value!r}", path=path, line=at(text_field))

    reward_spec = raw.get("reward", source.reward)
    if reward_spec is not None:
        reward = resolve(reward_spec, at("reward") if "reward" in raw else line)
    elif source.table_env is not None:
        reward, reward_spec = source.table_env.score, f"environment {source.table_env.name}'s score"
    else:
        raise SpecError("no reward function: add `reward: module:attr` (or `env: SPEC`) at the top of the "
                        "table, or set the ini option rlgate_reward_function", path=path, line=line)
    pass_steps = steps is not None
    if pass_steps and not _accepts(reward, "steps"):
        raise SpecError(f"row has 'steps' but {reward_spec} takes no 'steps' parameter; drop the steps or use "
                        "a reward like fn(reply, case, steps=None)", path=path, line=at("steps"))
    pass_prompt = prompt is not None and _param(reward, "prompt")

    if case is None:
        case = _case(prompt, source, resolve, path, line)
    category = raw.get("category")
    if category is None and isinstance(case, Mapping) and isinstance(case.get("category"), str):
        category = case["category"]

    row_id = raw.get("id")
    if row_id is None:
        row_id = f"row-{line}"
    if not isinstance(row_id, str) or len(row_id) > _MAX_ID or not _ID.fullmatch(row_id):
        raise SpecError(f"id {_short(row_id, 60)} must be letters, digits and - _ . : / [ ] only, at most {_MAX_ID} "
                        "of them (so `-k` can select it), "
                        "e.g. word_problem-off-by-one", path=path, line=at("id"))
    return RewardRow(
        id=row_id, path=path, line=line, reward_path=str(reward_spec), reward=reward, reply=reply,
        expected=expected, tolerance=tolerance, prompt=prompt, case=case, steps=steps, category=category,
        note=raw.get("note"), field=raw.get("field", header.get("field")), pass_steps=pass_steps,
        pass_prompt=pass_prompt,
    )


def _param(fn: Callable[..., object], name: str) -> bool:
    """True only for a *named* parameter: ``**kwargs`` alone does not ask for the prompt."""
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _case(
    prompt: str | None,
    source: _Source,
    resolve: _Resolve,
    path: str,
    line: int,
) -> Mapping[str, object] | str | None:
    """The case for a prompt: the header's ``case_for``, else the environment's (the table's
    ``env:``, else the session's), else the prompt text itself."""
    if source.case_for is not None:
        case_for: Callable[..., object] = resolve(source.case_for, line, "case_for")
    elif source.env is not None and source.env.has_case_for:
        case_for = source.env.case_for
    else:
        return prompt
    try:
        case = case_for(prompt)
    except _USER_CODE_ERRORS as exc:  # the user's case_for broke on this prompt
        raise SpecError(f"case_for({_short(prompt)}) raised {type(exc).__name__}: {exc}",
                        path=path, line=line) from None
    if case is not None and not isinstance(case, (Mapping, str)):
        raise SpecError(f"case_for({_short(prompt)}) returned {_short(case)}; it must return the case, a mapping",
                        path=path, line=line)
    return case
