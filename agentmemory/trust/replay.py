"""Recall receipts, read: the context a recall showed, rebuilt from the rows it names.

`replay` formats a receipt's items again exactly as that recall did (the rows a receipt
names are never rewritten); `receipts_at_turn` finds what the model saw at turn N.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from django.db.models import QuerySet

from agentmemory.models import MemoryEntry, RecallReceipt, Thread
from agentmemory.pipeline.config import RecallConfig
from agentmemory.pipeline.format import format_context


@dataclass(frozen=True)
class ReplayedContext:
    entries: list[MemoryEntry]
    text: str


def replay(receipt: RecallReceipt) -> ReplayedContext:
    """The context exactly as that recall formatted it, rebuilt from the rows it names."""
    ids = receipt.entry_ids()
    stored = MemoryEntry.objects.in_bulk(ids)
    entries = [stored[entry_id] for entry_id in ids if entry_id in stored]
    config = receipt.config
    header, footer = config.get("header", ""), config.get("footer", "")
    shaped = dataclasses.replace(_FORMAT_ONLY, header=header, footer=footer)
    return ReplayedContext(entries=entries, text=format_context(entries, shaped))


# format_context reads only header and footer; the rest is a valid placeholder.
_FORMAT_ONLY = RecallConfig(
    mode="inline", load_count=1, tiers=None, trigger_min_entries=1, preserve_recent=1,
    min_fold_entries=1, summary_tier="cold", instruction="", decay=None, reserve_tokens=0,
    minimum_tokens=0, max_entries=None, header="", footer="",
)


def receipts_at_turn(thread: Thread, turn: int) -> QuerySet[RecallReceipt]:
    """What the model saw at turn N: every recall made while turn N was the latest."""
    return RecallReceipt.objects.filter(thread=thread, turn=turn).order_by("created_at", "id")
