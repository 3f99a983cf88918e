"""pytest-rlgate: RL fine-tuning that passes or fails like any other test suite.

The names a first test, the ``rlgate`` command's pipeline as functions and a user's own
trainer need live here: about forty (``__all__``). Everything else is public in the facade of
its area: :mod:`pytest_rlgate.stats` (the statistics and planning), :mod:`~pytest_rlgate.gate`
(the gate's results, release policies, sampling until decided), :mod:`~pytest_rlgate.data`
(rows, harness logs, prompt sets), :mod:`~pytest_rlgate.policy` (loading and sampling),
:mod:`~pytest_rlgate.train`, :mod:`~pytest_rlgate.watch` (watched runs),
:mod:`~pytest_rlgate.rewards` (probes, scans, reward tables), :mod:`~pytest_rlgate.environment`,
:mod:`~pytest_rlgate.records`, :mod:`~pytest_rlgate.errors`, :mod:`~pytest_rlgate.report` and
:mod:`~pytest_rlgate.demo`. ``tests/test_api.py`` holds every list.

Names are resolved lazily (PEP 562) so that loading the pytest plugin, which imports this
package, costs no numpy, torch or Hypothesis import. A name that was public here before the
fence still resolves for one release, from its new home, with a deprecation warning naming it.

PYTEST_DONT_REWRITE: pytest marks a plugin's package for assertion rewriting, but under an
editable install (a PEP 660 import finder, the repository not on ``sys.path``) its hook cannot
find this module and it is imported as it is; every pytest session started in the same process
(``pytester``) then warned "Module already imported so cannot be rewritten: pytest_rlgate". This
module asserts nothing a test reads, so it asks pytest, in pytest's own words, not to rewrite it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._io.facade import Facade
from ._version import __version__ as __version__

#: public name -> the module that owns it
_EXPORTS: dict[str, str] = {
    # the first test
    "assert_no_regression": "gate",
    "compare": "gate",
    "RegressionError": "errors",
    # the pipeline the rlgate command runs, as functions: prompts, sample, grade, rows, train
    "build_prompts": "data.prompts",
    "stratified_split": "data.prompts",
    "load_policy": "policy.load",
    "sample": "policy.sampling",
    "sample_rows": "policy.sampling",
    "VllmSampler": "policy.generate",
    "ServedModel": "policy.served",
    "grade_replies": "data.rows",
    "grade_file": "data.replies",
    "read_rows": "data.readers",
    "write_rows": "data.rows",
    "load_rows": "data.rows",
    "train_grpo": "train.grpo",
    "train_dpo": "train.dpo",
    # errors
    "RlgateError": "errors",
    "SpecError": "errors",
    "DataError": "errors",
    "UsageError": "errors",
    "RlgateWarning": "errors",
    "RewardHackError": "errors",
    # the records every part passes (TypedDicts: plain dicts, typed)
    "Row": "records",
    "PromptItem": "records",
    "Case": "records",
    # environments
    "Env": "environment.contract",
    "Environment": "environment.contract",
    "load_env": "environment.contract",
    # options and results
    "GateOptions": "gate.options",
    "GateResult": "gate.result",
    "SampleOptions": "policy.generate",
    "ReadOptions": "options",
    "GRPOKnobs": "train.config",
    "DPOKnobs": "train.dpo_config",
    # your own trainer: the reward, the callbacks
    "env_reward": "train.reward",
    "GateCallback": "watch.callback",
    "HackMonitor": "train.monitor",
    # a reward's hacks
    "probe_reward": "rewards.probe",
    "hack_scan": "rewards.scan",
}

#: a name public here before the fence -> the facade that holds it now (read with a warning for one release)
_MOVED: dict[str, str] = {
    **dict.fromkeys(("RewardMismatch", "RewardValueError"), "errors"),
    **dict.fromkeys(("Markers", "Turn"), "records"),
    **dict.fromkeys(("EnvSpec", "Hack", "Episode", "ToolCall", "ToolCallRecord"), "environment"),
    **dict.fromkeys(("TINY_POLICY", "tiny_policy_dir", "SAMPLE_TEMPERATURE", "SAMPLE_TOP_P", "SAMPLE_SEED",
                     "BASE_RUN_SEEDS", "sample_episodes", "policy_draw"), "policy"),
    **dict.fromkeys(("RunKnobs", "RunFolder", "RunWriter", "build_pairs", "Pair", "read_pairs", "run_rows",
                     "save_baseline", "train_seeds", "cached_dir", "cache_key"), "train"),
    **dict.fromkeys(("hack_scan_diff", "HackScanResult", "HackScanDiff", "ScanFeature", "ProbeResult",
                     "HackFinding", "HackedReply", "RewardRow", "load_reward_table"), "rewards"),
    **dict.fromkeys(("validate_row", "Rows", "read_header", "regrade_rows", "row_header", "RowSource",
                     "detect_format", "reader_names", "plain_split", "Split", "balance", "fingerprint",
                     "count_by_category", "read_prompts", "write_prompts", "decontaminate", "keep_prompts",
                     "grade_episode", "grade_episodes"), "data"),
    **dict.fromkeys(("paired_bootstrap", "PairedBootstrapResult", "ConfidenceInterval", "holm",
                     "minimum_detectable_effect", "family_test", "FamilyMember", "FamilyTest", "compare_recipe",
                     "recipe_interval", "RecipeResult", "RecipeInterval", "SeedComparison", "plan", "Plan",
                     "CategoryPlan"), "stats"),
    **dict.fromkeys(("Comparison", "RecipeGateResult", "RecipeComparison", "ReleasePolicy", "load_release_policy",
                     "until_decided", "AdaptiveDesign", "AdaptiveResult"), "gate"),
    **dict.fromkeys(("SequentialGate", "watch_checkpoints", "select_checkpoint", "Selection"), "watch"),
    **dict.fromkeys(("write_report", "write_index", "report_text"), "report"),
    "run_demo": "demo",
}

_FACADE = Facade(__name__, _EXPORTS, _MOVED)
__all__ = sorted([*_FACADE.names(), "__version__"])


def __getattr__(name: str) -> Any:
    return _FACADE.resolve(name)


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # pragma: no cover - static analysers see what __getattr__ resolves
    from .data.prompts import build_prompts as build_prompts, stratified_split as stratified_split
    from .data.readers import read_rows as read_rows
    from .data.replies import grade_file as grade_file
    from .data.rows import grade_replies as grade_replies, load_rows as load_rows, write_rows as write_rows
    from .environment.contract import Env as Env, Environment as Environment, load_env as load_env
    from .errors import (
        DataError as DataError,
        RegressionError as RegressionError,
        RewardHackError as RewardHackError,
        RlgateError as RlgateError,
        RlgateWarning as RlgateWarning,
        SpecError as SpecError,
        UsageError as UsageError,
    )
    from .gate import assert_no_regression as assert_no_regression, compare as compare
    from .gate.options import GateOptions as GateOptions
    from .gate.result import GateResult as GateResult
    from .options import ReadOptions as ReadOptions
    from .policy.generate import SampleOptions as SampleOptions, VllmSampler as VllmSampler
    from .policy.load import load_policy as load_policy
    from .policy.sampling import sample as sample, sample_rows as sample_rows
    from .policy.served import ServedModel as ServedModel
    from .records import Case as Case, PromptItem as PromptItem, Row as Row
    from .rewards.probe import probe_reward as probe_reward
    from .rewards.scan import hack_scan as hack_scan
    from .train.config import GRPOKnobs as GRPOKnobs
    from .train.dpo import train_dpo as train_dpo
    from .train.dpo_config import DPOKnobs as DPOKnobs
    from .train.grpo import train_grpo as train_grpo
    from .train.monitor import HackMonitor as HackMonitor
    from .train.reward import env_reward as env_reward
    from .watch.callback import GateCallback as GateCallback
