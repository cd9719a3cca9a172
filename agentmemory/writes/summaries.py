"""Storing a fold's summary: the write-back of a summarizer's answer over a span."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from django.db import IntegrityError, transaction
from django.utils import timezone

from agentmemory.conf import memory_settings
from agentmemory.folding import Draft
from agentmemory.models import (
    EntryKind,
    MemoryEntry,
    Role,
    SummaryCoverage,
    SummarySource,
    Thread,
)
from agentmemory.trust.signing import sign_summary

if TYPE_CHECKING:
    from agentmemory.pipeline.config import RecallConfig
    from agentmemory.pipeline.summarize import FoldPlan


class SpanChanged(Exception):
    """Some entry of the span was covered or erased while the summarizer ran."""


def store_summary(
    plan: FoldPlan,
    config: RecallConfig,
    draft: Draft,
    version: int,
    *,
    replacing: MemoryEntry | None = None,
) -> MemoryEntry | None:
    """Write a fold's summary over ``plan``'s span in one transaction, under the thread's
    lock: the summary, its sources and its signed coverage, the claim of every entry it
    stands for (none while it is held for review), absorbed summaries retired, and
    ``replacing`` (regenerating) retired first. None when the span changed meanwhile or
    another fold of it won; the call's ledger row is settled either way."""
    thread = draft.thread
    ids = [entry.pk for entry in plan.span]
    newest = plan.span[-1]
    # Law 7: a summary goes when the first thing it stands for goes (nested summaries
    # already carry their own earliest expiry), and never lives forever when one does not.
    expires_at: datetime | None = min(
        (entry.expires_at for entry in plan.span if entry.expires_at is not None), default=None
    )
    held = bool(draft.flags) and memory_settings.HOLD_FLAGGED
    try:
        with transaction.atomic():
            # The one lock order (`ThreadQuerySet.lock`): an erasure either finished
            # before (seen here, or by the claim below) or waits for this commit.
            if not Thread.objects.lock_for_summary(thread.pk):
                raise SpanChanged
            if replacing is not None:
                # Retired first: the live summary key is unique.
                if not MemoryEntry.objects.filter(pk=replacing.pk).unretired().uncovered().update(
                    retired_at=timezone.now()
                ):
                    raise SpanChanged
                MemoryEntry.objects.filter(covered_by=replacing).update(covered_by=None)
            summary = MemoryEntry.objects.create(
                thread=thread,
                kind=EntryKind.SUMMARY,
                role=Role.SYSTEM,
                content=draft.content,
                turn=plan.to_turn,
                position=newest.position,
                tier=config.summary_tier,
                token_count=draft.tokens,
                created_at=max(entry.created_at for entry in plan.span),
                expires_at=expires_at,
                summary_key=plan.key,
                held_at=timezone.now() if held else None,
            )
            sources = ids
            if held and MemoryEntry.objects.filter(pk__in=ids).count() != len(ids):
                raise SpanChanged  # a held summary claims nothing: check its span stands
            if not held:
                direct = [pk for pk in ids if pk not in plan.absorbed]
                claimed = MemoryEntry.objects.filter(
                    pk__in=direct, covered_by__isnull=True
                ).update(covered_by=summary)
                if claimed != len(direct):
                    raise SpanChanged
                if plan.absorbed:
                    sources = [*direct, *absorb(plan.absorbed, summary)]
            SummarySource.objects.bulk_create(
                SummarySource(summary=summary, entry_id=pk) for pk in sources
            )
            coverage = SummaryCoverage(
                summary=summary,
                from_turn=plan.from_turn,
                to_turn=plan.to_turn,
                entry_count=len(ids),
                span_tokens=plan.span_tokens,
                original_tokens=sum(
                    e.coverage.original_tokens if e.is_summary else e.token_count
                    for e in plan.span
                ),
                message_count=plan.message_count,
                level=plan.level,
                version=version,
                **draft.provenance(),
            )
            coverage.signature = sign_summary(summary, coverage, sources)
            coverage.save(force_insert=True)
            summary.coverage = coverage
            draft.record_folded(summary)
    except (IntegrityError, SpanChanged) as exc:
        draft.record_lost(exc)
        return None
    except BaseException as exc:  # the fold is retried; this call's row says it was paid
        draft.record_unstored(exc)
        raise
    return summary


def absorb(absorbed: tuple[int, ...], summary: MemoryEntry) -> list[int]:
    """Hand what the absorbed summaries cover to ``summary`` and retire them; returns the
    ids handed over. The summary's text was written from theirs, so it stands for the
    same originals."""
    children = list(
        MemoryEntry.objects.filter(covered_by__in=absorbed).values_list("pk", flat=True)
    )
    MemoryEntry.objects.filter(pk__in=children).update(covered_by=summary)
    retired = MemoryEntry.objects.filter(pk__in=absorbed).unretired().uncovered().update(
        retired_at=timezone.now(), covered_by=None
    )
    if retired != len(absorbed):
        raise SpanChanged
    return children
