"""Row provenance: the one header object a row file written here starts with.

Rows alone do not say which reward graded them, so a baseline kept in a repository could be
compared with candidate rows graded by a newer reward and nobody would notice. Every row
file pytest-rlgate writes therefore starts with::

    {"rlgate_rows": 1, "env": name, "env_fingerprint": "sha256:...",
     "prompts_fingerprint": "sha256:..." | null, "policy": str | null,
     "sampling": {setting: number | null, ...}}

where ``sampling`` holds what the replies were drawn with (``k``, ``seed``, ``temperature``
and the sampler's other settings; a foreign source's is empty).

A file without it (rows written by other tools) is still read: a *foreign* file, whose
provenance is unknown and never checked. The gate refuses to compare two sides whose
headers name different environment fingerprints (re-score one side with ``rlgate regrade``)
or different prompt sets (sample the same holdout, or gate the shared units only).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeGuard

from ..environment.contract import Env, env_names, load_env
from ..errors import DataError, UsageError, hide_user_errors
from ..records import Header

__all__ = ["HEADER_KEY", "HEADER_VERSION", "Provenance", "adaptive_note", "check_graded_by", "check_header",
           "header_env", "is_header", "row_header", "sampled_with", "sampler_notes"]

#: a user's test that hands rlgate a bad file or spec fails with its one line, not these frames
__tracebackhide__ = hide_user_errors

#: The key that marks a header line, and its value: the header format's version.
HEADER_KEY = "rlgate_rows"
HEADER_VERSION = 1
#: The sampling settings code reads back from a header (by :func:`sampled_with`): integers.
_INTEGERS = ("seed", "k")


def row_header(
    env: Env | Mapping[str, object],
    *,
    prompts_fingerprint: str | None = None,
    policy: str | None = None,
    sampling: Mapping[str, int | float | None] | None = None,
    **settings: int | float | None,
) -> Header:
    """The header of rows graded by *env*; what is unknown stays None or absent (and is never checked).

    *env* is an :class:`~pytest_rlgate.environment.contract.Env` or the record ``Env.describe()`` gives (what
    a run's ``config.json`` keeps), so a run's rows get a header even where the environment
    no longer loads. *sampling* is what the replies were drawn with (a sampler passes
    ``SampleOptions.drawn()``), *settings* single values on top (``seed=17, k=4``).
    """
    name, fingerprint = ((env.name, env.fingerprint) if isinstance(env, Env)
                         else (env.get("name"), env.get("fingerprint")))
    return {
        HEADER_KEY: HEADER_VERSION,
        "env": name,
        "env_fingerprint": fingerprint,
        "prompts_fingerprint": prompts_fingerprint,
        "policy": policy,
        "sampling": {name: value for name, value in {**(sampling or {}), **settings}.items() if value is not None},
    }


def is_header(obj: object) -> TypeGuard[Mapping[str, object]]:
    """True for a header object (the first line of a file written here)."""
    return isinstance(obj, Mapping) and HEADER_KEY in obj


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_header(obj: Mapping[str, object], *, path: str | None = None, line: int | None = None) -> Header:
    """*obj* as a header dict, or a :class:`DataError` at ``path:line`` naming the bad field."""

    def fail(message: str) -> DataError:
        return DataError(f"row-file header: {message}", path=path or "<rows>", line=line)

    version = obj.get(HEADER_KEY)
    if version != HEADER_VERSION or isinstance(version, bool):
        raise fail(f"{HEADER_KEY!r} is {version!r}; this pytest-rlgate reads version {HEADER_VERSION} "
                   "(upgrade pytest-rlgate to read newer files)")
    for name in ("env", "env_fingerprint"):
        if not isinstance(obj.get(name), str) or not obj[name]:
            raise fail(f"{name!r} must be a non-empty string, got {obj.get(name)!r:.60}")
    for name in ("prompts_fingerprint", "policy"):
        if obj.get(name) is not None and not isinstance(obj[name], str):
            raise fail(f"{name!r} must be a string or null, got {obj[name]!r:.60}")
    sampling = obj.get("sampling", {})
    if not isinstance(sampling, Mapping) or not all(isinstance(name, str) for name in sampling):
        raise fail(f"'sampling' must be an object of settings (temperature, seed, k, ...), got {sampling!r:.60}")
    for name, value in sampling.items():
        integer = name in _INTEGERS
        if value is not None and not (isinstance(value, int) and not isinstance(value, bool) if integer
                                      else _number(value)):
            raise fail(f"'sampling.{name}' must be {'an integer' if integer else 'a number'} or null, "
                       f"got {value!r:.60}")
    return {**obj, "sampling": dict(sampling)}


def sampled_with(header: Mapping[str, object] | None, name: str) -> object:
    """The header's ``sampling.<name>`` (``seed``, ``k``, ...), None where it says nothing."""
    sampling = None if header is None else header.get("sampling")
    return sampling.get(name) if isinstance(sampling, Mapping) else None


def _short(fingerprint: object) -> str:
    text = str(fingerprint)
    return text if len(text) <= 19 else text[:19] + "…"


@dataclass(frozen=True)
class Provenance:
    """What the two sides' headers say, checked once before the gate reads any row."""

    before: Mapping[str, object] | None
    after: Mapping[str, object] | None
    before_label: str
    after_label: str

    def _differs(self, key: str) -> bool:
        if self.before is None or self.after is None:
            return False
        mine, theirs = self.before.get(key), self.after.get(key)
        return mine is not None and theirs is not None and mine != theirs

    def _sides(self, key: str, describe: Callable[[Mapping[str, object], str], str]) -> str:
        assert self.before is not None and self.after is not None
        return (f"{self.before_label} {describe(self.before, key)} but {self.after_label} "
                f"{describe(self.after, key)}")

    def check(self, *, allow_env_change: bool = False, shared_units_only: bool = False,
              allow_model_change: bool = False) -> list[str]:
        """Raise a one-line :class:`DataError` for sides that must not be compared; else the notes.

        Different environment fingerprints: the reward (or its markers) changed between the
        sides, so a delta would mix a policy change with a grading change. Different prompt
        sets: the holdout changed. ``allow_env_change`` compares anyway and says so;
        ``shared_units_only`` accepts a changed holdout (the gate then drops unpaired units).
        Sides served from two different base models are refused too (``allow_model_change``
        compares them anyway); sides sampled by different engines or settings are noted.
        """
        notes: list[str] = []
        if self._differs("env_fingerprint"):
            sides = self._sides("env_fingerprint", lambda h, k: f"was graded by {h['env']} {_short(h[k])}")
            if not allow_env_change:
                raise DataError(f"{sides}: the reward changed between the sides, so the rows do not compare; "
                                "re-score the older side with the current environment (`rlgate regrade ROWS "
                                "--env SPEC --out PATH`), or pass --allow-env-change to compare anyway")
            notes.append(f"environment changed: {sides} (compared anyway: --allow-env-change)")
        if self._differs("prompts_fingerprint"):
            sides = self._sides("prompts_fingerprint", lambda h, k: f"sampled prompt set {_short(h[k])}")
            if not (allow_env_change or shared_units_only):
                raise DataError(f"{sides}: the holdout changed between the sides; sample both on the same "
                                "holdout, pass --shared-units-only to gate the units both share, or "
                                "--allow-env-change to compare anyway")
            flag = "--shared-units-only" if shared_units_only else "--allow-env-change"
            notes.append(f"prompt set changed: {sides} (compared anyway: {flag})")
        if self.before is not None and self.after is not None:
            notes += sampler_notes(self.before, self.after, self.before_label, self.after_label,
                                   allow_model_change=allow_model_change)
        for label, header in ((self.before_label, self.before), (self.after_label, self.after)):
            note = adaptive_note(header, label)
            if note is not None:
                notes.append(note)
        return notes

    def env(self) -> Env | None:
        """The registered environment the headers name, or None (foreign rows, an unknown name)."""
        return header_env([h for h in (self.before, self.after) if h is not None])


def _engine(sampler: Mapping[str, object]) -> str:
    """How a side's replies were drawn, in words: the engine and, for a server, its build."""
    backend = sampler.get("backend")
    served = sampler.get("served")
    if backend == "served" and isinstance(served, Mapping):
        build = served.get("engine")
        return f"a served endpoint ({build})" if build else "a served endpoint"
    return f"{backend} in-process" if isinstance(backend, str) else "an unnamed engine"


def sampler_notes(before: Mapping[str, object], after: Mapping[str, object], before_label: str, after_label: str, *,
                  allow_model_change: bool = False) -> list[str]:
    """What differs in how two sides were sampled (their headers' ``sampler`` and ``sampling``).

    Two sides served from different base models (``sampler.served.base``: an adapter's base,
    else the model's own weights) are refused: an adapter is gated against the base it was
    trained from, and a server restarted with other weights under the same name would pair
    replies of two models silently. Another engine for the same weights (a server against
    ``--model``), other sampling settings, or a server that ignores ``seed`` are said, since
    each moves the rows without any change of policy.
    """
    mine, theirs = before.get("sampler"), after.get("sampler")
    if not isinstance(mine, Mapping) or not isinstance(theirs, Mapping):
        return []
    notes: list[str] = []
    served_before, served_after = mine.get("served"), theirs.get("served")
    if isinstance(served_before, Mapping) and isinstance(served_after, Mapping) \
            and served_before.get("base") != served_after.get("base"):
        what = (f"{before_label} was served from base {_short_path(served_before.get('base'))} but {after_label} "
                f"from {_short_path(served_after.get('base'))}")
        if not allow_model_change:
            raise DataError(f"{what}: rows of two different served models do not pair (an adapter gates against the "
                            "base it was trained from); sample both sides from one base on one server (the base and "
                            "its adapters), or pass --allow-model-change to compare anyway")
        notes.append(f"model changed: {what} (compared anyway: --allow-model-change)")
    engines = _engine(mine), _engine(theirs)
    if engines[0] != engines[1]:
        same = mine.get("model") is not None and mine.get("model") == theirs.get("model") \
            and mine.get("adapter") == theirs.get("adapter")
        why = ("; the same weights on both sides, so a difference measures the engines (their random streams and "
               "numerics), not a policy change") if same else ""
        notes.append(f"engines differ: {before_label} was sampled by {engines[0]} but {after_label} by "
                     f"{engines[1]}{why}")
    drawn = [header.get("sampling") for header in (before, after)]
    settings = []
    if isinstance(drawn[0], Mapping) and isinstance(drawn[1], Mapping):
        for name in sorted((set(drawn[0]) & set(drawn[1])) - {"seed", "k"}):  # sides differ in those by design
            if drawn[0][name] is not None and drawn[1][name] is not None and drawn[0][name] != drawn[1][name]:
                settings.append(f"{name} {drawn[0][name]} vs {drawn[1][name]}")
    if settings:
        notes.append(f"sampling differs between {before_label} and {after_label}: {', '.join(settings)}")
    for label, served in ((before_label, served_before), (after_label, served_after)):
        if isinstance(served, Mapping) and served.get("seed") == "ignored":
            notes.append(f"{label} came from a server that ignores 'seed': its rows do not reproduce on a rerun")
    return notes


def _short_path(value: object) -> str:
    text = str(value)
    return text if len(text) <= 48 else "…" + text[-47:]


def adaptive_note(header: Mapping[str, object] | None, label: str) -> str | None:
    """What a gate of rows sampled until decided must say: its single look is not the run's sequential decision.

    ``rlgate sample --until-decided`` gave more replies only to the categories its earlier
    looks could not call, and held each look at a share of the family level; a later gate of
    the file looks once more, at the whole level, at data whose k was chosen by those looks.
    """
    design = None if header is None else header.get("adaptive")
    if not isinstance(design, Mapping):
        return None
    ks, levels = design.get("ks"), design.get("levels")
    plan = ""
    if isinstance(ks, Sequence) and isinstance(levels, Sequence) and all(_number(v) for v in (*ks, *levels)):
        plan = (f" (looks at k {', '.join(str(k) for k in ks)}, each at a family level of "
                f"{', '.join(f'{float(v):.2%}' for v in levels)})")
    outcome = design.get("outcome")
    decided = ""
    if isinstance(outcome, Mapping) and isinstance(outcome.get("passed"), bool):
        decided = f"; that run {'passed' if outcome['passed'] else 'FAILED'}"
    return (f"{label} was sampled until decided{plan}: its categories got more replies where earlier looks were "
            f"undecided, so this one look at the full family level is not the sequential decision{decided} (its "
            "exit code is the decision; this gate is for the table)")


def check_graded_by(env: Env, headers: Sequence[tuple[str, Mapping[str, object] | None]], *,
                    allow_env_change: bool = False) -> list[str]:
    """Refuse sides whose header says another version of *env* graded them; else the notes.

    The gate reads markers and categories through *env* (``--env``): rows graded by an older
    reward would be judged by rules they were never scored with. ``allow_env_change`` compares
    anyway and says so.
    """
    notes: list[str] = []
    for label, header in headers:
        graded = None if header is None else header.get("env_fingerprint")
        if graded is None or graded == env.fingerprint:
            continue
        assert header is not None
        what = (f"{label} was graded by {header.get('env')} {_short(graded)} "
                f"but --env {env.name} is {_short(env.fingerprint)}")
        if not allow_env_change:
            raise DataError(f"{what}: re-score it with the current environment (`rlgate regrade ROWS --env SPEC "
                            "--out PATH`), or pass --allow-env-change to compare anyway")
        notes.append(f"environment changed: {what} (compared anyway: --allow-env-change)")
    return notes


def header_env(headers: Sequence[Mapping[str, object]]) -> Env | None:
    """The environment every header names, when it is registered and graded one of the sides.

    Only registered names (built-ins and ``rlgate.envs`` entry points) are loaded: a header's
    name is data, and importing a module that happens to share it would run arbitrary code.
    An environment whose fingerprint matches no header has changed since, so its markers
    (the gate's guards) may not be the rows' either: None then too.
    """
    names = {h.get("env") for h in headers}
    if len(names) != 1:
        return None
    name = names.pop()
    if not isinstance(name, str) or name not in env_names():
        return None
    try:
        env = load_env(name)
    except UsageError:
        return None
    return env if any(h.get("env_fingerprint") == env.fingerprint for h in headers) else None
