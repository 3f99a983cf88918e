"""Every Python example in README.md and docs/ runs as a test (Sybil), in a fresh temporary folder.

A block that only shows an API (it needs a GPU, a trained run, or a user's own trainer)
is marked with ``<!-- skip: next -->`` on the line before it, which Sybil honours.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

try:
    from sybil import Sybil
    from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser
except ImportError:  # the test extra is missing: the examples are not collected
    pass
else:
    def _setup(namespace: dict[str, Any]) -> None:
        namespace["__name__"] = "docs_example"

    @pytest.fixture
    def _docs_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("RLGATE_CACHE_DIR", str(tmp_path / "cache"))
        return tmp_path

    pytest_collect_file = Sybil(
        parsers=[PythonCodeBlockParser(), SkipParser()],
        patterns=["README.md", "docs/*.md"],
        setup=_setup,
        fixtures=["_docs_tmp"],
    ).pytest()


#: An example that trains a run takes minutes on a CPU: it runs with the slow end-to-end tests.
_TRAINS = ("train_grpo(", "train_dpo(", "train_seeds(", "run_demo(", "rlgate_after_rows", "rlgate_adapter")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        example = getattr(item, "example", None)
        if example is not None and any(word in str(example.parsed) for word in _TRAINS):
            item.add_marker(pytest.mark.slow)
