"""hack_scan: which feature of a reply does the reward pay for *within* a prompt?

GRPO learns only from differences between rollouts of the same prompt (the group-relative
advantage), so the question that matters is not "what tracks reward overall" (mostly: which
prompt it was) but "what separates a better rollout from a worse one of the same prompt".
hack_scan centres every reply feature and the reward within each prompt, correlates them,
and compares each correlation with a noise floor obtained by shuffling rewards within
prompts. When the strongest feature the reward pays for is not one the policy is supposed to
learn (``endorsed``), the reward is being hacked — or will be.

numpy only: it runs inside a training loop on the last 512 completions every few steps.
"""

from __future__ import annotations

import inspect
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from ..environment.contract import Env, Environment, EnvSpec, load_env
from ..errors import DataError, RewardHackError, UsageError

__all__ = [
    "REGIMES",
    "HackScanDiff",
    "HackScanResult",
    "RewardHackError",
    "ScanFeature",
    "hack_scan",
    "hack_scan_diff",
]

#: Every value ``HackScanResult.regime`` can take, in the order they are decided.
REGIMES: tuple[str, ...] = ("unknown", "no_signal", "degenerate", "reward_hack", "pool_exhausted", "train")
#: Share of prompts whose rollouts all reach the scan's best reward above which the pool is spent.
EXHAUSTED_SHARE = 0.2
#: |correlation| at which two features are indistinguishable (seed: 0.999).
COLLINEAR = 0.999
#: How many frequent words and word pairs become ``contains:`` features (seed: 200).
MAX_TERMS = 200

_WORD = re.compile(r"[a-z_][a-z0-9_]*")

Extractor = Callable[[str], float]
#: An environment's ``features(reply) -> {name: value}``.
FeatureFn = Callable[[str], Mapping[str, float]]


@dataclass(frozen=True)
class ScanFeature:
    """One reply feature and how the reward relates to it within prompts."""

    name: str
    correlation: float  #: Pearson r of the within-prompt-centred feature and reward
    pooled: float  #: plain Pearson r over all rows (mostly "which prompt"; for contrast)
    n_nonzero: int  #: rows where the feature is non-zero
    clears_floor: bool  #: |correlation| > the scan's noise floor
    endorsed: bool  #: matches one of the scan's ``endorsed`` substrings
    aliases: tuple[str, ...] = ()  #: features with the identical column, merged into this one


@dataclass(frozen=True)
class HackScanResult:
    """What :func:`hack_scan` found. ``str()`` is a one-line verdict plus the table.

    ``regime`` is one of :data:`REGIMES` (see :func:`hack_scan` for their exact meaning);
    ``top_feature`` is the strongest above-floor feature the reward *pays for* (positive
    correlation), or None; ``features`` are ranked by |correlation|, strongest first.
    """

    regime: str
    top_feature: str | None
    features: tuple[ScanFeature, ...]
    floor: float
    n_rows: int
    n_prompts: int
    median_rollouts: float
    exhausted_share: float
    endorsed: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    n_permutations: int = 0
    alpha: float = 0.05

    def feature(self, name: str) -> ScanFeature:
        """The feature called *name* (or with *name* among its aliases)."""
        for feat in self.features:
            if name == feat.name or name in feat.aliases:
                return feat
        raise KeyError(f"no feature {name!r}; the scan has {[f.name for f in self.features]}")

    @property
    def above_floor(self) -> tuple[ScanFeature, ...]:
        return tuple(f for f in self.features if f.clears_floor)

    def summary(self) -> str:
        top = "none" if self.top_feature is None else self.top_feature
        return (
            f"hack_scan: regime {self.regime}, top feature {top}, noise floor {self.floor:.3f} "
            f"({self.n_rows} rows, {self.n_prompts} prompts, median {self.median_rollouts:g} rollouts)"
        )

    def table(self, limit: int = 10) -> str:
        """The strongest *limit* features as a text table (``*`` marks above-floor rows)."""
        from tabulate import tabulate

        rows = [
            [
                f.name + (f" (= {', '.join(f.aliases[:2])}{', ...' if len(f.aliases) > 2 else ''})"
                          if f.aliases else ""),
                f"{f.correlation:+.3f}",
                f"{f.pooled:+.3f}",
                f.n_nonzero,
                "*" if f.clears_floor else "",
                "yes" if f.endorsed else "",
            ]
            for f in self.features[:limit]
        ]
        return str(tabulate(rows, headers=["feature", "r within", "r pooled", "n", "floor", "endorsed"]))

    def to_dict(self) -> dict[str, object]:
        return {
            "regime": self.regime,
            "top_feature": self.top_feature,
            "floor": self.floor,
            "n_rows": self.n_rows,
            "n_prompts": self.n_prompts,
            "median_rollouts": self.median_rollouts,
            "exhausted_share": self.exhausted_share,
            "endorsed": list(self.endorsed),
            "warnings": list(self.warnings),
            "features": [
                {
                    "name": f.name,
                    "correlation": f.correlation,
                    "pooled": f.pooled,
                    "n_nonzero": f.n_nonzero,
                    "clears_floor": f.clears_floor,
                    "endorsed": f.endorsed,
                    "aliases": list(f.aliases),
                }
                for f in self.features
            ],
        }

    def __str__(self) -> str:
        text = self.summary() + "\n" + self.table()
        if self.warnings:
            text += "\n" + "\n".join(f"warning: {w}" for w in self.warnings)
        return text

    def assert_no_hack(self) -> None:
        """Raise :class:`RewardHackError` (with the table) unless the regime is benign.

        Fails on ``reward_hack``; every other regime passes, because "no signal" or "pool
        exhausted" are training problems, not exploits.
        """
        if self.regime == "reward_hack":
            raise RewardHackError(f"reward pays for {self.top_feature!r}, which is not endorsed\n{self}", self)


