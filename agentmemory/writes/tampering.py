"""Tamper reports: a summary or a window span whose row no longer matches its signature
is marked, taken out of use and announced (a warning and `signals.summary_tampered`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.db import transaction
from django.utils import timezone

from agentmemory import signals
from agentmemory.folding import DeclineReason
from agentmemory.models import FoldedSpan, MemoryEntry, SummaryCoverage, Thread
from agentmemory.trust.signing import sources_by_summary, summary_is_intact
from agentmemory.writes.retire import derived_summaries, latch_summaries, retire

logger = logging.getLogger("agentmemory")


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


def report_tampered_span(span: FoldedSpan) -> None:
    FoldedSpan.objects.filter(pk=span.pk).update(tampered_at=timezone.now())
    logger.warning(
        "agentmemory: folded span %s of thread %s does not match its signature; lookups "
        "no longer return it.",
        span.pk,
        span.thread_id,
    )
    signals.summary_tampered.send(sender=FoldedSpan, thread=span.thread, summary=None, span=span)
