"""Recall and fold: thin calls into `agentmemory.pipeline.recall`, which owns the whole
recall (load-intact, the inline fold under the lease, the receipt) and its result types.
`arecall` is `recall` for async code.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.utils import timezone

from agentmemory.conf import memory_settings
from agentmemory.models import Thread
from agentmemory.pipeline.budget import context_room
from agentmemory.pipeline.config import RecallConfig
from agentmemory.pipeline.intact import load_intact
from agentmemory.pipeline.recall import (
    FOLD_PENDING,
    RecalledMessage,
    RecallResult,
    fold_loaded,
    fold_while_due,
    recall_context,
)
from agentmemory.pipeline.summarize import FoldOutcome
from agentmemory.services.background import fold_for_room
from agentmemory.summarizers import get_summarizer
from agentmemory.writes.retire import retire_expired

__all__ = [
    "FOLD_PENDING",
    "FoldOutcome",
    "RecallResult",
    "RecalledMessage",
    "arecall",
    "fold",
    "load_intact",
    "recall",
    "retire_expired",
    "fold_while_due",
]


def recall(
    thread: Thread, budget_tokens: int, *, now: datetime | None = None, **overrides: Any
) -> RecallResult:
    """The thread's context within ``budget_tokens`` (`agentmemory.pipeline.recall.recall_context`).

    In background mode the thread's fold room follows its recalls: a budget smaller than
    any before becomes the room its background folds keep it within (unless
    ``Thread.fold_budget`` pins one), and a context that left history out requests a fold
    for it and says ``omitted_reason="fold-pending"`` until the worker has folded.
    """
    return recall_context(thread, budget_tokens, now=now, follow_room=fold_for_room, **overrides)


async def arecall(
    thread: Thread, budget_tokens: int, *, now: datetime | None = None, **overrides: Any
) -> RecallResult:
    """`recall` for async code: runs `recall` itself on the thread Django's sync code
    shares, as `aappend` runs `append`. An inline fold it makes runs there too, so the
    event loop waits for the summarizer without being blocked by it."""
    return await sync_to_async(recall, thread_sensitive=True)(
        thread, budget_tokens, now=now, **overrides
    )


def fold(
    thread: Thread,
    *,
    now: datetime | None = None,
    budget_tokens: int | None = None,
    **overrides: Any,
) -> FoldOutcome:
    """The summarize stage on its own: fold what recall would fold now.

    Budget-driven, it folds toward ``budget_tokens`` (default: the thread's fold
    budget), at most FOLDS_PER_TASK folds per call (`fold_while_due`), and returns the last
    summary written, or the decline.
    """
    config = RecallConfig.build(**overrides)
    now = now or timezone.now()
    if not config.budget_driven:
        loaded = load_intact(thread, config, now, 0)
        return fold_loaded(thread, loaded.entries, config)
    room = context_room(budget_tokens or thread.effective_fold_budget(), config)
    outcomes = fold_while_due(thread, config, room, get_summarizer(), now=now,
                              max_folds=memory_settings.FOLDS_PER_TASK)
    folded = [outcome for outcome in outcomes if outcome.folded]
    if folded:
        return folded[-1]
    return outcomes[-1] if outcomes else FoldOutcome(summary=None)
