"""``rlgate demo``: the whole story on the embedded tiny policy, CPU only.

Tiny policy -> seeded prompt set and stratified split -> GRPO (unbalanced), GRPO with
``--balance 0.25`` and one DPO round with constructed negatives, each gated by category
against three base runs (the noise floor) -> one side-by-side table and a plain-words
account -> run folders, their reports and an index page under ``--runs-dir``.

The story is told on an environment (``--env``; refund by default, whose story this module
knows by name: it watches the no-id category and the tool-call rate). Every run is trained
through the same cache the pytest fixtures use (``train.cached``), so ``examples/refund``
and the demo share work: whichever runs first trains, the other reads. When the honest
reward regresses none of the watched categories within the demo's budget, the demo also
trains one run against a deliberately hackable reward the environment offers (refund's
``lookup_anything`` pays any lookup on every prompt), labelled as such, so the gate and the
monitor have a real collapse to catch. Every number printed is read from the run folders'
row files; nothing is made up.

Rendering (``render_table``, ``render_story``) is pure over gate dicts and row summaries so
it is tested without training anything.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabulate import tabulate

from .._io.progress import heartbeat
from ..data.prompts import count_by_category, write_prompts
from ..data.rows import read_rows
from ..environment.contract import Env, EnvSpec, load_env
from ..errors import DataError, RlgateError, UsageError
from ..gate.adapter import compare_adapter
from ..gate.numtext import interval, signed
from ..gate.record import Record as ComparisonRecord
from ..gate.verdicts import verdict_word
from ..policy.load import tiny_policy_dir
from ..policy.tiny.spec import TINY_PREFIX
from ..records import Row
from ..report import write_index, write_report
from ..report.markdown import reproduce_command
from ..train.cached import cached_run
from ..train.config import RunKnobs, resolved
from ..train.methods import make_knobs
from ..train.pipeline import load_prompts
from ..train.run import RunFolder
from ..train.seeds import publish_copy
from .real import REAL_STEPS, RealStory, real_story, warm_base
from .workers import Workers, side_by_side

__all__ = [
    "BASE_LABEL",
    "DemoConfig",
    "DemoResult",
    "RunSummary",
    "base_noise",
    "configurations",
    "hackable_configuration",
    "hackable_note",
    "hackable_reward",
    "render_story",
    "render_table",
    "run_demo",
    "summarise",
]

#: Categories in the order a reader meets the story: the one RL improves, the one it breaks.
ORDER: tuple[str, ...] = ("with_id", "not_refundable", "no_id", "off_topic")
#: Training steps of a full demo run: honest GRPO moves with_id on the tiny policy in 20 (measured).
STEPS = 20
#: Steps of the --quick path: the whole flow, no story (used by the slow test).
QUICK_STEPS = 3
#: The prompt set: the default, held out by the environment's own shares (refund: 24/30/24
#: scenarios held out, 95/16/8 trained on), the holdout every other surface uses by default.
SIZE = "default"
#: The trainer's reward in the hackable run when the environment offers it (refund does);
#: otherwise the first variant the environment's ``rewards`` name.
HACKABLE_REWARD = "lookup_anything"
#: The categories whose collapse the story watches, by environment (others: every category).
WATCHED: dict[str, tuple[str, ...]] = {"refund": ("no_id",), "refund_agent": ("not_refundable", "with_id")}
#: The marker whose rate the table shows under each cell, when the rows carry it (refund's).
TOOL_MARKER = "tool_call"
BASE_LABEL = "base"
#: Wall minutes of ``rlgate demo --seeds 3`` with the tiny policy built: 573 s measured on 2
#: CPU cores shared with other jobs (load 4.3); named by the closing line, so a reader knows
#: what the recipe story costs before starting it.
RECIPE_MINUTES = 10
#: What introduces the printed `rlgate gate ...` line that gives the shown run's verdicts again.
REPRODUCE_HINT = "the same verdicts from the run's files (any run: its folder instead): "


@dataclass(frozen=True)
class DemoConfig:
    """One training run of the demo: a run-folder name, a title and the method's knobs."""

    name: str
    title: str
    method: str
    knobs: Mapping[str, object] = field(default_factory=dict)
    hackable: bool = False

    @property
    def label(self) -> str:
        return self.title + (" *" if self.hackable else "")


