"""A release policy: what each category (or guarded marker) is worth to a release, in a file.

The gate's rule is the same for every category; a release owner's is not: "no_id is
critical, off_topic is advisory, with_id may drop at most two points". A release policy says
so in YAML or TOML, without Python::

    tiers:                      # optional: each tier's own confidence and margin
      critical: {confidence: 0.90}
    rules:                      # category, marker:<guard>, overall, or a glob of them
      no_id: {tier: critical, min_units: 10, required: true}
      off_topic: advisory       # a tier alone
      with_id: {max_drop: 0.02}
      "marker:*": {tier: critical}
      off_topic: {sees_drop: 0.20}   # fail when its holdout cannot see a 0.20 drop

Tiers: ``advisory`` never fails (its verdict is shown, and it is left out of the family the
gate holds at its run-level false-fail); ``supporting`` (the default) fails on ``regressed``;
``critical`` fails on ``regressed`` and also on ``insufficient``. Each tier, and each rule,
may set its own ``confidence`` and ``margin``: inside the family a comparison's share of the
run-level false-fail is proportional to ``1 - confidence`` (a critical tier at 0.90 is held to
twice the level of a supporting one at 0.95), and with ``family_level: null`` each is tested
at its own confidence. ``family_level`` at the top sets the run-level false-fail (a
``--family-level`` the command line sets wins). ``severe_flips: true`` also fails a
comparison in which any scenario went from every reply passing to none, however flat the
mean. ``max_drop`` fails a
lower bound below ``-max_drop``; ``max_relative_drop`` one below ``-max_relative_drop x
before`` (for low baselines, where two points are a large share); ``required: true`` fails
when the category is missing; ``min_units`` turns a comparison over fewer units into
``insufficient``; ``sees_drop: D`` fails when the category's holdout cannot see a drop of D
with 80 % power (``rlgate plan``'s figure, :mod:`.sees`: without the rule the gate only reports
it, at ``--sees-drop``).

Which rule applies: a guarded marker's comparison takes a ``marker:<guard>`` rule (exact
name, else the first glob in file order; it names that guard in every group, overall
included), else its category's rule; a category's takes its
exact name, else the first glob; ``overall`` only a rule named ``overall`` and is advisory
otherwise (the pooled number mixes tiers, so it must not overrule an advisory category).
A selector that names nothing in the rows (no glob matches either) is a typo and an error
naming ``file:line``, unless the rule is ``required`` (then it is the gate's failure).
Every result names the line that decided it.
"""

from __future__ import annotations

import fnmatch
import math
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError, hide_user_errors

__all__ = ["TIERS", "Decision", "ReleasePolicy", "ReleaseRule", "as_release_policy", "load_release_policy"]

TIERS: tuple[str, ...] = ("critical", "supporting", "advisory")
#: the tier of a comparison no rule names (``overall`` excepted: advisory)
DEFAULT_TIER = "supporting"
_RULE_KEYS = ("tier", "confidence", "margin", "max_drop", "max_relative_drop", "required", "min_units",
              "severe_flips", "sees_drop")
_TIER_KEYS = ("confidence", "margin")
_TOP_KEYS = ("tiers", "rules", "family_level")
#: a policy that does not set family_level leaves the gate's
_UNSET = "unset"
_MAX_BYTES = 1 << 20
_GLOB = re.compile(r"[*?\[]")
_MARKER = "marker:"

#: a bad policy or row file in a user's test fails it with one line naming file:line, not these frames
__tracebackhide__ = hide_user_errors


