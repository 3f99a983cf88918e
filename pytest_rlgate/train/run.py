"""The run folder ``runs/<name>/``: what a training run leaves behind, for any method.

A run is written into a hidden sibling ``runs/.<name>.partial-<owner>-<random>/`` and
renamed to ``runs/<name>/`` only after every file is in place and the ``COMPLETE`` marker
is written last, so an interrupted run never looks finished: ``RunFolder.open`` refuses a
folder without the marker. ``--overwrite`` swaps by renames: the old run moves aside, the
new one moves in, and only then is the old one deleted. A killed run leaves its partial
folder (and a swap killed between its renames, the old run aside); the next ``RunWriter``
in that folder sweeps them (:mod:`pytest_rlgate._io.stale`): partial folders of dead owners are
deleted, an old run whose name is still free is put back. The layout is the same for GRPO and DPO, so ``rlgate gate``,
``rlgate eval`` and the fixtures read both alike.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._io.atomic import atomic_write, disk_errors, disk_problem, public_mode
from .._io.ranks import agree, is_main_process, rank, stopped_cleanly, wait_for_main, world_size
from .._io.stale import OWNER, sweep, token
from ..data.jsonl import GZIP_ERRORS, loads_bounded, open_lines
from ..data.rows import write_rows
from ..environment.contract import Env, EnvSpec, load_env
from ..errors import DataError, UsageError
from ..gate.result import GateResult
from ..records import Row

__all__ = ["COMPLETE", "NONFINITE", "RunFolder", "RunWriter", "before_name", "finite_json", "read_json",
           "read_json_object", "read_metrics", "sweep_runs", "write_json", "write_jsonl"]

#: Written last; a folder without it is an interrupted (or still running) run.
COMPLETE = "COMPLETE"
CONFIG = "config.json"
METRICS = "metrics.jsonl"
MONITOR = "monitor.json"
GATE = "gate.json"
#: ``--watch-every``'s watched run inside the run folder (``rlgate select RUN/rlgate-watch``)
WATCH_FOLDER = "rlgate-watch"
ADAPTER = "adapter"
AFTER = "holdout_after.jsonl"
#: The run's report page, written by :mod:`pytest_rlgate.report` beside the files above.
REPORT_NAME = "report.html"
#: The index page over many run folders.
INDEX_NAME = "index.html"
#: A recipe folder (``rlgate train --seeds``) holds this instead of config.json: the recipe
#: gate over every seed's run, and where those runs are.
RECIPE_FILE = "recipe.json"
#: Files a finished run always has (``pairs.jsonl`` etc. are method extras).
REQUIRED = (CONFIG, METRICS, GATE, AFTER, ADAPTER)
#: A run being written (``partial``) or an old run moved aside by ``--overwrite`` (``old``).
_LEFTOVER = re.compile(rf"\.(?P<name>.+)\.(?P<kind>partial|old)-{OWNER}-[^.]+")


def before_name(index: int, seed: int) -> str:
    """``holdout_before.jsonl`` for the first base run, ``holdout_before_seed<S>.jsonl`` after."""
    return "holdout_before.jsonl" if index == 0 else f"holdout_before_seed{seed}.jsonl"


#: The field that names the values a record could not hold as numbers: ``{"loss": "NaN"}``.
#: A diverged run logs NaN or infinite losses and grad norms; JSON has no word for them (every
#: reader here refuses ``NaN``), so they are written as ``null`` and named here, and the report
#: shows them as gaps in the curves instead of refusing the run whose curves matter most.
NONFINITE = "nonfinite"


def _nonfinite_word(value: float) -> str:
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def finite_json(obj: object) -> tuple[object, dict[str, str]]:
    """*obj* with every NaN and infinite float replaced by None, and where each was
    (``{"loss": "NaN", "history[3].kl": "Infinity"}``): what JSON can hold of a training log."""
    found: dict[str, str] = {}

    def clean(value: object, where: str) -> object:
        if isinstance(value, float) and not math.isfinite(value):
            found[where] = _nonfinite_word(value)
            return None
        if isinstance(value, Mapping):
            return {key: clean(item, f"{where}.{key}" if where else str(key)) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(item, f"{where}[{i}]") for i, item in enumerate(value)]
        return value

    return clean(obj, ""), found


def _noted(obj: object) -> object:
    """:func:`finite_json` of *obj*; an object keeps its list of replaced values under ``nonfinite``."""
    cleaned, found = finite_json(obj)
    if found and isinstance(cleaned, dict):
        cleaned[NONFINITE] = {**(cleaned.get(NONFINITE) or {}), **found}
    return cleaned


def _dumps(obj: object, **kwargs: Any) -> str:
    return json.dumps(_noted(obj), sort_keys=True, default=str, allow_nan=False, **kwargs)


def write_json(path: Path, obj: object) -> None:
    """Write *obj* as indented, key-sorted JSON, atomically; a NaN or infinity becomes ``null``,
    named under ``nonfinite`` (:data:`NONFINITE`), so the file stays JSON every reader reads."""
    atomic_write(path, _dumps(obj, indent=2) + "\n")


def write_jsonl(path: Path, rows: Iterable[Mapping[str, object]]) -> None:
    """Write one JSON object per line, atomically; non-finite numbers as in :func:`write_json`."""
    atomic_write(path, "".join(_dumps(r) + "\n" for r in rows))


class RunWriter:
    """Builds a run in a partial folder; ``publish()`` makes it ``runs/<name>/`` in one rename.

    Use as a context manager: leaving the block with an exception removes the partial
    folder, so nothing half-written is ever found under the run's name.
    """

    def __init__(self, runs_dir: str | os.PathLike[str], name: str, *, overwrite: bool = False) -> None:
        self.final = Path(runs_dir) / name
        sweep_runs(self.final.parent)
        if self.final.exists() and not overwrite:
            raise UsageError(
                f"--run-name {name!r}: {self.final} already exists; pick another --run-name or delete the folder"
            )
        #: only the main process of a launch publishes; another rank's files are its scratch
        self.main = is_main_process()
        scratch = "" if self.main else f".rank{rank()}"
        with disk_errors(self.final, "the run folder"):
            self.final.parent.mkdir(parents=True, exist_ok=True)
            self.path = Path(tempfile.mkdtemp(prefix=f".{name}{scratch}.partial-{token()}-", dir=self.final.parent))
        self.overwrite = overwrite
        self._signals = contextlib.ExitStack()

    def __enter__(self) -> RunWriter:
        self._signals.enter_context(stopped_cleanly())  # a launcher's SIGTERM cleans up like an error
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        try:
            if exc_type is not None:
                self.discard()
        finally:
            self._signals.close()
        # a full disk met anywhere in the run (the trainer's checkpoints, the adapter, a row file) is
        # the machine's state, not a bug: one line, after the partial folder is gone
        problem = disk_problem(exc, "the run folder", self.final) if isinstance(exc, OSError) else None
        if problem is not None:
            raise problem from None

    def discard(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)

    def json(self, name: str, obj: object) -> Path:
        write_json(self.path / name, obj)
        return self.path / name

    def jsonl(self, name: str, rows: Iterable[Mapping[str, object]]) -> Path:
        write_jsonl(self.path / name, rows)
        return self.path / name

    def rows(self, name: str, rows: Sequence[Row]) -> Path:
        """Graded rows through the row schema's own writer (validated)."""
        write_rows(self.path / name, rows)
        return self.path / name

    @property
    def adapter_dir(self) -> Path:
        return self.path / ADAPTER

    def publish(self) -> RunFolder:
        """Check the required files, write ``COMPLETE`` last, rename into place.

        Under a launcher every rank calls it: the run is published by rank 0 alone, and only
        when every rank's part succeeded; another rank's scratch is removed, and it waits
        for rank 0's folder.
        """
        missing = [n for n in REQUIRED if not (self.path / n).exists()] if self.main else []
        if not agree(not missing):
            self.discard()
            if missing:
                raise RuntimeError(f"run {self.final.name} is missing {', '.join(missing)}; not publishing it")
            raise DataError(f"another process of this {world_size()}-process launch failed before its part of run "
                            f"{self.final.name} was done; nothing was published (re-run it)", path=self.final)
        if not self.main:
            self.discard()
            wait_for_main()
            return RunFolder(self.final)
        try:
            with disk_errors(self.final, "the run folder"):
                return self._publish()
        finally:
            wait_for_main()

    def _publish(self) -> RunFolder:
        (self.path / COMPLETE).write_text("complete\n", encoding="utf-8")
        for entry in [self.path, *self.path.rglob("*")]:  # mkdtemp/mkstemp made them private
            os.chmod(entry, public_mode(directory=entry.is_dir()))
        old = None
        if self.overwrite and self.final.exists():
            old = self.final.with_name(f".{self.final.name}.old-{token()}-{uuid.uuid4().hex[:8]}")
            os.replace(self.final, old)  # aside, not deleted: the new run is not in place yet
        try:
            os.replace(self.path, self.final)
        except OSError:  # another run took the name while this one trained
            if old is not None and not self.final.exists():
                os.replace(old, self.final)
            raise UsageError(f"--run-name {self.final.name!r}: {self.final} appeared while this run trained; "
                             f"its files stay in {self.path} - move them or re-run with another --run-name") from None
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return RunFolder.open(self.final)


