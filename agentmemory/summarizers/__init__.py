"""Summarizer backends and the one configured for this project."""

from __future__ import annotations

import functools

from django.utils.module_loading import import_string

from agentmemory.conf import memory_settings
from agentmemory.exceptions import AgentMemoryConfigurationError
from agentmemory.extras import missing_extra
from agentmemory.summarizers.base import BaseSummarizer, SummaryResult, build_prompt

__all__ = ["BaseSummarizer", "SummaryResult", "build_prompt", "get_summarizer", "load_summarizer"]


def load_summarizer(config: object) -> BaseSummarizer:
    """Build a summarizer from a ``{"BACKEND", "MODEL", "OPTIONS"}`` dict."""
    if not isinstance(config, dict) or "BACKEND" not in config:
        raise AgentMemoryConfigurationError(
            "AGENTMEMORY['SUMMARIZER'] must be a dict with BACKEND, MODEL and OPTIONS keys."
        )
    try:
        backend_class = import_string(config["BACKEND"])
    except ImportError as exc:
        # Our own backends name the extra they need; a project's module is its own affair.
        backend = f"AGENTMEMORY['SUMMARIZER']['BACKEND'] = {config['BACKEND']!r}"
        missing = missing_extra(backend, exc)
        if missing is not None and str(config["BACKEND"]).startswith("agentmemory."):
            raise missing from exc
        raise AgentMemoryConfigurationError(f"{backend} cannot be imported: {exc}") from exc
    if not (isinstance(backend_class, type) and issubclass(backend_class, BaseSummarizer)):
        raise AgentMemoryConfigurationError(
            f"AGENTMEMORY['SUMMARIZER']['BACKEND'] = {config['BACKEND']!r} is not a "
            "subclass of agentmemory.summarizers.BaseSummarizer."
        )
    summarizer: BaseSummarizer = backend_class(
        model=config.get("MODEL", ""), options=config.get("OPTIONS") or {}
    )
    return summarizer


@functools.cache
def get_summarizer() -> BaseSummarizer:
    """The summarizer ``AGENTMEMORY['SUMMARIZER']`` names, built once per process."""
    return load_summarizer(memory_settings.SUMMARIZER)
