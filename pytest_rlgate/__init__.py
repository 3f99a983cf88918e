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
    # policy, sampling, cache (issue 5a)
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
    # training (issue 5b)
    "train_grpo": "train.grpo",
    "GRPOKnobs": "train.config",
    "RunKnobs": "train.config",
    "HackMonitor": "train.monitor",
    "RunFolder": "train.run",
    "RunWriter": "train.run",
    "refund_reward": "train.reward",
    # DPO rounds (issue 6)
    "train_dpo": "train.dpo",
    "DPOKnobs": "train.dpo",
    "build_pairs": "train.pairs",
    "Pair": "train.pairs",
    "read_pairs": "train.pairs",
    # hacks (issue 4)
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
    # gate (issue 3)
    "read_rows": "rows",
    "write_rows": "rows",
    "grade_replies": "rows",
    "validate_row": "rows",
    "paired_bootstrap": "stats",
    "PairedBootstrapResult": "stats",
    "ConfidenceInterval": "stats",
    "holm": "stats",
    "minimum_detectable_effect": "stats",
    "compare": "gate",
    "GateResult": "gate",
    "Comparison": "gate",
    "RegressionError": "gate",
    "assert_no_regression": "gate",
    # run reports
    "write_report": "report",
    "write_index": "report",
    "report_text": "report",
    # the demo (issue 7)
    "run_demo": "demo",
    # prompts (issue 2)
    "build_prompts": "prompts",
    "stratified_split": "prompts",
    "plain_split": "prompts",
    "Split": "prompts",
    "balance": "prompts",
    "fingerprint": "prompts",
    "count_by_category": "prompts",
    "read_prompts": "prompts",
    "write_prompts": "prompts",
    # reward tables (issue 2)
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


if TYPE_CHECKING:  # pragma: no cover
    from .errors import DataError, RlgateError, RlgateWarning, SpecError, UsageError
