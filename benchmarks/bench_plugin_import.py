"""What the installed plugin costs a project that does not use it: a one-test run with and without it.

A fresh ``python -m pytest`` process runs one trivial test in a temporary folder with no
rlgate setting, once as pytest loads it (the ``pytest11`` entry point) and once with
``-p no:rlgate``; each side runs ``--repeat`` times, alternating, and the medians are
compared. The target is at most 50 ms added. Bytecode (and pytest's rewritten bytecode) is
cached in a temporary ``PYTHONPYCACHEPREFIX``, as on a user's machine, even where the
environment sets ``PYTHONDONTWRITEBYTECODE`` (``--as-is`` keeps the environment's setting:
then every run parses and rewrites every module again). ``--importtime`` also prints the
slowest imports that the plugin brings in (``python -X importtime``), to find what to make lazy.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_plugin_import.py [--repeat 15] [--importtime] [--as-is]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ONE_TEST = "def test_one():\n    assert 1 + 1 == 2\n"


def run_once(folder: Path, extra: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one fresh pytest process; CPU time is what a busy machine disturbs least."""
    cpu_before = _children_cpu()
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra],
                          cwd=folder, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"pytest {' '.join(extra)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    return elapsed, _children_cpu() - cpu_before


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def slowest_imports(folder: Path, env: dict[str, str], top: int) -> list[tuple[int, str]]:
    """(cumulative microseconds, module) of the imports only the plugin run has (nested ones included)."""

    def imports(extra: list[str]) -> dict[str, int]:
        proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               *extra], cwd=folder, env=env, capture_output=True, text=True)
        out: dict[str, int] = {}
        for line in proc.stderr.splitlines():
            if line.startswith("import time:") and "|" in line:
                _, cumulative, name = line[len("import time:"):].split("|")
                if cumulative.strip().isdigit():
                    out[name.strip()] = int(cumulative)
        return out

    plain = imports(["-p", "no:rlgate"])
    return sorted(((us, name) for name, us in imports([]).items() if name not in plain), reverse=True)[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--repeat", type=int, default=15, help="fresh processes per side (default 15)")
    parser.add_argument("--importtime", action="store_true", help="also list the slowest imports the plugin adds")
    parser.add_argument("--as-is", action="store_true", help="keep the environment's bytecode settings")
    args = parser.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    with tempfile.TemporaryDirectory(prefix="rlgate-bench-plugin-") as tmp:
        folder = Path(tmp) / "project"
        folder.mkdir()
        if not args.as_is:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        (folder / "test_one.py").write_text(ONE_TEST, encoding="utf-8")
        run_once(folder, [], env)  # warm the file cache and the bytecode of both sides
        run_once(folder, ["-p", "no:rlgate"], env)
        with_plugin: list[tuple[float, float]] = []
        without: list[tuple[float, float]] = []
        for _ in range(args.repeat):
            with_plugin.append(run_once(folder, [], env))
            without.append(run_once(folder, ["-p", "no:rlgate"], env))
        cache = "environment's bytecode settings" if args.as_is else "bytecode cached"
        print(f"one-test pytest run, median of {args.repeat} fresh processes each ({cache}):")
        for kind, index in (("wall", 0), ("CPU ", 1)):
            on = statistics.median(t[index] for t in with_plugin)
            off = statistics.median(t[index] for t in without)
            print(f"  {kind}: with the rlgate plugin {on * 1000:7.1f} ms, -p no:rlgate {off * 1000:7.1f} ms; "
                  f"the plugin adds {(on - off) * 1000:+7.1f} ms (x{on / off:.2f}; target <= +50 ms)")
        if args.importtime:
            print("slowest imports only the plugin run has (cumulative, python -X importtime):")
            for us, name in slowest_imports(folder, env, top=12):
                print(f"  {us / 1000:7.1f} ms  {name}")


if __name__ == "__main__":
    main()
