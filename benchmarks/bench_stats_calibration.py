"""Calibration of the gate's default interval by simulation (research/stats.md section 3).

Model: a holdout of n units (prompts), k = 4 rollouts each. Before, unit i passes with
probability p_i ~ Beta(a, b) (four priors: U-shaped, mid-range, mean 0.8, near ceiling:
heterogeneous prompts). After, q_i = expit(logit p_i + mu + tau * z_i): "exact" null (tau 0),
"churn" null (tau 1, units move both ways, no net change) and a 0.10 drop (tau 0.5); mu is
solved so the super-population effect E[q - p] hits the target exactly. Each dataset is
gated with ``paired_bootstrap``; we count how often the interval covers the true effect and,
under the nulls, how often its upper bound is below 0 (a false "regressed").

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_stats_calibration.py [--reps 2000]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from pytest_rlgate.gate.stats import paired_bootstrap

PRIORS = {"U(0.5,0.5)": (0.5, 0.5), "Beta(2,2)": (2.0, 2.0), "Beta(4,1)": (4.0, 1.0), "Beta(8,1)": (8.0, 1.0)}
EFFECTS = {"null_exact": (0.0, 0.0), "null_churn": (0.0, 1.0), "drop_0.10": (-0.10, 0.5)}
K = 4


def _expit(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-12, 1 - 1e-12)
    return np.log(p) - np.log1p(-p)


def solve_mu(prior: tuple[float, float], target: float, tau: float, draws: int = 400_000) -> float:
    """mu such that E[expit(logit p + mu + tau z) - p] = target (common random numbers)."""
    rng = np.random.default_rng(12345)
    p = rng.beta(*prior, size=draws)
    z = rng.standard_normal(draws)
    lp = _logit(p)

    def effect(mu: float) -> float:
        return float(np.mean(_expit(lp + mu + tau * z) - p))

    low, high = -8.0, 8.0
    for _ in range(60):
        mid = 0.5 * (low + high)
        if effect(mid) < target:
            low = mid
        else:
            high = mid
    return 0.5 * (low + high)


def simulate(n: int, prior: tuple[float, float], effect: tuple[float, float], reps: int, *, method: str,
             n_resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """(coverage of the true effect, rate of upper bound < 0) over *reps* datasets."""
    target, tau = effect
    mu = 0.0 if tau == 0 and target == 0 else solve_mu(prior, target, tau)
    rng = np.random.default_rng(
        [seed, n, int(prior[0] * 10), int(prior[1] * 10), int(tau * 10), int(round(abs(target) * 100))])
    covered = below = 0
    for _ in range(reps):
        p = rng.beta(*prior, size=n)
        q = p if tau == 0 and mu == 0 else _expit(_logit(p) + mu + tau * rng.standard_normal(n))
        before = rng.binomial(K, p) / K
        after = rng.binomial(K, q) / K
        res = paired_bootstrap(before, after, n_resamples=n_resamples, method=method, rng=rng)
        low, high = res.confidence_interval
        covered += low - 1e-12 <= target <= high + 1e-12
        below += high < 0
    return covered / reps, below / reps


def calibrate(ns=(15, 163), reps: int = 1000, method: str = "expanded", n_resamples: int = 2000):
    """Mean coverage (all cells) and mean false-regression rate (null cells) per n."""
    out = {}
    for n in ns:
        cov, false = [], []
        for prior in PRIORS.values():
            for name, effect in EFFECTS.items():
                c, b = simulate(n, prior, effect, reps, method=method, n_resamples=n_resamples)
                cov.append(c)
                if name.startswith("null"):
                    false.append(b)
        out[n] = (float(np.mean(cov)), min(cov), max(cov), float(np.mean(false)), max(false))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--reps", type=int, default=2000, help="datasets per cell (default 2000)")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--methods", default="expanded,t,percentile")
    args = parser.parse_args()
    cells = len(PRIORS) * len(EFFECTS)
    print(f"k={K}, {len(PRIORS)} priors x {len(EFFECTS)} effects, {args.reps} datasets per cell, "
          f"B={args.resamples}; MC s.e. of a mean coverage ~{math.sqrt(0.95 * 0.05 / (args.reps * cells)):.4f}")
    print(f"{'method':<11}{'n':>5}  {'coverage mean (min-max)':<28}{'false regressed mean (max)':<28}{'seconds':>8}")
    for method in args.methods.split(","):
        for n in (15, 163):
            t0 = time.perf_counter()
            cov, lo, hi, false, fmax = calibrate((n,), args.reps, method, args.resamples)[n]
            print(f"{method:<11}{n:>5}  {cov:.3f} ({lo:.3f}-{hi:.3f})          {false:.4f} ({fmax:.4f})"
                  f"{'':<12}{time.perf_counter() - t0:8.1f}")


if __name__ == "__main__":
    main()
