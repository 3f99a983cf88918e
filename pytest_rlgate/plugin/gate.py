"""pytest hooks and fixtures for the gate: the ``rlgate`` fixture, the summary, the report.

A gate is an ordinary test that fails with :class:`~pytest_rlgate.RegressionError`. Each
gate's result travels in ``item.user_properties`` as ``("rlgate_gate", <json>)``: pytest
serialises user properties with the report, so under pytest-xdist the controller receives
every worker's results in ``pytest_runtest_logreport``, and ``--junitxml`` records them
for free. The controller collects them, prints a terminal section, and writes
``--rlgate-report`` JSON at the end of the session. numpy loads only when a gate runs, and
the tables' text module only when the summary has a gate to show.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from pytest_rlgate._io.atomic import atomic_write
from pytest_rlgate.errors import RlgateError, RlgateWarning, hide_user_errors
from pytest_rlgate.gate import compare, require_passed
from pytest_rlgate.gate.numtext import interval
from pytest_rlgate.gate.options import Choice, GateOptions, OrNone, flag_help, old_spelling, shown_default
from pytest_rlgate.gate.verdicts import FAILURE_FLAGS, RECIPE_VERDICTS, verdict_word
from pytest_rlgate.options import Number, path_problem
from pytest_rlgate.plugin import GATE_KEYS, MARKER, add_setting, fail, path_setting, setting, shown_path
from pytest_rlgate.plugin.env import marker_env
from pytest_rlgate.plugin.harness import read_options

if TYPE_CHECKING:
    from pytest_rlgate.data.rows import RowInput
    from pytest_rlgate.environment.contract import Env
    from pytest_rlgate.gate.adaptive import AdaptiveDesign, AdaptiveResult
    from pytest_rlgate.gate.afters import SeedSources
    from pytest_rlgate.gate.recipe import RecipeGateResult
    from pytest_rlgate.gate.result import GateResult
    from pytest_rlgate.policy.handles import Tokenizer
    from pytest_rlgate.policy.kinds import Policy
    from pytest_rlgate.records import PromptItem

PROPERTY = "rlgate_gate"
_STATE = pytest.StashKey["_GateLog"]()


def _kind(bound: Number | Choice | OrNone) -> type:
    """How a setting's text is read before its bound checks it: a name, an integer or a number.

    A setting that may be ``none`` is read as its text, so ``none`` stays apart from unset.
    """
    return str if isinstance(bound, (Choice, OrNone)) else int if bound.integer else float


def pytest_addoption(parser: pytest.Parser) -> None:
    for name, spec in GateOptions.settings().items():
        bound, kind = spec.metadata["bound"], _kind(spec.metadata["bound"])
        choices = f", one of {', '.join(bound.choices)}" if isinstance(bound, Choice) else ""
        add_setting(parser, name, type=kind, metavar={str: "NAME", int: "INT"}.get(kind, "X"),
                    help=f"gate: {flag_help(spec)}{choices} (default {shown_default(spec)})")
    help_ = f"gate: {GateOptions.field('base_runs').metadata['help']}"
    parser.getgroup("rlgate").addoption("--rlgate-base-run", dest="rlgate_base_run", action="append", default=None,
                                        metavar="FILE", help=help_)
    parser.addini("rlgate_base_run", help=f"{help_} (ini twin of --rlgate-base-run: one path a line)",
                  type="paths", default=None)
    add_setting(parser, "report", metavar="PATH", help="gate: write every gate result of the session as JSON")
    add_setting(parser, "release-policy", metavar="FILE", aliases=("policy",),
                help=f"gate: {GateOptions.field('release_policy').metadata['help']}")
    add_setting(parser, "markdown", metavar="PATH",
                help="gate: write a Markdown summary of every gate of the session (also appended to "
                     "$GITHUB_STEP_SUMMARY under CI)")


def _defaults(config: pytest.Config) -> dict[str, Any]:
    """The :class:`GateOptions` fields the command line / ini set; only what was set, each checked.

    :raises pytest.UsageError: a value out of its bound, naming the flag and its ini twin.
    """
    out: dict[str, Any] = {}
    for name, spec in GateOptions.settings().items():
        bound, flag = spec.metadata["bound"], name
        value: object
        if spec.name == "bootstrap_seed":
            value, deprecated = _bootstrap_seed(config)
            flag = "seed" if deprecated else name
        else:
            value = setting(config, name, _kind(bound))
        if value is None:
            continue
        if isinstance(bound, OrNone):
            try:
                value = bound(str(value))
            except argparse.ArgumentTypeError as exc:
                raise pytest.UsageError(f"--rlgate-{flag} / rlgate_{flag.replace('-', '_')} = {value!r}: {exc}") \
                    from None
        problem = bound.problem(value)
        if problem is not None and isinstance(bound, Choice):
            raise pytest.UsageError(f"--rlgate-{flag} {value!r}: choose {bound.describe()}")
        if problem is not None:
            raise pytest.UsageError(f"--rlgate-{flag} / rlgate_{flag.replace('-', '_')} = {value!r}: {problem}")
        out[spec.name] = value
    policy = path_setting(config, "release-policy")
    if policy is not None:
        out["release_policy"] = str(policy)
    given = config.getoption("rlgate_base_run", default=None)
    runs = [config.invocation_params.dir / p for p in given] if given else config.getini("rlgate_base_run")
    if runs:
        out["base_runs"] = tuple(str(p) for p in runs)
    return out


def _bootstrap_seed(config: pytest.Config) -> tuple[int | None, bool]:
    """The bootstrap seed, and whether it came from the deprecated ``--rlgate-seed`` alone.

    ``--rlgate-bootstrap-seed`` wins; without it a prompt seed given on the command line or
    in the ini file still seeds the bootstrap, as it used to, and is deprecated for that.
    Neither given: None, and the gate seeds :data:`~pytest_rlgate.gate.options.BOOTSTRAP_SEED`.
    """
    seed = setting(config, "bootstrap-seed", int)
    if seed is not None:
        return seed, False
    try:  # --rlgate-seed belongs to the prompts feature; absent when it is not registered
        legacy = setting(config, "seed", int)
    except (ValueError, AttributeError):
        return None, False
    return legacy, legacy is not None


DEPRECATED_SEED = ("--rlgate-seed / rlgate_seed as the gate's bootstrap seed is deprecated: pass "
                   "--rlgate-bootstrap-seed (ini rlgate_bootstrap_seed); --rlgate-seed stays the prompt seed")


def pytest_configure(config: pytest.Config) -> None:
    _defaults(config)  # a bad value stops the session now, not in the first gate
    if _bootstrap_seed(config)[1]:
        config.issue_config_time_warning(RlgateWarning(DEPRECATED_SEED), stacklevel=2)
    policy = _defaults(config).get("release_policy")
    if policy:
        from pytest_rlgate.gate.release import load_release_policy

        try:  # a bad policy file is one line now, not a failure in every gating test
            load_release_policy(policy)
        except RlgateError as exc:
            raise pytest.UsageError(f"--rlgate-release-policy / rlgate_release_policy: {exc}") from None
    for name in ("report", "markdown"):
        target = path_setting(config, name)
        problem = None if target is None else path_problem(target, directory=False)
        if problem is not None:  # checked now, not after every test has run
            raise pytest.UsageError(f"--rlgate-{name} / rlgate_{name} {setting(config, name)!r}: {problem}")
    log = _GateLog(config)
    config.stash[_STATE] = log
    config.pluginmanager.register(log, "rlgate-gate-log")


class RlgateGate:
    """The ``rlgate`` fixture: gate rows from inside a test, with the session's settings.

    Guards and declared categories default to the environment's (``env.guards``,
    ``env.categories``): the test's ``@pytest.mark.rlgate(env=...)``, else the session's
    ``--rlgate-env``, because that environment graded the rows the test gates. A relative
    row-file path is resolved against the rootdir, like the ini settings, so a suite gates
    the same files whichever folder pytest is started from.
    """

    def __init__(self, node: pytest.Item, config: pytest.Config, env: Env,
                 marked: Mapping[str, object] | None = None) -> None:
        self._node = node
        self._root = config.rootpath
        self._config = config
        self.env = env
        marked = dict(marked or {})
        if "policy" in marked:
            marked["release_policy"] = old_spelling("policy", marked.pop("policy"), "release_policy")
        policy = marked.get("release_policy")
        if isinstance(policy, (str, os.PathLike)) and not Path(policy).is_absolute():
            marked["release_policy"] = str(self._root / policy)
        #: the session's options (``--rlgate-*`` and ini), with this test's environment and
        #: its ``@pytest.mark.rlgate(show_flips=..., flips_in=..., release_policy=...)``
        chosen = {**_defaults(config), **marked}
        self.options = GateOptions(env=env, **chosen, given=frozenset(chosen))
        self._marked_policy = "release_policy" in marked

    def _rooted(self, source: RowInput) -> RowInput:
        if isinstance(source, (str, os.PathLike)):
            if not Path(source).is_absolute():
                source = os.path.relpath(self._root / source)  # short in messages: "before.jsonl" from the rootdir
            if Path(source).exists() or "#" in os.fspath(source):  # a harness's log too, with the session's options
                from pytest_rlgate.data.readers import read_rows

                return read_rows(source, **read_options(self._config))
        return source

    def _rooted_after(self, after: RowInput | SeedSources) -> RowInput | SeedSources:
        """One after side, or one per training seed (a mapping seed -> rows, or a list): each rooted."""
        from pytest_rlgate.gate.afters import is_seed_sources

        if isinstance(after, Mapping):
            return {seed: self._rooted(rows) for seed, rows in after.items()}
        if is_seed_sources(after):  # a list of the seeds' sources: a mapping was handled above
            return [self._rooted(rows) for rows in cast("Sequence[RowInput]", after)]
        return self._rooted(after)

    def compare(self, before: RowInput, after: RowInput | SeedSources, **options: object,
                ) -> GateResult | RecipeGateResult:
        """Run the gate (a recipe gate when *after* holds one row source per training seed) and
        record its result on the test (without raising). *options* override the session's."""
        from pytest_rlgate.gate.afters import is_seed_sources

        __tracebackhide__ = hide_user_errors
        base = self.options
        if base.release_policy is not None and is_seed_sources(after) and not self._marked_policy:
            base = base.replace(release_policy=None)  # a session-wide policy is an adapter's; a recipe gates without
        before, after = self._rooted(before), self._rooted_after(after)
        sides = [before, *(after.values() if isinstance(after, Mapping) else after if is_seed_sources(after)
                           else [after])]
        if base.env is not None and any(_from_harness(side) for side in sides):
            # an eval harness graded these rows: the session's environment declares neither their guards
            # nor their categories
            base = base.replace(env=None)
        result = compare(before, after, base, **options)
        record = result.to_dict()
        self._node.user_properties.append((PROPERTY, json.dumps(record, sort_keys=True)))
        self._node.user_properties.extend(verdict_properties(record))
        return result

    def assert_no_regression(self, before: RowInput, after: RowInput | SeedSources, **options: object,
                             ) -> GateResult | RecipeGateResult:
        """Gate AFTER against BEFORE (row lists or row-file paths); fail the test on regression.

        *after* may hold one row source per training seed (``rlgate_after_rows`` of a
        ``@pytest.mark.rlgate(seeds=...)`` test is a mapping seed -> rows): the recipe gate.

        *options* are :func:`pytest_rlgate.compare`'s; unset ones come from
        ``--rlgate-bootstrap-seed/-resamples/-confidence/-margin/-method`` or their ini twins, and
        ``guards``/``categories`` from the environment (``env=`` picks another one).
        """
        __tracebackhide__ = hide_user_errors
        return require_passed(self.compare(before, after, **options))


    def until_decided(self, before: RowInput, policy: Policy, tokenizer: Tokenizer | None = None, *,
                      items: Sequence[PromptItem], design: AdaptiveDesign | None = None, seed: int | None = None,
                      **options: object) -> AdaptiveResult:
        """Sample *policy* on *items* until decided against *before* (:func:`pytest_rlgate.gate.until_decided`).

        The session's gate options and this test's environment apply (*options* override them);
        the last look's gate is recorded on the test like :meth:`compare`'s. The test decides:
        ``assert result.passed, result.summary()`` (a regression claimed at any look fails it).
        """
        from pytest_rlgate.gate.adaptive import until_decided
        from pytest_rlgate.policy.adaptive import policy_draw
        from pytest_rlgate.policy.generate import SAMPLE_SEED

        __tracebackhide__ = hide_user_errors
        draw = policy_draw(policy, tokenizer, env=self.env, seed=SAMPLE_SEED if seed is None else seed)
        result = until_decided(self._rooted(before), draw, items, design=design,
                               options=self.options.replace(**options))
        if result.result is not None:
            record = result.result.to_dict()
            self._node.user_properties.append((PROPERTY, json.dumps(record, sort_keys=True)))
            self._node.user_properties.extend(verdict_properties(record))
        return result


