"""The watched run by simulation: how often it stops a run that changed nothing, and how often it catches a drop.

Setup: three categories of 6, 12 and 20 scenarios, 2 prompts each, k replies per prompt;
scenario pass rates Beta(2, 2); step 0 sampled once and every checkpoint freshly (a look is
the checkpoint's rows against step 0's). Each run goes through :class:`SequentialGate` (the
public API, with ``Units.from_sums`` instead of row dicts) and stops at its first regression.

* **no change**: every checkpoint is step 0's policy; 10 planned looks, and an open-ended
  run of 50 looks; a stop is a false stop (family-wise over looks, groups and families);
* **drop**: from look 6 on, the 20-scenario (or the 12-scenario) category loses 0.7 logits
  (about -0.14 in pass@1); caught = the run stops at look 6..10 naming that category. The
  open-ended schedule runs the same 10 looks without knowing it will stop there. The last
  column gates look 10 alone with one ordinary ``rg.compare`` at its usual level (live);
* **collapse**: every scenario's pass rate falls to 0 at look L; stopped = the run stopped by
  look L (at L, or earlier on a false stop), for L = 1..10 planned and L = 1, 2, 5, 10, 25, 50
  open-ended (20 runs each).

Methods: ``exact`` (permutation p-values, the default) and ``betting`` (e-values, the
anytime-valid alternative; at the first k only, by default) with the same families and schedule.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_watch.py [--runs 400] [--k 4 8]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from scipy import stats

import pytest_rlgate as rg
from pytest_rlgate.gate.options import FAMILY_LEVEL
from pytest_rlgate.watch.looks import SequentialGate, Units

SIZES = {"small": 6, "mid": 12, "large": 20}
PROMPTS = 2
DROP = 0.7
DROP_LOOK = 6
LOOKS = 10
OPEN_LOOKS = 50
COLLAPSE_RUNS = 20
UNITS = [(c, f"{c}-{i}") for c, n in SIZES.items() for i in range(n)]
CATEGORY = np.array([u[0] for u in UNITS])


def _expit(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-9, 1 - 1e-9)
    return np.log(p) - np.log1p(-p)


def _side(counts: np.ndarray, k: int) -> Units:
    """One side from per-prompt pass counts (units x prompts)."""
    total = counts.sum(axis=1)
    return Units.from_sums({u: (float(c),) for u, c in zip(UNITS, total)}, {u: PROMPTS * k for u in UNITS})


def _rows(counts: np.ndarray, k: int, run: str) -> list[dict]:
    """The same side as graded row dicts (for rg.compare)."""
    rows = []
    for (category, scenario), per_prompt in zip(UNITS, counts):
        for p, passed in enumerate(per_prompt):
            for j in range(k):
                ok = int(j < passed)
                rows.append({"prompt": f"{scenario}/{p}", "scenario_id": scenario, "category": category,
                             "rollout_index": j, "reply": "r", "score": float(ok), "reward": ok, "markers": {},
                             "eval_run": run})
    return rows


Rates = Callable[[int, np.ndarray], np.ndarray]


def run_once(gate: SequentialGate, rng: np.random.Generator, k: int, looks: int, rates: Rates,
             final_compare: bool = False) -> tuple[int | None, list[str], rg.GateResult | None]:
    """(look it stopped at or None, what it named there, one rg.compare of the last look when asked).

    With *final_compare* the run is sampled to its last look even after a stop, so the
    ordinary gate of the last checkpoint sees the same runs whatever the watch did.
    """
    p = rng.beta(2.0, 2.0, size=len(UNITS))
    before = rng.binomial(k, p[:, None], size=(len(UNITS), PROMPTS))
    base = _side(before, k)
    counts = before
    stopped: tuple[int | None, list[str]] = (None, [])
    for look in range(1, looks + 1):
        counts = rng.binomial(k, rates(look, p)[:, None], size=(len(UNITS), PROMPTS))
        if stopped[0] is None:
            done = gate.look(base, _side(counts, k), step=look)
            if done.regressed:
                stopped = (look, done.regressed)
                if not final_compare:
                    break
    result = None
    if final_compare:
        result = rg.compare(_rows(before, k, "step-0"), _rows(counts, k, f"step-{looks}"), by="category")
    return stopped[0], stopped[1], result


def _cp(hits: int, n: int) -> str:
    low = stats.beta.ppf(0.025, hits, n - hits + 1) if hits else 0.0
    high = stats.beta.ppf(0.975, hits + 1, n - hits) if hits < n else 1.0
    return f"{hits / n:.1%} ({low:.1%}-{high:.1%})"


#: the run's family level (--family-level; default: the gate's)
LEVEL = [FAMILY_LEVEL]


def _gate(method: str, planned: int | None) -> SequentialGate:
    return SequentialGate(LEVEL[0], planned=planned, report=False, method=method)


def no_change(method: str, planned: int | None, looks: int, k: int, runs: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    stops = sum(run_once(_gate(method, planned), rng, k, looks, lambda _l, p: p)[0] is not None for _ in range(runs))
    return _cp(stops, runs)


def drop(method: str, planned: int | None, category: str, k: int, runs: int, seed: int,
         compare: bool = False) -> tuple[str, str | None]:
    rng = np.random.default_rng(seed)
    hit = CATEGORY == category

    def rates(look: int, p: np.ndarray) -> np.ndarray:
        return np.where(hit & (look >= DROP_LOOK), _expit(_logit(p) - DROP), p)

    caught = final = 0
    for _ in range(runs):
        look, named, result = run_once(_gate(method, planned), rng, k, LOOKS, rates, final_compare=compare)
        caught += look is not None and look >= DROP_LOOK and f"pass@1/{category}" in named
        if compare:
            final += result is not None and any(
                c.metric == "pass@1" and c.group == category and c.verdict == "regressed" for c in result.comparisons)
    return f"{caught / runs:.1%}", (f"{final / runs:.1%}" if compare else None)


def collapse(method: str, planned: int | None, k: int, seed: int) -> str:
    at = list(range(1, LOOKS + 1)) if planned else [1, 2, 5, 10, 25, 50]
    rng = np.random.default_rng(seed)
    worst = 1.0
    for start in at:
        stopped = 0
        for _ in range(COLLAPSE_RUNS):
            look, _named, _r = run_once(_gate(method, planned), rng, k, start,
                                        lambda look, p, s=start: np.zeros_like(p) if look >= s else p)
            stopped += look is not None
        worst = min(worst, stopped / COLLAPSE_RUNS)
    span = f"looks 1-{LOOKS}" if planned else "looks 1-50"
    return "every run, every look" if worst == 1.0 else f"{worst:.0%} at its worst look ({span})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--runs", type=int, default=400, help="simulated runs a cell (%(default)s)")
    parser.add_argument("--k", type=int, nargs="+", default=[4, 8], help="replies per prompt (%(default)s)")
    parser.add_argument("--methods", nargs="+", default=["exact", "betting"],
                        help="(%(default)s; the ones after the first at the first --k only, unless --all)")
    parser.add_argument("--all", action="store_true", help="every method at every k")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--family-level", type=float, default=FAMILY_LEVEL,
                        help="how often an unchanged run may be stopped (%(default)s, the gate's)")
    args = parser.parse_args()
    LEVEL[0] = args.family_level
    start = time.perf_counter()
    p = np.random.default_rng(12345).beta(2.0, 2.0, size=1_000_000)
    shift = float(np.mean(_expit(_logit(p) - DROP) - p))
    print(f"bench_watch: categories of {'/'.join(map(str, SIZES.values()))} scenarios x {PROMPTS} prompts x k "
          f"replies, pass rates Beta(2,2), {args.runs} runs a cell, family level {args.family_level:g}; "
          f"drop -{DROP} logit ({shift:+.3f} in pass@1 on average) from look {DROP_LOOK} of {LOOKS}")
    print()
    print("| k | schedule | method | no change: runs stopped (95% CI) | drop in 20 caught | drop in 12 caught "
          "| one final rg.compare: 20 / 12 | total collapse stopped |")
    print("|---|---|---|---|---|---|---|---|")
    for k in args.k:
        for planned, label in ((LOOKS, f"{LOOKS} planned looks"), (None, f"open-ended ({OPEN_LOOKS} looks null)")):
            for method in args.methods if args.all or k == args.k[0] else args.methods[:1]:
                seed = args.seed + 1000 * k
                null = no_change(method, planned, LOOKS if planned else OPEN_LOOKS, k, args.runs, seed)
                compare = method == args.methods[0] and planned is not None
                large, final_large = drop(method, planned, "large", k, args.runs, seed + 1, compare)
                mid, final_mid = drop(method, planned, "mid", k, args.runs, seed + 2, compare)
                finals = f"{final_large} / {final_mid}" if compare else "-"
                total = collapse(method, planned, k, seed + 3)
                name = f"{method} (default)" if method == "exact" else method
                print(f"| {k} | {label} | {name} | {null} | {large} | {mid} | {finals} | {total} |", flush=True)
    print()
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
