"""pytest hooks and fixtures: trained adapters and their before/after holdout rows.

``@pytest.mark.rlgate(method="grpo", env=..., steps=..., balance=...)`` configures
``rlgate_adapter``; the environment is the marker's ``env`` (a spec or an object), else the
session's (``--rlgate-env``). The session-wide ``rlgate_adapter_factory`` trains each
configuration once (cached across sessions and xdist workers). ``--rlgate-adapter PATH`` with
``--rlgate-base-model ID`` gates an adapter trained elsewhere instead (the CI step after a
GPU job). ``rlgate_before_rows`` / ``rlgate_after_rows`` are the graded holdout rows of the
base and of the adapter, sampled once per configuration. With ``seeds=(17, 18, 19)`` the
marker names a recipe: one adapter per trainer seed, so ``rlgate_adapter`` and
``rlgate_after_rows`` become mappings seed -> adapter / rows (the before rows are the first
seed's base runs) and the ``rlgate`` fixture gates the recipe. Everything heavy is imported
inside functions: this module loads in every pytest run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_rlgate.errors import RlgateError
from pytest_rlgate.plugin import GATE_KEYS, MARKER, add_setting, fail, path_setting, setting
from pytest_rlgate.plugin.env import marker_env
from pytest_rlgate.plugin.harness import candidate_rows

if TYPE_CHECKING:
    from pytest_rlgate.data.readers import RowSource
    from pytest_rlgate.data.rows import Rows
    from pytest_rlgate.environment.contract import Env, EnvSpec
    from pytest_rlgate.policy.served import ServedModel
    from pytest_rlgate.records import PromptItem, Row
    from pytest_rlgate.train.config import RunKnobs
    from pytest_rlgate.train.run import RunFolder

#: Knobs that decide which prompts a handed-in adapter's rows are sampled on (training knobs do not
#: apply); the sampling knobs (``RunKnobs.sampling_knobs()``, SampleOptions' fields) decide how.
PROMPT_KNOBS = ("env", "prompt_seed", "size", "prompts_file", "holdout", "base_runs")


def _sampling_knobs() -> tuple[str, ...]:
    from pytest_rlgate.train.config import RunKnobs

    return (*PROMPT_KNOBS, *RunKnobs.sampling_knobs())


def pytest_addoption(parser: pytest.Parser) -> None:
    add_setting(parser, "adapter", metavar="PATH",
                help="gate this LoRA adapter folder (trained elsewhere) instead of training one")
    add_setting(parser, "base-model", metavar="ID",
                help="base model of the adapters: hub id or folder (default: the embedded tiny policy); with "
                     "--rlgate-base-url, the name the server serves it under")
    add_setting(parser, "base-url", metavar="URL",
                help="sample the handed-in --rlgate-adapter and its base through this OpenAI-compatible server "
                     "(vLLM with --enable-lora): the adapter is loaded into it, sampled by name and unloaded")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(method='grpo', env=None, **knobs): train a LoRA adapter with these knobs on this "
        "environment (default: --rlgate-env) once, cached, for the rlgate_adapter / rlgate_before_rows / "
        "rlgate_after_rows fixtures; seeds=(17, 18, 19) trains one per trainer seed (then mappings seed -> ...); "
        "show_flips=, flips_in= and release_policy= are the rlgate fixture's gate options for this test",
    )
    adapter = path_setting(config, "adapter")
    if adapter is not None:
        from pytest_rlgate.train.adapters import check_adapter

        try:
            check_adapter(adapter, flag="--rlgate-adapter")
        except RlgateError as exc:
            raise pytest.UsageError(str(exc)) from None


@dataclass
class TrainedAdapter:
    """An adapter the fixtures gate: trained here (``run`` set) or handed in (``run`` None)."""

    adapter: Path
    base_model: str
    knobs: RunKnobs
    run: RunFolder | None = None
    from_cache: bool = False
    key: str = ""
    #: the server a handed-in adapter and its base are sampled through (``--rlgate-base-url``), or None
    base_url: str | None = None
    _rows: dict[str, Rows] = field(default_factory=dict, repr=False)

    @property
    def handed_in(self) -> bool:
        return self.run is None


class AdapterFactory:
    """``factory(method="grpo", env=None, **knobs) -> TrainedAdapter``: one training per configuration.

    *env* (a spec or an environment object) defaults to the session's ``--rlgate-env``.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        handed = path_setting(config, "adapter")
        self.handed_in = None if handed is None else str(handed)
        self.base_model = setting(config, "base-model")
        self.base_url = setting(config, "base-url")
        self._made: dict[str, TrainedAdapter] = {}

    def __call__(self, method: str = "grpo", env: EnvSpec = None, **knobs: object) -> TrainedAdapter:
        try:
            return self._make(method, marker_env(self.config, env), knobs)
        except RlgateError as exc:
            fail(f"rlgate: {exc}")

    def _make(self, method: str, env: Env, values: dict[str, object]) -> TrainedAdapter:
        from pytest_rlgate.train.adapters import check_adapter
        from pytest_rlgate.train.cached import cached_run
        from pytest_rlgate.train.config import renamed, resolved
        from pytest_rlgate.train.methods import make_knobs

        values = {**renamed(values, warn=True), "env": env}
        if self.base_model and "base_model" not in values:
            values = {**values, "base_model": self.base_model}
        if self.handed_in:
            kept = {k: v for k, v in values.items() if k in (*_sampling_knobs(), "base_model")}
            knobs = make_knobs(method, **kept)
            memo = f"handed:{self.handed_in}:{env.fingerprint}:{sorted(knobs.to_dict().items())!r}"
            if memo not in self._made:
                path = check_adapter(Path(self.handed_in).expanduser(), flag="--rlgate-adapter")
                base = knobs.base_model if self.base_url else resolved(knobs.base_model, "base_model")
                self._made[memo] = TrainedAdapter(adapter=path, base_model=str(base), knobs=knobs,
                                                   base_url=self.base_url)
            return self._made[memo]

        knobs = make_knobs(method, **values)
        memo = f"{env.fingerprint}:{sorted(knobs.to_dict().items())!r}"
        if memo not in self._made:
            served = cached_run(knobs)
            self._made[memo] = TrainedAdapter(adapter=served.adapter,
                                              base_model=resolved(knobs.base_model, "base_model"), knobs=knobs,
                                              run=served.run, from_cache=served.hit, key=served.key)
        return self._made[memo]

    def per_seed(self, method: str, seeds: Sequence[int], env: EnvSpec = None,
                 **knobs: object) -> dict[int | str, TrainedAdapter]:
        """One adapter per trainer seed (its ``sample_seed``) of one recipe: seed -> adapter.

        A handed-in adapter (``--rlgate-adapter``) is one adapter whatever the seeds: the
        mapping holds it alone, keyed by its path, and the recipe gate calls that unresolved.
        """
        from pytest_rlgate.train.seeds import check_seeds

        where = f"@pytest.mark.{MARKER}(seeds=...)"
        try:
            seeds = check_seeds(seeds, flag=where)
        except RlgateError as exc:
            fail(f"rlgate: {exc}")
        if "sample_seed" in knobs:
            pytest.fail(f"rlgate: {where} sets each run's sample_seed; drop sample_seed={knobs['sample_seed']!r}",
                        pytrace=False)
        if self.handed_in:
            adapter = self(method, env, **knobs)
            return {str(adapter.adapter): adapter}
        return {seed: self(method, env, **knobs, sample_seed=seed) for seed in seeds}

    def rows(self, trained: TrainedAdapter, side: str) -> Rows:
        """The before (every base run) or after rows of *trained*, sampled once."""
        if side not in trained._rows:
            try:
                trained._rows[side] = _rows(trained, side)
            except RlgateError as exc:
                fail(f"rlgate: {exc}")
        return trained._rows[side]


