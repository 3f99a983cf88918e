"""How much the seeded prompt set costs: build, fingerprint, write + read, and the header.

The pytest header builds the session's prompt set on every run, so it must stay a small
share of pytest's own start-up. Run: ``python benchmarks/bench_prompts.py``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from pytest_rlgate.data.prompts import build_prompts, fingerprint, read_prompts, write_prompts


def _median_ms(fn: Callable[[], object], repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def _pytest_startup_ms(*extra: str) -> float:
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
        cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *extra]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        return _median_ms(lambda: subprocess.run(cmd, cwd=folder, capture_output=True, env=env, check=False), 3)


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "prompts.jsonl")
        print(f"{'size':8} {'prompts':>8} {'build ms':>9} {'fingerprint ms':>15} {'write+read ms':>14}")
        for size in ("small", "default", "large"):
            items = build_prompts(0, size)
            build = _median_ms(lambda size=size: build_prompts(0, size))
            digest = _median_ms(lambda items=items: fingerprint(items))
            io = _median_ms(lambda items=items: (write_prompts(path, items), read_prompts(path)))
            print(f"{size:8} {len(items):8d} {build:9.1f} {digest:15.1f} {io:14.1f}")
    header = _median_ms(lambda: fingerprint(build_prompts(0)))
    with_plugin = _pytest_startup_ms()
    without = _pytest_startup_ms("-p", "no:rlgate")
    print(f"header (default set): {header:.1f} ms = {header / with_plugin:.1%} of a {with_plugin:.0f} ms "
          f"`pytest --collect-only` (plugin off: {without:.0f} ms, ratio {with_plugin / without:.2f})")


if __name__ == "__main__":
    main()
