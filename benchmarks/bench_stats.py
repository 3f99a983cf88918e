"""paired_bootstrap against scipy.stats.bootstrap, side by side in one run.

Both compute a 95 % percentile interval of the mean per-unit difference (k = 4 rollouts,
so differences lie on a lattice of 9 values) with B = 10,000 resamples; scipy gets the
per-unit differences as a one-sample problem, its cheapest form. Time is the median of
several runs after a warm-up; memory is the tracemalloc peak of one extra run.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_stats.py [--units 163 10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc
from collections.abc import Callable

import numpy as np
from scipy import stats as sps

from pytest_rlgate.gate.stats import paired_bootstrap

B = 10_000
K = 4


def data(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n)
    p = rng.beta(2, 2, size=n)
    return rng.binomial(K, p) / K, rng.binomial(K, np.clip(p - 0.05, 0, 1)) / K


def measure(fn: Callable[[], object], repeat: int) -> tuple[float, float, object]:
    """(median seconds, peak MB, last result)."""
    out = fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return statistics.median(times), peak, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--units", type=int, nargs="+", default=[163, 10_000])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"B = {B}, k = {K}, percentile 95 %, median of {args.repeat} runs; memory = tracemalloc peak")
    print(f"{'units':>7} {'ours ms':>9} {'scipy ms':>10} {'speed-up':>9} {'ours MB':>8} {'scipy MB':>9}  "
          f"{'ours CI':<20} scipy CI")
    for n in args.units:
        before, after = data(n)
        d = after - before
        ours_t, ours_mb, ours = measure(
            lambda before=before, after=after: paired_bootstrap(before, after, n_resamples=B, method="percentile",
                                                                rng=1), args.repeat)
        sp_t, sp_mb, sp = measure(
            lambda d=d: sps.bootstrap((d,), np.mean, n_resamples=B, method="percentile", vectorized=True,
                                  rng=np.random.default_rng(2)), max(1, args.repeat if n < 5000 else 3))
        ci_o = f"[{ours.confidence_interval.low:+.4f}, {ours.confidence_interval.high:+.4f}]"
        ci_s = f"[{sp.confidence_interval.low:+.4f}, {sp.confidence_interval.high:+.4f}]"
        print(f"{n:>7} {ours_t * 1e3:>9.1f} {sp_t * 1e3:>10.1f} {sp_t / ours_t:>8.0f}x {ours_mb:>8.1f} {sp_mb:>9.1f}  "
              f"{ci_o:<20} {ci_s}")


if __name__ == "__main__":
    main()
