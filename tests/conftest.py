"""Shared test setup: one CPU thread (2 cores are shared), extension modules loaded once."""

from __future__ import annotations

import os

# Imported once here: Hypothesis's plugin re-imports it after every in-process pytester run
# otherwise, which costs seconds per run.
import hypothesis  # noqa: F401

# An in-process pytester run drops every module it imported from sys.modules afterwards; a
# C extension such as numpy.fft cannot be loaded twice in one process, so a later import of
# torch (which needs it) would fail. Loading it here keeps it out of the runs' snapshots.
import numpy.fft  # noqa: F401

os.environ.setdefault("OMP_NUM_THREADS", "1")
# the suite's own gates must not land on the CI job's summary page (tests that want it set it)
os.environ.pop("GITHUB_STEP_SUMMARY", None)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


import pytest


@pytest.fixture(scope="session")
def hub_model_dir(tmp_path_factory: pytest.TempPathFactory):
    """A folder holding a hub-shaped Qwen2 chat model (``tests/_hub_model.py``), built once a session."""
    from _hub_model import build_hub_model

    return build_hub_model(tmp_path_factory.mktemp("hub-model") / "qwen2-tiny")
