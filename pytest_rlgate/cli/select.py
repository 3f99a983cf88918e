"""``rlgate select RUN_DIR``: choose the checkpoint to ship from a watched run's folder.

RUN_DIR is what ``rlgate watch`` or ``GateCallback`` wrote (``looks.json`` and the rows of
every look). The choice is the best checkpoint whose gate passed, by a gated metric (never
the training reward), with the checkpoints that cannot be told apart from it; the strip
shows every checkpoint's verdicts. Every recorded confirmation is kept (a confirmation gates
one checkpoint, whatever criterion chose it), and the pick's is used when one was made; with
``--confirm`` a watch folder's pick is confirmed now on a fresh sample. Exit 0: a
checkpoint to ship; 1: none passed, or its confirmation failed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .._io.atomic import atomic_write
from ..errors import UsageError
from ..gate.options import FAMILY_LEVEL, LEVEL
from ..options import add_deprecated
from ..report.strip import read_watch, strip_text
from ..watch.folder import confirm_in_folder
from ..watch.select import SELECTION, select_checkpoint

HELP = "choose the checkpoint to ship from a watched run (rlgate watch / GateCallback folder)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", metavar="RUN_DIR", type=Path, help="the folder rlgate watch or GateCallback wrote")
    parser.add_argument("--select", default="pass@1/overall", metavar="METRIC/GROUP",
                        help="rank checkpoints by this gated metric (%(default)s)")
    parser.add_argument("--family-level", type=LEVEL, default=FAMILY_LEVEL, metavar="L",
                        help=f"the tie set's tests are held together at it (default {FAMILY_LEVEL:g}, the gate's)")
    add_deprecated(parser, "--alpha", "--family-level", dest="family_level", type=LEVEL)
    parser.add_argument("--confirm", action="store_true",
                        help="confirm the pick now on a fresh sample (a watch folder: its settings say how)")
    parser.add_argument("--json", action="store_true", help="print selection.json instead of the summary")


def _rows(folder: Path, steps: list[int]) -> dict[int, Path]:
    found = {}
    for step in steps:
        path = folder / f"step-{step:06d}.jsonl"
        if not path.is_file():
            raise UsageError(f"{path}: missing; the selection needs the graded rows of every look")
        found[step] = path
    return found


def run(args: argparse.Namespace) -> int:
    folder: Path = args.run_dir
    if not (folder / "looks.json").is_file():
        raise UsageError(f"{folder}: no looks.json; pass a folder written by rlgate watch or GateCallback")
    looks, recorded, record = read_watch(folder)
    stopped = record.get("stopped_at")
    stopped_step = int(stopped["step"]) if isinstance(stopped, dict) and stopped.get("step") is not None else None
    selection = select_checkpoint(looks, _rows(folder, [look.step for look in looks]), criterion=args.select,
                                  family_level=args.family_level, stopped_at=stopped_step)
    selection = selection.keeping(recorded)
    if args.confirm and selection.best is not None:
        selection = confirm_in_folder(folder, selection)
    atomic_write(folder / SELECTION, json.dumps(selection.to_dict(), indent=2, sort_keys=True) + "\n")
    if args.json:
        print(json.dumps(selection.to_dict(), indent=2, sort_keys=True))
    else:
        print(strip_text(looks, selection))
        print(selection.summary())
    return 0 if selection.shipped is not None else 1