@dataclass(frozen=True)
class ReleaseRule:
    """One line of a release policy: a selector and what it sets (None: not set)."""

    selector: str
    line: int
    tier: str | None = None
    confidence: float | None = None
    margin: float | None = None
    max_drop: float | None = None
    max_relative_drop: float | None = None
    required: bool = False
    min_units: int | None = None
    severe_flips: bool = False
    #: the drop the category's holdout must be able to see with 80 % power, else the gate fails
    sees_drop: float | None = None

    @property
    def is_glob(self) -> bool:
        return bool(_GLOB.search(self.selector))

    @property
    def is_marker(self) -> bool:
        return self.selector.startswith(_MARKER)

    def matches(self, name: str) -> bool:
        return fnmatch.fnmatchcase(name, self.selector) if self.is_glob else name == self.selector


@dataclass(frozen=True)
class Decision:
    """What the policy says on one comparison: its tier, level, margin and limits, and which line said it.

    A gate without a policy file decides every comparison with :meth:`default` (supporting,
    the gate's own settings, ``where`` empty: no line to name).
    """

    tier: str
    confidence_level: float
    margin: float
    max_drop: float | None
    max_relative_drop: float | None
    min_units: int | None
    where: str  #: ``release.yaml:4 no_id`` or ``release.yaml (no rule: overall is advisory)``; "" without a policy
    severe_flips: bool = False
    #: the comparison's share of the family's level, relative to a comparison at the gate's own confidence
    weight: float = 1.0
    #: the rule's ``sees_drop``: a holdout that cannot see this drop fails the gate (None: only reported)
    sees_drop: float | None = None

    @classmethod
    def default(cls, *, confidence_level: float, margin: float, max_drop: float | None) -> Decision:
        """The decision of the gate without a policy: every comparison supporting, at the gate's settings."""
        return cls(tier=DEFAULT_TIER, confidence_level=confidence_level, margin=margin, max_drop=max_drop,
                   max_relative_drop=None, min_units=None, where="")

    @property
    def can_fail(self) -> bool:
        return self.tier != "advisory"

    def label(self) -> str:
        """``critical (release.yaml:4 no_id)``."""
        return f"{self.tier} ({self.where})"


