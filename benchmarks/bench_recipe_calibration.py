"""Calibration of the recipe interval across training seeds, by simulation.

AdaptiveDesign: S training seeds of one recipe, each scored on the same U holdout units (crossed),
k = 4 rollouts per unit, binary pass. On the logit scale unit u starts at
``eta_u ~ N(logit 0.7, 1.0)`` (heterogeneous prompts) and after training seed s sits at
``eta_u + mu + c_u + tau * z_s + w_su``: ``c_u ~ N(0, 0.5²)`` is how unit u responds to the
recipe (shared by every seed), ``tau * z_s`` (z ~ N(0, 1)) the seed's own shift, the
run-to-run spread of training, and ``w_su ~ N(0, 0.5²)`` the seed x unit interaction. Pass
counts are Binomial(4, expit(.)) before (once) and after (per seed).

True recipe effect: ``E[after - before]`` over the seed distribution *and* the unit
population, the quantity today's single-seed interval already targets for units (the holdout
is a sample of the category). It is computed exactly by Gauss-Hermite quadrature (the after
logit is normal with variance 1 + 0.5² + tau² + 0.5²) and mu is solved by bisection so that
it is exactly 0 (null) or -0.10 (a drop). The narrower "these units" effect (expected delta
over seeds on the drawn units) is reported as well: the interval covers it too.

Grid: S in {3, 5}, U in {6, 15, 40}, tau in {0, 0.5, 1.0}, each at both effects; per cell
we count coverage, the false-regression rate under the null (upper bound < 0, nominal 2.5 %)
and the power against the drop. Bounds for the default: coverage >= 93 % in every cell and
false regressions <= 3.5 %. The candidate intervals are the ones the default was chosen
against, and "one seed" is today's gate (stats.paired_bootstrap, expanded percentile) on the
first seed alone, and on each seed ("any of S": a seed-by-seed gate).

1,000 recipes a cell (the default) put the Monte-Carlo error of a 95 % coverage at ±1.35
points and of a 2.5 % rate at ±0.97 points (95 % bands); --quick uses 200 (±3.0 points).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_recipe_calibration.py [--quick] [--reps 1000]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np
from scipy import stats as sps

from pytest_rlgate.gate.recipe_stats import seed_unit_interval
from pytest_rlgate.gate.stats import paired_bootstrap

K = 4
BASE_LOGIT = math.log(0.7 / 0.3)
UNIT_SD = 1.0
RESPONSE_SD = 0.5
INTERACTION_SD = 0.5
SEEDS = (3, 5)
UNITS = (6, 15, 40)
TAUS = (0.0, 0.5, 1.0)
DROP = -0.10
EFFECTS = (0.0, DROP)
COVER_BOUND = 0.93
FALSE_BOUND = 0.035
#: the coverage every cell must keep for a narrower interval to replace the default
POWER_COVER = 0.94
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(80)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()

Interval = tuple[np.ndarray, np.ndarray]


def _expit(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def true_effect(mu: float, tau: float) -> float:
    """Population recipe effect E[expit(after logit)] - E[expit(before logit)], by quadrature."""
    after_sd = math.sqrt(UNIT_SD**2 + RESPONSE_SD**2 + tau**2 + INTERACTION_SD**2)
    after = _WEIGHTS @ _expit(BASE_LOGIT + mu + after_sd * _NODES)
    before = _WEIGHTS @ _expit(BASE_LOGIT + UNIT_SD * _NODES)
    return float(after - before)


def solve_mu(target: float, tau: float) -> float:
    """The logit shift that makes the population recipe effect exactly *target* (bisection)."""
    low, high = -8.0, 8.0
    for _ in range(80):
        mid = 0.5 * (low + high)
        if true_effect(mid, tau) < target:
            low = mid
        else:
            high = mid
    return 0.5 * (low + high)


def simulate(
    rng: np.random.Generator, reps: int, n_seeds: int, n_units: int, tau: float, target: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """*reps* recipes: before (reps, U), after (reps, S, U) pass rates and each one's "these units" effect."""
    mu = solve_mu(target, tau)
    eta = rng.normal(BASE_LOGIT, UNIT_SD, (reps, n_units))
    shifted = eta + mu + RESPONSE_SD * rng.standard_normal((reps, n_units))
    seed_shift = tau * rng.standard_normal((reps, n_seeds, 1))
    after_logit = shifted[:, None, :] + seed_shift + INTERACTION_SD * rng.standard_normal((reps, n_seeds, n_units))
    before = rng.binomial(K, _expit(eta)) / K
    after = rng.binomial(K, _expit(after_logit)) / K
    spread = math.sqrt(tau**2 + INTERACTION_SD**2)  # what the seed distribution still averages over
    expected_after = _expit(shifted[..., None] + spread * _NODES) @ _WEIGHTS
    these_units = (expected_after - _expit(eta)).mean(axis=1)
    return before, after, these_units


def _t_interval(mean: np.ndarray, var: np.ndarray, df: np.ndarray) -> Interval:
    half = sps.t.ppf(0.975, df) * np.sqrt(var)
    return mean - half, mean + half


