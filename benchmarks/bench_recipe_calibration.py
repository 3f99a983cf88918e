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

Grid: S in {3, 5}, U in {6, 12, 15, 40}, tau in {0, 0.5, 1.0}, each at both effects; per
cell we count coverage, the false-regression rate under the null (upper bound < 0, nominal
(1 - confidence) / 2) and the power against the drop, at ``--confidence`` (0.95; the gate
also calls the interval at adjusted levels such as 0.99). A cell is "in the band" when its
coverage at both effects is within a fifth of the miss rate of the confidence (94-96 % at
95 %, 98.8-99.2 % at 99 %). The candidates are the
intervals the default was chosen against (see ``candidates``), and "one seed" is today's gate
(stats.paired_bootstrap, expanded percentile) on the first seed alone, and on each seed
("any of S": a seed-by-seed gate).

2,000 recipes a cell (the default) put the Monte-Carlo error of a 95 % coverage at ±1.0
point and of a 2.5 % rate at ±0.7 (95 % bands); --quick uses 200 (±3.0 points).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_recipe_calibration.py [--quick] [--reps 2000]
        [--confidence 0.99] [--bootstrap] [--skip-one-seed]
"""

from __future__ import annotations

import argparse
import functools
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
UNITS = (6, 12, 15, 40)
TAUS = (0.0, 0.5, 1.0)
DROP = -0.10
EFFECTS = (0.0, DROP)
#: a cell is in the band when its coverage is within a fifth of the miss rate of the confidence
#: level: 94-96 % at 95 %, 98.8-99.2 % at 99 %
BAND = 0.2
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


def _t_interval(mean: np.ndarray, var: np.ndarray, df: np.ndarray | float, confidence: float) -> Interval:
    half = sps.t.ppf(0.5 + confidence / 2, df) * np.sqrt(var)
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


def _components(d: np.ndarray, confidence: float, df_rule: bool) -> Interval:
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
    return _t_interval(grand, total / (n_seeds * n_units), df, confidence)


def _banerjee(grand: np.ndarray, v_seeds: np.ndarray, v_units: np.ndarray, n_seeds: int, n_units: int,
              confidence: float) -> tuple[Interval, np.ndarray]:
    """Banerjee's interval for two pieces at S - 1 and U - 1 df, and each one's share of it (w, the seed piece's)."""
    q = 0.5 + confidence / 2
    seeds, units = sps.t.ppf(q, n_seeds - 1) ** 2 * v_seeds, sps.t.ppf(q, n_units - 1) ** 2 * v_units
    both = seeds + units
    half = np.sqrt(both)
    return (grand - half, grand + half), np.where(both > 0, seeds / np.where(both > 0, both, 1.0), 0.0)


def banerjee_raw_margins(d: np.ndarray, confidence: float) -> Interval:
    """Banerjee on the raw margins, var(seed means)/S and var(unit means)/U: the interaction counted twice."""
    _, n_seeds, n_units = d.shape
    seed_means, unit_means = d.mean(axis=2), d.mean(axis=1)
    interval, _ = _banerjee(seed_means.mean(axis=1), seed_means.var(axis=1, ddof=1) / n_seeds,
                            unit_means.var(axis=1, ddof=1) / n_units, n_seeds, n_units, confidence)
    return interval


def seed_piece_without_interaction(d: np.ndarray, confidence: float) -> Interval:
    """Banerjee with the interaction moved from the seed piece (t at S - 1) to the unit piece (t at U - 1).

    ``(MS_S - MS_E)+ / (S U)`` at S - 1 df and ``MS_U / (S U)`` at U - 1: the same total,
    the interaction's share at the larger t. Narrower where the seeds barely differ; where they
    dominate, the seed piece is a difference of mean squares, not a chi-square at S - 1, and
    the interval under-covers.
    """
    _, n_seeds, n_units = d.shape
    grand, ms_s, ms_u, ms_e = _anova(d)
    interval, _ = _banerjee(grand, np.maximum(ms_s - ms_e, 0.0) / (n_seeds * n_units), ms_u / (n_seeds * n_units),
                            n_seeds, n_units, confidence)
    return interval


@functools.lru_cache(maxsize=64)
def shrink_factor(n_seeds: int, n_units: int, confidence: float, draws: int = 40_000) -> float:
    """The largest kappa whose shrunk Banerjee interval keeps normal-theory coverage at every variance ratio.

    Normal theory: the seed piece is ``(f_e + f_a) chi2(S-1)/(S-1)``, the unit piece
    ``((f_e + f_b) chi2(U-1)/(U-1) - f_e chi2(E)/E)+`` for variance shares (f_a, f_b, f_e) of
    the seeds, units and interaction on a 0.1 grid of the simplex; the half-width
    ``(1 - kappa 4 w (1 - w)) * Banerjee`` (w the seed piece's share of it) shrinks Banerjee
    where it is conservative, between the pure cases where it is exact. A ratio may lose at
    most 0.15 point (the Monte-Carlo error) against the lower of the confidence and Banerjee.
    """
    rng = np.random.default_rng(0)
    f1, f2, f3 = n_seeds - 1, n_units - 1, (n_seeds - 1) * (n_units - 1)
    w1, w2, w3 = (rng.chisquare(f, draws) / f for f in (f1, f2, f3))
    z2 = rng.standard_normal(draws) ** 2
    shares = np.array([(i / 10, j / 10, 1 - (i + j) / 10) for i in range(11) for j in range(11 - i)])
    fa, fb, fe = shares[:, :1], shares[:, 1:2], shares[:, 2:]
    q = 0.5 + confidence / 2
    seeds = sps.t.ppf(q, f1) ** 2 * (fe + fa) * w1
    both = seeds + sps.t.ppf(q, f2) ** 2 * np.maximum((fe + fb) * w2 - fe * w3, 0.0)
    w = np.where(both > 0, seeds / np.where(both > 0, both, 1.0), 0.0)

    def coverage(kappa: float) -> np.ndarray:
        return np.asarray((z2 <= (1 - kappa * 4 * w * (1 - w)) ** 2 * both).mean(axis=1))

    floor = np.minimum(coverage(0.0), confidence) - 0.0015
    low, high = 0.0, 0.8
    for _ in range(16):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if np.all(coverage(mid) >= floor) else (low, mid)
    return low


def shrunk_banerjee(d: np.ndarray, confidence: float) -> Interval:
    """The default's pieces, the half-width shrunk by ``1 - kappa 4 w (1 - w)`` (:func:`shrink_factor`)."""
    _, n_seeds, n_units = d.shape
    grand, ms_s, ms_u, ms_e = _anova(d)
    (low, high), w = _banerjee(grand, ms_s / (n_seeds * n_units), np.maximum(ms_u - ms_e, 0.0) / (n_seeds * n_units),
                               n_seeds, n_units, confidence)
    half = (1 - shrink_factor(n_seeds, n_units, confidence) * 4 * w * (1 - w)) * (high - grand)
    return grand - half, grand + half


def generalized_pivot(d: np.ndarray, confidence: float, draws: int = 4000) -> Interval:
    """Weerahandi's generalized (fiducial) interval: each variance component as its sum of squares over a chi-square."""
    _, n_seeds, n_units = d.shape
    rng = np.random.default_rng(1)
    dfs = (n_seeds - 1, n_units - 1, (n_seeds - 1) * (n_units - 1))
    w_s, w_u, w_e = (rng.chisquare(f, draws) for f in dfs)
    z = rng.standard_normal(draws)
    grand, ms_s, ms_u, ms_e = _anova(d)
    ss_s, ss_u, ss_e = (ms * f for ms, f in zip((ms_s, ms_u, ms_e), dfs))
    g_e = ss_e[:, None] / w_e
    total = g_e + np.maximum(ss_s[:, None] / w_s - g_e, 0.0) + np.maximum(ss_u[:, None] / w_u - g_e, 0.0)
    half = np.quantile(np.abs(z) * np.sqrt(total / (n_seeds * n_units)), confidence, axis=1)
    return grand - half, grand + half


def _seed_t(d: np.ndarray, confidence: float) -> Interval:
    """t interval on the S per-seed deltas (S - 1 df): blind to the units every seed shares."""
    seed_means = d.mean(axis=2)
    n_seeds = seed_means.shape[1]
    return _t_interval(seed_means.mean(axis=1), seed_means.var(axis=1, ddof=1) / n_seeds, n_seeds - 1.0, confidence)


def two_way_bootstrap(d: np.ndarray, confidence: float, resamples: int, rng: np.random.Generator,
                      chunk: int = 50) -> Interval:
    """Percentile interval of the pigeonhole bootstrap: seeds and units resampled independently."""
    reps, n_seeds, n_units = d.shape
    low, high = np.empty(reps), np.empty(reps)
    tail = (1 - confidence) / 2
    for start in range(0, reps, chunk):
        block = d[start:start + chunk]
        n = len(block)
        w_seeds = rng.multinomial(n_seeds, np.full(n_seeds, 1.0 / n_seeds), (n, resamples)).astype(float)
        w_units = rng.multinomial(n_units, np.full(n_units, 1.0 / n_units), (n, resamples)).astype(float)
        means = np.einsum("rbs,rsu,rbu->rb", w_seeds, block, w_units, optimize=True) / (n_seeds * n_units)
        low[start:start + n], high[start:start + n] = np.quantile(means, [tail, 1 - tail], axis=1)
    return low, high


def candidates(confidence: float, boot_resamples: int | None,
               rng: np.random.Generator) -> dict[str, Callable[[np.ndarray], Interval]]:
    """The intervals compared, the library default first (the two-way bootstrap only with a resample count)."""
    def default(d: np.ndarray) -> Interval:
        return seed_unit_interval(d, confidence_level=confidence)[1:]

    out: dict[str, Callable[[np.ndarray], Interval]] = {
        "recipe (default)": default,
        "Banerjee, raw margins": lambda d: banerjee_raw_margins(d, confidence),
        "seed piece without the interaction": lambda d: seed_piece_without_interaction(d, confidence),
        "Banerjee shrunk (normal-theory calibrated)": lambda d: shrunk_banerjee(d, confidence),
        "generalized pivot (fiducial)": lambda d: generalized_pivot(d, confidence),
        "Satterthwaite": lambda d: _components(d, confidence, df_rule=False),
        "S-1 df rule": lambda d: _components(d, confidence, df_rule=True),
        "seed-t": lambda d: _seed_t(d, confidence),
    }
    if boot_resamples is not None:
        out["two-way bootstrap"] = lambda d: two_way_bootstrap(d, confidence, boot_resamples, rng)
    return out


def one_seed_regressions(before: np.ndarray, after: np.ndarray, resamples: int, confidence: float,
                         rng: np.random.Generator) -> tuple[float, float]:
    """Today's gate per seed: (first seed regressed, any seed regressed) rates."""
    regressed = np.array([[paired_bootstrap(b, a, n_resamples=resamples, confidence_level=confidence,
                                            rng=rng).confidence_interval.high < 0
                           for a in seeds] for b, seeds in zip(before, after)])
    return float(regressed[:, 0].mean()), float(regressed.any(axis=1).mean())


def run_cell(n_seeds: int, n_units: int, tau: float, reps: int, *, confidence: float = 0.95,
             boot_resamples: int | None = None, one_seed_resamples: int | None = 2000,
             seed: int = 0) -> dict[object, float]:
    """Every figure of one (S, U, tau) row: per method coverage at both effects, false regress, power."""
    out: dict[object, float] = {}
    for target in EFFECTS:
        rng = np.random.default_rng([seed, n_seeds, n_units, int(tau * 10), int(round(-target * 100))])
        before, after, these_units = simulate(rng, reps, n_seeds, n_units, tau, target)
        d = after - before[:, None, :]
        for name, interval in candidates(confidence, boot_resamples, rng).items():
            low, high = interval(d)
            out[name, target, "cover"] = float(np.mean((low - 1e-12 <= target) & (target <= high + 1e-12)))
            out[name, target, "below"] = float(np.mean(high < 0))
            out[name, target, "width"] = float(np.mean(high - low))
            out[name, target, "cover these"] = float(np.mean((low <= these_units) & (these_units <= high)))
        if target == 0.0 and one_seed_resamples is not None:
            out["one seed"], out["any seed"] = one_seed_regressions(before, after, one_seed_resamples, confidence, rng)
    return out


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--reps", type=int, default=2000, help="simulated recipes per cell and effect (2000)")
    parser.add_argument("--quick", action="store_true", help="200 recipes a cell")
    parser.add_argument("--confidence", type=float, default=0.95, help="confidence level of every interval (0.95)")
    parser.add_argument("--bootstrap", type=int, default=None, metavar="B",
                        help="also run the two-way bootstrap with B resamples (slow)")
    parser.add_argument("--units", type=int, nargs="+", default=list(UNITS), help="units per holdout (6 12 15 40)")
    parser.add_argument("--one-seed-resamples", type=int, default=2000, help="B for today's interval (2000)")
    parser.add_argument("--skip-one-seed", action="store_true", help="leave out today's single-seed gate (faster)")
    args = parser.parse_args()
    reps = 200 if args.quick else args.reps
    conf = args.confidence
    one_seed = None if args.skip_one_seed else args.one_seed_resamples
    nominal = (1 - conf) / 2
    band = BAND * (1 - conf)
    names = list(candidates(conf, args.bootstrap, np.random.default_rng()))
    t0 = time.perf_counter()
    print(f"{reps} recipes a cell and effect, k = {K}, confidence {conf:g}; Monte-Carlo 95 % band ±"
          f"{_pct(1.96 * math.sqrt(conf * (1 - conf) / reps))} pt on the coverage, ±"
          f"{_pct(1.96 * math.sqrt(nominal * (1 - nominal) / reps))} pt on a {_pct(nominal)} % rate\n")
    print(f"Default interval (percent): coverage of the population effect at Δ = 0 and Δ = -0.10, of the "
          f"these-units effect (worse of the two), false regress at Δ = 0 (nominal {_pct(nominal)}), power at "
          "Δ = -0.10, width at Δ = 0; today's single-seed gate under the null; the candidates as worse "
          "coverage / false regress.\n")
    header = ["S", "units", "τ", "cover Δ=0", "cover Δ=-0.10", "cover these units", "false regress",
              "power", "width", "one seed: false regress", "any of S seeds regress", *names[1:]]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    worst: dict[str, list[tuple[float, float, float, float, float, str]]] = {name: [] for name in names}
    for n_seeds in SEEDS:
        for n_units in args.units:
            for tau in TAUS:
                cell = run_cell(n_seeds, n_units, tau, reps, confidence=conf, boot_resamples=args.bootstrap,
                                one_seed_resamples=one_seed)
                label = f"S {n_seeds}, U {n_units}, τ {tau}"
                for name in names:
                    covers = [cell[name, t, "cover"] for t in EFFECTS]
                    worst[name].append((min(covers), max(covers), cell[name, 0.0, "below"], cell[name, DROP, "below"],
                                        cell[name, 0.0, "width"], label))
                d = "recipe (default)"
                row = [str(n_seeds), str(n_units), f"{tau:.1f}", _pct(cell[d, 0.0, "cover"]),
                       _pct(cell[d, DROP, "cover"]), _pct(min(cell[d, t, "cover these"] for t in EFFECTS)),
                       _pct(cell[d, 0.0, "below"]), _pct(cell[d, DROP, "below"]), f"{cell[d, 0.0, 'width']:.2f}",
                       "-" if one_seed is None else _pct(cell["one seed"]),
                       "-" if one_seed is None else _pct(cell["any seed"])]
                row += [f"{_pct(min(cell[n, t, 'cover'] for t in EFFECTS))} / {_pct(cell[n, 0.0, 'below'])}"
                        for n in names[1:]]
                print("| " + " | ".join(row) + " |", flush=True)
    cells = len(worst[names[0]])
    print(f"\n| method | coverage, worst and best cell | worst false regress | mean power at Δ = -0.10 | "
          f"mean width at Δ = 0 | cells covering {_pct(conf - band)}-{_pct(conf + band)} % (of {cells}) | "
          f"cells covering >= {_pct(conf)} % | cells with false regress <= {_pct(nominal)} % |")
    print("|---|---|---|---|---|---|---|---|")
    for name, rows in worst.items():
        low = min(rows, key=lambda c: c[0])
        high = max(rows, key=lambda c: c[1])
        false = max(rows, key=lambda c: c[2])
        power = sum(c[3] for c in rows) / len(rows)
        width = sum(c[4] for c in rows) / len(rows)
        in_band = sum(conf - band <= c[0] and c[1] <= conf + band for c in rows)
        covering = sum(c[0] >= conf for c in rows)
        honest = sum(c[2] <= nominal for c in rows)
        print(f"| {name} | {_pct(low[0])} ({low[5]}) - {_pct(high[1])} ({high[5]}) | {_pct(false[2])} ({false[5]}) | "
              f"{_pct(power)} | {width:.3f} | {in_band} | {covering} | {honest} |")
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
