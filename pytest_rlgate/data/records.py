"""The records' former address: they live in :mod:`pytest_rlgate.records`, on the ground floor,
so that every floor (the cache, the environment contract) may name them without a climb."""

from __future__ import annotations

from ..records import JSON, Case, Header, JSONObject, Markers, PromptItem, Row, Turn

__all__ = ["JSON", "Case", "Header", "JSONObject", "Markers", "PromptItem", "Row", "Turn"]
