"""Summarizer backends and the one configured for this project."""

from __future__ import annotations

from typing import Any

from agentmemory.conf import import_from_string, memory_settings
from agentmemory.exceptions import AgentMemoryConfigurationError
from agentmemory.summarizers.base import BaseSummarizer, SummaryResult, build_prompt

__all__ = ["BaseSummarizer", "SummaryResult", "build_prompt", "get_summarizer", "load_summarizer"]

BACKEND_SETTING = "AGENTMEMORY['SUMMARIZER']['BACKEND']"


def load_summarizer(config: object) -> BaseSummarizer:
    """Build a summarizer from a ``{"BACKEND", "MODEL", "OPTIONS"}`` dict."""
    checked = _with_backend(config)
    return _build(import_from_string(checked["BACKEND"], BACKEND_SETTING), checked)


def get_summarizer() -> BaseSummarizer:
    """The summarizer ``AGENTMEMORY['SUMMARIZER']`` names, built once and kept until the
    setting changes (``memory_settings.reload``)."""
    config = _with_backend(memory_settings.SUMMARIZER)
    return memory_settings.plugin("SUMMARIZER", lambda backend: _build(backend, config))


def _with_backend(config: object) -> dict[str, Any]:
    if not isinstance(config, dict) or "BACKEND" not in config:
        raise AgentMemoryConfigurationError(
            "AGENTMEMORY['SUMMARIZER'] must be a dict with BACKEND, MODEL and OPTIONS keys."
        )
    return config


def _build(backend_class: Any, config: dict[str, Any]) -> BaseSummarizer:
    if not (isinstance(backend_class, type) and issubclass(backend_class, BaseSummarizer)):
        raise AgentMemoryConfigurationError(
            f"{BACKEND_SETTING} = {config['BACKEND']!r} is not a subclass of "
            "agentmemory.summarizers.BaseSummarizer."
        )
    summarizer: BaseSummarizer = backend_class(
        model=config.get("MODEL", ""), options=config.get("OPTIONS") or {}
    )
    return summarizer
