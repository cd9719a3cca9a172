"""Retiring summaries: never recalled again, covering nothing, still readable; and the
latches that keep their spans from being folded again straight away."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from agentmemory.folding.latches import span_key_of
from agentmemory.models import FoldLatch, FoldPurpose, MemoryEntry, SummarySource, Thread


def retire_expired(thread: Thread, now: datetime) -> int:
    """Retire the thread's live summaries past their expiry (law 7): what they stood
    for and still lives is recalled verbatim, and folded again when the room needs it."""
    ids = list(
        MemoryEntry.objects.filter(thread=thread).summaries().expired(now).unretired()
        .values_list("pk", flat=True)
    )
    return retire(ids, now=now) if ids else 0


def retire(summary_ids: Iterable[int], *, now: datetime | None = None) -> int:
    """Retire summaries: never recalled again, covering nothing, still readable."""
    ids = list(summary_ids)
    with transaction.atomic():
        Thread.objects.lock_many(
            MemoryEntry.objects.filter(pk__in=ids).values_list("thread_id", flat=True)
        )
        count = MemoryEntry.objects.filter(pk__in=ids).unretired().update(
            retired_at=now or timezone.now()
        )
        MemoryEntry.objects.filter(covered_by__in=ids).update(covered_by=None)
    return count


def derived_summaries(entries: Iterable[MemoryEntry]) -> list[int]:
    """Ids of every summary built on ``entries``, live or retired, up through nesting."""
    return derived_summary_ids(entry.pk for entry in entries)


def derived_summary_ids(entry_ids: Iterable[int]) -> list[int]:
    found: list[int] = []
    frontier = set(entry_ids)
    while frontier:
        frontier = set(
            SummarySource.objects.filter(entry_id__in=frontier).values_list(
                "summary_id", flat=True
            )
        ) - set(found)
        found.extend(frontier)
    return found


def latch_summaries(summary_ids: Iterable[int], reason: str) -> None:
    """Latch the spans of these summaries, so the same spans are not folded again.

    Unfolding and a detected edit both promise originals recalled verbatim; without
    the latch, the very next recall would fold the same span again and pay for it.
    """
    sources = SummarySource.objects.filter(summary_id__in=list(summary_ids)).order_by(
        "summary_id", "entry__position", "entry_id"
    ).values_list("summary_id", "entry_id", "summary__thread_id", "summary__coverage__model")
    spans: dict[int, tuple[int, str, list[int]]] = {}
    for summary_id, entry_id, thread_id, model in sources:
        spans.setdefault(summary_id, (thread_id, model, []))[2].append(entry_id)
    for thread_id, model, ids in spans.values():
        FoldLatch.objects.get_or_create(
            thread_id=thread_id,
            purpose=FoldPurpose.RECALL_FOLD,
            span_key=span_key_of(ids),
            defaults={"reason": reason, "entry_count": len(ids), "model": model},
        )
