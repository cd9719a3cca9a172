"""Integrity: every summary and window span checked against its signature."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from agentmemory.models import FoldedSpan, MemoryEntry, SpanSource, SummaryCoverage
from agentmemory.paging import pages
from agentmemory.querysets import FoldedSpanQuerySet, MemoryEntryQuerySet
from agentmemory.trust.signing import (
    sign_span,
    sign_summary,
    sources_by_summary,
    span_is_intact,
    summary_is_intact,
)
from agentmemory.writes.tampering import report_tampered, report_tampered_span

__all__ = ["report_tampered", "report_tampered_span", "verify", "verify_count"]

#: Rows read (and their sources) per query.
PAGE = 500


def _scope(now: datetime) -> tuple[MemoryEntryQuerySet, FoldedSpanQuerySet]:
    # Expired summaries are the purge's: what they stood for may be gone already.
    return (
        MemoryEntry.objects.summaries().unretired().unexpired(now).select_related(
            "coverage", "thread"
        ),
        FoldedSpan.objects.untampered().select_related("thread"),
    )


def verify_count(*, now: datetime | None = None) -> int:
    """How many rows `verify` checks: live unexpired summaries and untampered spans."""
    summaries, spans = _scope(now or timezone.now())
    return summaries.count() + spans.count()


def verify(
    *,
    resign: bool = False,
    dry_run: bool = False,
    checked: Callable[[str, bool], None] | None = None,
) -> dict[str, list[int]]:
    """Check every live summary and every span against its signature, a page at a time
    (each page's sources in one query).

    Tampered ones are reported like a recall would (``summaries``, ``spans``). With
    ``resign`` nothing is checked or reported: every row is signed anew with the current
    key (after a key rotation you have checked; ``resigned_*``: the rows whose signature
    changed). With ``dry_run`` nothing is written: the tampered rows are listed and not
    reported, and with ``resign`` the rows that would be signed anew are listed.
    ``checked(kind, intact)`` is called after each row (``"summary"`` or ``"span"``;
    with ``resign``, whether its signature was already the current key's). Expired
    summaries are left to the purge: what they stood for may already be gone, and recall
    no longer shows them.
    """
    summaries, spans = _scope(timezone.now())
    found: dict[str, list[int]] = {
        "summaries": [], "spans": [], "resigned_summaries": [], "resigned_spans": []
    }
    bad_summaries: list[MemoryEntry] = []
    for page in pages(summaries, PAGE):
        sources = sources_by_summary(page)
        for summary in page:
            if resign:
                intact = _resign(
                    summary.pk, summary.coverage.signature,
                    sign_summary(summary, summary.coverage, sources[summary.pk]),
                    SummaryCoverage.objects.filter(pk=summary.pk), dry_run,
                    found["resigned_summaries"],
                )
            elif not (intact := summary_is_intact(summary, sources[summary.pk])):
                bad_summaries.append(summary)
            if checked is not None:
                checked("summary", intact)
    bad_spans: list[FoldedSpan] = []
    for span_page in pages(spans, PAGE):
        derivations = _derivations(span_page)
        for span in span_page:
            if resign:
                intact = _resign(
                    span.pk, span.signature, sign_span(span, derivations[span.pk]),
                    FoldedSpan.objects.filter(pk=span.pk), dry_run, found["resigned_spans"],
                )
            elif not (intact := span_is_intact(span, derivations[span.pk])):
                bad_spans.append(span)
            if checked is not None:
                checked("span", intact)
    found["summaries"] = [summary.pk for summary in bad_summaries]
    found["spans"] = [span.pk for span in bad_spans]
    if not dry_run:
        if bad_summaries:
            report_tampered(bad_summaries)
        for span in bad_spans:
            report_tampered_span(span)
    return found


def _resign(
    pk: int, stored: str, fresh: str, rows: QuerySet[Any], dry_run: bool, resigned: list[int]
) -> bool:
    """Write ``fresh`` over a row's ``stored`` signature unless they are the same already
    (a dry run only lists it); True when the row was signed with the current key."""
    if fresh == stored:
        return True
    if not dry_run:
        rows.update(signature=fresh)
    resigned.append(pk)
    return False


def _derivations(spans: list[FoldedSpan]) -> dict[int, list[str]]:
    """`signing.span_derivation` of a page of spans, in one query."""
    by_position: dict[int, dict[int, str]] = {span.pk: {} for span in spans}
    rows = SpanSource.objects.filter(span__in=spans).order_by("span", "position").values_list(
        "span", "position", "digest"
    )
    for span_id, position, digest in rows:
        by_position[span_id][position] = digest
    return {span_id: list(digests.values()) for span_id, digests in by_position.items()}
