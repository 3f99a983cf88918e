"""A prompt set's folder (``prompts.jsonl``, ``train.jsonl``, ``holdout.jsonl``) written as one unit.

The three files mean something only together: the holdout must be the holdout *of* that
prompts file. Written one by one, an interrupted ``rlgate prompts`` leaves a new
``prompts.jsonl`` beside an old ``holdout.jsonl`` and nothing can tell. So the whole set is
written into a hidden sibling folder and swapped in with two renames: at every instant the
folder holds one complete set, or (between the renames) does not exist, which every reader
reports as a missing file. Hidden leftovers of a killed writer are removed by the next one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from .._io.atomic import public_mode
from ..errors import UsageError
from .prompts import write_prompts

__all__ = ["SET_FILES", "write_prompt_set"]

#: The files a set folder may hold; anything else in it is the user's and stops the swap.
SET_FILES: tuple[str, ...] = ("prompts.jsonl", "train.jsonl", "holdout.jsonl")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _sweep(folder: Path) -> None:
    """Remove hidden partial/old siblings of *folder* whose writer process is gone."""
    head = f".{folder.name}."
    for stale in folder.parent.iterdir():
        if not stale.name.startswith(head):
            continue
        kind, _, rest = stale.name[len(head):].partition("-")
        pid = rest.partition("-")[0]
        if kind in ("partial", "old") and pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)


def _check_target(folder: Path, names: Sequence[str], flag: str) -> None:
    here = Path.cwd()
    if folder == here or folder in here.parents:
        raise UsageError(f"{flag} {str(folder)!r}: is the current folder or holds it, and the set replaces its "
                         "folder whole; pass a subfolder, e.g. prompts/")
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{flag} {str(folder)!r}: is a file; pass a folder for the prompt set")
    if folder.is_dir():
        foreign = sorted(p.name for p in folder.iterdir() if p.name not in names)
        if foreign:
            shown = ", ".join(foreign[:5]) + (f" (+{len(foreign) - 5} more)" if len(foreign) > 5 else "")
            raise UsageError(f"{flag} {str(folder)!r}: holds files that are not a prompt set's ({shown}); the set "
                             "replaces the folder whole, so pass a new or empty folder")


def write_prompt_set(
    folder: str | os.PathLike[str],
    files: Mapping[str, Sequence[Mapping[str, object]]],
    *,
    flag: str = "--out-dir",
) -> dict[str, str]:
    """Write each ``name -> items`` of *files* into *folder* as one unit; return the fingerprints.

    The set is written into ``.<folder>.partial-<pid>-*`` beside *folder*, then the old
    folder (if any) is renamed away and the new one renamed into place. A *folder* holding
    anything but :data:`SET_FILES` is refused (a :class:`UsageError` naming *flag*): the swap
    would delete it.
    """
    target = Path(os.path.normpath(Path(folder).absolute()))
    unknown = sorted(set(files) - set(SET_FILES))
    if unknown:
        raise UsageError(f"prompt set file(s) {', '.join(unknown)}: a set holds {', '.join(SET_FILES)}")
    _check_target(target, SET_FILES, flag)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{flag} {str(target)!r}: cannot create its parent folder ({exc.strerror})") from None
    _sweep(target)
    prefix = f".{target.name}.%s-{os.getpid()}-"
    partial = Path(tempfile.mkdtemp(prefix=prefix % "partial", dir=target.parent))
    try:
        digests = {name: write_prompts(partial / name, items) for name, items in files.items()}
        os.chmod(partial, public_mode(directory=True))
        _swap(partial, target, tempfile.mkdtemp(prefix=prefix % "old", dir=target.parent))
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return digests


def _swap(new: Path, target: Path, trash: str) -> None:
    """Rename *new* to *target*, moving an existing *target* into the empty folder *trash* first."""
    old = Path(trash) / "set"
    if target.exists():
        os.replace(target, old)
    try:
        os.replace(new, target)
    except BaseException:
        if old.exists():
            os.replace(old, target)  # the old set goes back; the error stands
        raise
    finally:
        if not old.exists() or target.exists():
            shutil.rmtree(trash, ignore_errors=True)