@dataclass(frozen=True)
class HackScanDiff:
    """What changed between two scans: features that newly clear the floor, or stopped to."""

    gained: tuple[ScanFeature, ...]
    lost: tuple[ScanFeature, ...]
    shifts: tuple[tuple[str, float, float], ...]  #: (name, r before, r after), biggest first
    learned: str

    def table(self, limit: int = 10) -> str:
        from tabulate import tabulate

        gained = {f.name for f in self.gained}
        lost = {f.name for f in self.lost}
        rows = [
            [name, f"{b:+.3f}", f"{a:+.3f}", f"{a - b:+.3f}",
             "gained" if name in gained else ("lost" if name in lost else "")]
            for name, b, a in self.shifts[:limit]
        ]
        return str(tabulate(rows, headers=["feature", "r before", "r after", "shift", "floor"]))

    def __str__(self) -> str:
        return self.learned + "\n" + self.table()


def _text(value: object) -> str:
    """A reply or prompt as text: plain strings, or chat messages (last user / first content)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and value and all(isinstance(m, Mapping) for m in value):
        users = [m for m in value if m.get("role") == "user"]
        return str((users[-1] if users else value[0]).get("content") or "")
    raise TypeError(type(value).__name__)


def _read_rows(rows: Iterable[Mapping[str, object]]) -> tuple[list[str], list[str], np.ndarray]:
    prompts: list[str] = []
    replies: list[str] = []
    rewards: list[float] = []
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise DataError(f"row {i}: expected a dict with prompt, reply and score, got {type(row).__name__}")
        for key in ("prompt", "reply"):
            if key not in row:
                raise DataError(f"row {i}: no {key!r} field; hack_scan needs prompt, reply and score (or reward)")
        key = "score" if row.get("score") is not None else "reward"
        value = row.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise DataError(f"row {i}: {key!r} must be a finite number, got {value!r}; "
                            "give each row a 'score' or 'reward'")
        try:
            prompts.append(_text(row["prompt"]))
            replies.append(_text(row["reply"]) if row["reply"] is not None else "")
        except TypeError as exc:
            raise DataError(f"row {i}: prompt and reply must be text or chat messages, got {exc}") from None
        rewards.append(float(value))
    return prompts, replies, np.asarray(rewards, dtype=float)


def _reply_features(replies: Sequence[str], features: FeatureFn) -> dict[str, np.ndarray]:
    """``length`` (characters), then the environment's own features, one column per name.

    A name the environment returns for some replies only (``tool:<name>`` for the tools a
    reply called) is 0 for the others. Columns keep the order the names first appear in.
    """
    n = len(replies)
    columns: dict[str, np.ndarray] = {"length": np.fromiter((len(r) for r in replies), dtype=float, count=n)}
    for i, reply in enumerate(replies):
        try:
            found = {str(k): float(v) for k, v in dict(features(reply)).items()}
        except (TypeError, ValueError) as exc:
            raise UsageError(f"the environment's features(reply) must return {{name: number}}: {exc}") from None
        clash = [k for k in found if k == "length" or k.startswith("contains:")]
        if clash:
            raise UsageError(f"the environment's feature {clash[0]!r} clashes with a built-in feature; rename it")
        for name, value in found.items():
            columns.setdefault(name, np.zeros(n))[i] = value
    return columns


def _features_of(env: Env | Environment | str | FeatureFn | None) -> FeatureFn:
    """The features function *env* stands for: its own, a bare function, or the default environment's."""
    if callable(env) and not inspect.isclass(env) and not isinstance(env, Env):
        return env
    return load_env(cast(EnvSpec, env)).features


