"""The gate: paired, scenario-clustered bootstrap intervals per category and guarded marker,
the verdict each interval earns, and the text that explains it.

:func:`compare` is the one public gate: one after side gates that adapter
(:func:`.adapter.compare_adapter`), one after side per training seed gates the recipe
(:func:`.recipe.compare_seeds`); both take one :class:`~.options.GateOptions`.
:func:`assert_no_regression` raises :class:`~pytest_rlgate.errors.RegressionError`, and
:func:`require_passed` is the one place that raises it. This package is also the facade of the
gate's results (:class:`~.result.GateResult`, the recipe's), release policies and sampling until
decided; the statistics behind them are :mod:`pytest_rlgate.stats`'.

The statistics (numpy) load on the first gate, not with this package: the pytest plugin
imports :mod:`.options` when pytest starts, and every pytest run pays for what loads then. So
the facade's other names (the results, release policies, sampling until decided) are resolved
when first used (:mod:`pytest_rlgate._io.facade`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from .._io.facade import Facade
from ..errors import RegressionError, hide_user_errors as _hide_user_errors
from .options import GateOptions

if TYPE_CHECKING:
    from ..data.rows import RowInput
    from .afters import SeedSources

#: public name -> the module of this package that owns it (resolved when first used)
_EXPORTS: dict[str, str] = {
    "GateResult": "result",
    "Comparison": "result",
    "RecipeGateResult": "recipe",
    "RecipeComparison": "recipe",
    "ReleasePolicy": "release",
    "load_release_policy": "release",
    "until_decided": "adaptive",
    "AdaptiveDesign": "adaptive",
    "AdaptiveResult": "adaptive",
}
_FACADE = Facade(__name__, _EXPORTS)
__all__ = sorted([*_FACADE.names(), "GateOptions", "RegressionError", "assert_no_regression", "compare",
                  "require_passed"])


def __getattr__(name: str) -> Any:
    return _FACADE.resolve(name)


#: a regression or a bad row file in a user's test reads as its message, not these frames
__tracebackhide__ = _hide_user_errors


_R = TypeVar("_R", bound="GateResult | RecipeGateResult")


def compare(before_rows: RowInput, after_rows: RowInput | SeedSources, options: GateOptions | None = None,
            **overrides: object) -> GateResult | RecipeGateResult:
    """Gate AFTER against BEFORE graded rows by category: one adapter, or a recipe over seeds.

    One after side (a row file, or an iterable of row dicts) gates that adapter:
    :func:`~pytest_rlgate.gate.adapter.compare_adapter`, which documents every option. Several
    after sides, one per training seed of the same recipe (a list of row files or row lists,
    or a mapping seed -> rows, each sampled on the before side's holdout units), gate the
    recipe: :func:`~pytest_rlgate.gate.recipe.compare_seeds`. *options* is a
    :class:`GateOptions`; keyword *overrides* (``margin=0.05``) apply on top of it.
    """
    from .afters import is_seed_sources

    opts = GateOptions.build(options, **overrides)
    if is_seed_sources(after_rows):
        from .recipe import compare_seeds

        return compare_seeds(before_rows, after_rows, opts)
    from .adapter import compare_adapter

    return compare_adapter(before_rows, after_rows, opts)


def require_passed(result: _R) -> _R:
    """*result* when its gate passed, else :class:`RegressionError` (an AssertionError) with its message."""
    if not result.passed:
        raise RegressionError(result.message(), result)
    return result


def assert_no_regression(before: RowInput, after: RowInput | SeedSources, options: GateOptions | None = None,
                         **overrides: object) -> GateResult | RecipeGateResult:
    """Run :func:`compare` and raise :class:`~pytest_rlgate.RegressionError` (an AssertionError) on failure.

    *after* may be one row source or several (a list, or a mapping seed -> rows);
    *options* and *overrides* are :func:`compare`'s. Returns the result when the gate passes.
    """
    return require_passed(compare(before, after, options, **overrides))


if TYPE_CHECKING:  # pragma: no cover - static analysers see what __getattr__ resolves
    from .adaptive import (
        AdaptiveDesign as AdaptiveDesign,
        AdaptiveResult as AdaptiveResult,
        until_decided as until_decided,
    )
    from .recipe import RecipeComparison as RecipeComparison, RecipeGateResult as RecipeGateResult
    from .release import ReleasePolicy as ReleasePolicy, load_release_policy as load_release_policy
    from .result import Comparison as Comparison, GateResult as GateResult