@dataclass(frozen=True)
class ReleasePolicy:
    """A parsed release policy file; :meth:`decide` answers for one (metric, group)."""

    source: str
    rules: tuple[ReleaseRule, ...]
    tiers: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    #: the run-level false-fail the policy asks for (None: each comparison at its own confidence);
    #: ``"unset"`` leaves the gate's own
    family_level: float | None | str = _UNSET

    def family(self, gate_level: float | None, *, given: bool) -> float | None:
        """The family level in force: the gate's when it was *given* (set explicitly, even to its
        default value), else the policy's own when it names one, else the gate's default."""
        if given or isinstance(self.family_level, str):
            return gate_level
        return self.family_level

    def _rule(self, name: str, *, marker: bool) -> ReleaseRule | None:
        pool = [r for r in self.rules if r.is_marker == marker]
        exact = next((r for r in pool if not r.is_glob and r.selector == name), None)
        if exact is not None or name == "overall":
            return exact
        return next((r for r in pool if r.is_glob and r.matches(name)), None)

    def rule_for(self, metric: str, group: str) -> ReleaseRule | None:
        """The rule that decides *metric* in *group*, or None (the defaults apply)."""
        if metric.startswith(_MARKER):
            rule = self._rule(metric, marker=True)
            if rule is not None:
                return rule
        return self._rule(group, marker=False)

    def decide(self, metric: str, group: str, *, confidence_level: float, margin: float,
               max_drop: float | None) -> Decision:
        """The tier and settings of *metric* in *group*; the gate's own settings fill what the policy leaves."""
        rule = self.rule_for(metric, group)
        if rule is None:
            tier = "advisory" if group == "overall" else DEFAULT_TIER
            reason = "overall is advisory" if group == "overall" else f"{tier} by default"
            where = f"{self.source} (no rule: {reason})"
        else:
            tier = rule.tier or DEFAULT_TIER
            where = f"{self.source}:{rule.line} {rule.selector}"
        settings = self.tiers.get(tier, {})

        def pick(name: str, gate: float) -> float:
            value = None if rule is None else getattr(rule, name)
            return value if value is not None else settings.get(name, gate)

        level = float(pick("confidence", confidence_level))
        return Decision(tier=tier, confidence_level=level, margin=float(pick("margin", margin)),
                        max_drop=rule.max_drop if rule is not None and rule.max_drop is not None else max_drop,
                        max_relative_drop=None if rule is None else rule.max_relative_drop,
                        min_units=None if rule is None else rule.min_units, where=where,
                        severe_flips=rule is not None and rule.severe_flips,
                        weight=(1.0 - level) / (1.0 - confidence_level),
                        sees_drop=None if rule is None else rule.sees_drop)

    def required(self) -> list[ReleaseRule]:
        return [r for r in self.rules if r.required and not r.is_marker]

    def check_names(self, categories: Iterable[str], guards: Sequence[str]) -> None:
        """Every selector must name a category (or guard) of the rows: a typo is an error naming its line.

        ``required`` rules are exempt (their missing category is the gate's failure).
        """
        cats = set(categories) | {"overall"}
        markers = {f"{_MARKER}{g}" for g in guards}
        for rule in self.rules:
            if rule.required:
                continue
            names = markers if rule.is_marker else cats
            if not any(rule.matches(n) for n in names):
                what = "guarded marker" if rule.is_marker else "category"
                have = sorted(markers if rule.is_marker else cats - {"overall"})
                raise UsageError(f"{self.source}:{rule.line}: {rule.selector!r} matches no {what} of the rows "
                                 f"(they have {', '.join(have) or 'none'}); fix the name, or mark the rule "
                                 "required: true if the category must be there")

    def summary(self) -> str:
        """The rule text's policy part: ``release.yaml: no_id critical, off_topic advisory, ...``."""
        parts = []
        for r in self.rules:
            bits = [r.tier or DEFAULT_TIER]
            bits += [f"{name} {getattr(r, name):g}" for name in ("confidence", "margin", "max_drop",
                                                                  "max_relative_drop") if getattr(r, name) is not None]
            if r.min_units is not None:
                bits.append(f"min_units {r.min_units}")
            if r.required:
                bits.append("required")
            if r.severe_flips:
                bits.append("severe_flips")
            if r.sees_drop is not None:
                bits.append(f"sees_drop {r.sees_drop:g}")
            parts.append(f"{r.selector} {' '.join(bits)} (line {r.line})")
        tiers = "".join(f"; {t}: " + ", ".join(f"{k} {v:g}" for k, v in s.items()) for t, s in self.tiers.items())
        family = "" if self.family_level == _UNSET else \
            f"; family_level {'null' if self.family_level is None else f'{self.family_level:g}'}"
        return f"release policy {self.source}: " + "; ".join(parts) + tiers + family


# -- reading -----------------------------------------------------------------------------------


def _fail(source: str, line: int | None, message: str) -> UsageError:
    where = source if line is None else f"{source}:{line}"
    return UsageError(f"{where}: {message}")


