"""The gate's options, each declared once: its default, its bound and its help.

The command line (``rlgate gate``), the pytest plugin (``--rlgate-*`` and ``rlgate_*``) and
the Python API (``compare(before, after, margin=...)``) all build one :class:`GateOptions`,
validated where it is built, and the gates read typed fields from it. The flags of
``rlgate gate`` and the plugin's settings are generated from the fields' metadata, so a
default or a bound changed here changes every door and every help text. Pure Python (no
numpy), so the plugin imports it when pytest starts.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ..errors import RlgateDeprecationWarning, RlgateWarning, UsageError
from ..options import CONFIDENCE, RESAMPLES, SEED, SHARE, Number

if TYPE_CHECKING:
    from ..environment.contract import EnvSpec
    from .release import ReleasePolicy

__all__ = ["BOOTSTRAP_METHOD", "BOOTSTRAP_SEED", "BY", "CONFIDENCE_LEVEL", "DEFAULT_METHOD", "FAMILY_LEVEL", "LEVEL",
           "FLIPS_IN", "MARGIN", "METHODS", "METHOD_NAMES", "N_RESAMPLES", "SHOW_FLIPS", "Choice", "GateOptions",
           "Method", "OrNone", "flag_help", "old_spelling", "parse_metric", "shown_default"]

T = TypeVar("T")

Method = Literal["expanded", "percentile", "basic", "t"]
#: every interval the gate knows (:func:`~pytest_rlgate.gate.stats.paired_bootstrap`)
METHODS: tuple[Method, ...] = ("expanded", "percentile", "basic", "t")
#: The paired t interval, at the level the family test sets: its critical value is the one the
#: scenario sign flips calibrate, so the verdict it prints is exactly the family's decision
#: (benchmarks/bench_family.py: run-level false-fail at or below 5 % at 2, 4 and 8 categories).
#: The bootstrap intervals (``expanded`` is Hesterberg's expanded percentile) remain, at the
#: same level.
DEFAULT_METHOD: Method = "t"
#: what :func:`~pytest_rlgate.gate.stats.paired_bootstrap` makes unless told: Hesterberg's expanded
#: percentile, 95.4 % coverage at 15 units and a 2.3 % false-regression rate (nominal 2.5 %) in
#: benchmarks/bench_stats_calibration.py, where the plain percentile gives 93.2 % and 3.2 %
BOOTSTRAP_METHOD: Method = "expanded"
#: how each method is named in every printed interval
METHOD_NAMES: dict[str, str] = {
    "expanded": "expanded-percentile bootstrap",
    "percentile": "percentile bootstrap",
    "basic": "basic bootstrap",
    "t": "paired t",
}
#: the one grouping the gate knows
BY = "category"
#: a change inside ±10 points of pass@1 is "flat"
MARGIN = 0.10
CONFIDENCE_LEVEL = 0.95
#: resamples per interval: the percentile bounds move by under 0.005 between reruns at 15 units
N_RESAMPLES = 10_000
#: the bootstrap's seed (each comparison draws from its own stream derived from it)
BOOTSTRAP_SEED = 0
#: flips shown per failing comparison: the scenarios that lost the most
SHOW_FLIPS = 3
#: which comparisons list their flips: the failing ones, or every one
FLIPS_IN: tuple[str, ...] = ("failing", "all")
#: an unchanged run fails the whole gate (every category, overall and every guard) at most this often; a
#: watched run (rlgate watch, GateCallback) and a sample until decided hold their looks together at it too
FAMILY_LEVEL = 0.05
#: the range of a family level, declared once for the gate, a watched run and a sample until decided
LEVEL = Number(0, 0.5, "0.05", low_open=True, high_open=True)
#: the drop every category's holdout should see (the README's story: no-id pass@1 0.95 -> 0.75)
SEES_DROP = 0.20
#: the metrics a gate may add to pass@1: pass^K (all K replies of a prompt pass) and pass@K (any of K)
_METRIC = re.compile(r"^pass([\^@])([1-9][0-9]{0,2})$")


def old_spelling(old: str, value: T, new: str) -> T:
    """*value*, given under the keyword *old* that is now *new*: accepted for one release, with a warning."""
    warnings.warn(f"{old}= is now {new}=; {old}= will be removed", RlgateDeprecationWarning, stacklevel=4)
    return value


def parse_metric(name: str) -> tuple[str, int]:
    """``pass^4`` -> (``"^"``, 4); a UsageError for anything else."""
    found = _METRIC.match(name) if isinstance(name, str) else None
    if found is None:
        raise UsageError(f"metric {name!r}: the gate adds pass^K (every one of K replies passes) or pass@K (any of "
                         "K passes), K from 1 to 999, e.g. pass^4")
    return found.group(1), int(found.group(2))


@dataclass(frozen=True)
class Choice:
    """A text option with a fixed set of values: an argparse ``type`` and a check, like :class:`Number`."""

    choices: tuple[str, ...]

    def describe(self) -> str:
        return f"one of {', '.join(self.choices)}"

    def problem(self, value: object) -> str | None:
        return None if value in self.choices else f"expected {self.describe()}"

    def __call__(self, text: str) -> str:
        if text not in self.choices:
            raise argparse.ArgumentTypeError(f"{text[:40]!r}: choose {self.describe()}")
        return text


@dataclass(frozen=True)
class OrNone:
    """A :class:`Number` option that may also be ``none`` (``--family-level none``)."""

    number: Number

    def describe(self) -> str:
        return f"{self.number.describe()}, or none"

    def problem(self, value: object) -> str | None:
        return None if value is None else self.number.problem(value)

    def __call__(self, text: str) -> float | None:
        return None if text.strip().lower() == "none" else self.number(text)


def _option(default: T, help: str, *, bound: Number | Choice | OrNone | None = None, flag: str | None = None,
            setting: str | None = None, label: str | None = None, aliases: tuple[str, ...] = (),
            none: str | None = None) -> T:
    """A field with its metadata: *help*, the *bound* its values keep, the ``rlgate gate`` *flag*
    (and its older spellings, *aliases*, accepted for one release), the plugin *setting*
    (``--rlgate-<setting>`` / ``rlgate_<setting>``), the *label* of messages and, for an
    :class:`OrNone` bound, what ``none`` means (said only where a door accepts it)."""
    return field(default=default, metadata={"help": help, "bound": bound, "flag": flag, "setting": setting,
                                            "label": label, "aliases": aliases, "none": none})


def flag_help(spec: dataclasses.Field[object], *, none: bool = True) -> str:
    """A field's help at a door: with what ``none`` means where the door accepts it (*none*), else without."""
    meaning = spec.metadata.get("none")
    return f"{spec.metadata['help']} ('none': {meaning})" if none and meaning else str(spec.metadata["help"])


