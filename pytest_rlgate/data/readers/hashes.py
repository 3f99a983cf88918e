"""An item's pairing hashes, packed: what each side keeps per item to check the other against.

Kept apart from the rows (:mod:`~pytest_rlgate.data.readers.source`) and the check
(:mod:`~pytest_rlgate.data.readers.pairing`), which both use it.
"""

from __future__ import annotations

__all__ = ["HASH_DIGITS", "pack", "unpack"]

#: hex digits of each hash an item's pairing keeps (48 bits: a changed item goes unnoticed with odds 2**-48)
HASH_DIGITS = 12
_NONE = "-" * HASH_DIGITS


def pack(data: str | None, target: str | None, prompt: str | None) -> str:
    """An item's data, target and prompt hashes (hex, any length; None unknown) as one short string.

    One string per item rather than a tuple of three: the pairing table holds one per
    item of a side, and at 100,000 items that is the difference that shows.
    """
    return "".join(_NONE if h is None else h[:HASH_DIGITS].ljust(HASH_DIGITS, "0") for h in (data, target, prompt))


def unpack(packed: str) -> tuple[str | None, str | None, str | None]:
    """The three hash prefixes :func:`pack` joined (None where unknown)."""
    parts = [packed[i:i + HASH_DIGITS] for i in range(0, 3 * HASH_DIGITS, HASH_DIGITS)]
    return tuple(None if p == _NONE else p for p in parts)  # type: ignore[return-value]