def _rows(trained: TrainedAdapter, side: str) -> Rows:
    from pytest_rlgate.train.baseline import run_rows

    if trained.run is not None:
        return run_rows(trained.run, side)  # with the run's provenance header
    return _sample_handed_in(trained, side)


def _sample_handed_in(trained: TrainedAdapter, side: str) -> Rows:
    from pytest_rlgate.policy.identity import adapter_identity, base_identity
    from pytest_rlgate.policy.served import ServedModel
    from pytest_rlgate.train.adapters import attach_adapter, load_base
    from pytest_rlgate.train.cached import cached_rows, env_identity
    from pytest_rlgate.train.pipeline import base_seeds, holdout_rows, load_prompts, versions

    knobs = trained.knobs
    base = trained.base_model
    holdout = load_prompts(knobs).holdout
    sampling = {k: v for k, v in knobs.to_dict().items() if k in _sampling_knobs() and k != "env"}
    served = None if trained.base_url is None else ServedModel(trained.base_url, base)
    identity = base_identity(base) if served is None else {"served": _served_base(served)}
    parts = {"side": side, "base": identity, "env": env_identity(knobs.environment), "sampling": sampling,
             "versions": versions()}
    if side == "after":
        parts["adapter"] = adapter_identity(trained.adapter)

    def sample() -> list[Row]:
        if served is not None:
            return _sample_served(served, trained, side, holdout)
        model, tok = load_base(base, flag="--rlgate-base-model")
        if side == "before":
            return [row for i, seed in enumerate(base_seeds(knobs))
                    for row in holdout_rows(model, tok, holdout, knobs, seed=seed, policy="base",
                                            eval_run=f"before-{i}")]
        model = attach_adapter(model, trained.adapter, flag="--rlgate-adapter")
        return holdout_rows(model, tok, holdout, knobs, seed=knobs.sample_seed, policy=str(trained.adapter),
                            eval_run="after")

    rows, _hit = cached_rows(parts, sample)
    return rows


