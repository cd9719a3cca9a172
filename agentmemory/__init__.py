"""Durable, explainable conversation memory for LLM agents on Django.

The Python API lives in `agentmemory.services`; the names users import most
are re-exported lazily here so that importing the package never touches models
before the app registry is ready.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_SERVICE_NAMES = (
    "append",
    "recall",
    "fold",
    "expand",
    "unfold",
    "compact",
    "folded_span_for",
    "folded_messages",
    "expand_span",
    "erase_entry",
    "erase_thread",
    "erase_user",
    "purge_expired",
)

__all__ = ["__version__", *_SERVICE_NAMES]


def __getattr__(name: str) -> Any:
    if name in _SERVICE_NAMES:
        from agentmemory import services

        return getattr(services, name)
    raise AttributeError(f"module 'agentmemory' has no attribute {name!r}")
