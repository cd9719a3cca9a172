"""The load stage as recall uses it: only intact, unexpired summaries stand for their
spans.

A summary whose row no longer matches its signature, or one past its expiry, is
retired here (with every summary built on it) before anything is recalled or folded,
so what it hid comes back verbatim in the very call that found it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from agentmemory.models import MemoryEntry, Thread
from agentmemory.pipeline.config import RecallConfig
from agentmemory.pipeline.entries import ContextEntry, Entry
from agentmemory.pipeline.load import Loaded, load_context, load_oldest, load_visible
from agentmemory.trust.signing import sources_by_summary, summary_is_intact
from agentmemory.writes.retire import retire_expired
from agentmemory.writes.tampering import report_tampered

logger = logging.getLogger("agentmemory")


def load_intact(
    thread: Thread, config: RecallConfig, now: datetime, room: int
) -> Loaded[MemoryEntry]:
    """The load stage, with every loaded summary checked against its signature and its
    expiry.

    An edited summary is neither recalled nor folded into a new one (which would sign
    its text anew), and an expired one stands for something that is gone: either is
    retired and the load repeated, so what it hid comes back verbatim in this very call.
    """
    return _checked(thread, now, lambda: load_visible(thread, config, now, room))


def load_context_intact(
    thread: Thread, config: RecallConfig, now: datetime, room: int
) -> Loaded[ContextEntry]:
    """`load_intact` for a recall that folds nothing: only what the budget stage could
    pick is read (`load_context`), its messages as values."""
    return _checked(thread, now, lambda: load_context(thread, config, now, room))


def load_oldest_intact(
    thread: Thread, config: RecallConfig, now: datetime, tokens: int
) -> Loaded[MemoryEntry]:
    """`load.load_oldest` (the slice a backfill folds forward from), its summaries checked
    as `load_intact` checks them: a history longer than the row cap is folded from rows
    the newest load never read."""
    return _checked(thread, now, lambda: load_oldest(thread, config, now, tokens))


def _checked(thread: Thread, now: datetime, load: Callable[[], Loaded[Entry]]) -> Loaded[Entry]:
    loaded = load()
    summaries = [entry for entry in loaded.entries
                 if isinstance(entry, MemoryEntry) and entry.is_summary]
    # The coverage rows every current signature covers: read with the load, or in one read.
    sources = loaded.sources
    if sources is None:
        sources = sources_by_summary(summaries)
    tampered = [s for s in summaries if not summary_is_intact(s, sources.get(s.pk))]
    if tampered:
        report_tampered(tampered)
    if loaded.expired_summaries:
        retire_expired(thread, now)
    if tampered or loaded.expired_summaries:
        loaded = load()
    return loaded


