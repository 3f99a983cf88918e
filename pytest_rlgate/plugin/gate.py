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
import dataclasses
import json
import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from pytest_rlgate.errors import RlgateError, RlgateWarning, hide_user_errors
from pytest_rlgate.gate import compare, require_passed
from pytest_rlgate.gate.options import Choice, GateOptions, OrNone, flag_help, old_spelling, shown_default
from pytest_rlgate.options import Number, path_problem
from pytest_rlgate.plugin import GATE_KEYS, MARKER, add_setting, fail, path_setting, setting, shown_path
from pytest_rlgate.plugin.env import marker_env
from pytest_rlgate.plugin.harness import read_options
from pytest_rlgate.plugin.prompts import session_prompts

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
#: ``--rlgate-subtests`` and its ini twin ``rlgate_subtests`` (a bool)
SUBTESTS = "rlgate_subtests"
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
    help_ = ("gate: report each comparison of rlgate.assert_no_regression as its own subtest (pytest >= 9, or "
             "pytest-subtests; a test that asks for the subtests fixture always does)")
    parser.getgroup("rlgate").addoption("--rlgate-subtests", dest=SUBTESTS, action="store_true", default=False,
                                        help=help_)
    parser.addini(SUBTESTS, help=f"{help_} (ini twin of --rlgate-subtests)", type="bool", default=False)


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


NO_SUBTESTS = ("--rlgate-subtests / rlgate_subtests: this pytest has no subtests (pytest >= 9 has them, older "
               "ones with the pytest-subtests plugin); each gate reports as its test alone")


def _subtests_asked(config: pytest.Config) -> bool:
    try:
        return bool(config.getoption(SUBTESTS, default=False) or config.getini(SUBTESTS))
    except (ValueError, pytest.UsageError) as exc:  # pytest's bool parser, which names no setting
        raise pytest.UsageError(f"ini setting {SUBTESTS}: {exc}; use true or false") from None


def pytest_configure(config: pytest.Config) -> None:
    defaults = _defaults(config)  # a bad value stops the session now, not in the first gate
    if _bootstrap_seed(config)[1]:
        config.issue_config_time_warning(RlgateWarning(DEPRECATED_SEED), stacklevel=2)
    policy = defaults.get("release_policy")
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
    if _subtests_asked(config) and not config.pluginmanager.has_plugin("subtests"):
        config.issue_config_time_warning(RlgateWarning(NO_SUBTESTS), stacklevel=2)
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
                 marked: Mapping[str, object] | None = None, request: pytest.FixtureRequest | None = None) -> None:
        self._node = node
        self._request = request
        self._root = config.rootpath
        self._config = config
        self.env = env
        marked = dict(marked or {})
        if "policy" in marked:
            marked["release_policy"] = old_spelling("policy", marked.pop("policy"), "release_policy")
        policy = marked.get("release_policy")
        if isinstance(policy, (str, os.PathLike)) and not Path(policy).is_absolute():
            marked["release_policy"] = str(self._root / policy)
        chosen = {**_defaults(config), **marked}
        options = GateOptions(env=env, **chosen, given=frozenset(chosen))
        adjusted = node.ihook.pytest_rlgate_gate_options(config=config, item=node, options=options)
        if adjusted is not None and not isinstance(adjusted, GateOptions):
            fail(f"rlgate: a pytest_rlgate_gate_options hook returned {type(adjusted).__name__}; return "
                 "options.replace(...) or None")
        #: the session's options (``--rlgate-*`` and ini), with this test's environment, its
        #: ``@pytest.mark.rlgate(show_flips=..., flips_in=..., release_policy=...)``, and what a
        #: ``pytest_rlgate_gate_options`` hook made of them
        self.options: GateOptions = options if adjusted is None else adjusted
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
        if self._node.ihook.pytest_rlgate_rows.get_hookimpls():  # else the sides stream from their files, unread
            before = self._hooked("before", before)
            if isinstance(after, Mapping):
                after = {seed: self._hooked("after", rows, seed) for seed, rows in after.items()}
            elif is_seed_sources(after):
                after = [self._hooked("after", rows) for rows in cast("Sequence[RowInput]", after)]
            else:
                after = self._hooked("after", after)
        result = compare(before, after, base, **options)
        self._record(result)
        return result

    def _hooked(self, side: str, source: RowInput, seed: int | str | None = None) -> RowInput:
        """*source* as :class:`~pytest_rlgate.data.Rows` that the ``pytest_rlgate_rows`` hooks changed in place.

        An rlgate row file is read into memory; a harness's log stays a row source read through
        its reader, and the hooks see each reading's rows, so the reader's notes and pairing
        checks still apply. A path that was not found stays a path: the gate names it.
        """
        from pytest_rlgate.data.readers import NATIVE, RowSource
        from pytest_rlgate.data.rows import Rows, load_rows

        hook = self._node.ihook.pytest_rlgate_rows

        def changed(rows: Rows) -> Rows:
            hook(config=self._config, item=self._node, side=side, rows=rows, seed=seed)
            return rows

        if isinstance(source, RowSource) and source.format != NATIVE:
            read, header = source.rows, source.header
            return dataclasses.replace(source, rows=lambda record: changed(Rows(read(record), header=header)))
        if isinstance(source, RowSource):  # an rlgate row file
            source = source.path
        if isinstance(source, (str, os.PathLike)) and not Path(source).exists():
            return source
        return changed(load_rows(source))

    def _record(self, result: GateResult | RecipeGateResult) -> None:
        """Put the gate's record, verdicts and seeds on the test; tell the ``pytest_rlgate_gate_result`` hooks."""
        record = result.to_dict()
        seeds = gate_seeds(self._node, record)
        self._node.user_properties.append((PROPERTY, json.dumps({**record, "seeds": seeds}, sort_keys=True)))
        self._node.user_properties.extend(verdict_properties(record))
        self._node.user_properties.extend(seed_properties(seeds))
        self._node.ihook.pytest_rlgate_gate_result(config=self._config, item=self._node, result=result)

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
        result = self.compare(before, after, **options)
        self._each_as_subtest(result)
        return require_passed(result)

    def _each_as_subtest(self, result: GateResult | RecipeGateResult) -> None:
        """Report each comparison as a subtest, when the test asks for pytest's ``subtests`` fixture or the
        session sets ``--rlgate-subtests``; else (or on a pytest without subtests) nothing.

        A comparison fails its subtest only when the gate failed and it is a reason why, so the
        test's own outcome is the gate's, as without subtests; a failure of the sides (a category
        missing from one) is a subtest of its own.
        """
        subtests = self._subtests()
        if subtests is None:
            return
        record = result.to_dict()
        failing = not result.passed
        checks = [(f"{c['metric']} in {c['group']}", c["failure"]["text"] if failing and c.get("failure") else None)
                  for c in record["comparisons"]]
        checks += [("sides", text) for text in (record.get("side_failures") or ()) if failing]
        for name, failure in checks:
            try:
                with subtests.test(msg=name):
                    if failure is not None:
                        fail(failure)
            except pytest.fail.Exception:  # -x: pytest stops at the first failure; the gate's own error follows
                return

    def _subtests(self) -> Any:
        request = self._request
        if request is None or not ("subtests" in request.fixturenames or _subtests_asked(self._config)):
            return None
        try:
            return request.getfixturevalue("subtests")
        except pytest.FixtureLookupError:  # pytest < 9 without pytest-subtests: the gate stays one result
            return None


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
            self._record(result.result)
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
    return RlgateGate(request.node, request.config, env, marked, request=request)