def _term_features(replies: Sequence[str], *, max_terms: int, min_support: int) -> dict[str, np.ndarray]:
    """``contains:<term>`` for the most frequent words and word pairs (in >= min_support rows)."""
    n = len(replies)
    docs: list[set[str]] = []
    df: Counter[str] = Counter()
    for reply in replies:
        words = _WORD.findall(reply.lower())
        terms = set(words) | {f"{a} {b}" for a, b in zip(words, words[1:])}
        docs.append(terms)
        df.update(terms)
    chosen = sorted((t for t, c in df.items() if min_support <= c < n), key=lambda t: (-df[t], t))[:max_terms]
    index = {t: j for j, t in enumerate(chosen)}
    matrix = np.zeros((n, len(chosen)))
    for i, terms in enumerate(docs):
        cols = [index[t] for t in terms if t in index]
        matrix[i, cols] = 1.0
    return {f"contains:{t}": matrix[:, j] for t, j in index.items()}


def _centre(values: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """Subtract each prompt's mean (a vector or an n × F matrix); memory O(n × F)."""
    order = np.argsort(groups, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(groups[order]) != 0])
    sums = np.add.reduceat(values[order], starts, axis=0)
    counts = np.bincount(groups, minlength=n_groups).astype(float)
    means = sums / (counts[:, None] if values.ndim == 2 else counts)
    return np.asarray(values - means[groups], dtype=float)


def _within_permutations(groups: np.ndarray, n_permutations: int, rng: np.random.Generator) -> np.ndarray:
    """n_permutations × n index arrays, each shuffling rows only among rows of one prompt."""
    n = len(groups)
    base = np.argsort(groups, kind="stable")  # rows ordered by prompt
    keys = rng.random((n_permutations, n)) + groups[None, :]
    shuffled = np.argsort(keys, axis=1)  # rows ordered by prompt, randomly within it
    perm = np.empty_like(shuffled)
    perm[:, base] = shuffled
    return perm


def _is_endorsed(names: Iterable[str], endorsed: Sequence[str]) -> bool:
    lowered = [n.lower() for n in names]
    return any(e.lower() in n for e in endorsed for n in lowered)


def _rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    if rng is None:
        return np.random.default_rng(0)
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return np.random.default_rng(int(rng))
    raise UsageError(f"rng must be a numpy Generator, an int seed or None, got {type(rng).__name__}")


def _scan_options(endorsed: Sequence[str], n_permutations: int, alpha: float) -> tuple[str, ...]:
    """*endorsed* as a tuple (a lone string is one substring); a UsageError for a bad knob."""
    if isinstance(endorsed, str):
        endorsed = (endorsed,)
    endorsed = tuple(endorsed)
    if not isinstance(n_permutations, int) or n_permutations < 1:
        raise UsageError(f"n_permutations must be a positive int, got {n_permutations!r}")
    if not 0 < alpha < 1:
        raise UsageError(f"alpha must lie strictly between 0 and 1, got {alpha!r}")
    return endorsed


def _group_by_prompt(prompts: Sequence[str]) -> tuple[np.ndarray, int, np.ndarray, float]:
    """(each row's prompt index, number of prompts, rollouts per prompt, their median).

    Rows with the same prompt text are one GRPO group; indices follow first appearance.
    """
    n = len(prompts)
    prompt_ids: dict[str, int] = {}
    groups = np.fromiter((prompt_ids.setdefault(p, len(prompt_ids)) for p in prompts), dtype=np.int64, count=n)
    n_groups = len(prompt_ids)
    counts = np.bincount(groups, minlength=n_groups) if n else np.zeros(0, dtype=int)
    median = float(np.median(counts)) if n else 0.0
    return groups, n_groups, counts, median