def _served_base(served: ServedModel) -> dict[str, object]:
    """What keys a served base's cached rows: the server's account of it, not its address."""
    return {key: value for key, value in served.identity().items() if key != "url"}


def _sample_served(served: ServedModel, trained: TrainedAdapter, side: str, holdout: Sequence[PromptItem]) -> list[Row]:
    """The base's runs, or the handed-in adapter loaded into the server, sampled there."""
    from pytest_rlgate.policy.served import adapter_name
    from pytest_rlgate.train.pipeline import base_seeds, holdout_rows

    knobs = trained.knobs
    if side == "before":
        return [row for i, seed in enumerate(base_seeds(knobs))
                for row in holdout_rows(served, None, holdout, knobs, seed=seed, policy="base", eval_run=f"before-{i}")]
    with served.loaded(adapter_name(trained.adapter), trained.adapter) as adapter:
        return holdout_rows(adapter, None, holdout, knobs, seed=knobs.sample_seed, policy=str(trained.adapter),
                            eval_run="after")


@pytest.fixture(scope="session")
def rlgate_adapter_factory(pytestconfig: pytest.Config) -> AdapterFactory:
    """Train (or serve from the cache) an adapter per configuration: ``factory(method, **knobs)``.

    Under ``torchrun -m pytest`` every process joins the job: training is data-parallel,
    sampling sharded, and only the main process writes the cache.
    """
    from pytest_rlgate._io import ranks

    ranks.init_from_launcher()
    return AdapterFactory(pytestconfig)


def _marker_knobs(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    marker = request.node.get_closest_marker(MARKER)
    if marker is None:
        return "grpo", {}
    if marker.args:
        pytest.fail(f"@pytest.mark.{MARKER} takes keyword arguments only (method='grpo', env=..., steps=...), "
                    f"got positional {marker.args!r}", pytrace=False)
    knobs = {k: v for k, v in marker.kwargs.items() if k not in GATE_KEYS}
    return str(knobs.pop("method", "grpo")), knobs


@pytest.fixture
def rlgate_adapter(
    request: pytest.FixtureRequest, rlgate_adapter_factory: AdapterFactory
) -> TrainedAdapter | dict[int | str, TrainedAdapter]:
    """The adapter for this test's ``@pytest.mark.rlgate(...)`` configuration (or the handed-in one);
    with ``seeds=(...)``, a mapping seed -> adapter, one per trainer seed."""
    method, knobs = _marker_knobs(request)
    seeds = knobs.pop("seeds", None)
    if seeds is not None:
        return rlgate_adapter_factory.per_seed(method, seeds, **knobs)
    return rlgate_adapter_factory(method, **knobs)


@pytest.fixture
def rlgate_before_rows(request: pytest.FixtureRequest,
                       rlgate_baseline_rows: Rows | RowSource | None) -> Rows | RowSource:
    """Graded holdout rows of the base policy, every base run (seeds 17, 18, 19); with
    ``--rlgate-baseline``, the stored rows instead, and no adapter or model is made for them."""
    if rlgate_baseline_rows is not None:
        return rlgate_baseline_rows
    factory: AdapterFactory = request.getfixturevalue("rlgate_adapter_factory")
    adapter = request.getfixturevalue("rlgate_adapter")
    first = next(iter(adapter.values())) if isinstance(adapter, dict) else adapter  # a recipe: the first seed's
    return factory.rows(first, "before")


@pytest.fixture
def rlgate_after_rows(
    request: pytest.FixtureRequest, rlgate_adapter_factory: AdapterFactory
) -> Rows | RowSource | dict[int | str, Rows]:
    """Graded holdout rows of the base with the adapter, sampled at the first base run's seed;
    with ``seeds=(...)``, a mapping seed -> rows, each seed's adapter sampled at its own seed.
    With ``--rlgate-candidate PATH``, that candidate's rows or eval-harness log, and no adapter
    is trained."""
    candidate = candidate_rows(request.config)
    if candidate is not None:
        return candidate
    rlgate_adapter = request.getfixturevalue("rlgate_adapter")
    if isinstance(rlgate_adapter, dict):
        return {seed: rlgate_adapter_factory.rows(adapter, "after") for seed, adapter in rlgate_adapter.items()}
    return rlgate_adapter_factory.rows(rlgate_adapter, "after")