def verdict_properties(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """One JUnit property per comparison: ``rlgate:pass@1:no_id`` = ``REGRESSED -0.833 [-1.000, -0.333]``.

    CI dashboards that read ``--junitxml`` see each category's verdict without parsing the
    gate's JSON (which travels beside them as ``rlgate_gate``): upper case when that
    comparison failed the gate, with the rule's flag when the verdict does not say why
    (``FLAT +0.000 [...] critical (severe flips)``).
    """
    from pytest_rlgate.gate.numtext import interval
    from pytest_rlgate.gate.verdicts import FAILURE_FLAGS, verdict_word

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


def gate_seeds(item: pytest.Item, record: Mapping[str, Any]) -> dict[str, Any]:
    """What reproduces a gate besides its rows: its seeds and the fingerprint of the prompts it was sampled on.

    ``bootstrap_seed`` is the gate's own; ``sample_seed`` (``{"before": 17, "after": 17}``, the
    after side a list for a recipe) and ``prompts_fingerprint`` come from the sides' row-file
    headers, which say how rlgate sampled them; ``prompt_seed`` from the test's adapter
    (``rlgate_adapter``), else the session's prompt set when the test asked for it
    (``rlgate_prompts``, ``rlgate_split``). What is not known is left out: rows from elsewhere
    name no seed. The header prints the session's; this keeps them where ``-q`` does not reach,
    the JUnit properties and the ``--rlgate-report`` JSON.
    """
    headers = record.get("sides", {}).get("headers") or {}
    before, after = headers.get("before"), headers.get("after")
    afters = after if isinstance(after, list) else [after]
    out: dict[str, Any] = {"bootstrap_seed": record.get("options", {}).get("bootstrap_seed")}
    prompt_seed = _prompt_seed(item)
    if prompt_seed is not None:
        out["prompt_seed"] = prompt_seed
    sampled = {"before": _header_value(before, "seed"),
               "after": [_header_value(h, "seed") for h in afters] if isinstance(after, list)
               else _header_value(after, "seed")}
    if sampled["before"] is not None or sampled["after"] not in (None, []):
        out["sample_seed"] = sampled
    prints = {"before": _header_value(before, "prompts_fingerprint"),
              "after": _header_value(afters[0] if afters else None, "prompts_fingerprint")}
    named = {p for p in (prints["before"], *(_header_value(h, "prompts_fingerprint") for h in afters)) if p}
    if len(named) == 1:
        out["prompts_fingerprint"] = named.pop()
    elif named:
        out["prompts_fingerprint"] = prints
    return out


def _header_value(header: object, key: str) -> Any:
    """A row-file header's *key* (``seed`` is the sampling's), or None."""
    if not isinstance(header, Mapping):
        return None
    if key == "seed":
        sampling = header.get("sampling")
        return sampling.get("seed") if isinstance(sampling, Mapping) else None
    return header.get(key)


def _prompt_seed(item: pytest.Item) -> int | None:
    funcargs: Mapping[str, Any] = getattr(item, "funcargs", {})
    adapter = funcargs.get("rlgate_adapter")
    if isinstance(adapter, Mapping):  # a recipe: one adapter per training seed, one prompt set
        adapter = next(iter(adapter.values()), None)
    knobs = getattr(adapter, "knobs", None)
    if knobs is not None:
        return cast("int | None", getattr(knobs, "prompt_seed", None))
    if {"rlgate_prompts", "rlgate_split"} & set(funcargs):
        built = session_prompts(item.config)
        return None if built is None else cast("int", built["prompt_seed"])
    return None


#: the keys of a gate's seeds, in the order they are shown
SEED_KEYS = ("bootstrap_seed", "prompt_seed", "sample_seed", "prompts_fingerprint")


def seed_properties(seeds: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The JUnit properties of a gate's seeds: ``rlgate:bootstrap_seed`` = ``0``, ``rlgate:sample_seed`` =
    ``before 17, after 17``, ``rlgate:prompts_fingerprint`` = ``sha256:...``."""
    return [(f"rlgate:{name}", _shown_seed(seeds[name])) for name in SEED_KEYS if name in seeds]


def _shown_seed(value: object, cut: int | None = None) -> str:
    """A seed's value as text; *cut* shortens a fingerprint for the terminal."""
    if isinstance(value, Mapping):
        return ", ".join(f"{side} {_shown_seed(value[side], cut)}" for side in ("before", "after") if side in value)
    if isinstance(value, list):
        return " ".join(_shown_seed(v, cut) for v in value)
    text = "none" if value is None else str(value)
    return text if cut is None or not text.startswith("sha256:") else text[:cut]


class _GateLog:
    """Collects gate results from test reports (the controller's view under xdist).

    Registered as a plugin object in ``pytest_configure``, like pytest's own LFPlugin.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.gates: list[dict[str, Any]] = []
        self.report_path: str | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call" or hasattr(report, "context"):  # a subtest's report repeats its test's properties
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
        from pytest_rlgate._io.atomic import atomic_write

        payload: dict[str, Any] = {"format_version": 1, "passed": all(g["passed"] for g in self.gates),
                                   "gates": self.gates}
        prompts = session_prompts(self.config)
        if prompts is not None:
            payload["prompts"] = prompts
        self.config.hook.pytest_rlgate_update_json(config=self.config, output_json=payload)
        atomic_write(path, json.dumps(payload, indent=2, sort_keys=True) + "\n")
        self.report_path = shown_path(self.config, path, "report")

    def _markdown(self) -> None:
        """``--rlgate-markdown`` and, under CI, ``$GITHUB_STEP_SUMMARY``: every gate's summary, failing first.

        Nothing is imported in a session that gated nothing: someone else's test run pays for no report module.
        """
        if not self.gates:
            return
        from pytest_rlgate._io.atomic import atomic_write
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


def seed_lines(gates: Sequence[Mapping[str, Any]], most: int = 3) -> list[str]:
    """``rlgate: seeds: ...`` once for each set of seeds the session's gates ran with, at every verbosity: the
    header that also names them is hidden by ``-q``."""
    counts: dict[str, int] = {}
    for g in gates:
        seeds = g.get("seeds", {})
        text = "; ".join(f"{name.replace('_', ' ')} {_shown_seed(seeds[name], cut=23)}" for name in SEED_KEYS
                         if name in seeds)
        counts[text] = counts.get(text, 0) + 1
    lines = [f"rlgate: seeds: {text}" + (f" ({n} gates)" if len(counts) > 1 else "")
             for text, n in list(counts.items())[:most] if text]
    if len(counts) > most:
        lines.append(f"rlgate: seeds: {len(counts) - most} more sets (each gate's are in --rlgate-report and the "
                     "JUnit properties)")
    return lines


def _summary(tr: pytest.TerminalReporter, config: pytest.Config, log: _GateLog) -> None:

    verbosity = config.get_verbosity()
    report_path = log.report_path
    if not log.gates:
        return
    from tabulate import tabulate

    from pytest_rlgate.gate.numtext import interval
    from pytest_rlgate.gate.recipe_text import DOTS_LEGEND, seeds_cell, worth_a_look
    from pytest_rlgate.gate.text import blind_text, is_borderline, units_label
    from pytest_rlgate.gate.verdicts import RECIPE_VERDICTS, verdict_word

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
    for line in seed_lines(log.gates):
        tr.write_line(line)
    tr.write_line(last, red=bool(failed), green=not failed)
    if report_path and verbosity >= 0:
        tr.write_sep("-", f"generated rlgate report: {report_path}")
