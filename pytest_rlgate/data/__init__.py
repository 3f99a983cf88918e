"""The data the gate reads: seeded prompt sets and their splits, data hygiene, graded row
files with their provenance headers, eval-harness logs read as rows (:mod:`.readers`), and
replies graded from anywhere. Nothing here loads a model.

The public names of this package are resolved when first used (:mod:`pytest_rlgate._io.facade`),
so the pytest plugin, which imports some of its modules at start-up, pays for none of the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._io.facade import Facade

#: public name -> the module of this package that owns it
_EXPORTS: dict[str, str] = {
    # graded rows and their headers
    "Rows": "rows",
    "write_rows": "rows",
    "load_rows": "rows",
    "read_header": "rows",
    "validate_row": "rows",
    "grade_replies": "rows",
    "regrade_rows": "rows",
    "row_header": "provenance",
    "grade_file": "replies",
    "grade_episode": "episodes",
    "grade_episodes": "episodes",
    # eval-harness logs as rows
    "read_rows": "readers",
    "ReadOptions": "readers",
    "RowSource": "readers",
    "detect_format": "readers",
    "reader_names": "readers",
    # prompt sets, splits and hygiene
    "build_prompts": "prompts",
    "stratified_split": "prompts",
    "plain_split": "prompts",
    "Split": "prompts",
    "balance": "prompts",
    "fingerprint": "prompts",
    "count_by_category": "prompts",
    "read_prompts": "prompts",
    "write_prompts": "prompts",
    "decontaminate": "hygiene",
    "keep_prompts": "hygiene",
}

_FACADE = Facade(__name__, _EXPORTS)
__all__ = _FACADE.names()


def __getattr__(name: str) -> Any:
    return _FACADE.resolve(name)


if TYPE_CHECKING:  # pragma: no cover - static analysers see what __getattr__ resolves
    from .episodes import grade_episode as grade_episode, grade_episodes as grade_episodes
    from .hygiene import decontaminate as decontaminate, keep_prompts as keep_prompts
    from .prompts import (
        Split as Split,
        balance as balance,
        build_prompts as build_prompts,
        count_by_category as count_by_category,
        fingerprint as fingerprint,
        plain_split as plain_split,
        read_prompts as read_prompts,
        stratified_split as stratified_split,
        write_prompts as write_prompts,
    )
    from .provenance import row_header as row_header
    from .readers import (
        ReadOptions as ReadOptions,
        RowSource as RowSource,
        detect_format as detect_format,
        read_rows as read_rows,
        reader_names as reader_names,
    )
    from .replies import grade_file as grade_file
    from .rows import (
        Rows as Rows,
        grade_replies as grade_replies,
        load_rows as load_rows,
        read_header as read_header,
        regrade_rows as regrade_rows,
        validate_row as validate_row,
        write_rows as write_rows,
    )
