"""Integrity: every summary and window span checked against its signature."""

from __future__ import annotations

from django.utils import timezone

from agentmemory.models import FoldedSpan, MemoryEntry, SummaryCoverage
from agentmemory.trust.signing import (
    sign_span,
    sign_summary,
    span_is_intact,
    summary_is_intact,
)
from agentmemory.writes.tampering import report_tampered, report_tampered_span

__all__ = ["report_tampered", "report_tampered_span", "verify"]


def verify(*, resign: bool = False) -> dict[str, list[int]]:
    """Check every live summary and every span against its signature.

    Tampered ones are reported like a recall would (``summaries``, ``spans``). With
    ``resign`` nothing is checked or reported: every row is signed anew with the current
    key (after a key rotation you have checked; ``resigned_*``). Expired summaries are
    left to the purge: what they stood for may already be gone, and recall no longer
    shows them.
    """
    now = timezone.now()
    bad_summaries: list[MemoryEntry] = []
    resigned_summaries: list[int] = []
    for summary in (
        MemoryEntry.objects.summaries().unretired().unexpired(now)
        .select_related("coverage", "thread")
        .iterator(chunk_size=500)
    ):
        if not resign and not summary_is_intact(summary):
            bad_summaries.append(summary)
        elif resign:
            SummaryCoverage.objects.filter(pk=summary.pk).update(
                signature=sign_summary(summary, summary.coverage)
            )
            resigned_summaries.append(summary.pk)
    bad_spans: list[FoldedSpan] = []
    resigned_spans: list[int] = []
    for span in FoldedSpan.objects.untampered().select_related(
        "thread"
    ).iterator(chunk_size=500):
        if not resign and not span_is_intact(span):
            bad_spans.append(span)
        elif resign:
            FoldedSpan.objects.filter(pk=span.pk).update(signature=sign_span(span))
            resigned_spans.append(span.pk)
    if bad_summaries:
        report_tampered(bad_summaries)
    for span in bad_spans:
        report_tampered_span(span)
    return {
        "summaries": [summary.pk for summary in bad_summaries],
        "spans": [span.pk for span in bad_spans],
        "resigned_summaries": resigned_summaries,
        "resigned_spans": resigned_spans,
    }
