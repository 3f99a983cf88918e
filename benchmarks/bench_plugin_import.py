"""What the installed plugin costs a project that does not use it: a trivial pytest run with and without it.

A fresh ``python -m pytest`` process runs a trivial suite in a temporary folder with no
rlgate setting, once as pytest loads the plugin (the ``pytest11`` entry point ``rlgate``) and
once with ``-p no:rlgate``; each side runs ``--repeat`` times, alternating, and the medians of
wall and CPU time are compared (their difference and their ratio). The target is at most
50 ms added. Two suites run side by side: one test in one file, and ten files of one test.
Bytecode (and pytest's rewritten bytecode) is cached in a temporary ``PYTHONPYCACHEPREFIX``,
as on a user's machine, even where the environment sets ``PYTHONDONTWRITEBYTECODE``
(``--as-is`` keeps the environment's setting: then every run parses and rewrites every
module again).

Each process also counts CPython's full (generation 2) garbage collections and the CPU they
take. A full collection runs about every 70,000 container objects made; the one-test session
without the plugin ends a few hundred short of its third, so the plugin's ~2,300 objects buy
that session one more full collection of everything pytest and the other plugins made (some
30 ms here). A session that makes a few hundred more objects, as the ten-file suite does, pays
for that collection with or without the plugin: the second suite shows the plugin's own cost,
the first the worst case a threshold can add to it. CPU time is the figure a busy machine
disturbs least; wall time on a shared machine carries its neighbours' load.

``--importtime`` also prints the slowest imports that the plugin brings in (``python -X
importtime``), to find what to make lazy. pytest imports the plugin and the plugin its feature
modules by ``importlib.import_module``, which ``-X importtime`` does not log: those show only
through the modules they import.

    OMP_NUM_THREADS=1 nice -n 5 .venv/bin/python benchmarks/bench_plugin_import.py [--repeat 15] [--importtime]
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
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

ONE_TEST = "def test_one():\n    assert 1 + 1 == 2\n"
#: the suites: name -> how many files of ONE_TEST
SUITES = {"one test": 1, "ten test files": 10}
TARGET_MS = 50.0

#: ``python -m pytest`` that also writes "<full collections> <their CPU seconds>" to $RLGATE_BENCH_GC at exit
COUNTING_PYTEST = """
import atexit, gc, os, runpy, sys, time
full, start = [0, 0.0], [0.0]
def count(phase, info):
    if info["generation"] == 2:
        if phase == "start":
            start[0] = time.process_time()
        else:
            full[0] += 1
            full[1] += time.process_time() - start[0]
gc.callbacks.append(count)
atexit.register(lambda: open(os.environ["RLGATE_BENCH_GC"], "w").write(f"{full[0]} {full[1]}"))
sys.argv[0] = "pytest"
runpy.run_module("pytest", run_name="__main__", alter_sys=True)
"""


class Run(NamedTuple):
    wall: float  #: seconds
    cpu: float  #: CPU seconds of the process
    full_gcs: int  #: CPython's full (generation 2) garbage collections in it
    gc_cpu: float  #: the CPU seconds they took


def run_once(folder: Path, extra: list[str], env: dict[str, str]) -> Run:
    """One fresh pytest process in *folder*."""
    counts = folder.parent / f"{folder.name}-gc.txt"
    cpu_before = _children_cpu()
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", COUNTING_PYTEST, "-q", "-p", "no:cacheprovider", *extra],
                          cwd=folder, env={**env, "RLGATE_BENCH_GC": str(counts)}, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"pytest {' '.join(extra)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    full, gc_cpu = counts.read_text(encoding="utf-8").split()
    return Run(elapsed, _children_cpu() - cpu_before, int(full), float(gc_cpu))


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def suite(root: Path, name: str, files: int) -> Path:
    """A folder of *files* test files of one trivial test each."""
    folder = root / name.replace(" ", "-")
    folder.mkdir()
    for i in range(files):
        (folder / f"test_{i}.py").write_text(ONE_TEST, encoding="utf-8")
    return folder


def compare(folder: Path, repeat: int, env: dict[str, str]) -> tuple[list[Run], list[Run]]:
    """(with the plugin, ``-p no:rlgate``): *repeat* fresh processes each, alternating, after one warm-up each."""
    run_once(folder, [], env)  # warm the file cache and the bytecode of both sides
    run_once(folder, ["-p", "no:rlgate"], env)
    with_plugin: list[Run] = []
    without: list[Run] = []
    for _ in range(repeat):
        with_plugin.append(run_once(folder, [], env))
        without.append(run_once(folder, ["-p", "no:rlgate"], env))
    return with_plugin, without


def report(name: str, with_plugin: list[Run], without: list[Run]) -> None:
    print(f"{name}:")
    value: Callable[[Run], float]
    for kind, value in (("wall", lambda r: r.wall), ("CPU ", lambda r: r.cpu)):
        on = statistics.median(value(r) for r in with_plugin)
        off = statistics.median(value(r) for r in without)
        print(f"  {kind}: with the rlgate plugin {on * 1000:6.1f} ms, -p no:rlgate {off * 1000:6.1f} ms; the plugin "
              f"adds {(on - off) * 1000:+6.1f} ms (x{on / off:.3f}; target <= +{TARGET_MS:.0f} ms); quartiles "
              f"{_quartiles(with_plugin, value)} and {_quartiles(without, value)} ms")
    on_gc, off_gc = (statistics.median(r.gc_cpu for r in runs) for runs in (with_plugin, without))
    print(f"  full garbage collections: {statistics.median(r.full_gcs for r in with_plugin):.0f} with the plugin "
          f"({on_gc * 1000:.1f} ms CPU), {statistics.median(r.full_gcs for r in without):.0f} without "
          f"({off_gc * 1000:.1f} ms CPU)")


def _quartiles(runs: list[Run], value: Callable[[Run], float]) -> str:
    """The first and third quartile of *value* over *runs*, in ms: how far the machine's load spread them."""
    q1, _, q3 = statistics.quantiles((value(r) * 1000 for r in runs), n=4)
    return f"{q1:.0f}-{q3:.0f}"


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
    parser.add_argument("--repeat", type=int, default=15, help="fresh processes per side and suite (default 15)")
    parser.add_argument("--importtime", action="store_true", help="also list the slowest imports the plugin adds")
    parser.add_argument("--as-is", action="store_true", help="keep the environment's bytecode settings")
    args = parser.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_PLUGINS", None)
    with tempfile.TemporaryDirectory(prefix="rlgate-bench-plugin-") as tmp:
        if not args.as_is:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        cache = "environment's bytecode settings" if args.as_is else "bytecode cached"
        print(f"trivial pytest runs, median of {args.repeat} fresh processes a side, alternating ({cache}; "
              f"load average {os.getloadavg()[0]:.1f} at the start)")
        folders = {name: suite(Path(tmp), name, files) for name, files in SUITES.items()}
        for name, folder in folders.items():
            report(name, *compare(folder, args.repeat, env))
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
        if args.importtime:
            print("slowest imports only the plugin run has (cumulative, python -X importtime):")
            for us, name in slowest_imports(folders["one test"], env, top=12):
                print(f"  {us / 1000:7.1f} ms  {name}")


if __name__ == "__main__":
    main()
