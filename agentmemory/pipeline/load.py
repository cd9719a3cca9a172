"""Load: the newest visible entries of a thread, oldest first, in one query."""

from __future__ import annotations

from datetime import datetime

from agentmemory.models import MemoryEntry, Thread
from agentmemory.pipeline.config import RecallConfig


def load_recent(thread: Thread, config: RecallConfig, now: datetime) -> list[MemoryEntry]:
    # select_related joins each summary's coverage, so later stages read no more rows.
    rows = (
        MemoryEntry.objects.filter(thread=thread)
        .visible(now, config.tiers)
        .select_related("coverage")
        .newest_first()[: config.load_count]
    )
    return list(reversed(rows))
