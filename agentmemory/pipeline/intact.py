"""The load stage as recall uses it: only intact, unexpired summaries stand for their
spans.

A summary whose row no longer matches its signature, or one past its expiry, is
retired here (with every summary built on it) before anything is recalled or folded,
so what it hid comes back verbatim in the very call that found it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from agentmemory import signals
from agentmemory.folding import DeclineReason
from agentmemory.models import MemoryEntry, SummaryCoverage, SummarySource, Thread
from agentmemory.pipeline.config import RecallConfig
from agentmemory.pipeline.load import Loaded, load_context, load_oldest, load_visible
from agentmemory.pipeline.summarize import latch_summaries
from agentmemory.trust.signing import sources_by_summary, summary_is_intact

logger = logging.getLogger("agentmemory")


def load_intact(
    thread: Thread, config: RecallConfig, now: datetime, room: int, *, context_only: bool = False
) -> Loaded:
    """The load stage, with every loaded summary checked against its signature and its
    expiry. ``context_only``: the recall folds nothing, so only what the budget stage
    could pick is read (`load_context`).

    An edited summary is neither recalled nor folded into a new one (which would sign
    its text anew), and an expired one stands for something that is gone: either is
    retired and the load repeated, so what it hid comes back verbatim in this very call.
    """
    load = load_context if context_only else load_visible
    return _checked(thread, now, lambda: load(thread, config, now, room))


def load_oldest_intact(
    thread: Thread, config: RecallConfig, now: datetime, tokens: int
) -> Loaded:
    """`load.load_oldest` (the slice a backfill folds forward from), its summaries checked
    as `load_intact` checks them: a history longer than the row cap is folded from rows
    the newest load never read."""
    return _checked(thread, now, lambda: load_oldest(thread, config, now, tokens))


def _checked(thread: Thread, now: datetime, load: Callable[[], Loaded]) -> Loaded:
    loaded = load()
    summaries = [entry for entry in loaded.entries if entry.is_summary]
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


def report_tampered(summaries: Iterable[MemoryEntry]) -> None:
    """Summaries whose row no longer matches its signature: mark, retire, announce.

    Each is checked again under its thread's lock, as stored then: one that a concurrent
    erasure removed (its thread, or an original and everything built on it) between the
    read that found it and here was not edited, and is neither reported nor written."""
    found = list(summaries)
    now = timezone.now()
    with transaction.atomic():
        locked = set(Thread.objects.lock_many(summary.thread_id for summary in found))
        stored = list(MemoryEntry.objects.filter(
            pk__in=[summary.pk for summary in found if summary.thread_id in locked],
        ).select_related("coverage", "thread"))
        sources = sources_by_summary(stored)
        summaries = [s for s in stored if not summary_is_intact(s, sources.get(s.pk))]
        if not summaries:
            return
        SummaryCoverage.objects.filter(summary__in=summaries).update(tampered_at=now)
        # A summary folded from an edited one may carry its text: like unfold, retire it
        # too, so the originals come back verbatim once rather than beside it; and latch
        # the spans, so they are not folded again straight away.
        ids = [*(summary.pk for summary in summaries), *derived_summaries(summaries)]
        latch_summaries(ids, DeclineReason.TAMPERED)
        retire(ids, now=now)
    for summary in summaries:
        logger.warning(
            "agentmemory: summary %s of thread %s does not match its signature; it is "
            "retired and its originals are recalled verbatim.",
            summary.pk,
            summary.thread_id,
        )
        signals.summary_tampered.send(
            sender=MemoryEntry, thread=summary.thread, summary=summary, span=None
        )