def _shared(quick: bool, env: EnvSpec) -> dict[str, object]:
    """Knobs every demo run shares (the examples' markers use the same ones, so they share runs)."""
    knobs: dict[str, object] = {"size": "small" if quick else SIZE}
    if env is not None:
        knobs["env"] = env
    if quick:
        knobs["monitor_every"] = 2
    return knobs


def configurations(steps: int = STEPS, *, quick: bool = False, env: EnvSpec = None,
                   episodic: bool = False, real: RealStory | None = None) -> list[DemoConfig]:
    """The honest runs: GRPO unbalanced, GRPO balanced to 0.25, one DPO round (on *env*'s spec,
    a knob the runs are keyed by; *episodic*: the caller's resolved environment is an episode
    environment, which trains no DPO round, because DPO pairs one-turn replies). *real* scales
    them to a real model on a CPU (:mod:`.real`): the first run then keeps its checkpoints."""
    shared = _shared(quick, env)
    dpo_extra: dict[str, object] = {"pair_samples": 4} if quick else {}

    def extra(method: str, **flags: bool) -> dict[str, object]:
        return real.knobs(method, **flags) if real is not None else {}

    runs = [
        DemoConfig("grpo", f"GRPO, {steps} steps", "grpo",
                   {**shared, "steps": steps, **extra("grpo", watched=True)}),
        DemoConfig("grpo-balance-0.25", f"GRPO --balance 0.25, {steps} steps", "grpo",
                   {**shared, "steps": steps, "balance": 0.25, **extra("grpo")}),
        DemoConfig("dpo-constructed", f"DPO + constructed negatives, {steps} steps", "dpo",
                   {**shared, "steps": steps, "constructed_negatives": True, **dpo_extra, **extra("dpo")}),
    ]
    return runs[:2] if episodic else runs


def hackable_reward(env: Env) -> str | None:
    """The deliberately hackable variant the demo trains on: :data:`HACKABLE_REWARD` or *env*'s first, or None."""
    if HACKABLE_REWARD in env.rewards:
        return HACKABLE_REWARD
    return next(iter(env.rewards), None)


def hackable_note(env: Env, reward: str) -> str:
    """Shown under the table every time the hackable run is: what its reward pays (its docstring's first line)."""
    doc = (env.rewards[reward].__doc__ or "").strip().splitlines()
    pays = f"{reward}: {doc[0].rstrip('.')}" if doc else reward
    return (f"* trained on a DELIBERATELY HACKABLE reward ({pays}); its holdout is graded by the real "
            f"{env.name} reward like every other run")


def hackable_configuration(steps: int = STEPS, *, quick: bool = False, env: EnvSpec = None,
                           reward: str = HACKABLE_REWARD, real: RealStory | None = None) -> DemoConfig:
    """GRPO, unbalanced, trained on the deliberately hackable *reward* (*real*: scaled to a real model)."""
    extra = real.knobs("grpo") if real is not None else {}
    return DemoConfig("grpo-hackable-reward", f"GRPO on the hackable reward, {steps} steps", "grpo",
                      {**_shared(quick, env), "steps": steps, "reward": reward, **extra}, hackable=True)


# --------------------------------------------------------------------------- summaries


@dataclass
class RunSummary:
    """What the demo shows of one finished run (plain data: the table renders from it)."""

    config: DemoConfig
    gate: Mapping[str, Any]  #: the run's gate.json (pass@1 and guard comparisons, verdicts)
    tool_calls: Mapping[str, ComparisonRecord]  #: group -> comparison of marker:tool_call (when rows carry it)
    alarms: Sequence[Mapping[str, object]] = ()
    monitor_history: Sequence[Mapping[str, object]] = ()
    train_reward: tuple[float, float] | None = None  #: first and last logged training reward
    seconds: float = 0.0
    from_cache: bool = False
    path: Path | None = None

    @property
    def passed(self) -> bool:
        return bool(self.gate.get("passed"))

    def pass_at_1(self) -> dict[str, ComparisonRecord]:
        return {c["group"]: c for c in self.gate.get("comparisons", []) if c["metric"] == "pass@1"}


