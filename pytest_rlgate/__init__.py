"""pytest-rlgate: RL fine-tuning that passes or fails like any other test suite.

The public API lives here. Names are resolved lazily (PEP 562) so that loading the pytest
plugin, which imports this package, costs no numpy, torch or Hypothesis import.

PYTEST_DONT_REWRITE: pytest marks a plugin's package for assertion rewriting, but under an
editable install (a PEP 660 import finder, the repository not on ``sys.path``) its hook cannot
find this module and it is imported as it is; every pytest session started in the same process
(``pytester``) then warned "Module already imported so cannot be rewritten: pytest_rlgate". This
module asserts nothing a test reads, so it asks pytest, in pytest's own words, not to rewrite it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__ as __version__

#: public name -> the module that owns it
_EXPORTS: dict[str, str] = {
    # errors
    "RlgateError": "errors",
    "SpecError": "errors",
    "DataError": "errors",
    "UsageError": "errors",
    "RlgateWarning": "errors",
    # the records every part passes (TypedDicts: plain dicts, typed)
    "Row": "records",
    "PromptItem": "records",
    "Case": "records",
    "Markers": "records",
    "Turn": "records",
    "RegressionError": "errors",
    "RewardHackError": "errors",
    "RewardMismatch": "errors",
    "RewardValueError": "errors",
    # environments
    "Environment": "environment.contract",
    "Env": "environment.contract",
    "EnvSpec": "environment.contract",
    "Hack": "environment.hack",
    "load_env": "environment.contract",
    # policy, sampling, cache
    "TINY_POLICY": "policy.load",
    "load_policy": "policy.load",
    "tiny_policy_dir": "policy.load",
    "sample": "policy.sampling",
    "sample_rows": "policy.sampling",
    "VllmSampler": "policy.sampling",
    "SAMPLE_TEMPERATURE": "policy.sampling",
    "SAMPLE_TOP_P": "policy.sampling",
    "SAMPLE_SEED": "policy.sampling",
    "BASE_RUN_SEEDS": "policy.sampling",
    "SampleOptions": "policy.sampling",
    "cached_dir": "_io.cache",
    "cache_key": "_io.cache",
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
    "DPOKnobs": "train.dpo_config",
    "build_pairs": "train.pairs",
    "Pair": "train.pairs",
    "read_pairs": "train.pairs",
    # hacks
    "hack_scan": "rewards.scan",
    "hack_scan_diff": "rewards.scan",
    "HackScanResult": "rewards.scan",
    "HackScanDiff": "rewards.scan",
    "ScanFeature": "rewards.scan",
    "probe_reward": "rewards.probe",
    "ProbeResult": "rewards.probe",
    "HackFinding": "rewards.probe",
    "HackedReply": "rewards.strategies",
    # gate
    "write_rows": "data.rows",
    "grade_replies": "data.rows",
    "validate_row": "data.rows",
    # stored baselines and row provenance
    "Rows": "data.rows",
    "load_rows": "data.rows",
    "read_header": "data.rows",
    "regrade_rows": "data.rows",
    "row_header": "data.provenance",
    "run_rows": "train.baseline",
    "save_baseline": "train.baseline",
    # eval-harness logs as rows (the formats: pytest_rlgate.data.readers)
    "read_rows": "data.readers",
    "RowSource": "data.readers",
    "ReadOptions": "data.readers",
    "detect_format": "data.readers",
    "reader_names": "data.readers",
    "paired_bootstrap": "gate.stats",
    "PairedBootstrapResult": "gate.stats",
    "ConfidenceInterval": "gate.stats",
    "holm": "gate.stats",
    "minimum_detectable_effect": "gate.stats",
    "family_test": "gate.family",
    "FamilyMember": "gate.family",
    "FamilyTest": "gate.family",
    "compare": "gate",
    "GateOptions": "gate.options",
    "GateResult": "gate.result",
    "Comparison": "gate.result",
    "assert_no_regression": "gate",
    # recipes across training seeds
    "RecipeGateResult": "gate.recipe",
    "RecipeComparison": "gate.recipe",
    "compare_recipe": "gate.recipe_stats",
    "recipe_interval": "gate.recipe_stats",
    "RecipeResult": "gate.recipe_stats",
    "RecipeInterval": "gate.recipe_stats",
    "SeedComparison": "gate.recipe_stats",
    "train_seeds": "train.seeds",
    # planning a holdout's size
    "plan": "gate.plan",
    "Plan": "gate.plan",
    "CategoryPlan": "gate.plan",
    # release policies
    "ReleasePolicy": "gate.release",
    "load_release_policy": "gate.release",
    # run reports
    "write_report": "report",
    "write_index": "report",
    "report_text": "report",
    # the demo
    "run_demo": "demo.story",
    # prompts
    "build_prompts": "data.prompts",
    "stratified_split": "data.prompts",
    "plain_split": "data.prompts",
    "Split": "data.prompts",
    "balance": "data.prompts",
    "fingerprint": "data.prompts",
    "count_by_category": "data.prompts",
    "read_prompts": "data.prompts",
    "write_prompts": "data.prompts",
    # data hygiene
    "decontaminate": "data.hygiene",
    "keep_prompts": "data.hygiene",
    # reward tables
    "RewardRow": "rewards.tables",
    "load_reward_table": "rewards.tables",
    # your own model and trainer: graded replies from anywhere, the gate inside a trainer
    "grade_file": "data.replies",
    "GateCallback": "watch.callback",
    "SequentialGate": "watch.looks",
    # a watched run: checkpoints we did not train, and the one to ship
    "watch_checkpoints": "watch.folder",
    "select_checkpoint": "watch.select",
    "Selection": "watch.select",
    # multi-turn episodes with tools
    "Episode": "environment.episode",
    "ToolCall": "environment.episode",
    "ToolCallRecord": "environment.episode",
    "sample_episodes": "policy.episode",
    "grade_episode": "data.episodes",
    "grade_episodes": "data.episodes",
    # sampling until decided: more replies only where the gate cannot call a category yet
    "until_decided": "gate.adaptive",
    "AdaptiveDesign": "gate.adaptive",
    "AdaptiveResult": "gate.adaptive",
    "policy_draw": "policy.adaptive",
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
    from ._io.cache import cache_key as cache_key, cached_dir as cached_dir
    from .data.episodes import grade_episode as grade_episode, grade_episodes as grade_episodes
    from .data.hygiene import decontaminate as decontaminate, keep_prompts as keep_prompts
    from .data.prompts import (
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
    from .data.provenance import row_header as row_header
    from .data.readers import (
        ReadOptions as ReadOptions,
        RowSource as RowSource,
        detect_format as detect_format,
        read_rows as read_rows,
        reader_names as reader_names,
    )
    from .data.replies import grade_file as grade_file
    from .data.rows import (
        Rows as Rows,
        grade_replies as grade_replies,
        load_rows as load_rows,
        read_header as read_header,
        regrade_rows as regrade_rows,
        validate_row as validate_row,
        write_rows as write_rows,
    )
    from .demo.story import run_demo as run_demo
    from .environment.contract import Env as Env, Environment as Environment, EnvSpec as EnvSpec, load_env as load_env
    from .environment.episode import Episode as Episode, ToolCall as ToolCall, ToolCallRecord as ToolCallRecord
    from .environment.hack import Hack as Hack
    from .errors import (
        DataError as DataError,
        RegressionError as RegressionError,
        RewardHackError as RewardHackError,
        RewardMismatch as RewardMismatch,
        RewardValueError as RewardValueError,
        RlgateError as RlgateError,
        RlgateWarning as RlgateWarning,
        SpecError as SpecError,
        UsageError as UsageError,
    )
    from .gate import assert_no_regression as assert_no_regression, compare as compare
    from .gate.adaptive import (
        AdaptiveDesign as AdaptiveDesign,
        AdaptiveResult as AdaptiveResult,
        until_decided as until_decided,
    )
    from .gate.family import FamilyMember as FamilyMember, FamilyTest as FamilyTest, family_test as family_test
    from .gate.options import GateOptions as GateOptions
    from .gate.plan import CategoryPlan as CategoryPlan, Plan as Plan, plan as plan
    from .gate.recipe import RecipeComparison as RecipeComparison, RecipeGateResult as RecipeGateResult
    from .gate.recipe_stats import (
        RecipeInterval as RecipeInterval,
        RecipeResult as RecipeResult,
        SeedComparison as SeedComparison,
        compare_recipe as compare_recipe,
        recipe_interval as recipe_interval,
    )
    from .gate.release import ReleasePolicy as ReleasePolicy, load_release_policy as load_release_policy
    from .gate.result import Comparison as Comparison, GateResult as GateResult
    from .gate.stats import (
        ConfidenceInterval as ConfidenceInterval,
        PairedBootstrapResult as PairedBootstrapResult,
        holm as holm,
        minimum_detectable_effect as minimum_detectable_effect,
        paired_bootstrap as paired_bootstrap,
    )
    from .policy.adaptive import policy_draw as policy_draw
    from .policy.episode import sample_episodes as sample_episodes
    from .policy.load import (
        TINY_POLICY as TINY_POLICY,
        load_policy as load_policy,
        tiny_policy_dir as tiny_policy_dir,
    )
    from .policy.sampling import (
        BASE_RUN_SEEDS as BASE_RUN_SEEDS,
        SAMPLE_SEED as SAMPLE_SEED,
        SAMPLE_TEMPERATURE as SAMPLE_TEMPERATURE,
        SAMPLE_TOP_P as SAMPLE_TOP_P,
        SampleOptions as SampleOptions,
        VllmSampler as VllmSampler,
        sample as sample,
        sample_rows as sample_rows,
    )
    from .records import (
        Case as Case,
        Markers as Markers,
        PromptItem as PromptItem,
        Row as Row,
        Turn as Turn,
    )
    from .report import report_text as report_text, write_index as write_index, write_report as write_report
    from .rewards.probe import HackFinding as HackFinding, ProbeResult as ProbeResult, probe_reward as probe_reward
    from .rewards.scan import (
        HackScanDiff as HackScanDiff,
        HackScanResult as HackScanResult,
        ScanFeature as ScanFeature,
        hack_scan as hack_scan,
        hack_scan_diff as hack_scan_diff,
    )
    from .rewards.strategies import HackedReply as HackedReply
    from .rewards.tables import RewardRow as RewardRow, load_reward_table as load_reward_table
    from .train.baseline import run_rows as run_rows, save_baseline as save_baseline
    from .train.config import GRPOKnobs as GRPOKnobs, RunKnobs as RunKnobs
    from .train.dpo import train_dpo as train_dpo
    from .train.dpo_config import DPOKnobs as DPOKnobs
    from .train.grpo import train_grpo as train_grpo
    from .train.monitor import HackMonitor as HackMonitor
    from .train.pairs import Pair as Pair, build_pairs as build_pairs, read_pairs as read_pairs
    from .train.reward import env_reward as env_reward
    from .train.run import RunFolder as RunFolder, RunWriter as RunWriter
    from .train.seeds import train_seeds as train_seeds
    from .watch.callback import GateCallback as GateCallback
    from .watch.folder import watch_checkpoints as watch_checkpoints
    from .watch.looks import SequentialGate as SequentialGate
    from .watch.select import Selection as Selection, select_checkpoint as select_checkpoint
