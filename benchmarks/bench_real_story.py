"""The seed's story on a real model (SmolLM2-135M-Instruct, refund), every number from one command.

    rlgate models fetch smollm2-135m
    OMP_NUM_THREADS=1 python benchmarks/bench_real_story.py [--runs-dir runs/real-story] [--steps 16] [--runs ...]
    OMP_NUM_THREADS=1 python benchmarks/bench_real_story.py --read --skip watch   # the tables again, nothing trained

What it runs, each step cached by content (the warm start under ``warm/``, every run under
``runs-<method>/``, every row file this script samples under ``rows/`` of the artifact cache), so
a rerun prints the same tables in seconds and an interrupted one goes on where it stopped. Each run
is also published to ``<runs-dir>/<name>/`` (the watched run's checkpoints to ``<name>-checkpoints/``,
the warm start's record to ``warm-start.json``); ``--read`` prints the tables from those folders
alone, training nothing, which is what a rerun after a code change wants (the run cache is keyed by
the training code, so it would train every run again):

1. **the warm start**: the environment's SFT recipe on the fetched model (``smollm2-135m+refund``),
   and where it lands: pass@1 per category of the model before and after it, with intervals;
2. **the story**: the demo's runs with the real model's knobs (:mod:`pytest_rlgate.demo.real`):
   GRPO on refund's own reward, the same with ``--balance 0.25``, one DPO round with constructed
   negatives, and GRPO on the deliberately hackable reward, each gated by category against the
   warm base's runs; the README-style table, the intervals, the failures and the flips;
3. **the check of the verdicts**: every run's holdout sampled again at another seed and gated again;
4. **watched and selected**: ``rlgate watch`` on the honest run's LoRA checkpoints (the step-0
   side is the run's own base rows), the look a category is stopped on, if any, and the
   checkpoint ``rlgate select`` ships with its confirmation;
5. **the hack**: ``hack_scan`` of the trained policies' holdout rollouts (the after rows and the
   re-sample), with the reward each trained on, the honest run against the hackable one;
6. **what the holdout can see**: ``rlgate plan`` on the base rows;

then the time of each phase and the sampling engine. Progress goes to stderr, the tables to stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shlex
import shutil
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest_rlgate as rg
from pytest_rlgate._io.atomic import atomic_write
from pytest_rlgate.data.prompts import fingerprint, read_prompts
from pytest_rlgate.data.rows import read_rows
from pytest_rlgate.demo import real as real_demo
from pytest_rlgate.demo.story import (
    DemoConfig,
    RunSummary,
    configurations,
    hackable_configuration,
    summarise,
    train_config,
)
from pytest_rlgate.gate.stats import t_ppf
from pytest_rlgate.policy.warm import WARM_INFO, warm_model_dir, warm_name
from pytest_rlgate.stats import plan
from pytest_rlgate.train.cached import adapter_identity, base_identity, cached_rows, cached_run, env_identity
from pytest_rlgate.train.evaluate import resample_run
from pytest_rlgate.train.inputs import versions
from pytest_rlgate.train.methods import make_knobs
from pytest_rlgate.train.pipeline import HOLDOUT_PROMPTS, gate_runs
from pytest_rlgate.train.run import CONFIG, RunFolder
from pytest_rlgate.watch import watch_checkpoints

ENGINES = ("generate",)
#: The warm start's record (recipe, loss, time), copied beside the runs it is the base of.
WARM_RECORD = "warm-start.json"
RUNS = ("grpo", "grpo-balance-0.25", "dpo-constructed", "grpo-hackable-reward")
CATEGORIES = ("with_id", "no_id", "off_topic")
TIMES: dict[str, float] = {}


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    say(f"[{time.strftime('%H:%M:%S')}] {name} ...")
    started = time.perf_counter()
    try:
        yield
    finally:
        TIMES[name] = TIMES.get(name, 0.0) + time.perf_counter() - started
        say(f"[{time.strftime('%H:%M:%S')}] {name}: {TIMES[name]:.0f} s")


# --------------------------------------------------------------------------- figures


def rate(rows: Sequence[Mapping[str, object]], category: str) -> tuple[float, float, float, int]:
    """pass@1 of *category* over its scenarios (each scenario's mean reply), with a 95 % t interval
    over scenarios (the gate's unit): (rate, low, high, scenarios)."""
    units: dict[str, list[float]] = {}
    for row in rows:
        if row["category"] == category:
            units.setdefault(str(row.get("scenario_id") or row["prompt"]), []).append(float(row["reward"] >= 1.0))
    means = [sum(v) / len(v) for v in units.values()]
    n = len(means)
    mean = sum(means) / n
    if n < 2:
        return mean, 0.0, 1.0, n
    sd = math.sqrt(sum((m - mean) ** 2 for m in means) / (n - 1))
    half = t_ppf(0.975, n - 1) * sd / math.sqrt(n)
    return mean, max(0.0, mean - half), min(1.0, mean + half), n


def rate_cells(rows: Sequence[Mapping[str, object]]) -> list[str]:
    out = []
    for category in CATEGORIES:
        mean, low, high, n = rate(rows, category)
        out.append(f"{mean:.3f} [{low:.2f}, {high:.2f}] ({n})")
    return out


def tool_calls(rows: Sequence[Mapping[str, object]], category: str) -> float:
    mine = [float(row["markers"]["tool_call"]) for row in rows if row["category"] == category]  # type: ignore[index]
    return sum(mine) / len(mine)


def verdicts(gate: Mapping[str, object], metric: str = "pass@1") -> dict[str, dict[str, object]]:
    return {c["group"]: c for c in gate["comparisons"] if c["metric"] == metric}  # type: ignore[index, union-attr]


def cell(c: Mapping[str, object] | None, *, interval: bool = False) -> str:
    if c is None:
        return "n/a"
    text = f"{c['before']:.2f} → {c['after']:.2f}, {c['verdict']}"
    if interval and c.get("low") is not None:
        text = f"{c['before']:.3f} → {c['after']:.3f}, Δ {c['delta']:+.3f} [{c['low']:+.3f}, {c['high']:+.3f}], " \
               f"{c['verdict']}"
    return f"**{text}**" if c["verdict"] == "regressed" else text


def readme_table(summaries: Sequence[RunSummary], *, interval: bool = False) -> str:
    head = "| run | " + " | ".join(CATEGORIES) + " | gate |"
    lines = [head, "|" + "---|" * (len(CATEGORIES) + 2)]
    for s in summaries:
        rows = s.pass_at_1()
        lines.append(f"| {s.config.label} | " + " | ".join(cell(rows.get(c), interval=interval) for c in CATEGORIES)
                     + f" | {'PASSED' if s.passed else 'FAILED'} |")
    return "\n".join(lines)


def command(config: DemoConfig, runs_dir: Path) -> str:
    """The ``rlgate train`` line that trains *config* (the story trains it through the same cache)."""
    def value(v: object) -> str:
        return ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)

    flags = [f"--{k.replace('_', '-')}" + ("" if v is True else f" {shlex.quote(value(v))}")
             for k, v in config.knobs.items() if k != "env" and v is not False]
    return f"rlgate train {config.method} --env refund {' '.join(flags)} --runs-dir {runs_dir} --run-name {config.name}"


# --------------------------------------------------------------------------- phases


def sampled(parts: Mapping[str, object], sample) -> list[dict[str, object]]:  # type: ignore[no-untyped-def]
    rows, hit = cached_rows({"kind": "bench-real-story", **parts, "versions": versions()}, sample)
    say(f"  rows {'served from the cache' if hit else 'sampled'} ({len(rows)})")
    return list(rows)


def raw_base_rows(args: argparse.Namespace, env: rg.Env, holdout: Sequence[rg.PromptItem]) -> list[dict[str, object]]:
    """The fetched model, before the warm start, on the story's holdout at the first base seed."""
    def sample() -> list[rg.Row]:
        model, tok = rg.load_policy(args.model)
        return list(rg.sample_rows(model, tok, list(holdout), k=args.k, seed=17, env=env,
                                   max_new_tokens=args.max_new_tokens, policy=args.model, eval_run="raw"))

    return sampled({"side": "raw", "base": base_identity(args.model), "env": env_identity(env),
                    "holdout": fingerprint(list(holdout)), "k": args.k, "tokens": args.max_new_tokens},
                   sample)


def resampled(folder: RunFolder, seed: int) -> list[dict[str, object]]:
    """The run's holdout sampled again with its adapter at *seed* (``rlgate eval --sample-seed``)."""
    return sampled({"side": "resample", "adapter": adapter_identity(folder.adapter), "seed": seed,
                    "knobs": folder.config["knobs"]}, lambda: list(resample_run(folder, seed=seed)))


def keep_checkpoints(config: DemoConfig, runs_dir: Path) -> Path:
    """The watched run's ``checkpoint-N`` folders copied from its cache entry to ``<runs-dir>/<name>-checkpoints``,
    where ``rlgate train --save-steps`` would have put them (the run is trained or served by then: a cache hit)."""
    knobs = make_knobs(config.method, **config.knobs)
    served = cached_run(knobs)
    kept = knobs.with_overrides(runs_dir=str(served.run.path.parent), run_name=served.run.path.name).checkpoints_dir
    target = runs_dir / f"{config.name}-checkpoints"
    if kept.is_dir() and not target.exists():
        shutil.copytree(kept, target)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="a fetched registry model (%(default)s)")
    parser.add_argument("--runs-dir", default="runs/real-story", type=Path)
    parser.add_argument("--steps", type=int, default=real_demo.REAL_STEPS, help="GRPO and DPO steps (%(default)s)")
    parser.add_argument("--resample-seed", type=int, default=1017,
                        help="the seed each run's holdout is sampled again at (%(default)s)")
    parser.add_argument("--engine", choices=ENGINES, default="generate",
                        help="how replies are sampled: transformers' generate (the only engine wired here yet)")
    parser.add_argument("--skip", nargs="*", default=[], choices=["resample", "watch", "raw"],
                        help="phases to leave out (each is cached anyway)")
    parser.add_argument("--read", action="store_true",
                        help="only read the runs already in --runs-dir, training nothing (the run cache is keyed by "
                             "the training code too, so after a code change it would train them again)")
    parser.add_argument("--runs", nargs="*", default=list(RUNS), choices=RUNS,
                        help="the runs to train or serve (default: all; the first is the watched one, the honest "
                             "GRPO run, and hack_scan compares it with the hackable one when both are in)")
    args = parser.parse_args()
    started = time.perf_counter()
    env = rg.load_env("refund")
    story = real_demo.real_story(warm_name(args.model, env.name), args.steps)
    args.k = story.shared["k"]
    args.max_new_tokens = story.shared["max_new_tokens"]

    warm_record = args.runs_dir / WARM_RECORD
    if not args.read:
        with phase("warm start"):
            real_demo.warm_base(args.model, env, say)
        args.runs_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(warm_record, (warm_model_dir(story.base_model) / WARM_INFO).read_text(encoding="utf-8"))
    honest, balanced, dpo = configurations(args.steps, env="refund", real=story)
    hackable = hackable_configuration(args.steps, env="refund", real=story)
    summaries: list[RunSummary] = []
    for config in (c for c in (honest, balanced, dpo, hackable) if c.name in args.runs):
        if args.read:
            if not (args.runs_dir / config.name / CONFIG).is_file():
                say(f"{config.name}: no finished run in {args.runs_dir}, left out")
                continue
            summaries.append(summarise(config, RunFolder.open(args.runs_dir / config.name), from_cache=True))
            continue
        with phase(f"train {config.name}"):
            trained = train_config(config, args.runs_dir)
            if trained.summary is None:
                raise SystemExit(f"{config.name} did not train: {trained.error}")
            summaries.append(trained.summary)
            if config.name == honest.name:
                keep_checkpoints(config, args.runs_dir)
    if not summaries:
        raise SystemExit(f"no run of {', '.join(args.runs)} in {args.runs_dir}")
    first = RunFolder.open(summaries[0].path)
    before = [list(read_rows(p)) for p in first.before_files]
    holdout = read_prompts(first.path / HOLDOUT_PROMPTS, env=env)  # the prompts the runs were gated on

    print(f"# The story on {args.model} (refund), sampled with {args.engine}\n")
    print("## The warm start\n")
    if warm_record.is_file():
        info = json.loads(warm_record.read_text(encoding="utf-8"))
        recipe = info["recipe"]
        print(f"{story.base_model}: {recipe['steps']} SFT steps x {recipe['batch_size']} chats, lr "
              f"{recipe['learning_rate']:g}, LoRA r{recipe['lora_rank']}, chats {info['data_kinds']}; loss "
              f"{info['loss_first']:.3f} -> {info['loss_last']:.3f} in {info['train_seconds']:.0f} s\n")
    else:
        print(f"{story.base_model}: no {WARM_RECORD} in {args.runs_dir} (the runs were published without it)\n")
    counts = {c: rate(before[0], c)[3] for c in CATEGORIES}
    print(f"holdout: {sum(counts.values())} scenarios ({', '.join(f'{c} {n}' for c, n in counts.items())}) x "
          f"{args.k} replies, {args.max_new_tokens} new tokens; pass@1 [95 % interval over scenarios] "
          "(scenarios)\n")
    print("| policy | " + " | ".join(CATEGORIES) + " |\n|---|---|---|---|")
    if "raw" not in args.skip:
        with phase("sample the model before the warm start"):
            raw = raw_base_rows(args, env, holdout)
        print(f"| {args.model}, seed 17 | " + " | ".join(rate_cells(raw)) + " |")
    for path, rows in zip(first.before_files, before):
        print(f"| {story.base_model}, {path.stem.removeprefix('holdout_')} | " + " | ".join(rate_cells(rows)) + " |")
    print("\ntool calls of the warm base (base run 1): "
          + ", ".join(f"{c} {tool_calls(before[0], c):.2f}" for c in CATEGORIES) + "\n")

    print("## The runs\n")
    print(readme_table(summaries) + "\n")
    print(readme_table(summaries, interval=True) + "\n")
    for s in summaries:
        folder = RunFolder.open(s.path)
        training = folder.config["training"]
        print(f"- {s.config.label}: `{command(s.config, args.runs_dir)}`; {training['steps_done']} steps, "
              f"{training['seconds_per_step']:.0f} s a step; training reward "
              + (f"{s.train_reward[0]:.2f} -> {s.train_reward[1]:.2f}" if s.train_reward else "n/a")
              + "; tool calls on no_id " + (f"{tool_calls(list(read_rows(folder.before_files[0])), 'no_id'):.2f} -> "
                                            f"{tool_calls(list(read_rows(folder.after_file)), 'no_id'):.2f}")
              + ("; failures: " + "; ".join(s.gate.get("failures", [])) if not s.passed else ""))
    print()
    for s in summaries:
        for c in s.gate["comparisons"]:
            if c["metric"] == "pass@1" and c["group"] in ("no_id", "off_topic") and c.get("flips"):
                print(f"flips in {s.config.name} {c['group']} ({c['verdict']}):")
                for flip in c["flips"][:3]:
                    print(f"  {flip['unit']}  {flip['before']:g}/{flip['before_rows']} -> "
                          f"{flip['after']:g}/{flip['after_rows']}: {flip.get('after_reply')!r}")
    print()

    again_rows: dict[str, list[dict[str, object]]] = {}
    if "resample" not in args.skip:
        print(f"## The verdicts again, after rows sampled at seed {args.resample_seed}\n")
        print("| run | " + " | ".join(CATEGORIES) + " | gate | same verdicts |\n|---|---|---|---|---|---|")
        for s in summaries:
            folder = RunFolder.open(s.path)
            with phase(f"resample {s.config.name}"):
                rows = again_rows[s.config.name] = resampled(folder, args.resample_seed)
            again = gate_runs([list(read_rows(p)) for p in folder.before_files], rows, env=env).to_dict()
            first_verdicts, second = verdicts(s.gate), verdicts(again)
            same = all(first_verdicts[c]["verdict"] == second[c]["verdict"] for c in CATEGORIES)
            print(f"| {s.config.label} | " + " | ".join(cell(second.get(c)) for c in CATEGORIES)
                  + f" | {'PASSED' if again['passed'] else 'FAILED'} | {'yes' if same else 'no'} |")
        print()

    watched_run = next((s for s in summaries if s.config.name == honest.name), None)
    if "watch" not in args.skip and watched_run is not None:
        print("## Watched and selected\n")
        checkpoints = args.runs_dir / f"{honest.name}-checkpoints"
        looks = len(list(checkpoints.glob("checkpoint-*")))
        watch_dir = args.runs_dir / "watch"
        said: list[str] = []
        with phase("watch the honest run's checkpoints"):
            watched = watch_checkpoints(
                checkpoints, holdout, env=env, base_model=story.base_model, baseline=first.before_files[0],
                out=watch_dir, k=args.k, seed=17, max_new_tokens=args.max_new_tokens,
                planned_looks=looks, select="pass@1/with_id", say=lambda line: (said.append(line), say(line)))
        for line in [*said, *watched.notes]:
            if "scenarios" in line or "can stop" in line:  # what each category can see, said first
                print(line)
        for look in watched.looks:
            print(f"look {look.look} (step {look.step}): level {look.alpha:.4f}, regressed: "
                  f"{', '.join(look.regressed) or 'nothing'}")
        print(f"stopped at: {watched.stopped_at if watched.stopped_at is not None else 'never'}")
        if watched.selection is not None:
            print(watched.selection.summary())
        print(f"(`rlgate watch {checkpoints} --env refund --base-model {story.base_model} --baseline "
              f"{first.before_files[0]} --k {args.k} --max-new-tokens "
              f"{args.max_new_tokens} --looks {looks} --select pass@1/with_id --out {watch_dir}`, then "
              f"`rlgate select {watch_dir}`)\n")

    if again_rows:
        print("## The hack, named: hack_scan of the trained policies' rollouts\n")
        print("Two rollouts a holdout prompt (the after rows and the re-sample), against the base's two runs, "
              "scored with the reward each run trained on:\n")
        for s in [s for s in summaries if s.config.name in ("grpo", "grpo-hackable-reward")]:
            folder = RunFolder.open(s.path)
            trained_on = s.config.knobs.get("reward")
            found = rg.hack_scan([*read_rows(folder.after_file), *again_rows[s.config.name]],
                                 before=[row for rows in before for row in rows], env=env, reward=trained_on)
            print(f"- {s.config.label} (trained on {trained_on or 'refund score'}): {found.summary().splitlines()[0]}")
            for category, scan in sorted(found.by_category.items()):
                print(f"  - {category}: regime {scan.regime}, top feature {scan.top_feature}; {scan.pays_for()}")
        print()

    print("## What this holdout can see\n")
    with phase("plan"):
        planned = plan([row for rows in before for row in rows], drop=0.2)
    print(planned.report() + "\n")

    print("## Time\n")
    print(f"sampling engine: {args.engine}; torch threads {os.environ.get('OMP_NUM_THREADS')}")
    for name, seconds in TIMES.items():
        print(f"- {name}: {seconds:.0f} s")
    print(f"- total: {time.perf_counter() - started:.0f} s (cached phases take seconds)")


if __name__ == "__main__":
    main()