def _share(source: str, line: int, key: str, value: object, *, open_low: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not (0 < value < 1 if open_low else 0 <= value < 1):
        bound = "(0, 1)" if open_low else "[0, 1)"
        raise _fail(source, line, f"{key} must be a number in {bound}, got {value!r}")
    return float(value)


def _rule(source: str, selector: str, line: int, body: object, lines: Mapping[str, int]) -> ReleaseRule:
    if isinstance(body, str):
        body = {"tier": body}
    if not isinstance(body, Mapping):
        raise _fail(source, line, f"rule {selector!r} must be a tier name or a table of {', '.join(_RULE_KEYS)}, "
                                  f"got {body!r}")
    values: dict[str, Any] = {}  # each checked below for the ReleaseRule field it fills
    for key, value in body.items():
        at = lines.get(key, line)
        if key not in _RULE_KEYS:
            raise _fail(source, at, f"unknown key {key!r} in rule {selector!r}; a rule takes {', '.join(_RULE_KEYS)}")
        if key == "tier":
            if value not in TIERS:
                raise _fail(source, at, f"tier must be one of {', '.join(TIERS)}, got {value!r}")
            values[key] = value
        elif key in ("required", "severe_flips"):
            if not isinstance(value, bool):
                raise _fail(source, at, f"{key} must be true or false, got {value!r}")
            values[key] = value
        elif key == "min_units":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise _fail(source, at, f"min_units must be a positive integer, got {value!r}")
            values[key] = value
        else:
            values[key] = _share(source, at, key, value, open_low=key in ("confidence", "sees_drop"))
    return ReleaseRule(selector=selector, line=line, **values)


def _build(source: str, data: object, where: _Lines) -> ReleasePolicy:
    if not isinstance(data, Mapping):
        raise _fail(source, 1, "a release policy is a table with 'rules' (and optionally 'tiers')")
    for key in data:
        if key not in _TOP_KEYS:
            raise _fail(source, where.line((key,)), f"unknown key {key!r}; a release policy has "
                                                     f"{' and '.join(_TOP_KEYS)}")
    rules_data = data.get("rules")
    if not isinstance(rules_data, Mapping) or not rules_data:
        raise _fail(source, where.line(("rules",)), "'rules' must be a non-empty table of selector: rule")
    rules = []
    for selector, body in rules_data.items():
        if not isinstance(selector, str) or not selector.strip():
            raise _fail(source, where.line(("rules",)), f"a rule's selector must be a name, got {selector!r}")
        keys = body.keys() if isinstance(body, Mapping) else ()
        rules.append(_rule(source, selector, where.line(("rules", selector)), body,
                           {k: where.line(("rules", selector, k)) for k in keys}))
    tiers: dict[str, dict[str, float]] = {}
    tiers_data = data.get("tiers") or {}
    if not isinstance(tiers_data, Mapping):
        raise _fail(source, where.line(("tiers",)), "'tiers' must be a table of tier: {confidence, margin}")
    for tier, body in tiers_data.items():
        if tier not in TIERS or tier == "advisory":
            raise _fail(source, where.line(("tiers", tier)), f"tiers sets critical or supporting, got {tier!r} "
                                                             "(advisory never fails: it has no level)")
        if not isinstance(body, Mapping):
            raise _fail(source, where.line(("tiers", tier)), f"tier {tier!r} must be a table of confidence, margin")
        settings = {}
        for key, value in body.items():
            at = where.line(("tiers", tier, key))
            if key not in _TIER_KEYS:
                raise _fail(source, at, f"unknown key {key!r} in tier {tier!r}; a tier takes {', '.join(_TIER_KEYS)}")
            settings[key] = _share(source, at, key, value, open_low=key == "confidence")
        tiers[tier] = settings
    family: float | None | str = _UNSET
    if "family_level" in data:
        family = data["family_level"]
        if family is not None:
            family = _share(source, where.line(("family_level",)), "family_level", family, open_low=True)
            if family >= 0.5:
                raise _fail(source, where.line(("family_level",)), f"family_level must be below 0.5, got {family!r}")
    return ReleasePolicy(source=source, rules=tuple(rules), tiers=tiers, family_level=family)


class _Lines:
    """Line numbers of keys by path (``("rules", "no_id", "tier")``); the nearest known parent else."""

    def __init__(self, known: Mapping[tuple[str, ...], int]) -> None:
        self.known = known

    def line(self, path: tuple[object, ...]) -> int:
        for end in range(len(path), 0, -1):
            found = self.known.get(tuple(str(p) for p in path[:end]))
            if found is not None:
                return found
        return 1


def _yaml(source: str, text: str) -> tuple[object, _Lines]:
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise _fail(source, None if mark is None else mark.line + 1,
                    f"not valid YAML: {getattr(exc, 'problem', None) or exc}") from None
    known: dict[tuple[str, ...], int] = {}
    constructor = yaml.SafeLoader("")

    def build(node: yaml.Node, path: tuple[str, ...], depth: int) -> object:
        if isinstance(node, yaml.ScalarNode):
            return constructor.construct_object(node)
        if isinstance(node, yaml.MappingNode) and depth < 3:
            out: dict[object, object] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, yaml.ScalarNode):
                    raise _fail(source, key_node.start_mark.line + 1, "keys must be plain names")
                key = constructor.construct_object(key_node)
                known[path + (str(key),)] = key_node.start_mark.line + 1
                out[key] = build(value_node, path + (str(key),), depth + 1)
            return out
        raise _fail(source, node.start_mark.line + 1, "a release policy nests at most tiers/rules -> name -> "
                                                      "key: value (no lists, no deeper tables)")

    return (None if root is None else build(root, (), 0)), _Lines(known)