def base_noise(before_runs: Sequence[Sequence[Row]]) -> dict[str, list[float]]:
    """pass@1 per category of each base run (mean over scenarios of each scenario's mean)."""
    out: dict[str, list[float]] = {}
    for rows in before_runs:
        units: dict[tuple[str, str], list[float]] = {}
        for row in rows:
            unit = str(row.get("scenario_id") or row["prompt"])
            units.setdefault((row["category"], unit), []).append(float(row["reward"]))
        per_cat: dict[str, list[float]] = {}
        for (category, _), values in units.items():
            per_cat.setdefault(category, []).append(sum(values) / len(values))
        for category, means in per_cat.items():
            out.setdefault(category, []).append(sum(means) / len(means))
    return out


def _tool_call_comparisons(before: Sequence[Row], after: Sequence[Row]) -> dict[str, ComparisonRecord]:
    """Δ tool-call rate with its interval, per category (descriptive: more calls is not "better").

    Empty when the rows carry no :data:`TOOL_MARKER` (an environment without tool calls).
    """
    if not all(TOOL_MARKER in (row.get("markers") or {}) for row in (*before, *after)):
        return {}
    result = compare_adapter(list(before), list(after), by="category", guards=(TOOL_MARKER,))
    return {c.group: c.to_dict() for c in result.comparisons if c.metric == f"marker:{TOOL_MARKER}"}


def summarise(config: DemoConfig, folder: RunFolder, *, seconds: float = 0.0, from_cache: bool = False) -> RunSummary:
    """Read a finished run folder (``train.run.RunFolder``) into what the demo prints."""
    before = [row for path in folder.before_files for row in read_rows(path)]
    after = list(read_rows(folder.after_file))
    monitor = folder.monitor or {}
    rewards = [m["reward"] for m in folder.metrics() if isinstance(m.get("reward"), (int, float))]
    return RunSummary(
        config=config, gate=folder.gate, tool_calls=_tool_call_comparisons(before, after),
        alarms=list(monitor.get("alarms", [])), monitor_history=list(monitor.get("history", [])),
        train_reward=(rewards[0], rewards[-1]) if rewards else None, seconds=seconds, from_cache=from_cache,
        path=folder.path,
    )


# --------------------------------------------------------------------------- rendering


def _signed(x: float | None, digits: int = 2) -> str:
    return signed(x, digits, missing="n/a", minus="−")