def _anova(d: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Grand mean and the two-way mean squares (seeds, units, residual) of (reps, S, U) deltas."""
    _, n_seeds, n_units = d.shape
    grand = d.mean(axis=(1, 2))
    seed_means, unit_means = d.mean(axis=2), d.mean(axis=1)
    ms_seeds = n_units * seed_means.var(axis=1, ddof=1)
    ms_units = n_seeds * unit_means.var(axis=1, ddof=1)
    residual = d - seed_means[:, :, None] - unit_means[:, None, :] + grand[:, None, None]
    ms_resid = (residual**2).sum(axis=(1, 2)) / ((n_seeds - 1) * (n_units - 1))
    return grand, ms_seeds, ms_units, ms_resid


def _components(d: np.ndarray, df_rule: bool) -> Interval:
    """Variance components (ANOVA moments, truncated at 0) with Satterthwaite df.

    ``df_rule``: use S - 1 degrees of freedom whenever the seed mean square exceeds the
    residual one (the seed component is estimated positive).
    """
    _, n_seeds, n_units = d.shape
    grand, ms_s, ms_u, ms_e = _anova(d)
    ms_s, ms_u = np.maximum(ms_s, ms_e), np.maximum(ms_u, ms_e)
    total = ms_s + ms_u - ms_e
    denom = ms_s**2 / (n_seeds - 1) + ms_u**2 / (n_units - 1) + ms_e**2 / ((n_seeds - 1) * (n_units - 1))
    df = np.where(denom > 0, total**2 / np.where(denom > 0, denom, 1.0), n_units - 1)
    if df_rule:
        df = np.where(ms_s > ms_e, n_seeds - 1.0, df)
    return _t_interval(grand, total / (n_seeds * n_units), df)


def banerjee_raw_margins(d: np.ndarray) -> Interval:
    """Banerjee on the raw margins, var(seed means)/S and var(unit means)/U: the interaction counted twice."""
    _, n_seeds, n_units = d.shape
    seed_means, unit_means = d.mean(axis=2), d.mean(axis=1)
    half = np.sqrt(sps.t.ppf(0.975, n_seeds - 1) ** 2 * seed_means.var(axis=1, ddof=1) / n_seeds
                   + sps.t.ppf(0.975, n_units - 1) ** 2 * unit_means.var(axis=1, ddof=1) / n_units)
    grand = seed_means.mean(axis=1)
    return grand - half, grand + half


def _seed_t(d: np.ndarray) -> Interval:
    """t interval on the S per-seed deltas (S - 1 df): blind to the units every seed shares."""
    seed_means = d.mean(axis=2)
    n_seeds = seed_means.shape[1]
    return _t_interval(seed_means.mean(axis=1), seed_means.var(axis=1, ddof=1) / n_seeds,
                       np.full(len(d), n_seeds - 1.0))


def two_way_bootstrap(d: np.ndarray, resamples: int, rng: np.random.Generator, chunk: int = 50) -> Interval:
    """Percentile interval of the pigeonhole bootstrap: seeds and units resampled independently."""
    reps, n_seeds, n_units = d.shape
    low, high = np.empty(reps), np.empty(reps)
    for start in range(0, reps, chunk):
        block = d[start:start + chunk]
        n = len(block)
        w_seeds = rng.multinomial(n_seeds, np.full(n_seeds, 1.0 / n_seeds), (n, resamples)).astype(float)
        w_units = rng.multinomial(n_units, np.full(n_units, 1.0 / n_units), (n, resamples)).astype(float)
        means = np.einsum("rbs,rsu,rbu->rb", w_seeds, block, w_units, optimize=True) / (n_seeds * n_units)
        low[start:start + n], high[start:start + n] = np.quantile(means, [0.025, 0.975], axis=1)
    return low, high


def candidates(boot_resamples: int, rng: np.random.Generator) -> dict[str, Callable[[np.ndarray], Interval]]:
    """The intervals compared, the library default first."""
    def default(d: np.ndarray) -> Interval:
        return seed_unit_interval(d)[1:]

    return {
        "recipe (default)": default,
        "Banerjee, raw margins": banerjee_raw_margins,
        "Satterthwaite": lambda d: _components(d, df_rule=False),
        "S-1 df rule": lambda d: _components(d, df_rule=True),
        "seed-t": _seed_t,
        "two-way bootstrap": lambda d: two_way_bootstrap(d, boot_resamples, rng),
    }


def one_seed_regressions(before: np.ndarray, after: np.ndarray, resamples: int,
                         rng: np.random.Generator) -> tuple[float, float]:
    """Today's gate per seed: (first seed regressed, any seed regressed) rates."""
    regressed = np.array([[paired_bootstrap(b, a, n_resamples=resamples, rng=rng).confidence_interval.high < 0
                           for a in seeds] for b, seeds in zip(before, after)])
    return float(regressed[:, 0].mean()), float(regressed.any(axis=1).mean())


def run_cell(n_seeds: int, n_units: int, tau: float, reps: int, boot_resamples: int, one_seed_resamples: int,
             seed: int = 0) -> dict[str, object]:
    """Every figure of one (S, U, tau) row: per method coverage at both effects, false regress, power."""
    out: dict[str, object] = {}
    for target in EFFECTS:
        rng = np.random.default_rng([seed, n_seeds, n_units, int(tau * 10), int(round(-target * 100))])
        before, after, these_units = simulate(rng, reps, n_seeds, n_units, tau, target)
        d = after - before[:, None, :]
        for name, interval in candidates(boot_resamples, rng).items():
            low, high = interval(d)
            out[name, target, "cover"] = float(np.mean((low - 1e-12 <= target) & (target <= high + 1e-12)))
            out[name, target, "below"] = float(np.mean(high < 0))
            out[name, target, "width"] = float(np.mean(high - low))
            out[name, target, "cover these"] = float(np.mean((low <= these_units) & (these_units <= high)))
        if target == 0.0:
            out["one seed"], out["any seed"] = one_seed_regressions(before, after, one_seed_resamples, rng)
    return out


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000, help="simulated recipes per cell and effect (1000)")
    parser.add_argument("--quick", action="store_true", help="200 recipes a cell, 300 bootstrap resamples")
    parser.add_argument("--boot", type=int, default=1000, help="two-way bootstrap resamples (1000)")
    parser.add_argument("--units", type=int, nargs="+", default=list(UNITS), help="units per holdout (6 15 40)")
    parser.add_argument("--one-seed-resamples", type=int, default=2000, help="B for today's interval (2000)")
    args = parser.parse_args()
    reps, boot = (200, 300) if args.quick else (args.reps, args.boot)
    names = list(candidates(boot, np.random.default_rng()))
    t0 = time.perf_counter()
    print(f"{reps} recipes a cell and effect, k = {K}; Monte-Carlo 95 % band ±"
          f"{_pct(1.96 * math.sqrt(0.95 * 0.05 / reps))} pt on a 95 % coverage, ±"
          f"{_pct(1.96 * math.sqrt(0.025 * 0.975 / reps))} pt on a 2.5 % rate; bootstrap B = {boot}\n")
    print("Default interval (percent): coverage of the population effect at Δ = 0 and Δ = -0.10, of the "
          "these-units effect (worse of the two), false regress at Δ = 0, power at Δ = -0.10, width at Δ = 0; "
          "today's single-seed gate under the null; the candidates as worse coverage / false regress.\n")
    header = ["S", "units", "τ", "cover Δ=0", "cover Δ=-0.10", "cover these units", "false regress",
              "power", "width", "one seed: false regress", "any of S seeds regress", *names[1:]]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    worst: dict[str, list[tuple[float, float, float, float, str]]] = {name: [] for name in names}
    for n_seeds in SEEDS:
        for n_units in args.units:
            for tau in TAUS:
                cell = run_cell(n_seeds, n_units, tau, reps, boot, args.one_seed_resamples)
                label = f"S {n_seeds}, U {n_units}, τ {tau}"
                for name in names:
                    cover = min(cell[name, t, "cover"] for t in EFFECTS)
                    worst[name].append((cover, cell[name, 0.0, "below"], cell[name, DROP, "below"],
                                        cell[name, 0.0, "width"], label))
                d = "recipe (default)"
                row = [str(n_seeds), str(n_units), f"{tau:.1f}", _pct(cell[d, 0.0, "cover"]),
                       _pct(cell[d, DROP, "cover"]), _pct(min(cell[d, t, "cover these"] for t in EFFECTS)),
                       _pct(cell[d, 0.0, "below"]), _pct(cell[d, DROP, "below"]), f"{cell[d, 0.0, 'width']:.2f}",
                       _pct(cell["one seed"]), _pct(cell["any seed"])]
                row += [f"{_pct(min(cell[n, t, 'cover'] for t in EFFECTS))} / {_pct(cell[n, 0.0, 'below'])}"
                        for n in names[1:]]
                print("| " + " | ".join(row) + " |", flush=True)
    print(f"\n| method | worst coverage | worst false regress | mean power at Δ = -0.10 | mean width at Δ = 0 | "
          f"cells within bounds (of {len(worst[names[0]])}) | cells covering >= {_pct(POWER_COVER)} % |")
    print("|---|---|---|---|---|---|---|")
    for name, cells in worst.items():
        cover = min(cells)
        false = max(cells, key=lambda c: c[1])
        power = sum(c[2] for c in cells) / len(cells)
        ok = sum(c >= COVER_BOUND and f <= FALSE_BOUND for c, f, _, _, _ in cells)
        covering = sum(c >= POWER_COVER for c, *_ in cells)
        width = sum(c[3] for c in cells) / len(cells)
        print(f"| {name} | {_pct(cover[0])} ({cover[4]}) | {_pct(false[1])} ({false[4]}) | {_pct(power)} | "
              f"{width:.3f} | {ok} | {covering} |")
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
