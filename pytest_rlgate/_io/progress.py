"""What reaches the terminal while rlgate works: its own progress bars, and no third-party chatter.

Progress bars. Building a tiny policy, every sampling pass and every training run show a
named tqdm bar ("sampling holdout (base run 1/3)", "GRPO steps", ...) when, and only
when, stderr is a terminal: piped or captured output (CI logs, ``rlgate ... 2> log``,
pytest) stays free of carriage returns. Every ``progress=`` parameter of the API and
every ``--no-progress`` flag of the CLI is a ``bool | None`` resolved here, by
:func:`progress_enabled`: ``None`` (the default) means "on a terminal", True and False
force it. Sampling passes inside training (the HackMonitor's) pass False: a second bar
would tear the trainer's.

Third-party chatter. transformers, TRL, PEFT, accelerate and datasets print deprecation
``FutureWarning``\\ s, info logs and their own bars ("Loading weights", "Tokenizing train
dataset") that are not the user's to act on. :func:`third_party_quiet` silences them for
the duration of one CLI command unless ``--verbose``; importing the library changes
nothing, so a user's own transformers logging is theirs.

tqdm and transformers are imported only when a bar or a trainer callback is made: the
gate and the plugin never pay for them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tqdm import tqdm
    from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

__all__ = ["HEARTBEAT_SECONDS", "bar", "heartbeat", "progress_enabled", "third_party_quiet", "trainer_progress"]

#: Without bars (stderr piped, as in CI) a long command still says it is alive this often, so a
#: CI log never looks hung.
HEARTBEAT_SECONDS = 30.0

#: Libraries whose logs and warnings are chatter on rlgate's terminal (their logger names
#: and the top-level module names warnings are attributed to).
THIRD_PARTY = ("transformers", "trl", "peft", "accelerate", "datasets", "huggingface_hub", "torch", "tokenizers")

#: Read by those libraries when they are first imported: their log level and their own bars.
_QUIET_ENV = {
    "TRANSFORMERS_VERBOSITY": "error",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "DATASETS_VERBOSITY": "error",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
}

#: Training-log keys shown beside a trainer's bar, when the method logs them.
_POSTFIX_KEYS = ("reward", "loss", "kl")


def progress_enabled(progress: bool | None) -> bool:
    """Whether to show a progress bar: *progress* when given, else whether stderr is a terminal."""
    if progress is not None:
        return bool(progress)
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


@contextlib.contextmanager
def heartbeat(name: str, status: Callable[[], str], progress: bool | None, *,
              every: float = HEARTBEAT_SECONDS) -> Iterator[None]:
    """While the block runs, a line on stderr every *every* seconds (``rlgate demo: 2m30s, 1 of 4 runs
    done``) when bars are not shown because stderr is not a terminal; nothing on a terminal (the bars
    say it) or with ``progress=False`` (asked for quiet). *status* says what is going on."""
    if progress is not None or progress_enabled(None):
        yield
        return
    import threading
    import time

    stop = threading.Event()
    started = time.monotonic()

    def beat() -> None:
        while not stop.wait(every):
            minutes, seconds = divmod(int(time.monotonic() - started), 60)
            try:
                print(f"{name}: {minutes}m{seconds:02d}s, {status()}", file=sys.stderr, flush=True)
            except Exception:  # a closed stream, a status that failed: the heartbeat is never the error
                return

    thread = threading.Thread(target=beat, name=f"{name} heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=1.0)


def bar(total: int | None, desc: str, progress: bool | None, *, unit: str = "it", leave: bool = True) -> tqdm:
    """A tqdm bar named *desc* on stderr, or a silent one when :func:`progress_enabled` says no.

    The silent bar is tqdm's own (``disable=True``), so callers update and close it alike.
    *leave* False clears a short, repeated pass's bar when it ends.
    """
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, leave=leave, dynamic_ncols=True,
                disable=not progress_enabled(progress))


def trainer_progress(desc: str, progress: bool | None) -> TrainerCallback:
    """A ``TrainerCallback`` showing one bar of optimizer steps named *desc*, with the last
    logged reward, loss and KL beside it.

    It replaces transformers' own progress and printer callbacks (the trainers run with
    ``disable_tqdm=True``), which print an unnamed bar and every log dict; ``metrics.jsonl``
    keeps the logs. Built on call because transformers is heavy to import.
    """
    from transformers import TrainerCallback

    class _StepBar(TrainerCallback):
        def __init__(self) -> None:
            self.bar: tqdm | None = None

        def on_train_begin(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                           **kw: object) -> None:
            self.bar = bar(state.max_steps, desc, progress, unit="step")

        def on_step_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                        **kw: object) -> None:
            if self.bar is not None:
                self.bar.update(state.global_step - self.bar.n)

        def on_log(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                   logs: Mapping[str, float] | None = None, **kw: object) -> None:
            logs = logs or {}
            shown = {key: f"{logs[key]:.3g}" for key in _POSTFIX_KEYS if isinstance(logs.get(key), (int, float))}
            if self.bar is not None and shown:
                self.bar.set_postfix(shown, refresh=False)

        def on_train_end(self, args: TrainingArguments, state: TrainerState, control: TrainerControl,
                         **kw: object) -> None:
            if self.bar is not None:
                self.bar.close()

    return _StepBar()


@contextlib.contextmanager
def third_party_quiet(verbose: bool = False) -> Iterator[None]:
    """Silence third-party warnings, info logs and progress bars inside the block, unless *verbose*.

    Warnings: every ``FutureWarning`` and ``DeprecationWarning`` (rlgate raises none of its
    own), and ``UserWarning``\\ s attributed to a :data:`THIRD_PARTY` module; rlgate's own
    ``RlgateWarning``\\ s still show. Logs: those libraries' loggers at ERROR. Bars: through
    the environment variables the libraries read when first imported, and through their
    switches when already imported. Everything is restored on exit, except the import-time
    settings of a library first imported inside the block (a CLI command is its own process).
    """
    if verbose:
        yield
        return
    with warnings.catch_warnings(), _environ(_QUIET_ENV), _loggers_at(logging.ERROR), _imported_bars_off():
        for category in (FutureWarning, DeprecationWarning, PendingDeprecationWarning):
            warnings.filterwarnings("ignore", category=category)
        warnings.filterwarnings("ignore", category=UserWarning, module=rf"({'|'.join(THIRD_PARTY)})(\.|$)")
        yield


@contextlib.contextmanager
def _environ(values: Mapping[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def _loggers_at(level: int) -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in THIRD_PARTY]
    saved = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(level)
    try:
        yield
    finally:
        for logger, old in zip(loggers, saved):
            logger.setLevel(old)


@contextlib.contextmanager
def _imported_bars_off() -> Iterator[None]:
    """Switch off the bars of transformers and datasets if they are imported already (the
    environment variables only reach an import that has not happened yet)."""
    switches = []
    module = sys.modules.get("transformers.utils.logging")
    if module is not None:
        switches.append((module.is_progress_bar_enabled(), module.enable_progress_bar, module.disable_progress_bar))
    module = sys.modules.get("datasets.utils.tqdm")
    if module is not None:
        switches.append((not module.are_progress_bars_disabled(), module.enable_progress_bars,
                         module.disable_progress_bars))
    for _, _, off in switches:
        off()
    try:
        yield
    finally:
        for was_on, on, _ in switches:
            if was_on:
                on()
