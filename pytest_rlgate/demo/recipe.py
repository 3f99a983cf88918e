"""``rlgate demo --seeds N``: the recipe story, honest GRPO and the balanced one at N trainer seeds each.

The single-seed demo gates adapters, and one adapter is partly the luck of its seed: the same
unbalanced GRPO regressed no-id at trainer seed 18 (0.92 -> 0.75) and passed at seed 17.
So this story trains each recipe once per trainer seed (17, 18, ...; each a cached run, the
same ones ``examples/refund/test_training_gate.py`` gates with ``seeds=``), gates the recipe
across them (:func:`pytest_rlgate.train.seeds.train_seeds`) and prints, per category, the
recipe effect with its interval over scenarios *and* seeds, its minimum detectable effect,
each seed's own delta as a dot and "regressed in k of S seeds".

The holdout is larger than the single-seed demo's (0.6 instead of 0.4): the default prompt
set then holds out 10 no-id scenarios instead of 6. The large set does not help here: its
74 no-id prompts are paraphrases of 7 scenarios (2 of them in its 0.3 holdout), and the
gate's unit is the scenario, so it has fewer no-id units, not more.

Rendering (``render_recipe_table``, ``render_recipe_story``) is pure over recipe gate dicts,
so it is tested without training anything.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabulate import tabulate

from ..data.prompts import count_by_category
from ..environment.contract import EnvSpec, load_env
from ..gate.numtext import interval
from ..gate.recipe_text import seed_dots
from ..gate.record import Record as RecipeComparisonRecord
from ..report import write_index, write_report
from ..train.config import resolved
from ..train.methods import make_knobs
from ..train.pipeline import load_prompts
from ..train.seeds import train_seeds
from .story import ORDER, SIZE, STEPS, DemoConfig, _plain, _signed, _tiny_policy, watched

__all__ = ["FIRST_SEED", "RecipeDemoResult", "RecipeSummary", "recipe_configurations",
           "recipe_seeds", "render_recipe_story", "render_recipe_table", "run_recipe_demo"]

#: The first trainer seed; the single-seed demo's runs train at it too.
FIRST_SEED = 17
#: Width of the dot strip in a table cell.
DOTS = 17


def recipe_seeds(n: int) -> tuple[int, ...]:
    """The trainer seeds of ``--seeds n``: 17, 18, ..."""
    return tuple(range(FIRST_SEED, FIRST_SEED + n))


def recipe_configurations(steps: int = STEPS, *, env: str | None = None) -> list[DemoConfig]:
    """The two honest recipes: GRPO on the imbalanced split, and balanced to 0.25 (on *env*'s spec), on
    the environment's own holdout, as the single-seed demo trains them (its runs are the first seed's)."""
    shared: dict[str, object] = {"size": SIZE, "steps": steps}
    if env is not None:
        shared["env"] = env
    return [DemoConfig("grpo", f"GRPO, {steps} steps", "grpo", shared),
            DemoConfig("grpo-balance-0.25", f"GRPO --balance 0.25, {steps} steps", "grpo",
                       {**shared, "balance": 0.25})]


@dataclass
class RecipeSummary:
    """What the story shows of one recipe: its configuration and its recipe gate (``to_dict()``)."""

    config: DemoConfig
    gate: Mapping[str, Any]
    folder: Path | None = None
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return bool(self.gate.get("passed"))

    def pass_at_1(self) -> dict[str, RecipeComparisonRecord]:
        return {c["group"]: c for c in self.gate.get("comparisons", []) if c["metric"] == "pass@1"}


def _groups(summaries: Sequence[RecipeSummary]) -> list[str]:
    seen = {g for s in summaries for g in s.pass_at_1() if g != "overall"}
    return [g for g in ORDER if g in seen] + sorted(seen - set(ORDER))


def _interval(c: RecipeComparisonRecord) -> str:
    return interval(c.get("low"), c.get("high"), 2, missing="no interval", minus="−")


def _shown(verdict: str) -> str:
    return verdict.upper() if verdict == "regressed" else verdict


def _cell(summary: RecipeSummary, group: str) -> str:
    c = summary.pass_at_1().get(group)
    if c is None:
        return "not measured"
    verdict = _shown(c["verdict"])
    mde = f", MDE {_plain(c['mde'])}" if c.get("mde") is not None else ""
    return "\n".join([f"{_plain(c['before'])} → {_plain(c['after'])}", f"{_signed(c['delta'])} {_interval(c)}",
                      f"{verdict}{mde}", seed_dots([s["delta"] for s in c["seeds"]], c.get("low"), c.get("high"),
                                                   width=DOTS),
                      c["seeds_line"]])


def render_recipe_table(summaries: Sequence[RecipeSummary]) -> str:
    """Recipes as rows, categories side by side: levels, recipe Δ [CI], verdict and MDE, dots, k of S."""
    groups = _groups(summaries)
    first = next((s.pass_at_1() for s in summaries if s.pass_at_1()), {})

    def head(group: str) -> str:
        c = first.get(group)
        return group if c is None else f"{group}\n({c['n_units']} scenarios × {c['k']:g}, {c['n_seeds']} seeds)"

    rows = [[s.config.title, *(_cell(s, g) for g in groups), "PASSED" if s.passed else "FAILED"] for s in summaries]
    table = str(tabulate(rows, headers=["recipe", *map(head, groups), "recipe gate"], tablefmt="grid",
                         disable_numparse=True))
    return table + ("\ncells: pass@1 before → after (mean over seeds); recipe Δ [interval over scenarios and seeds, "
                    "a recipe's comparisons held together at 5%]; "
                    "verdict, minimum detectable effect; each seed's Δ as a dot ([──] the interval, | zero); "
                    "how many seeds regressed on their own")


def _describe(group: str, c: RecipeComparisonRecord) -> str:
    """One clause per category, led by the recipe verdict, then the seeds on their own."""
    span = f"Δ {_signed(c['delta'])} {_interval(c)} over {c['n_units']} scenarios × {c['n_seeds']} seeds"
    verdict = c["verdict"]
    if verdict == "regressed":
        lead = f"{group} REGRESSED as a recipe ({span}, entirely below 0)"
    elif verdict == "moved":
        lead = f"{group} moved up as a recipe ({span})"
    elif verdict == "flat":
        lead = f"{group} held as a recipe ({span}, inside the ±margin)"
    elif verdict == "inconclusive":
        lead = (f"{group} is inconclusive as a recipe ({span}: a drop smaller than the MDE {_plain(c['mde'])} "
                "could go unseen)")
    else:
        reason = c.get("reason")
        lead = f"{group} is {verdict} ({span}{': ' + reason if reason else ''})"
    seeds = ", ".join(f"{s['seed']} {_signed(s['delta'])} {_shown(s['verdict'])}" for s in c["seeds"])
    return f"{lead}; seed by seed {seeds}: {c['seeds_line']}"


def render_recipe_story(summaries: Sequence[RecipeSummary], watch: Sequence[str]) -> list[str]:
    """What each recipe gate says in plain words (watched categories first), then what one seed would have said."""
    lines = []
    for s in summaries:
        rows = s.pass_at_1()
        order = [g for g in watch if g in rows] + [g for g in _groups([s]) if g not in watch]
        verdict = "PASSES" if s.passed else "FAILS"
        guards = [f"the {c['metric'][len('marker:'):]} guard {_shown(c['verdict'])} as a recipe (Δ "
                  f"{_signed(c['delta'])} {_interval(c)}, {c['seeds_line']})"
                  for c in s.gate.get("comparisons", []) if c["metric"] != "pass@1" and c["group"] == "overall"
                  and (c["regressed_seeds"] or c["verdict"] == "regressed")]
        lines.append(f"{s.config.title}: {'; '.join(_describe(g, rows[g]) for g in order)}"
                     f"{'; ' + '; '.join(guards) if guards else ''}. So the recipe gate {verdict} it.")
        lucky = [g for g in watch if g in rows and rows[g]["regressed_seeds"] and rows[g]["verdict"] != "regressed"]
        if lucky:
            lines.append(f"Gated one adapter at a time, {s.config.title} would have failed on "
                         f"{', '.join(lucky)} at some seeds and passed at others: one run's verdict is partly the "
                         "luck of its seed. The recipe interval holds that spread (seeds) and the holdout's sampling "
                         "(scenarios), so it does not claim a regression the recipe did not show.")
    return lines


@dataclass
class RecipeDemoResult:
    runs_dir: Path
    recipes: list[RecipeSummary]
    index: Path | None
    seconds: float


def run_recipe_demo(runs_dir: str | os.PathLike[str] = "runs/demo", *, seeds: int = 3, steps: int | None = None,
                    progress: bool | None = None, say: Callable[[str], None] = print,
                    env: EnvSpec = None) -> RecipeDemoResult:
    """The recipe story on *env*: each honest recipe at *seeds* trainer seeds, gated across them.

    Run folders (``<name>-seed<S>``), recipe folders (``<name>-recipe``), their reports and an
    index land in *runs_dir*. Verdicts are results, not errors.
    """
    import torch

    torch.set_num_threads(1)
    started = time.perf_counter()
    environment = load_env(env)
    steps = steps or STEPS
    root = Path(runs_dir)
    root.mkdir(parents=True, exist_ok=True)
    configs = recipe_configurations(steps, env=env if isinstance(env, str) else None)
    trainer_seeds = recipe_seeds(seeds)
    first = make_knobs(configs[0].method, **configs[0].knobs)
    _tiny_policy(resolved(first.base_model, "base_model"), say)
    sets = load_prompts(first)
    say(f"prompts: {sets.source}; train {count_by_category(sets.train)}, "
        f"holdout {count_by_category(sets.holdout)} (each run folder keeps its holdout prompts)")
    say(f"training each recipe at trainer seeds {', '.join(map(str, trainer_seeds))} (each run samples the base "
        "3 times, trains, samples again), then gating the recipe across the seeds:")
    stdout = sys.stdout

    def tell(line: str) -> None:  # the story's lines go to stdout while trainer output goes to stderr
        with contextlib.redirect_stdout(stdout):
            say(f"  {line}")

    summaries = []
    for config in configs:
        say(f"- {config.title}: {config.method} {' '.join(f'{k}={v}' for k, v in config.knobs.items())}")
        knobs = make_knobs(config.method, **config.knobs, run_name=config.name, runs_dir=str(root))
        begun = time.perf_counter()
        with contextlib.redirect_stdout(sys.stderr):
            runs = train_seeds(knobs, trainer_seeds, overwrite=True, progress=progress, say=tell)
        for run in runs.runs:
            write_report(run.run.path)
        write_report(runs.folder)
        say(f"  recipe gate {'PASSED' if runs.result.passed else 'FAILED'} -> {runs.folder}")
        summaries.append(RecipeSummary(config, runs.result.to_dict(), runs.folder, time.perf_counter() - begun))

    index = write_index(root)
    say("")
    say(render_recipe_table(summaries))
    say("")
    for line in render_recipe_story(summaries, watched(environment)):
        say(line)
        say("")
    say(f"reports: {index} (a report.html per run and per recipe folder); each recipe gate is also in "
        f"<recipe folder>/recipe.txt, and `rlgate gate BEFORE AFTER AFTER ...` gates any seeds' row files alike")
    seconds = time.perf_counter() - started
    say(f"demo finished in {seconds:.0f} s")
    return RecipeDemoResult(runs_dir=root, recipes=summaries, index=index, seconds=seconds)