def sweep_runs(runs_dir: Path) -> list[Path]:
    """Clean what killed runs left in *runs_dir*: delete their partial folders, put back an old
    run that an interrupted ``--overwrite`` had moved aside (its name still free), delete the rest."""

    def dispose(path: Path, match: re.Match[str]) -> None:
        home = path.with_name(match["name"])
        if match["kind"] == "old" and not home.exists():
            os.replace(path, home)
        else:
            shutil.rmtree(path, ignore_errors=True)

    return sweep(runs_dir, _LEFTOVER, dispose=dispose)


@dataclass(frozen=True)
class RunFolder:
    """A finished run folder, opened for reading."""

    path: Path

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> RunFolder:
        """Open a finished run; a missing, unfinished or corrupt folder is a ``DataError``."""
        folder = Path(path)
        if not folder.is_dir():
            raise DataError("no such run folder; pass a runs/<name>/ folder written by `rlgate train`",
                            path=folder)
        if not (folder / COMPLETE).is_file():
            raise DataError("the run did not finish (no COMPLETE marker); re-run `rlgate train` for it",
                            path=folder)
        if _LEFTOVER.fullmatch(folder.name):
            # COMPLETE is written just before the rename: a run killed between the two looks finished
            raise DataError("a run being written or one moved aside, not a run: open runs/<name>/ (the next "
                            "`rlgate train` into this folder sweeps it)", path=folder)
        missing = [n for n in REQUIRED if not (folder / n).exists()]
        if missing:
            raise DataError(f"run folder is missing {', '.join(missing)}; re-run `rlgate train` for it",
                            path=folder)
        run = cls(folder)
        run.config  # noqa: B018 - validates config.json now
        return run

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def config(self) -> dict[str, Any]:
        return _read_json(self.path / CONFIG)

    def environment(self, env: EnvSpec = None) -> Env:
        """The environment the run was trained and graded with: *env*, else the one its
        ``config.json`` names; its fingerprint must match the recorded one, so rows graded
        by another reward are never compared with this run's."""
        recorded = self.config.get("env") or {}
        spec = env if env is not None else self.config.get("knobs", {}).get("env")
        try:
            found = load_env(spec)
        except UsageError as exc:
            if env is not None:  # the caller's choice fails as its own error, not the run's
                raise
            raise UsageError(f"run {self.name} was trained with environment {recorded.get('name', spec)!r}, which "
                             f"does not load here ({exc}); pass it with --env") from None
        if recorded.get("fingerprint") not in (None, found.fingerprint):
            raise DataError(f"trained with environment {recorded.get('name')} {recorded.get('fingerprint')}, but "
                            f"{found.name} here is {found.fingerprint}: its score or markers changed, so new rows "
                            "would not compare with the run's; retrain, or pass the environment it was trained "
                            "with (--env)", path=self.path / CONFIG)
        return found

    @property
    def gate(self) -> dict[str, Any]:
        return _read_json(self.path / GATE)

    def gate_result(self) -> GateResult:
        """The run's gate.json as the result of gating its own files, where they are now: BEFORE is
        ``holdout_before.jsonl``, the other base runs its ``base_runs``, AFTER ``holdout_after.jsonl``.
        The run gated the same rows in memory (before the folder had its name); read this way, every
        hint the result prints names real paths and its ``rlgate gate`` command reproduces its verdicts.

        :raises DataError: gate.json is not a gate result's record.
        """
        result = GateResult.from_dict(self.gate)
        first, *others = self.before_files
        return dataclasses.replace(result, options=result.options.replace(base_runs=tuple(map(str, others))),
                                   sides=dataclasses.replace(result.sides, before=str(first),
                                                             after=(str(self.after_file),)))

    @property
    def monitor(self) -> dict[str, Any] | None:
        return _read_json(self.path / MONITOR) if (self.path / MONITOR).exists() else None

    @property
    def adapter(self) -> Path:
        return self.path / ADAPTER

    @property
    def before_files(self) -> list[Path]:
        """The base-run holdout files, first (seed 17) first."""
        first = self.path / before_name(0, 0)
        rest = sorted(self.path.glob("holdout_before_seed*.jsonl"),
                      key=lambda p: int(p.stem.rsplit("seed", 1)[1]))
        return [first, *rest]

    @property
    def after_file(self) -> Path:
        return self.path / AFTER

    def metrics(self) -> list[dict[str, Any]]:
        return list(read_metrics(self.path / METRICS, remedy=_RERUN))