_TOML_TABLE = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]\s*(?:#.*)?$")
_TOML_KEY = re.compile(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_\-:*?.]+)\s*=""")


def _toml_parts(dotted: str) -> tuple[str, ...]:
    return tuple(p.strip().strip("\"'") for p in re.findall(r"""("[^"]*"|'[^']*'|[^.]+)""", dotted))


def _toml(source: str, text: str) -> tuple[object, _Lines]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: the same parser, as a package
        try:
            import tomli as tomllib  # type: ignore[import-not-found]
        except ImportError:
            raise _fail(source, None, "reading TOML on Python 3.10 needs `pip install tomli`; or write the "
                                      "policy as YAML") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"line (\d+)", str(exc))
        raise _fail(source, int(found.group(1)) if found else None, f"not valid TOML: {exc}") from None
    known: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    for number, raw in enumerate(text.splitlines(), 1):
        header = _TOML_TABLE.match(raw)
        if header:
            table = _toml_parts(header.group(1))
            for end in range(1, len(table) + 1):
                known.setdefault(table[:end], number)
            continue
        key = _TOML_KEY.match(raw)
        if key:
            path = table + _toml_parts(key.group(1))
            for end in range(1, len(path) + 1):
                known.setdefault(path[:end], number)
            inline = raw[key.end():]
            for inner in re.finditer(r"""([A-Za-z0-9_\-]+)\s*=""", inline if "{" in inline else ""):
                known.setdefault(path + (inner.group(1),), number)
    return data, _Lines(known)


def load_release_policy(path: str | os.PathLike[str]) -> ReleasePolicy:
    """Read a release policy from a ``.yaml``/``.yml`` or ``.toml`` file.

    :raises UsageError: the file cannot be read, is not YAML/TOML, or has an unknown key or a
        bad value: one line naming ``file:line`` and the fix.
    """
    source = os.fspath(path)
    target = Path(source)
    suffix = target.suffix.lower()
    if suffix not in (".yaml", ".yml", ".toml"):
        raise UsageError(f"release policy {source!r}: name a .yaml, .yml or .toml file")
    try:
        if target.stat().st_size > _MAX_BYTES:
            raise UsageError(f"release policy {source!r} is over {_MAX_BYTES // 1024} KiB; a policy is a few lines")
        text = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"release policy {source!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"release policy {source!r} cannot be read: {exc}") from None
    data, lines = (_toml if suffix == ".toml" else _yaml)(source, text)
    return _build(source, data, lines)


def as_release_policy(policy: ReleasePolicy | str | os.PathLike[str] | None) -> ReleasePolicy | None:
    """A :class:`ReleasePolicy` from itself or a file path; None stays None."""
    if policy is None or isinstance(policy, ReleasePolicy):
        return policy
    if isinstance(policy, (str, os.PathLike)):
        return load_release_policy(policy)
    raise UsageError(f"policy must be a release policy file path or a ReleasePolicy, got {type(policy).__name__}")