def _plain(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _interval(c: ComparisonRecord) -> str:
    return interval(c.get("low"), c.get("high"), 2, missing="no interval", minus="−")


def _verdict(c: ComparisonRecord) -> str:
    verdict = str(c.get("verdict", "?"))
    shown = verdict_word(verdict, c.get("failure") is not None)
    flags = [f for f in c.get("flags") or [] if f == "within noise"]
    return shown + (f" ({flags[0]})" if flags else "")


def _groups(summaries: Sequence[RunSummary]) -> list[str]:
    seen = {g for s in summaries for g in s.pass_at_1() if g != "overall"}
    return [g for g in ORDER if g in seen] + sorted(seen - set(ORDER))


def _base_cell(values: Sequence[float]) -> str:
    if not values:
        return "n/a"
    mean = sum(values) / len(values)
    spread = f"runs {min(values):.2f}–{max(values):.2f}" if len(values) > 1 else "1 run"
    return f"{mean:.2f}\n{spread}"


def _run_cell(summary: RunSummary, group: str) -> str:
    c = summary.pass_at_1().get(group)
    if c is None:
        return "not measured"
    lines = [f"{_plain(c['before'])} → {_plain(c['after'])}", f"{_signed(c['delta'])} {_interval(c)}", _verdict(c)]
    t = summary.tool_calls.get(group)
    if t is not None:
        lines.append(f"tool calls {_plain(t['before'])} → {_plain(t['after'])}")
    return "\n".join(lines)


def _units(summary: RunSummary, group: str) -> str:
    c = summary.pass_at_1().get(group)
    return "" if c is None else f"{c['n_units']} scenarios × {c['k']:g}"


def render_table(base: Mapping[str, Sequence[float]], summaries: Sequence[RunSummary], *,
                 hackable: str | None = None) -> str:
    """Runs as rows, categories side by side: pass@1 before → after, Δ [CI], verdict, tool calls.

    *hackable* is the note shown under the table when a hackable run is in it (:func:`hackable_note`).
    """
    groups = _groups(summaries)
    units = next((s for s in summaries if s.pass_at_1()), None)
    headers = ["run", *(f"{g}\n({_units(units, g)})" if units else g for g in groups), "gate"]
    rows = [[f"{BASE_LABEL} ({max((len(v) for v in base.values()), default=0)} runs)",
             *(_base_cell(base.get(g, [])) for g in groups), "noise floor"]]
    for s in summaries:
        rows.append([s.config.label, *(_run_cell(s, g) for g in groups), "PASSED" if s.passed else "FAILED"])
    table = str(tabulate(rows, headers=headers, tablefmt="grid", disable_numparse=True))
    tools = "; tool-call rate before → after" if any(s.tool_calls for s in summaries) else ""
    notes = [f"cells: pass@1 before → after; Δ [interval over scenarios, every comparison of a run held together "
             f"at a 5% run-level false-fail]; verdict{tools}"]
    if hackable and any(s.config.hackable for s in summaries):
        notes.append(hackable)
    return table + "\n" + "\n".join(notes)


def _describe_move(group: str, c: ComparisonRecord) -> str:
    """One clause per category, led by the verdict (the flags only add why)."""
    verdict = c.get("verdict")
    span = f"{_plain(c['before'])} → {_plain(c['after'])}"
    noise = "within noise" in (c.get("flags") or [])
    if verdict == "regressed":
        return f"{group} REGRESSED ({span}, interval {_interval(c)} entirely below 0)"
    if verdict == "moved":
        return f"{group} moved up ({span}, interval {_interval(c)} above 0)"
    if verdict == "flat":
        return f"{group} held ({span}, interval {_interval(c)} inside the ±margin)"
    if verdict == "inconclusive" and noise and (c.get("low") or 0) > 0:
        return (f"{group} is inconclusive ({span}: a gain no larger than the base runs differ from each other, "
                "so not claimed as a move)")
    if verdict == "inconclusive":
        return f"{group} is inconclusive ({span}, interval {_interval(c)} too wide to call)"
    return f"{group} had too few scenarios to judge ({span})"


def _monitor_words(s: RunSummary) -> str:
    parts = []
    if s.train_reward is not None:
        parts.append(f"training reward {s.train_reward[0]:.2f} → {s.train_reward[1]:.2f}")
    history = [h for h in s.monitor_history if isinstance(h.get("proxy_reward"), (int, float))]
    if len(history) >= 2:
        parts.append(f"the monitor's honest holdout score {history[0]['proxy_reward']:.2f} (step "
                     f"{history[0]['step']}) → {history[-1]['proxy_reward']:.2f} (step {history[-1]['step']})")
    if s.alarms:
        parts.append("alarms: " + ", ".join(f"{a['kind']} at step {a['step']}" + _alarm_detail(a) for a in s.alarms))
    else:
        parts.append("no monitor alarm")
    return "; ".join(parts)


def _alarm_detail(alarm: Mapping[str, object]) -> str:
    where = [str(alarm[k]) for k in ("top_feature", "category") if alarm.get(k)]
    return f" ({' on '.join(where)})" if where else ""


def render_story(base: Mapping[str, Sequence[float]], summaries: Sequence[RunSummary],
                 *, hackable_reason: str | None = None) -> list[str]:
    """What happened, in plain words, read off the verdicts (one paragraph per run)."""
    lines = []
    if base:
        ranked = sorted(base.items(), key=lambda kv: _rank(kv[0]))
        spread = ", ".join(f"{g} {min(v):.2f}–{max(v):.2f}" for g, v in ranked)
        lines.append(f"The base policy, sampled {max(len(v) for v in base.values())} times at different seeds, "
                     f"scored {spread}: a gain smaller than that spread is noise, and the gate does not "
                     "claim it as a move (a drop still counts).")
    for s in summaries:
        pass_rows = s.pass_at_1()
        moves = [_describe_move(g, pass_rows[g]) for g in _groups([s]) if g in pass_rows]
        verdict = "the gate PASSES it" if s.passed else "the gate FAILS it: " + _failures(s)
        tool = s.tool_calls.get("no_id")
        invent = ""
        if (tool is not None and tool["after"] > tool["before"] + 0.1
                and tool.get("verdict") in ("moved", "inconclusive")):
            invent = (f" On no-id prompts it now calls a tool in {tool['after']:.0%} of replies (base "
                      f"{tool['before']:.0%}): every such call invents an order id.")
        who = s.config.label + (" (the deliberately hackable reward)" if s.config.hackable else "")
        watched = _monitor_words(s)
        lines.append(f"{who}: {'; '.join(moves)}.{invent} {watched[0].upper()}{watched[1:]}. So {verdict}.")
    if hackable_reason:
        lines.append(hackable_reason)
    return lines


#: failures a run's paragraph quotes; the rest are counted and found in its gate.json
SHOWN_FAILURES = 3


def _failures(s: RunSummary) -> str:
    """Every failure of the run's gate, or the first :data:`SHOWN_FAILURES` and how many more."""
    failures = list(s.gate.get("failures", []))
    shown = "; ".join(failures[:SHOWN_FAILURES])
    rest = len(failures) - SHOWN_FAILURES
    if rest > 0:
        where = f" (all {len(failures)} in {s.path / 'gate.json'})" if s.path is not None else ""
        shown += f"; and {rest} more{where}"
    return shown


def _rank(group: str) -> int:
    return ORDER.index(group) if group in ORDER else len(ORDER)


def watched(env: Env) -> tuple[str, ...]:
    """The categories whose collapse the story watches for *env* (:data:`WATCHED`, else all)."""
    return WATCHED.get(env.name, env.categories)


def honest_collapse(summary: RunSummary, categories: Sequence[str]) -> bool:
    """True when the honest run already regressed a watched category (then the hackable run is not needed)."""
    rows = summary.pass_at_1()
    return any(c in rows and rows[c]["verdict"] == "regressed" for c in categories)


# --------------------------------------------------------------------------- the flow


@dataclass
class DemoResult:
    runs_dir: Path
    summaries: list[RunSummary]
    base: dict[str, list[float]]
    index: Path | None
    seconds: float


@dataclass(frozen=True)
class Trained:
    """One configuration's run, as the demo tells it: its summary, or why it was not trained."""

    config: DemoConfig
    summary: RunSummary | None
    seconds: float = 0.0
    error: str | None = None

    def say(self, say: Callable[[str], None], *, announce: bool = True) -> None:
        """Its lines of the transcript (*announce*: the configuration's line first)."""
        if announce:
            say(_announce(self.config))
        if self.summary is None:
            say(f"  not trained: {self.error}")
            return
        how = "served from the cache" if self.summary.from_cache else "trained"
        say(f"  {how} in {self.seconds:.0f} s -> {self.summary.path}")


def _announce(config: DemoConfig) -> str:
    return f"- {config.label}: {config.method} {' '.join(f'{k}={v}' for k, v in config.knobs.items())}"


def train_config(config: DemoConfig, runs_dir: Path, progress: bool | None = None) -> Trained:
    """Train (or serve) one configuration into ``runs_dir/<name>`` with its report; run in the
    demo's process or in a worker (it pickles, and so does what it returns)."""
    started = time.perf_counter()
    try:
        # trainers print their log dicts to stdout; the demo's stdout is the story, so they go to stderr
        with contextlib.redirect_stdout(sys.stderr):
            served = cached_run(make_knobs(config.method, **config.knobs), progress=progress)
    except RlgateError as exc:  # e.g. DPO finds too few preference pairs on this policy: say so, go on
        return Trained(config, None, error=str(exc))
    seconds = time.perf_counter() - started
    folder = publish_copy(served.run, runs_dir / config.name)
    write_report(folder.path)
    return Trained(config, summarise(config, folder, seconds=seconds, from_cache=served.hit), seconds)


def _train(config: DemoConfig, runs_dir: Path, say: Callable[[str], None], *,
           progress: bool | None) -> RunSummary | None:
    """Train (or serve) one configuration here, saying so before and after; None when it cannot train."""
    return _train_here(config, runs_dir, say, progress).summary


@dataclass(frozen=True)
class HackablePlan:
    """Whether the story trains the hackable-reward run, and the words it says about it."""

    config: DemoConfig | None
    line: str  #: said after the honest runs
    reason: str | None = None  #: the closing paragraph
    note: str | None = None  #: the note under the table
    collapse: str = ""

    def after(self, hacked: RunSummary | None, watch: Sequence[str], steps: int) -> str | None:
        """The closing paragraph once the hackable run (if any) is known."""
        if self.reason and hacked is not None and not honest_collapse(hacked, watch):
            return self.reason + f" Within {steps} steps it did not collapse {self.collapse} either."
        return self.reason


def hackable_plan(environment: Env, first: RunSummary | None, steps: int, *, quick: bool,
                  env: EnvSpec, real: RealStory | None = None) -> HackablePlan | None:
    """The hackable-reward run the story adds when honest GRPO (*first*) collapsed no watched
    category; None when it did."""
    watch = watched(environment)
    if first is not None and honest_collapse(first, watch):
        return None
    rows = first.pass_at_1() if first is not None else {}
    verdicts = [rows[c]["verdict"] if c in rows else "not measured" if first is not None else "untrained"
                for c in watch]
    left = f"{' / '.join(watch)} after honest GRPO: {' / '.join(verdicts)}"
    reward = hackable_reward(environment)
    if reward is None:
        return HackablePlan(None, f"{left}; environment {environment.name} offers no deliberately hackable reward "
                                  "(rewards), so there is no hackable-reward run")
    collapse = "/".join(c.replace("_", "-") for c in watch)
    reason = (f"Honest GRPO left {', '.join(f'{c} {v}' for c, v in zip(watch, verdicts))} "
              f"within {steps} steps, so the demo also trained GRPO on a deliberately hackable reward "
              f"(marked *) to show what a real {collapse} collapse looks like to the gate and the monitor.")
    return HackablePlan(hackable_configuration(steps, quick=quick, env=env, reward=reward, real=real),
                        f"{left}; training the hackable-reward run too (marked *)", reason=reason,
                        note=hackable_note(environment, reward), collapse=collapse)


def _one_at_a_time(honest: Sequence[DemoConfig], root: Path, say: Callable[[str], None], *,
                   plan_for: Callable[[RunSummary | None], HackablePlan | None],
                   progress: bool | None) -> tuple[list[RunSummary], HackablePlan | None, RunSummary | None]:
    """Every run in this process, one after the other, each said as it starts and ends."""
    summaries = [s for s in (_train(config, root, say, progress=progress) for config in honest) if s is not None]
    plan = plan_for(summaries[0] if summaries else None)
    hacked = None
    if plan is not None:
        say(plan.line)
        if plan.config is not None:
            hacked = _train(plan.config, root, say, progress=progress)
    return summaries, plan, hacked


def _side_by_side(honest: Sequence[DemoConfig], root: Path, say: Callable[[str], None], workers: Workers, *,
                  plan_for: Callable[[RunSummary | None], HackablePlan | None],
                  progress: bool | None) -> tuple[list[RunSummary], HackablePlan | None, RunSummary | None]:
    """The first honest run, then the hackable one, in this process, the other honest runs in
    *workers* meanwhile; said in the order :func:`_one_at_a_time` says them, so the transcript
    differs only in its times.

    The first honest run (unbalanced GRPO, whose verdict decides the hackable run) samples the
    base runs every run shares, and the hackable run can start only after it: that chain is the
    longest, so it runs here, where the training stack is already imported, and the hackable
    run starts the moment the verdict is known. The workers take the others in order, a run of
    another method first: DPO samples its preference pairs before it needs the base runs, so it
    does not wait for them.
    """
    others = sorted(honest[1:], key=lambda c: c.method == honest[0].method)
    pending = {c.name: workers.submit(train_config, c, root) for c in others}
    first = _train_here(honest[0], root, say, progress)
    done = [first]
    plan: HackablePlan | None = None
    decided = first.summary is not None
    if decided:
        plan = plan_for(first.summary)
    hacked = None
    if plan is not None and plan.config is not None:
        hacked = train_config(plan.config, root, progress)
    for config in honest[1:]:  # in the story's order; if GRPO did not train, the first that did decides
        done.append(workers.result(pending[config.name]))
        done[-1].say(say)
        if not decided and (done[-1].summary is not None or len(done) == len(honest)):
            decided = True
            plan = plan_for(done[-1].summary)
    if plan is not None:
        say(plan.line)
        if plan.config is not None:
            if hacked is None:  # decided only now
                hacked = _train_here(plan.config, root, say, progress)
            else:
                hacked.say(say)
    return ([t.summary for t in done if t.summary is not None], plan,
            hacked.summary if hacked is not None else None)


def _train_here(config: DemoConfig, root: Path, say: Callable[[str], None], progress: bool | None) -> Trained:
    """Train one configuration in this process, saying so before and after."""
    say(_announce(config))
    trained = train_config(config, root, progress)
    trained.say(say, announce=False)
    return trained


def _write_prompt_files(runs_dir: Path, knobs: RunKnobs, say: Callable[[str], None]) -> None:
    sets = load_prompts(knobs)
    folder = runs_dir / "prompts"
    folder.mkdir(parents=True, exist_ok=True)
    write_prompts(folder / "train.jsonl", sets.train)
    write_prompts(folder / "holdout.jsonl", sets.holdout)
    say(f"prompts: {sets.source}, fingerprint {sets.fingerprint[:12]}; train {count_by_category(sets.train)}, "
        f"holdout {count_by_category(sets.holdout)} -> {folder}")


def _tiny_policy(base_model: str, say: Callable[[str], None]) -> None:
    """Say which base model the story trains; a shipped tiny policy is found (and its files checked) up front."""
    if not base_model.startswith(TINY_PREFIX):
        say(f"base model: {base_model}")
        return
    t = time.perf_counter()
    say(f"tiny policy: {base_model} at {tiny_policy_dir(base_model)} ({time.perf_counter() - t:.0f} s)")


def run_demo(runs_dir: str | os.PathLike[str] = "runs/demo", *, steps: int | None = None, quick: bool = False,
             progress: bool | None = None, say: Callable[[str], None] = print,
             env: EnvSpec = None, jobs: int | None = None, verbose: bool = False,
             base_model: str | None = None) -> DemoResult:
    """The whole story on *env* (the default environment when None); returns what it printed as data.

    *jobs* runs train side by side, this process and ``jobs - 1`` worker processes (None: one
    per available core; 1: one after the other in this process); the table and the story do
    not depend on it. The workers are started with multiprocessing's ``spawn``, which imports
    the calling script again in each: a script calls this under ``if __name__ == "__main__":``.
    *verbose* lets the workers' third-party warnings and logs through. Verdicts are results,
    not errors. *base_model* tells the story on a real model instead of the environment's tiny
    policy (:mod:`.real`: warm-started when the environment declares a warm start, knobs scaled
    to a CPU; about an hour on two cores).
    """
    import torch

    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise UsageError(f"jobs={jobs!r}: give the number of runs to train side by side, 1 or more (None: one "
                         "per available CPU core)")
    torch.set_num_threads(1)
    started = time.perf_counter()
    environment = load_env(env)
    steps = steps or (QUICK_STEPS if quick else REAL_STEPS if base_model else STEPS)
    root = Path(runs_dir)
    root.mkdir(parents=True, exist_ok=True)
    real = real_story(warm_base(base_model, environment, say), steps) if base_model else None

    honest = configurations(steps, quick=quick, env=env, episodic=environment.is_episodic, real=real)
    if real is not None and jobs is None:  # a real model's GRPO run holds gigabytes: one at a time unless asked
        jobs = 1
    side = side_by_side(jobs, len(honest) + (hackable_reward(environment) is not None))
    problem = _unpicklable(honest) if side > 1 else None
    with contextlib.ExitStack() as stack:
        # this process trains too: side - 1 workers beside it
        workers = stack.enter_context(Workers(side - 1, verbose=verbose)) if side > 1 and problem is None else None
        first = make_knobs(honest[0].method, **honest[0].knobs)
        _tiny_policy(resolved(first.base_model, "base_model"), say)
        _write_prompt_files(root, first, say)
        if problem is not None:
            say(f"training one run at a time: {problem}")
        say("training (each run samples the holdout of the base 3 times - the noise floor - then trains, "
            "samples again and gates by category):")

        def plan_for(summary: RunSummary | None) -> HackablePlan | None:
            return hackable_plan(environment, summary, steps, quick=quick, env=env, real=real)

        told: list[str] = []

        def heard(line: str) -> None:
            told.append(line)
            say(line)

        def status() -> str:
            done = sum(line.startswith("  ") for line in told)
            return f"{done} run{'s' if done != 1 else ''} done; still training (bars show on a terminal)"

        with heartbeat("rlgate demo", status, progress):
            if workers is None:
                summaries, plan, hacked = _one_at_a_time(honest, root, heard, plan_for=plan_for, progress=progress)
            else:
                summaries, plan, hacked = _side_by_side(honest, root, heard, workers, plan_for=plan_for,
                                                        progress=progress)
    summaries += [hacked] if hacked is not None else []
    reason = plan.after(hacked, watched(environment), steps) if plan is not None else None
    note = plan.note if plan is not None else None

    if not summaries:
        raise DataError("no demo run could be trained; see the lines above", path=root)
    first_run = summaries[0].path
    assert first_run is not None  # a trained summary always names its run folder
    base = base_noise([list(read_rows(p)) for p in RunFolder.open(first_run).before_files])
    index = write_index(root)
    say("")
    say(render_table(base, summaries, hackable=note))
    say("")
    for line in render_story(base, summaries, hackable_reason=reason):
        say(line)
        say("")
    named = f" --env {env}" if isinstance(env, str) else ""
    say(f"reports: {index} (one report.html per run folder)")
    shown = next((s for s in summaries if not s.passed), summaries[0])
    if shown.path is not None:
        say(REPRODUCE_HINT + reproduce_command(RunFolder.open(shown.path).gate_result()))
    say(f"one training seed per run cannot tell a recipe from a lucky seed: `rlgate demo --seeds 3{named}` "
        f"trains honest GRPO and the balanced one at 3 trainer seeds each and gates the recipes "
        f"(about {RECIPE_MINUTES} minutes on 2 CPU cores)")
    seconds = time.perf_counter() - started
    say(f"demo finished in {seconds:.0f} s")
    return DemoResult(runs_dir=root, summaries=summaries, base=base, index=index, seconds=seconds)


def _unpicklable(configs: Sequence[DemoConfig]) -> str | None:
    """Why *configs* cannot go to a worker process (an environment object nothing can import), or None."""
    try:
        pickle.dumps(list(configs))
    except (pickle.PicklingError, AttributeError, TypeError) as exc:
        return f"the environment does not pickle ({type(exc).__name__}: {str(exc)[:80]})"
    return None
