"""Every Python example in README.md and docs/ runs as a test (Sybil).

The blocks of one page share one namespace and one temporary working folder (with its own
``RLGATE_CACHE_DIR``), so a page reads top to bottom like a session: a later block may use the
rows an earlier one wrote. Setup a reader need not see goes in an invisible block
(``<!-- invisible-code-block: python`` ... ``-->``); every namespace has ``docs_root`` (the
checkout, for the shipped examples) and ``docs_patch`` (a ``pytest.MonkeyPatch`` undone after
the page). A block that cannot run here (a hub
model, a GPU, vLLM) is marked with ``<!-- skip: next -->`` on the line before it and the prose
says why.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_ROOT = Path(__file__).resolve().parent

try:
    from sybil import Sybil
    from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser
except ImportError:  # the test extra is missing: the examples are not collected
    pass
else:
    def _setup(namespace: dict[str, Any]) -> None:
        namespace["__name__"] = "docs_example"
        namespace["docs_root"] = _ROOT

    @pytest.fixture(scope="module")
    def docs_patch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[pytest.MonkeyPatch]:
        """One working folder and one private cache per page (a Sybil document is a module)."""
        folder = tmp_path_factory.mktemp("docs")
        with pytest.MonkeyPatch.context() as patch:
            patch.chdir(folder)
            patch.setenv("RLGATE_CACHE_DIR", str(folder / ".cache"))
            yield patch

    pytest_collect_file = Sybil(
        parsers=[PythonCodeBlockParser(), SkipParser()],
        patterns=["README.md", "docs/*.md"],
        setup=_setup,
        fixtures=["docs_patch"],
    ).pytest()


#: An example that trains a run takes minutes on a CPU: it runs with the slow end-to-end tests.
#: (A block that only defines a test using the training fixtures trains nothing and stays.)
_TRAINS = ("train_grpo(", "train_dpo(", "train_seeds(", "run_demo(", "Trainer(")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        example = getattr(item, "example", None)
        if example is not None and any(word in str(example.parsed) for word in _TRAINS):
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """``-n N`` deals tests out one by one, which would split a docs page whose blocks share one
    namespace across workers; deal whole files instead (``--dist loadfile``), so a page runs on
    one worker, top to bottom."""
    if getattr(config.option, "dist", None) == "load":
        config.option.dist = "loadfile"
