"""Shared test setup: one CPU thread (2 cores are shared; see DESIGN's G1), pytester on."""

from __future__ import annotations

import os

# Imported once here: Hypothesis's plugin re-imports it after every in-process pytester run
# otherwise, which costs seconds per run.
import hypothesis  # noqa: F401

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
