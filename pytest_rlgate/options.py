"""Option values shared by the pytest plugin, the ``rlgate`` CLI and the training knobs, parsed one way.

argparse turns the ``ArgumentTypeError`` these raise into a one-line usage error (exit 2),
in pytest and in the CLI alike, so a bad value is refused at parse time, before anything
is loaded, sampled or trained. :class:`Number` also guards the Python API: NaN slips
through every ``x <= 0`` check and infinities or absurd sizes (``--resamples 10**12``)
would allocate without end, so each numeric option states one finite range, checked by
the command line and by the knobs' ``validate`` alike. Pure Python, so the plugin can
import it at load time.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict, TypeVar

from .errors import RlgateDeprecationWarning, UsageError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_T = TypeVar("_T")

__all__ = ["FILE_NUMBER", "HOLDOUT_FRACTION", "MAX_DEPTH", "MAX_NUMBER_DIGITS", "Deprecated", "Number", "ReadOptions",
           "add_deprecated", "add_env_argument", "add_knob_arguments", "add_output_arguments", "bounds_of", "fraction",
           "knob", "knob_flag", "output_dir", "output_file", "path_problem", "share"]


def fraction(text: str) -> float:
    """A holdout fraction, strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from None
    if HOLDOUT_FRACTION.problem(value) is not None:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1 (exclusive), got {text!r}")
    return value