@dataclass(frozen=True)
class GateOptions:
    """Every option of the gate (one adapter or a recipe across training seeds), validated when built.

    Build one with keywords (``GateOptions(margin=0.05)``), change one with
    :meth:`replace`, or let :func:`pytest_rlgate.compare` build it from its keywords.
    ``seed=`` is accepted for *bootstrap_seed* by :meth:`build`.
    """

    by: str = _option(BY, "group rows by this field", bound=Choice((BY,)), flag="--by")
    guards: tuple[str, ...] | None = _option(
        None, "marker that must not regress (repeatable; default: the --env's guards, else none; --guard '' for none)",
        flag="--guard")
    margin: float = _option(MARGIN, "flat means inside ±M", bound=SHARE, flag="--margin", setting="margin")
    family_level: float | None = _option(
        FAMILY_LEVEL, "run-level false-fail: every comparison that can fail (each category, overall, each guard) is "
                      "held together so that an unchanged run fails at most this often",
        bound=OrNone(LEVEL), flag="--family-level",
        setting="family-level", label="family_level", none="each comparison on its own, at the confidence level")
    confidence_level: float = _option(CONFIDENCE_LEVEL, "two-sided confidence of each comparison when "
                                                        "--family-level is none", bound=CONFIDENCE,
                                      flag="--confidence", setting="confidence", label="confidence level")
    n_resamples: int = _option(N_RESAMPLES, "draws: the scenario sign flips that set the family's level (the default "
                                            "t), or a bootstrap method's resamples", bound=RESAMPLES,
                               flag="--resamples",
                               setting="resamples", label="resamples")
    method: Method = _option(DEFAULT_METHOD, "interval method", bound=Choice(METHODS), flag="--method",
                             setting="method")
    bootstrap_seed: int | None = _option(BOOTSTRAP_SEED, "seed of the bootstrap resampling (and the sign flips)",
                                         bound=SEED, flag="--bootstrap-seed", setting="bootstrap-seed",
                                         aliases=("--seed",))
    max_drop: float | None = _option(None, "also fail when a lower bound is below -X (non-inferiority)",
                                     bound=SHARE, flag="--max-drop")
    require_moved: bool = _option(False, "also fail unless overall pass@1 moved up", flag="--require-moved")
    fail_on_inconclusive: bool = _option(False, "also fail on any inconclusive or insufficient verdict",
                                         flag="--fail-on-inconclusive")
    metrics: tuple[str, ...] = _option(
        (), "also gate this metric per category, paired over scenarios like pass@1 (repeatable): pass^K, every "
            "one of K replies of a prompt passes (agents' reliability), or pass@K, any of K does",
        flag="--gate-metric")
    categories: tuple[str, ...] | None = _option(
        None, "declared category that must appear on both sides (repeatable; default: the --env's categories, "
              "else none)", flag="--category")
    env: EnvSpec = _option(None, "environment that graded the rows (a registered name, 'module:attr' or "
                                 "'module'): its guards and categories are the defaults of --guard and --category",
                           flag="--env")
    allow_env_change: bool = _option(False, "compare sides whose headers name different environment fingerprints "
                                            "or prompt sets (the result says so); the fix is `rlgate regrade` of "
                                            "the older side", flag="--allow-env-change")
    allow_model_change: bool = _option(False, "compare sides sampled from different served base models (the result "
                                              "says so); an adapter gates against the base it was trained from",
                                       flag="--allow-model-change")
    shared_units_only: bool = _option(False, "the holdout changed: gate the units both sides share and report how "
                                             "many were dropped from each side (default: unpaired units are an "
                                             "error)", flag="--shared-units-only")
    show_flips: int = _option(SHOW_FLIPS, "name the N scenarios that lost the most in each failing comparison, "
                                          "with a reply from each side (0 for none)",
                              bound=Number(0, 1000, "3", integer=True), flag="--show-flips", setting="show-flips",
                              label="show_flips")
    flips_in: str = _option("failing", "which comparisons list their flips: the failing ones or all",
                            bound=Choice(FLIPS_IN), flag="--flips-in")
    base_runs: tuple[str, ...] = _option(
        (), "another base run of BEFORE's policy on the same holdout at another sample seed (repeatable): its rows "
            "join the before side, so the gate pools them and measures the run-to-run noise floor as rlgate train "
            "and rlgate demo do (their holdout_before_seed18.jsonl, ...)", flag="--base-run")
    sees_drop: float | None = _option(
        SEES_DROP, "name each category whose holdout cannot see a drop of D in pass@1 with power 0.8 (rlgate "
                   "plan's figure) at the top of the result; a release policy's sees_drop makes it fail ('none': "
                   "no check)", bound=OrNone(Number(0, 1, "0.20", low_open=True, high_open=True)), flag="--sees-drop",
        setting="sees-drop", label="sees_drop")
    release_policy: str | os.PathLike[str] | ReleasePolicy | None = _option(
        None, "release policy file (YAML or TOML): per category, marker or glob a tier (critical, supporting, "
              "advisory), its confidence and margin, max_drop, max_relative_drop, required, min_units",
        flag="--release-policy", aliases=("--policy",))
    #: the options set explicitly, not left at their default (:meth:`build` and every door record them):
    #: a release policy's family_level yields to an explicit --family-level, even one equal to the default
    given: frozenset[str] = field(default=frozenset(), compare=False, repr=False,
                                  metadata={"help": None, "bound": None, "flag": None, "setting": None, "label": None,
                                            "aliases": ()})

    def __post_init__(self) -> None:
        for name in ("guards", "categories", "metrics", "base_runs"):
            value = getattr(self, name)
            if value is not None:
                if isinstance(value, (str, bytes, Mapping, os.PathLike)) or not isinstance(value, Iterable):
                    raise UsageError(f"{name} must be a list of {'paths' if name == 'base_runs' else 'names'}, "
                                     f"got {value!r}")
                if name == "base_runs":
                    value = (os.fspath(v) for v in value)
                object.__setattr__(self, name, tuple(dict.fromkeys(value)))
        for metric in self.metrics:
            parse_metric(metric)
        if self.by != BY:
            raise UsageError(f"by={self.by!r} is not supported; rows are grouped by {BY!r}")
        for spec in dataclasses.fields(self):
            bound = spec.metadata["bound"]
            value = getattr(self, spec.name)
            if bound is None or spec.name == "by" or value is None and "None" in str(spec.type):
                continue
            problem = bound.problem(value)
            if problem is not None:
                label = spec.metadata["label"] or spec.name
                raise UsageError(f"{label} must be {bound.describe()}, got {value!r}")

    # the overrides are any of the fields above (checked by __post_init__): typing them again would declare each twice
    @classmethod
    def build(cls, options: GateOptions | None = None, /, **overrides: Any) -> GateOptions:
        """*options* (default: every default) with *overrides* applied; an unknown keyword is a UsageError.

        ``seed`` is the old spelling of ``bootstrap_seed`` and still reads as it; ``policy`` is
        the old spelling of ``release_policy`` (a warning, one release).
        """
        if "seed" in overrides:
            if "bootstrap_seed" in overrides:
                raise UsageError("pass bootstrap_seed= or its old spelling seed=, not both")
            overrides["bootstrap_seed"] = overrides.pop("seed")
        if "policy" in overrides:
            if "release_policy" in overrides:
                raise UsageError("pass release_policy= or its old spelling policy=, not both")
            overrides["release_policy"] = old_spelling("policy", overrides.pop("policy"), "release_policy")
        if "holm" in overrides:
            overrides.pop("holm")
            warnings.warn("holm= is no longer used: the gate holds every comparison together at family_level "
                          f"(default {FAMILY_LEVEL:.0%} run-level false-fail); drop holm=", RlgateWarning,
                          stacklevel=2)
        unknown = sorted(set(overrides) - set(cls.names()))
        if unknown:
            raise UsageError(f"unknown gate option(s) {', '.join(unknown)}; the gate takes {', '.join(cls.names())}")
        base = options if options is not None else cls()
        if not isinstance(base, GateOptions):
            raise UsageError(f"options must be a GateOptions, got {type(base).__name__}")
        return dataclasses.replace(base, **overrides, given=base.given | set(overrides)) if overrides else base

    def replace(self, **changes: object) -> GateOptions:
        """A copy with *changes* (validated as a new one)."""
        return GateOptions.build(self, **changes)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The options' names (every field but *given*)."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.name != "given")

    def is_given(self, name: str) -> bool:
        """Whether option *name* was set explicitly (else it holds its default)."""
        return name in self.given

    @classmethod
    def field(cls, name: str) -> dataclasses.Field[object]:
        """The field *name* (its help, bound and flag in ``metadata``)."""
        return next(f for f in dataclasses.fields(cls) if f.name == name)

    def __record__(self) -> dict[str, object]:
        """The options as JSON: an environment by its name, a release policy by its file."""
        out = {name: getattr(self, name) for name in self.names()}
        out["env"] = getattr(self.env, "name", self.env)
        policy = getattr(self.release_policy, "source", self.release_policy)
        out["release_policy"] = os.fspath(policy) if isinstance(policy, os.PathLike) else policy
        return out

    def to_argv(self) -> list[str]:
        """The ``rlgate gate`` flags that rebuild these options: every one that differs from its default.

        An environment or a release policy given as an object is written by its name (its
        registered name, its policy file), as a command line can only name them.
        """
        words: list[str] = []
        record = self.__record__()
        for spec in dataclasses.fields(self):
            flag = spec.metadata["flag"]
            if flag is None or record[spec.name] == spec.default and not self.is_given(spec.name):
                continue
            value = record[spec.name]
            if isinstance(value, bool):
                words.append(flag)
            elif isinstance(value, tuple):
                words += [w for item in (value or ("",)) for w in (flag, str(item))]
            else:
                words += [flag, "none" if value is None else f"{value:g}" if isinstance(value, float)
                          else os.fspath(value) if isinstance(value, os.PathLike) else str(value)]
        return words

    @classmethod
    def settings(cls) -> dict[str, dataclasses.Field[object]]:
        """plugin setting name (``resamples``) -> its field, for the options the plugin sets session-wide."""
        return {f.metadata["setting"]: f for f in dataclasses.fields(cls) if f.metadata["setting"]}


def shown_default(spec: dataclasses.Field[object]) -> str:
    """How a field's default reads in help text: ``10000``, ``0.95``, ``expanded``."""
    default = spec.default
    return f"{default:g}" if isinstance(default, float) and not default.is_integer() else str(default)

