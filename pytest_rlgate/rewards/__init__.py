"""Testing a reward before it trains anything: reward tables as pytest items (:mod:`.tables`,
the files they are read from: :mod:`.suffixes`), the probe that tries known and generated hacks
(:mod:`.probe`, :mod:`.strategies`), and the scan that finds which reply feature a reward pays
for (:mod:`.scan`). The public names are resolved when first used
(:mod:`pytest_rlgate._io.facade`), so the plugin's start-up loads neither yaml nor Hypothesis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._io.facade import Facade

#: public name -> the module of this package that owns it
_EXPORTS: dict[str, str] = {
    "probe_reward": "probe",
    "ProbeResult": "probe",
    "HackFinding": "probe",
    "HackedReply": "strategies",
    "hack_scan": "scan",
    "hack_scan_diff": "scan",
    "HackScanResult": "scan",
    "HackScanDiff": "scan",
    "ScanFeature": "scan",
    "RewardRow": "tables",
    "load_reward_table": "tables",
    "SPEC_SUFFIXES": "suffixes",
}

_FACADE = Facade(__name__, _EXPORTS)
__all__ = _FACADE.names()


def __getattr__(name: str) -> Any:
    return _FACADE.resolve(name)


if TYPE_CHECKING:  # pragma: no cover - static analysers see what __getattr__ resolves
    from .probe import HackFinding as HackFinding, ProbeResult as ProbeResult, probe_reward as probe_reward
    from .scan import (
        HackScanDiff as HackScanDiff,
        HackScanResult as HackScanResult,
        ScanFeature as ScanFeature,
        hack_scan as hack_scan,
        hack_scan_diff as hack_scan_diff,
    )
    from .strategies import HackedReply as HackedReply
    from .suffixes import SPEC_SUFFIXES as SPEC_SUFFIXES
    from .tables import RewardRow as RewardRow, load_reward_table as load_reward_table