def _from_harness(side: object) -> bool:
    header = getattr(side, "header", None)
    return isinstance(header, Mapping) and isinstance(header.get("source"), Mapping)


@pytest.fixture
def rlgate(request: pytest.FixtureRequest) -> RlgateGate:
    """Gate graded rows inside a test: ``rlgate.assert_no_regression(before, after)``."""
    marker = request.node.get_closest_marker(MARKER)
    try:
        env = marker_env(request.config, None if marker is None else marker.kwargs.get("env"))
    except RlgateError as exc:
        fail(f"@pytest.mark.{MARKER}(env=...): {exc}")
    marked = {} if marker is None else {k: v for k, v in marker.kwargs.items() if k in GATE_KEYS}
    return RlgateGate(request.node, request.config, env, marked)


def verdict_properties(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """One JUnit property per comparison: ``rlgate:pass@1:no_id`` = ``REGRESSED -0.833 [-1.000, -0.333]``.

    CI dashboards that read ``--junitxml`` see each category's verdict without parsing the
    gate's JSON (which travels beside them as ``rlgate_gate``): upper case when that
    comparison failed the gate, with the rule's flag when the verdict does not say why
    (``FLAT +0.000 [...] critical (severe flips)``).
    """
    out = []
    for c in record["comparisons"]:
        failure = c.get("failure")
        text = (f"{verdict_word(c['verdict'], failure is not None)} {c['delta']:+.3f} "
                f"{interval(c.get('low'), c.get('high'), missing='(no interval)')}")
        if c.get("tier"):
            text += f" {c['tier']}"
        flag = FAILURE_FLAGS.get(failure["kind"]) if failure else None
        if flag:
            text += f" ({flag})"
        out.append((f"rlgate:{c['metric']}:{c['group']}", text))
    return out


class _GateLog:
    """Collects gate results from test reports (the controller's view under xdist).

    Registered as a plugin object in ``pytest_configure``, like pytest's own LFPlugin.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.gates: list[dict[str, Any]] = []
        self.report_path: str | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        for name, value in getattr(report, "user_properties", ()):
            if name == PROPERTY:
                try:
                    entry = json.loads(value)
                except (TypeError, ValueError):
                    continue
                self.gates.append({"nodeid": report.nodeid, **entry})

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        path = path_setting(self.config, "report")
        if not hasattr(self.config, "workerinput"):
            self._markdown()
        if not path or hasattr(self.config, "workerinput"):
            return
        payload = {"format_version": 1, "passed": all(g["passed"] for g in self.gates), "gates": self.gates}
        atomic_write(path, json.dumps(payload, indent=2, sort_keys=True) + "\n")
        self.report_path = shown_path(self.config, path, "report")

    def _markdown(self) -> None:
        """``--rlgate-markdown`` and, under CI, ``$GITHUB_STEP_SUMMARY``: every gate's summary, failing first.

        Nothing is imported in a session that gated nothing: someone else's test run pays for no report module.
        """
        if not self.gates:
            return
        from pytest_rlgate.report.markdown import markdown_summary, step_summary_path

        path = path_setting(self.config, "markdown")
        step = step_summary_path()
        if not (path or step):
            return
        ordered = sorted(self.gates, key=lambda g: g["passed"])
        text = "\n".join(markdown_summary(g, title=g["nodeid"], reproduce=f"pytest {shlex.quote(g['nodeid'])}")
                         for g in ordered)
        if path:
            atomic_write(path, text)
        if step is not None:
            with step.open("a", encoding="utf-8") as out:
                out.write(text + "\n")

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if hasattr(self.config, "workerinput"):
            return
        try:
            _summary(terminalreporter, self.config, self)
        except Exception as exc:  # never raise out of the terminal summary
            terminalreporter.write_line(f"rlgate: could not print the gate summary: {exc!r}", yellow=True)


def _summary(tr: pytest.TerminalReporter, config: pytest.Config, log: _GateLog) -> None:

    verbosity = config.get_verbosity()
    report_path = log.report_path
    if not log.gates:
        return
    from tabulate import tabulate

    from pytest_rlgate.gate.recipe_text import DOTS_LEGEND, seeds_cell, worth_a_look
    from pytest_rlgate.gate.text import blind_text, is_borderline, units_label

    def _borderline(c: Mapping[str, Any]) -> bool:  # a comparison's record, as a test's gate wrote it
        if "seeds" in c:  # a recipe's
            return worth_a_look(c)
        return is_borderline(c["verdict"], c["flags"])

    failed = sum(not g["passed"] for g in log.gates)
    counts: dict[str, int] = {}
    for g in log.gates:
        for c in g["comparisons"]:
            counts[c["verdict"]] = counts.get(c["verdict"], 0) + 1
    tally = ", ".join(f"{counts[v]} {v}" for v in RECIPE_VERDICTS if counts.get(v))
    recipes = any(g.get("kind") == "recipe" for g in log.gates)  # then a column of per-seed dots
    last = (f"rlgate: {len(log.gates)} gate{'s' if len(log.gates) != 1 else ''}, {failed} failed; {tally}")
    if verbosity >= 0:
        tr.write_sep("=", "rlgate: gates")
        for g in log.gates:  # a holdout that cannot fail on the drop it is for, before anything else
            for blind in g.get("blind") or ():
                tr.write_line(f"{g['nodeid']}: BLIND: {blind_text(blind, g['sides']['before'])}",
                              yellow=True, bold=True)
        rows = []
        for g in log.gates:
            for c in g["comparisons"]:
                if verbosity > 0 or _borderline(c):
                    ci = interval(c["low"], c["high"])
                    verdict = verdict_word(c["verdict"], c.get("failure") is not None)
                    size = units_label(c["n_units"], c["k"], c.get("k_before"), c.get("k_after"))
                    seeds = [seeds_cell(c) if "seeds" in c else ""] if recipes else []
                    rows.append([g["nodeid"], c["metric"], c["group"], size,
                                 f"{c['delta']:+.3f}", ci, *seeds, verdict, ", ".join(c["flags"])])
        if rows:
            headers = ["gate", "metric", "group", "units×k", "delta", "CI", *(["per-seed Δ"] if recipes else []),
                       "verdict", "flags"]
            text = tabulate(rows, headers=headers, tablefmt="plain", disable_numparse=True)
            for line in text.splitlines():
                tr.write_line(line, red="REGRESSED" in line)
            if recipes:
                tr.write_line(DOTS_LEGEND)
        elif verbosity == 0:
            tr.write_line("(no regressed or borderline comparisons; -v lists them all)")
        for g in log.gates:
            if not g["passed"]:
                tr.write_line(f"{g['nodeid']}: rule: {g['rule']}")
    tr.write_line(last, red=bool(failed), green=not failed)
    if report_path and verbosity >= 0:
        tr.write_sep("-", f"generated rlgate report: {report_path}")
