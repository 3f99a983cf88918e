"""pytest-rlgate: RL fine-tuning that passes or fails like any other test suite.

The public API lives here. Names are resolved lazily (PEP 562) so that loading the pytest
plugin, which imports this package, costs no numpy, torch or Hypothesis import.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> the module that owns it
_EXPORTS: dict[str, str] = {
    # errors
    "RlgateError": "errors",
    "SpecError": "errors",
    "DataError": "errors",
    "UsageError": "errors",
    "RlgateWarning": "errors",
    # environments
    "Environment": "env",
    "Env": "env",
    "EnvSpec": "env",
    "Hack": "exploits",
    "load_env": "env",
    # policy, sampling, cache
    "TINY_POLICY": "policy",
    "load_policy": "policy",
    "tiny_policy_dir": "policy",
    "sample": "sampling",
    "sample_rows": "sampling",
    "VllmSampler": "sampling",
    "SAMPLE_TEMPERATURE": "sampling",
    "SAMPLE_TOP_P": "sampling",
    "SAMPLE_SEED": "sampling",
    "BASE_RUN_SEEDS": "sampling",
    "cached_dir": "cache",
    "cache_key": "cache",
    # training
    "train_grpo": "train.grpo",
    "GRPOKnobs": "train.config",
    "RunKnobs": "train.config",
    "HackMonitor": "train.monitor",
    "RunFolder": "train.run",
    "RunWriter": "train.run",
    "env_reward": "train.reward",
    # DPO rounds
    "train_dpo": "train.dpo",
    "DPOKnobs": "train.dpo",
    "build_pairs": "train.pairs",
    "Pair": "train.pairs",
    "read_pairs": "train.pairs",
    # hacks
    "hack_scan": "hacks",
    "hack_scan_diff": "hacks",
    "HackScanResult": "hacks",
    "HackScanDiff": "hacks",
    "ScanFeature": "hacks",
    "RewardHackError": "hacks",
    "probe_reward": "probe",
    "ProbeResult": "probe",
    "HackFinding": "probe",
    "HackedReply": "strategies",
    # gate
    "read_rows": "rows",
    "write_rows": "rows",
    "grade_replies": "rows",
    "validate_row": "rows",
    # stored baselines and row provenance
    "Rows": "rows",
    "load_rows": "rows",
    "read_header": "rows",
    "regrade_rows": "rows",
    "row_header": "provenance",
    "run_rows": "baseline",
    "save_baseline": "baseline",
    "paired_bootstrap": "stats",
    "PairedBootstrapResult": "stats",
    "ConfidenceInterval": "stats",
    "holm": "stats",
    "minimum_detectable_effect": "stats",
    "compare": "recipe_gate",
    "GateResult": "gate",
    "Comparison": "gate",
    "RegressionError": "gate",
    "assert_no_regression": "recipe_gate",
    # recipes across training seeds
    "RecipeGateResult": "recipe_gate",
    "RecipeComparison": "recipe_gate",
    "compare_recipe": "recipe",
    "recipe_interval": "recipe",
    "RecipeResult": "recipe",
    "RecipeInterval": "recipe",
    "SeedComparison": "recipe",
    "train_seeds": "train.seeds",
    # run reports
    "write_report": "report",
    "write_index": "report",
    "report_text": "report",
    # the demo
    "run_demo": "demo",
    # prompts
    "build_prompts": "prompts",
    "stratified_split": "prompts",
    "plain_split": "prompts",
    "Split": "prompts",
    "balance": "prompts",
    "fingerprint": "prompts",
    "count_by_category": "prompts",
    "read_prompts": "prompts",
    "write_prompts": "prompts",
    # data hygiene
    "decontaminate": "hygiene",
    "keep_prompts": "hygiene",
    # reward tables
    "RewardRow": "specs",
    "load_reward_table": "specs",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_rlgate' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"pytest_rlgate.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # pragma: no cover - static analysers see what __getattr__ resolves
    from .baseline import run_rows as run_rows, save_baseline as save_baseline
    from .cache import cache_key as cache_key, cached_dir as cached_dir
    from .demo import run_demo as run_demo
    from .env import Env as Env, Environment as Environment, EnvSpec as EnvSpec, load_env as load_env
    from .errors import (
        DataError as DataError,
        RlgateError as RlgateError,
        RlgateWarning as RlgateWarning,
        SpecError as SpecError,
        UsageError as UsageError,
    )
    from .exploits import Hack as Hack
    from .gate import Comparison as Comparison, GateResult as GateResult, RegressionError as RegressionError
    from .hacks import (
        HackScanDiff as HackScanDiff,
        HackScanResult as HackScanResult,
        RewardHackError as RewardHackError,
        ScanFeature as ScanFeature,
        hack_scan as hack_scan,
        hack_scan_diff as hack_scan_diff,
    )
    from .hygiene import decontaminate as decontaminate, keep_prompts as keep_prompts
    from .policy import (
        TINY_POLICY as TINY_POLICY,
        load_policy as load_policy,
        tiny_policy_dir as tiny_policy_dir,
    )
    from .probe import HackFinding as HackFinding, ProbeResult as ProbeResult, probe_reward as probe_reward
    from .prompts import (
        Split as Split,
        balance as balance,
        build_prompts as build_prompts,
        count_by_category as count_by_category,
        fingerprint as fingerprint,
        plain_split as plain_split,
        read_prompts as read_prompts,
        stratified_split as stratified_split,
        write_prompts as write_prompts,
    )
    from .provenance import row_header as row_header
    from .recipe import (
        RecipeInterval as RecipeInterval,
        RecipeResult as RecipeResult,
        SeedComparison as SeedComparison,
        compare_recipe as compare_recipe,
        recipe_interval as recipe_interval,
    )
    from .recipe_gate import (
        RecipeComparison as RecipeComparison,
        RecipeGateResult as RecipeGateResult,
        assert_no_regression as assert_no_regression,
        compare as compare,
    )
    from .report import report_text as report_text, write_index as write_index, write_report as write_report
    from .rows import (
        Rows as Rows,
        grade_replies as grade_replies,
        load_rows as load_rows,
        read_header as read_header,
        read_rows as read_rows,
        regrade_rows as regrade_rows,
        validate_row as validate_row,
        write_rows as write_rows,
    )
    from .sampling import (
        BASE_RUN_SEEDS as BASE_RUN_SEEDS,
        SAMPLE_SEED as SAMPLE_SEED,
        SAMPLE_TEMPERATURE as SAMPLE_TEMPERATURE,
        SAMPLE_TOP_P as SAMPLE_TOP_P,
        VllmSampler as VllmSampler,
        sample as sample,
        sample_rows as sample_rows,
    )
    from .specs import RewardRow as RewardRow, load_reward_table as load_reward_table
    from .stats import (
        ConfidenceInterval as ConfidenceInterval,
        PairedBootstrapResult as PairedBootstrapResult,
        holm as holm,
        minimum_detectable_effect as minimum_detectable_effect,
        paired_bootstrap as paired_bootstrap,
    )
    from .strategies import HackedReply as HackedReply
    from .train.config import GRPOKnobs as GRPOKnobs, RunKnobs as RunKnobs
    from .train.dpo import DPOKnobs as DPOKnobs, train_dpo as train_dpo
    from .train.grpo import train_grpo as train_grpo
    from .train.monitor import HackMonitor as HackMonitor
    from .train.pairs import Pair as Pair, build_pairs as build_pairs, read_pairs as read_pairs
    from .train.reward import env_reward as env_reward
    from .train.run import RunFolder as RunFolder, RunWriter as RunWriter
    from .train.seeds import train_seeds as train_seeds