_RERUN = "re-run `rlgate train` for this run"


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _read_json(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise DataError(f"missing; {_RERUN}", path=path)
    return read_json_object(path, remedy=_RERUN)


def read_json(path: Path, *, remedy: str = "re-run the step that wrote it") -> Any:
    """One of a run's JSON files (config, gate, monitor, recipe), parsed; a ``DataError``
    naming the file, the line and *remedy* when it is not JSON."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read: {exc.strerror}", path=path) from None
    try:
        return loads_bounded(data, str(path), what="run file")
    except DataError as exc:
        raise DataError(f"{exc.reason}; {remedy}", path=path, line=exc.line) from None


def read_json_object(path: Path, *, remedy: str = "re-run the step that wrote it") -> dict[str, Any]:
    """:func:`read_json`, which must find a JSON object."""
    value = read_json(path, remedy=remedy)
    if not isinstance(value, dict):
        raise DataError(f"expected a JSON object, found {type(value).__name__}; {remedy}", path=path)
    return value


_OLD_CONSTANTS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400: no writer of ours wrote that; the strict verdict stands
        raise ValueError(text)
    return value


#: reads the bare ``NaN`` / ``Infinity`` that older runs wrote (json.dumps' defaults), nothing more
_LENIENT = json.JSONDecoder(parse_constant=_OLD_CONSTANTS.__getitem__, parse_float=_finite_float)
_BOM = b"\xef\xbb\xbf"


def _old_nonfinite_line(raw: bytes, label: str, number: int) -> object | None:
    """A line an older run wrote with bare ``NaN`` / ``Infinity``: its values as :func:`write_jsonl`
    writes them now (``null``, named under ``nonfinite``); None when that is not what is wrong."""
    try:
        value = _LENIENT.decode(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    cleaned = _noted(value)
    if cleaned == value or not isinstance(cleaned, dict):
        return None
    try:  # every other bound (huge integers, depth) still holds
        return loads_bounded(json.dumps(cleaned, allow_nan=False), label, number, what="metrics log")
    except (DataError, ValueError, RecursionError):
        return None


def _metric_lines(path: Path, fix: str) -> Iterator[tuple[int, object]]:
    """``(line, value)`` of metrics.jsonl: strict JSON, plus the bare NaN of older runs."""
    label = os.fspath(path)
    handle = open_lines(path, what="metrics log", fix=fix)
    try:
        for number, raw in enumerate(handle, 1):
            line = raw[len(_BOM):] if number == 1 and raw.startswith(_BOM) else raw
            if not line.strip():
                continue
            try:
                yield number, loads_bounded(line, label, number, what="metrics log")
            except DataError:
                old = _old_nonfinite_line(line, label, number)
                if old is None:
                    raise
                yield number, old
    except GZIP_ERRORS as exc:
        raise DataError(f"damaged or truncated gzip file ({exc}); write it again", path=label) from None
    finally:
        handle.close()


def read_metrics(path: Path, *, remedy: str = "re-run the training") -> Iterator[dict[str, Any]]:
    """metrics.jsonl: one object per logged step, each with a finite numeric ``step``; a bad
    line is a ``DataError`` naming the file and line (a truncated last line, as such).

    A value a diverged run logged as NaN or infinity is ``null`` with its name under
    ``nonfinite`` (:data:`NONFINITE`); a file an older run wrote with bare ``NaN`` reads the same.
    """
    try:
        for number, record in _metric_lines(path, remedy):
            if not isinstance(record, dict):
                raise DataError(f"expected one JSON object per line, found {type(record).__name__}",
                                path=path, line=number)
            if not _is_number(record.get("step")) or not math.isfinite(record["step"]):
                raise DataError(f"field 'step' must be a number, found {record.get('step')!r}; every line "
                                "carries the optimizer step it was logged at", path=path, line=number)
            yield record
    except DataError as exc:
        raise DataError(f"{exc.reason}; {remedy}", path=exc.path, line=exc.line) from None
