"""A summary's life after it is written: expand, unfold, regenerate, review, retire."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from agentmemory.exceptions import NotASummaryError, ThreadGoneError
from agentmemory.folding import DeclineReason
from agentmemory.models import EntryKind, MemoryEntry, SummaryCoverage, Thread
from agentmemory.pipeline.config import RecallConfig
from agentmemory.pipeline.summarize import (
    FoldOutcome,
    decline_not_worth_a_call,
    fold_span,
    plan_span,
)
from agentmemory.summarizers import get_summarizer
from agentmemory.trust.signing import sign_summary, summary_is_intact
from agentmemory.writes.retire import (
    derived_summaries,
    derived_summary_ids,
    latch_summaries,
    retire,
)
from agentmemory.writes.tampering import report_tampered

__all__ = [
    "derived_summaries",
    "derived_summary_ids",
    "expand",
    "regenerate",
    "resign_summary",
    "retire",
    "review",
    "unfold",
]



def _require_summary(summary: MemoryEntry) -> None:
    if summary.kind != EntryKind.SUMMARY:
        raise NotASummaryError(f"Entry {summary.pk} is a {summary.kind}, not a summary.")


def expand(summary: MemoryEntry, *, recursive: bool = False) -> list[MemoryEntry]:
    """The exact entries a summary stands for, in thread order (retired ones too).

    With ``recursive=True`` nested summaries are replaced by their own originals,
    down to messages: one query per level of nesting.
    """
    _require_summary(summary)
    entries = list(
        MemoryEntry.objects.filter(summarized_in__summary=summary)
        .select_related("coverage")
        .order_by("position", "id")
    )
    while recursive and any(entry.is_summary for entry in entries):
        nested = [entry.pk for entry in entries if entry.is_summary]
        children = MemoryEntry.objects.filter(summarized_in__summary__in=nested).select_related(
            "coverage"
        )
        entries = sorted(
            [entry for entry in entries if not entry.is_summary] + list(children),
            key=lambda entry: (entry.position, entry.pk),
        )
    return entries



def unfold(summary: MemoryEntry) -> int:
    """Unfold a summary (and any summary built on it): its originals become verbatim.

    The summary is retired, not deleted, so a recall receipt that showed it can still
    be replayed and its history read. Returns how many summaries were retired.
    """
    _require_summary(summary)
    with transaction.atomic():
        if not Thread.objects.lock(summary.thread_id):
            raise ThreadGoneError(f"Thread {summary.thread_id} was erased.")
        ids = [summary.pk, *derived_summaries([summary])]
        # The same spans are latched: the next recall is verbatim, not a paid refold.
        latch_summaries(ids, DeclineReason.UNFOLDED)
        return retire(ids)


def regenerate(summary: MemoryEntry, **overrides: Any) -> FoldOutcome:
    """Fold a live summary's span again with a new call.

    The old version stays live until the new one is written, then stays readable
    (retired). A summary folded into another, or one built on an edited summary,
    is not regenerated.
    """
    _require_summary(summary)
    summarizer = get_summarizer()
    if summary.retired_at is not None or summary.covered_by_id is not None:
        return FoldOutcome(summary=None, decline=DeclineReason.NOT_REGENERABLE)
    span = expand(summary)
    tampered = [entry for entry in span if entry.is_summary and not summary_is_intact(entry)]
    if tampered:
        report_tampered(tampered)  # never sent to a model, never signed anew
        return FoldOutcome(summary=None, decline=DeclineReason.TAMPERED)
    config = RecallConfig.build(**overrides)
    plan = plan_span(span, config)
    if plan is None:
        return decline_not_worth_a_call(summary.thread, summarizer)
    return fold_span(summary.thread, plan, config, summarizer, replacing=summary)



def review(summary: MemoryEntry, user: Any, *, approve: bool) -> bool:
    """Staff review of a flagged summary. Approving a held one lets it cover its span
    (True when it now does); rejecting retires it. The review and the hold are signed,
    so the row is re-signed with them: an edited summary is never approved (that would
    sign its edits), it is reported as tampered instead."""
    _require_summary(summary)
    if not summary_is_intact(summary):
        report_tampered([summary])
        return False
    with transaction.atomic():
        if not Thread.objects.lock(summary.thread_id):
            raise ThreadGoneError(f"Thread {summary.thread_id} was erased.")
        covers = _review(summary, user, approve=approve)
        resign_summary(summary.pk)
    return covers


def _review(summary: MemoryEntry, user: Any, *, approve: bool) -> bool:
    SummaryCoverage.objects.filter(summary=summary).update(
        reviewed_at=timezone.now(), reviewed_by=user
    )
    if not approve:
        retire([summary.pk])
        return False
    if summary.held_at is None:
        return summary.covered_by_id is None and summary.retired_at is None
    ids = list(summary.sources.values_list("entry_id", flat=True))
    try:
        with transaction.atomic():
            claimed = MemoryEntry.objects.filter(pk__in=ids).uncovered().unretired().update(
                covered_by=summary
            )
            if claimed != len(ids):
                raise _SpanTaken
    except _SpanTaken:
        # The span was folded or erased while the summary waited: it can cover
        # nothing now, so it leaves recall for good.
        retire([summary.pk])
        return False
    MemoryEntry.objects.filter(pk=summary.pk).update(held_at=None)
    return True


def resign_summary(summary_id: int) -> None:
    """Sign a summary anew, as it now stands (after a write of agentmemory's own)."""
    summary = MemoryEntry.objects.select_related("coverage").get(pk=summary_id)
    SummaryCoverage.objects.filter(pk=summary_id).update(
        signature=sign_summary(summary, summary.coverage)
    )


class _SpanTaken(Exception):
    pass
