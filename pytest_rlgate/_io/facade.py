"""A package's public names, resolved when first used (PEP 562), so importing the package costs nothing.

Every public package of pytest-rlgate is a facade over the modules that own its names:
``pytest_rlgate.data.write_rows`` is ``pytest_rlgate.data.rows.write_rows``. A package's
``__init__`` runs whenever any of its modules is imported, the pytest plugin's included, so a
facade that imported its owners eagerly would load numpy, torch or yaml for a plugin that
needs none of them. Instead each facade declares ``name -> owning module`` once and hands it
to :class:`Facade`, which imports an owner on the first use of one of its names and keeps
the value in the package, where the next lookup finds it without asking again.

A name that moved to another facade (the top level's names before the fence) stays readable
for one release: it resolves through its new home, with a
:class:`~pytest_rlgate.errors.RlgateDeprecationWarning` naming that home.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Mapping
from typing import Any

from ..errors import RlgateDeprecationWarning

__all__ = ["Facade"]


class Facade:
    """The lazy public names of the package *package*.

    *exports* maps each name to the module that owns it, relative to the package (``"rows"``,
    ``"readers.source"``, or with Python's leading dots ``".._io.cache"``); *moved* maps an old
    name to the facade that now holds it, relative too (``"stats"``).
    """

    def __init__(self, package: str, exports: Mapping[str, str], moved: Mapping[str, str] | None = None) -> None:
        self.package = package
        self.exports = dict(exports)
        self.moved = dict(moved or {})
        both = set(self.exports) & set(self.moved)
        if both:
            raise ValueError(f"{package}: {sorted(both)} both exported and moved")

    def names(self) -> list[str]:
        """The exported names, sorted: the package's ``__all__``."""
        return sorted(self.exports)

    def resolve(self, name: str) -> Any:
        """The value of *name*, from its owner (kept in the package) or, for a moved name, from
        its new home with a deprecation warning; ``AttributeError`` for any other name, so
        ``from package import submodule`` still imports the submodule."""
        owner = self.exports.get(name)
        if owner is not None:
            value = getattr(importlib.import_module(owner if owner.startswith(".") else f".{owner}", self.package),
                            name)
            setattr(sys.modules[self.package], name, value)
            return value
        if name in self.moved:
            home = f"{self.package}.{self.moved[name]}"
            warnings.warn(f"{self.package}.{name} moved to {home}.{name}; import it from {home} (the old name "
                          "will be removed)", RlgateDeprecationWarning, stacklevel=3)
            return getattr(importlib.import_module(home), name)
        raise AttributeError(f"module {self.package!r} has no attribute {name!r}")