def share(text: str) -> float:
    """A balance share in [0, 1); 0 switches balancing off."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a share in [0, 1), e.g. 0.25, got {text!r}") from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a share in [0, 1), e.g. 0.25, got {text!r}")
    return value


def _cut(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"


def _shown(bound: float) -> str:
    return str(bound) if isinstance(bound, int) else f"{bound:g}"


@dataclass(frozen=True)
class Number:
    """A numeric option's finite range: called on text it is an argparse ``type``; ``problem``
    and ``check`` apply the same range to a value handed to the API."""

    low: float
    high: float
    example: str
    integer: bool = False
    #: the bound itself is outside the range (``(0, 1]`` has ``low_open``)
    low_open: bool = False
    high_open: bool = False
    #: a subnormal (0 < |x| < 2.2e-308) is accepted: a value in a file, not a flag someone typed
    subnormal: bool = False

    def describe(self) -> str:
        """``an integer in [1, 1000000], e.g. 40``: the range and an example, for messages."""
        kind = "an integer" if self.integer else "a number"
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"{kind} in {left}{_shown(self.low)}, {_shown(self.high)}{right}, e.g. {self.example}"

    def problem(self, value: object) -> str | None:
        """None when *value* is in range, else what is wrong with it (one line)."""
        wanted = (int,) if self.integer else (int, float)
        if isinstance(value, bool) or not isinstance(value, wanted):
            return f"expected {self.describe()}"
        try:
            finite = math.isfinite(value)
        except OverflowError:  # an integer beyond a double's range
            finite = False
        if not finite:
            return f"{_cut(value)} is not a finite number; expected {self.describe()}"
        if not self.integer and not self.subnormal and value != 0 and abs(value) < sys.float_info.min:
            return f"{value!r} is too close to 0 to tell from it (write 0, or at least 1e-300); " \
                   f"expected {self.describe()}"
        too_low = value <= self.low if self.low_open else value < self.low
        too_high = value >= self.high if self.high_open else value > self.high
        return f"out of range; expected {self.describe()}" if too_low or too_high else None

    def check(self, value: object) -> None:
        """Raise ``ValueError`` (the :meth:`problem`) when *value* is out of range."""
        problem = self.problem(value)
        if problem is not None:
            raise ValueError(problem)

    def __call__(self, text: str) -> int | float:
        try:
            value: int | float = int(text) if self.integer else float(text)
        except ValueError:  # also int() of more digits than Python converts
            raise argparse.ArgumentTypeError(f"expected {self.describe()}, got {text[:40]!r}") from None
        problem = self.problem(value)
        if problem is not None:
            raise argparse.ArgumentTypeError(f"{problem}, got {text[:40]!r}")
        return value


#: The share of scenarios held out: strictly between 0 and 1, so both splits hold scenarios.
HOLDOUT_FRACTION = Number(0, 1, "0.2", low_open=True, high_open=True)
#: Seeds reach numpy's and torch's generators, which take unsigned 32-bit values.
SEED = Number(0, 2**32 - 1, "17", integer=True)
#: Bootstrap resamples: fewer than 100 give a meaningless interval, a million is already exact
#: to three decimals (and 10**12 would ask for terabytes).
RESAMPLES = Number(100, 1_000_000, "10000", integer=True)
#: A confidence level: below one half an interval says less than a coin; above 0.999 its tails
#: are a handful of resamples, and the printed level would round to 100 %.
CONFIDENCE = Number(0.5, 0.999, "0.95")
#: A score or marker in a row file: finite, and within the range where a double still counts
#: in ones (2**53), so means and sums over a million rows stay finite and exact enough.
FILE_NUMBER = Number(-2**53, 2**53, "0.5", subnormal=True)
#: The gate's flat margin and non-inferiority drop: shares of pass@1.
SHARE = Number(0, 1, "0.10", high_open=True)


#: The deepest nesting any value read from a file may have (a JSON line, a JSON file, a YAML
#: table): a row needs three levels, and a few hundred would overflow the stack of any code
#: that walks the value later.
MAX_DEPTH = 64
#: The most digits an integer read from a file may have: a double's range (about 1.8e308),
#: so every number read converts to float; Python itself refuses to convert 4300 digits.
MAX_NUMBER_DIGITS = 309


def path_problem(path: str | os.PathLike[str], *, directory: bool) -> str | None:
    """None when *path* can be written as a file (or, with *directory*, created or filled as a
    folder), else the one-line reason: it is the other kind, or its nearest existing folder
    is not a folder or not writable. Checked before the work starts, so a long run never
    ends in a traceback at its last write."""
    target = Path(path).expanduser()
    if target.exists():
        if directory and not target.is_dir():
            return "is a file, not a folder; name a folder (it is created if missing)"
        if not directory and target.is_dir():
            return "is a folder; name a file inside it, e.g. " + str(target / "out.json")
        if not os.access(target, os.W_OK | (os.X_OK if directory else 0)):
            return "is not writable; choose a place you may write to"
        return None
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"cannot be created: {parent} is a file, not a folder"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot be created: {parent} is not writable"
    return None


def output_file(text: str) -> Path:
    """An argparse ``type`` for a file the command writes (``--out``, ``--json``, ``--rlgate-report``)."""
    problem = path_problem(text, directory=False)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text!r} {problem}")
    return Path(text).expanduser()


def output_dir(text: str) -> Path:
    """An argparse ``type`` for a folder the command creates or fills (``--out-dir``, ``--runs-dir``)."""
    problem = path_problem(text, directory=True)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{text!r} {problem}")
    return Path(text).expanduser()


def add_env_argument(parser: argparse.ArgumentParser, default: str = "refund", *,
                     resolve: Literal["always", "given"] | None = None) -> None:
    """The CLI's ``--env SPEC``, the same on every command that reads prompts, samples or trains.

    *resolve* says what the ``rlgate`` door does with it before the command runs (``args.env``
    then holds an ``Env``): ``"always"`` (absent: the default environment), ``"given"`` (absent
    stays None: the command finds its own, e.g. a run's), or None (the command's knobs do).
    """
    parser.add_argument("--env", metavar="SPEC", default=None,
                        help="environment: a registered name (refund, arith, reasoning_gym[TASK,...]), "
                             f"'module:attr' or 'module' (default: {default})")
    parser.set_defaults(resolve_env=resolve)


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """``--no-progress`` and ``--verbose``, the same on every command that samples, trains or builds.

    ``args.progress`` is False with ``--no-progress`` and None otherwise: the library then
    shows its bars when stderr is a terminal (:func:`pytest_rlgate._io.progress.progress_enabled`).
    ``args.verbose`` lets third-party warnings, logs and bars through (``rlgate`` silences
    them around the command: :func:`pytest_rlgate._io.progress.third_party_quiet`).
    """
    parser.add_argument("--no-progress", dest="progress", action="store_false", default=None,
                        help="no progress bars (default: shown when stderr is a terminal)")
    parser.add_argument("--verbose", action="store_true",
                        help="let transformers/TRL/datasets warnings, logs and progress bars through")


class KnobMeta(TypedDict):
    """What :func:`knob` declares about a field beside its default (its ``metadata``)."""

    help: str | Callable[[], str]
    group: str
    bound: Number | None
    parse: Callable[[str], object] | None
    metavar: str | tuple[str, ...] | None
    nargs: int | None
    aliases: tuple[str, ...]
    flag: str | None
    fills: str | None


def knob(default: _T, help: str | Callable[[], str], *, group: str, bound: Number | None = None,
         parse: Callable[[str], object] | None = None, metavar: str | tuple[str, ...] | None = None,
         nargs: int | None = None, aliases: tuple[str, ...] = (), flag: str | None = None,
         fills: str | None = None) -> _T:
    """A dataclass field declared once, the TRL way: its default, its help, its range and how its
    flag parses live in the field, and the CLI generates ``--<name>`` from it
    (:func:`add_knob_arguments`).

    *help* may be a callable when the text needs a heavy import (TRL's loss types); *group*
    is the ``--help`` section; *aliases* are older spellings of the flag, still accepted for
    one release with a deprecation warning and hidden from ``--help``; *flag* replaces
    ``--<name>`` where the name cannot be the flag's (``--async``: ``async`` is a Python
    keyword). *fills* names the field of another declared-once class this knob carries a
    value for (a training run's sampling knobs fill
    :class:`~pytest_rlgate.policy.generate.SampleOptions`' fields).
    """
    meta: KnobMeta = {"help": help, "group": group, "bound": bound, "parse": parse, "metavar": metavar,
                      "nargs": nargs, "aliases": aliases, "flag": flag, "fills": fills}
    return dataclasses.field(default=default, metadata=meta)


def knob_meta(spec: dataclasses.Field[object]) -> KnobMeta | None:
    """What :func:`knob` declared about the field *spec*; None for a field it did not make."""
    meta = spec.metadata
    if "help" not in meta or "group" not in meta:
        return None
    return KnobMeta(help=meta["help"], group=meta["group"], bound=meta["bound"], parse=meta["parse"],
                    metavar=meta["metavar"], nargs=meta["nargs"], aliases=meta["aliases"], flag=meta.get("flag"),
                    fills=meta.get("fills"))


def knob_flag(spec: dataclasses.Field[object]) -> str:
    """The flag of the :func:`knob` field *spec*: its declared *flag*, else ``--<name>``."""
    meta = knob_meta(spec)
    return (meta and meta["flag"]) or f"--{spec.name.replace('_', '-')}"


def bounds_of(cls_or_obj: DataclassInstance | type[DataclassInstance]) -> dict[str, Number]:
    """Every numeric knob's range, by field name, read from the fields' :func:`knob` metadata."""
    return {f.name: f.metadata["bound"] for f in dataclasses.fields(cls_or_obj) if f.metadata.get("bound")}


def add_knob_arguments(parser: argparse.ArgumentParser, cls: type[DataclassInstance], *,
                       only: tuple[str, ...] | None = None, defaults: Mapping[str, object] | None = None,
                       helps: Mapping[str, str] | None = None) -> dict[str, argparse._ArgumentGroup]:
    """One flag per :func:`knob` field of *cls* (*only* these names, in this order, when given):
    type, range, help, metavar and default from the field, so every command that takes the
    setting spells, bounds and explains it the same way. *defaults* and *helps* replace a
    field's default and help on this command (``rlgate eval --sample-seed`` defaults to the
    run's own seed). Each older spelling in the field's *aliases* is accepted, hidden from
    ``--help``, with a deprecation warning. The value lands in ``args.<field name>``.
    Returns the ``--help`` sections by title."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name in only if only is not None else tuple(fields):
        spec = fields[name]
        meta = knob_meta(spec)
        if meta is None:
            continue
        if meta["group"] not in groups:
            groups[meta["group"]] = parser.add_argument_group(meta["group"])
        group = groups[meta["group"]]
        help_ = (helps or {}).get(name) or (meta["help"]() if callable(meta["help"]) else meta["help"])
        default = (defaults or {}).get(name, spec.default)
        flag = knob_flag(spec)
        if spec.default is False:
            group.add_argument(flag, action="store_true", help=help_, dest=name)
            for old in meta["aliases"]:
                add_deprecated(group, old, flag, dest=name, nargs=0, const=True)
            continue
        kwargs: dict[str, Any] = {"type": meta["bound"] or meta["parse"]}
        if meta["metavar"] is not None:
            kwargs["metavar"] = meta["metavar"]
        if meta["nargs"] is not None:
            kwargs["nargs"] = meta["nargs"]
        group.add_argument(flag, default=default, help=help_, dest=name, **kwargs)
        for old in meta["aliases"]:
            add_deprecated(group, old, flag, dest=name, **kwargs)
    return groups


class Deprecated(argparse.Action):
    """An older spelling of a flag (*new*), kept for one release: it stores the value like the
    flag does, warns (:class:`~pytest_rlgate.errors.RlgateDeprecationWarning`) and is added
    with ``help=argparse.SUPPRESS``, so ``--help`` shows only the one name."""

    def __init__(self, *args: Any, new: str, **kwargs: Any) -> None:
        self.new = new
        super().__init__(*args, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        warnings.warn(f"{option_string} is now {self.new}; {option_string} will be removed", RlgateDeprecationWarning,
                      stacklevel=2)
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)


def add_deprecated(parser: argparse.ArgumentParser | argparse._ArgumentGroup, old: str, new: str, *, dest: str,
                   **kwargs: Any) -> None:
    """*old*, an older spelling of the flag *new* (same *dest*, same *kwargs* type/nargs), accepted
    for one release with a deprecation warning and hidden from ``--help``."""
    parser.add_argument(old, action=Deprecated, new=new, dest=dest, default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS, **kwargs)


def _read(default: _T, help: str, *, flag: str | None, metavar: str | None = None, old: str | None = None) -> _T:
    """A :class:`ReadOptions` field: its *help*, the ``rlgate gate``/``rlgate convert`` *flag*
    (the plugin's setting is ``--rlgate-`` + the flag's name) and its *metavar*; no flag: per path only.
    *old* is the option's older name (its keyword, ``#key=``, flag and setting), read for one release."""
    return dataclasses.field(default=default, metadata={"help": help, "flag": flag, "metavar": metavar, "old": old})


@dataclass(frozen=True)
class ReadOptions:
    """How an eval harness's per-sample record becomes a graded row; None means the reader's default.

    The options every reader shares, declared once for every door:
    :func:`pytest_rlgate.read_rows` takes them as keywords, ``rlgate gate`` and ``rlgate
    convert`` generate their flags from these fields and the plugin its ``--rlgate-*``
    settings (with ini twins). Pure Python, so the plugin reads the fields when pytest
    starts without loading a reader.

    *format* names the reader (default: detected per path). *category* and *unit* are dotted
    paths into the harness's record (``doc.subject``, ``metadata.category``); *score* names
    the score (``--score-key``; ``metric`` is its old name); *pass_threshold* turns a non-binary
    score into a pass (``score >= X``, or ``<=`` for a metric the harness marks lower-is-better);
    *allow_prompt_change* lets a side
    whose prompts changed (another chat template) be gated against the other anyway.

    *own* holds the values of the options the path's reader declares for itself (lm-eval's
    ``filter``, promptfoo's ``provider``: :class:`~pytest_rlgate.data.readers.source.ReaderOption`),
    each of them, None where unset; *loose* names those that do not shape the rows.
    """

    format: str | None = _read(None, "the format of every side (default: detected per path)", flag="--format",
                               metavar="NAME")
    category: str | None = _read(
        None, "dotted path into a harness's record that names the category (doc.subject, metadata.category, "
              "info.task; default: the reader's)", flag="--category-key", metavar="KEY")
    unit: str | None = _read(None, "dotted path to the unit in a harness record (the resampling cluster; default: "
                                   "the harness's item id)", flag="--unit-key", metavar="KEY")
    score: str | None = _read(None, "the score in a harness's record (a metric, scorer or named score; default: "
                                    "the harness's main one)", flag="--score-key", metavar="NAME", old="metric")
    pass_threshold: float | None = _read(None, "a non-binary score passes at >= X (<= X for a metric the harness "
                                               "marks lower-is-better)", flag="--pass-threshold", metavar="X")
    allow_prompt_change: bool = _read(False, "gate items whose prompt changed between the sides (another chat "
                                             "template), reporting how many; default: refused",
                                      flag="--allow-prompt-change")
    own: Mapping[str, object] = dataclasses.field(default_factory=dict, metadata={"flag": None})
    loose: frozenset[str] = dataclasses.field(default=frozenset(), metadata={"flag": None})

    def __post_init__(self) -> None:
        for name in ("format", "category", "unit", "score"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise UsageError(f"{name}={value!r}: expected a non-empty string")
        for name, value in self.own.items():
            if value is not None and isinstance(value, str) and not value.strip():
                raise UsageError(f"{name}={value!r}: expected a non-empty string")
        threshold = self.pass_threshold
        if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
                                      or not math.isfinite(threshold)):
            raise UsageError(f"pass_threshold={threshold!r}: expected a finite number")
        if not isinstance(self.allow_prompt_change, bool):
            raise UsageError(f"allow_prompt_change={self.allow_prompt_change!r}: expected True or False")

    def text(self, name: str) -> str | None:
        """The value of the reader's own option *name*, as given (None when unset)."""
        value = self.own.get(name)
        return None if value is None else str(value)

    def shaping(self) -> dict[str, object]:
        """The options that decide what a row means (the header records them; both sides must agree).
        The score's key stays ``metric`` there, so a file converted before the rename keeps its fingerprint."""
        shared = {"category": self.category, "unit": self.unit, "metric": self.score,
                  "pass_threshold": self.pass_threshold}
        return {**shared, **{k: v for k, v in sorted(self.own.items()) if k not in self.loose}}

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The shared options' names (the keywords of ``read_rows`` besides a reader's own)."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.name not in ("own", "loose"))

    @classmethod
    def renamed(cls, options: Mapping[str, _T], *, where: str) -> dict[str, _T]:
        """*options* with each field's older name (``metric``) read as its name, with a warning."""
        out = dict(options)
        for spec in dataclasses.fields(cls):
            old = spec.metadata.get("old")
            if old and old in out:
                if spec.name in out:
                    raise UsageError(f"{where}: pass {spec.name} or its old name {old}, not both")
                warnings.warn(f"{where}: {old} is now {spec.name}; {old} will be removed", RlgateDeprecationWarning,
                              stacklevel=3)
                out[spec.name] = out.pop(old)
        return out

    @classmethod
    def flags(cls) -> dict[str, dataclasses.Field[object]]:
        """flag name without its dashes (``category-key``) -> its field, for every option a door sets for all paths."""
        return {f.metadata["flag"][2:]: f for f in dataclasses.fields(cls) if f.metadata["flag"]}