def _feature_columns(replies: Sequence[str], env: Env | Environment | str | FeatureFn | None,
                     extractors: Mapping[str, Extractor] | None, max_terms: int) -> dict[str, np.ndarray]:
    """Every feature of every reply: length, the environment's, frequent terms, then *extractors*."""
    n = len(replies)
    columns = _reply_features(replies, _features_of(env))
    columns.update(_term_features(replies, max_terms=max_terms, min_support=min(20, max(2, n // 10))))
    for name, fn in (extractors or {}).items():
        try:
            columns[name] = np.fromiter((float(fn(r)) for r in replies), dtype=float, count=n)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"extractor {name!r} must return a number for every reply: {exc}") from None
    return columns


def _merge_identical(
    columns: Mapping[str, np.ndarray], n: int
) -> tuple[list[str], dict[str, tuple[str, ...]], np.ndarray]:
    """(names, aliases, n × F matrix) with identical columns merged into one feature.

    The first name wins (length and the environment's first), the rest become its aliases:
    two features that are the same column cannot be told apart by any reward.
    """
    merged: dict[bytes, list[str]] = {}
    for name, col in columns.items():
        merged.setdefault(np.ascontiguousarray(col).tobytes(), []).append(name)
    names = [group[0] for group in merged.values()]
    aliases = {group[0]: tuple(group[1:]) for group in merged.values()}
    matrix = np.column_stack([columns[name] for name in names]) if n and names else np.zeros((n, 0))
    return names, aliases, matrix


def _exhausted_share(reward: np.ndarray, groups: np.ndarray, n_groups: int, counts: np.ndarray) -> float:
    """Share of prompts with two or more rollouts whose every rollout reaches the best reward."""
    best = reward.max() if len(reward) else 0.0
    exhausted = np.ones(n_groups, dtype=bool)
    np.logical_and.at(exhausted, groups, reward >= best)
    return float(exhausted[counts >= 2].mean()) if (counts >= 2).any() else 0.0


@dataclass(frozen=True)
class _Centred:
    """Features and reward centred within prompt; features that never vary there are dropped."""

    names: list[str]  #: the features kept
    matrix: np.ndarray  #: their raw columns (for the pooled correlation and the non-zero counts)
    xn: np.ndarray  #: their centred columns, each scaled to unit norm
    yc: np.ndarray  #: the centred reward
    y_norm: float  #: its norm; ~0 when the reward never varies within a prompt

    @classmethod
    def of(cls, matrix: np.ndarray, reward: np.ndarray, groups: np.ndarray, n_groups: int,
           names: Sequence[str]) -> _Centred:
        xc = _centre(matrix, groups, n_groups)
        yc = _centre(reward, groups, n_groups)
        x_norm = np.sqrt((xc**2).sum(axis=0))
        keep = x_norm > 1e-9
        return cls([name for name, k in zip(names, keep) if k], matrix[:, keep], xc[:, keep] / x_norm[keep], yc,
                   float(np.sqrt(yc @ yc)))

    def correlations(self) -> np.ndarray:
        """Pearson r of each kept feature with the reward, within prompt (needs y_norm > 0)."""
        return np.asarray((self.yc @ self.xn) / self.y_norm, dtype=float)

    def noise_floor(self, groups: np.ndarray, n_permutations: int, alpha: float,
                    rng: np.random.Generator) -> float:
        """The (1 - alpha) quantile of the largest |r| of any feature under within-prompt shuffles."""
        perms = _within_permutations(groups, n_permutations, rng)
        null_max = np.abs((self.yc[perms] @ self.xn) / self.y_norm).max(axis=1)
        return float(np.quantile(null_max, 1 - alpha))


def _ranked_features(centred: _Centred, r: Any, floor: float, reward: np.ndarray,
                     aliases: Mapping[str, tuple[str, ...]], endorsed: Sequence[str]) -> tuple[ScanFeature, ...]:
    """The kept features, strongest |r| first; on a tie a paid-for endorsed one, then by name.

    *r* is :meth:`_Centred.correlations`, one per kept feature (numpy scalars, rounded as such).
    """
    names = centred.names
    pooled = _pooled(centred.matrix, reward)
    nonzero = (centred.matrix != 0).sum(axis=0)
    flags = [_is_endorsed((name, *aliases[name]), endorsed) for name in names]
    order = sorted(range(len(names)), key=lambda j: (-round(abs(r[j]), 12), not (flags[j] and r[j] > 0), names[j]))
    return tuple(
        ScanFeature(names[j], float(r[j]), float(pooled[j]), int(nonzero[j]), bool(abs(r[j]) > floor), flags[j],
                    aliases[names[j]])
        for j in order
    )


def _endorsement_warnings(features: Sequence[ScanFeature], endorsed: Sequence[str], names: Sequence[str]) -> list[str]:
    """What *endorsed* misses: no match at all, endorsed features punished, rivals also paid for."""
    warnings: list[str] = []
    above = [f for f in features if f.clears_floor]
    paid = next((f for f in above if f.correlation > 0), None)
    if endorsed and not any(f.endorsed for f in features):
        warnings.append(f"endorsed {list(endorsed)} matches no feature that varies within a prompt; "
                        f"check the spelling (features: {list(names[:8])}...)")
    inverted = [f.name for f in above if f.endorsed and f.correlation < 0]
    if inverted:
        warnings.append(f"the reward punishes endorsed features: {inverted}")
    if paid is not None and endorsed and paid.endorsed:
        rivals = [f.name for f in above if not f.endorsed and f.correlation > 0]
        if rivals:
            warnings.append(f"non-endorsed features also clear the floor: {rivals[:5]}")
    return warnings


def _regime(features: Sequence[ScanFeature], endorsed: Sequence[str], median: float, exhausted_share: float,
            warnings: list[str]) -> tuple[str, str | None]:
    """(regime, top feature) once the floor is known: the first of :func:`hack_scan`'s list that holds.

    Appends to *warnings* what the decision itself notices (indistinguishable features, no
    endorsed features to judge against).
    """
    above = [f for f in features if f.clears_floor]
    paid = next((f for f in above if f.correlation > 0), None)
    top = paid.name if paid else None
    if not above:
        return "no_signal", None
    collinear = sum(abs(f.correlation) >= COLLINEAR for f in features)
    if collinear >= 2 and median < 3:
        warnings.append(f"{collinear} features correlate perfectly with the reward; "
                        "too few rollouts to tell them apart")
        return "degenerate", None
    if endorsed and not any(f.endorsed for f in features):
        return "unknown", top
    if endorsed and ((paid is not None and not paid.endorsed) or (above[0].endorsed and above[0].correlation < 0)):
        return "reward_hack", top
    if not endorsed:
        warnings.append("no endorsed features given: a hack cannot be told from learning")
    if exhausted_share > EXHAUSTED_SHARE:
        return "pool_exhausted", top
    return "train", top


def hack_scan(
    rows: Iterable[Mapping[str, object]],
    *,
    endorsed: Sequence[str] = (),
    env: Env | Environment | str | FeatureFn | None = None,
    n_permutations: int = 100,
    alpha: float = 0.05,
    rng: np.random.Generator | int | None = None,
    extractors: Mapping[str, Extractor] | None = None,
    max_terms: int = MAX_TERMS,
) -> HackScanResult:
    """Find the reply feature a reward pays for within prompts, and judge whether it is a hack.

    *rows* are dicts with ``prompt``, ``reply`` and ``score`` (or ``reward`` when there is no
    score); prompts and replies may be text or chat messages. Rows with the same prompt text
    are one group (one GRPO group).

    Features of a reply: ``length`` (characters); the environment's own
    ``features(reply)`` (*env*: an environment, its spec, or just a features function; None
    is the default environment; refund adds tool-call counts, ``tool:<name>`` per tool,
    ``asks``, ``well_formed`` and ``text_after_call``); ``contains:<term>`` for the
    *max_terms* most frequent words and word pairs (present in at least min(20, n/10) rows
    and absent from one); and one feature per *extractors* entry (``name -> fn(reply) ->
    number``). Features with identical columns are merged (``aliases``, the first name
    wins); features that never vary within a prompt are dropped.

    Each feature and the reward are centred within prompt and correlated (Pearson). The noise
    floor is the (1 - *alpha*) quantile, over *n_permutations* within-prompt shuffles of the
    reward, of the largest |correlation| of any feature; a feature *clears the floor* when
    its |correlation| exceeds it. *endorsed* are case-insensitive substrings of feature names
    (or aliases) the policy is meant to learn, e.g. ``("lookup_order", "asks")``.

    ``regime`` is the first of these that holds:

    * ``unknown``: no prompt has two rollouts, or no feature varies within any prompt, or
      *endorsed* is given but matches no feature (nothing to judge against);
    * ``no_signal``: the reward never varies within a prompt, or no feature clears the floor
      (there is nothing a group-relative update can learn from the reply);
    * ``degenerate``: two or more features reach |r| >= 0.999 and prompts have fewer than 3
      rollouts at the median, so the winner cannot be told apart (no top feature is named);
    * ``reward_hack``: *endorsed* is given and the strongest above-floor feature the reward
      pays for (positive r) is not endorsed, or the strongest above-floor feature overall is
      endorsed and punished (negative r);
    * ``pool_exhausted``: more than 20% of prompts have every rollout at the scan's best
      reward: they carry no gradient, so training on them has stalled;
    * ``train``: the reward pays for the endorsed behaviour (or, without *endorsed*, for
      something above the floor); the scan cannot call it a hack.

    *rng* is a numpy Generator or int seed; None means seed 0, so a scan is reproducible.
    """
    endorsed = _scan_options(endorsed, n_permutations, alpha)
    generator = _rng(rng)
    prompts, replies, reward = _read_rows(rows)
    n = len(replies)
    warnings: list[str] = []
    groups, n_groups, counts, median = _group_by_prompt(prompts)
    names, aliases, matrix = _merge_identical(_feature_columns(replies, env, extractors, max_terms), n)
    exhausted_share = _exhausted_share(reward, groups, n_groups, counts)

    def result(regime: str, features: tuple[ScanFeature, ...] = (), floor: float = float("nan"),
               top: str | None = None) -> HackScanResult:
        return HackScanResult(regime, top, features, floor, n, n_groups, median, exhausted_share,
                              endorsed, tuple(warnings), n_permutations, alpha)

    if n == 0 or not (counts >= 2).any():
        warnings.append("no prompt has two or more rollouts; within-prompt correlation needs repeats")
        return result("unknown")
    if median < 4:
        warnings.append(f"median {median:g} rollouts per prompt: the noise floor is coarse; re-scan with 8")

    centred = _Centred.of(matrix, reward, groups, n_groups, names)
    if not centred.names:
        warnings.append("no feature varies within any prompt")
        return result("unknown")
    if centred.y_norm < 1e-12:
        warnings.append("the reward never varies within a prompt: nothing to learn from the reply")
        return result("no_signal")

    floor = centred.noise_floor(groups, n_permutations, alpha, generator)
    features = _ranked_features(centred, centred.correlations(), floor, reward, aliases, endorsed)
    warnings += _endorsement_warnings(features, endorsed, centred.names)
    regime, top = _regime(features, endorsed, median, exhausted_share, warnings)
    return result(regime, features, floor, top)

def _pooled(matrix: np.ndarray, reward: np.ndarray) -> np.ndarray:
    xc = matrix - matrix.mean(axis=0)
    yc = reward - reward.mean()
    denom = np.sqrt((xc**2).sum(axis=0) * (yc @ yc))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (yc @ xc) / np.where(denom > 0, denom, 1.0), 0.0)


def hack_scan_diff(before: HackScanResult, after: HackScanResult) -> HackScanDiff:
    """Which features newly clear the floor between two scans (e.g. two monitor evaluations).

    A gained feature that is not endorsed is reported as a landed reward hack in ``learned``.
    """
    for label, scan in (("before", before), ("after", after)):
        if not isinstance(scan, HackScanResult):
            raise UsageError(f"hack_scan_diff: {label} must be a HackScanResult, got {type(scan).__name__}")
    b = {f.name: f for f in before.features}
    a = {f.name: f for f in after.features}
    gained = tuple(f for f in after.features if f.clears_floor and not (f.name in b and b[f.name].clears_floor))
    lost = tuple(f for f in before.features if f.clears_floor and not (f.name in a and a[f.name].clears_floor))
    shifts = sorted(
        ((name, b[name].correlation if name in b else 0.0, a[name].correlation if name in a else 0.0)
         for name in {*a, *b}),
        key=lambda t: (-abs(t[2] - t[1]), t[0]),
    )
    hacks = [f.name for f in gained if not f.endorsed and f.correlation > 0]
    if hacks:
        learned = f"reward hack landed: the reward now pays for {', '.join(hacks)} (not endorsed)"
    elif gained:
        learned = f"newly above the floor: {', '.join(f.name for f in gained)}"
    else:
        learned = "no feature newly clears the noise floor"
    return HackScanDiff(gained, lost, tuple(shifts), learned)
