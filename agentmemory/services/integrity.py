"""Integrity: every summary and window span checked against its signature."""

from __future__ import annotations

from django.utils import timezone

from agentmemory.models import FoldedSpan, MemoryEntry, SummaryCoverage
from agentmemory.pipeline.intact import report_tampered
from agentmemory.trust.signing import (
    is_legacy,
    sign_span,
    sign_summary,
    span_is_intact,
    summary_is_intact,
)
from agentmemory.window.compact import report_tampered_span

__all__ = ["report_tampered", "report_tampered_span", "verify"]


def verify(*, resign: bool = False) -> dict[str, list[int]]:
    """Check every live summary and every span against its signature.

    Tampered ones are reported like a recall would; intact ones still under a version 1
    signature are re-signed under the current scheme (``resigned_*``). With ``resign``
    nothing is reported: every row is signed anew (after a key rotation you have
    checked). Expired summaries are left to the purge: what they stood for may already
    be gone, and recall no longer shows them.
    """
    now = timezone.now()
    bad_summaries: list[MemoryEntry] = []
    upgraded_summaries: list[int] = []
    for summary in (
        MemoryEntry.objects.summaries().unretired().unexpired(now)
        .select_related("coverage", "thread")
        .iterator(chunk_size=500)
    ):
        if not resign and not summary_is_intact(summary):
            bad_summaries.append(summary)
        elif resign or is_legacy(summary.coverage.signature):
            SummaryCoverage.objects.filter(pk=summary.pk).update(
                signature=sign_summary(summary, summary.coverage)
            )
            upgraded_summaries.append(summary.pk)
    bad_spans: list[FoldedSpan] = []
    upgraded_spans: list[int] = []
    for span in FoldedSpan.objects.untampered().select_related(
        "thread"
    ).iterator(chunk_size=500):
        if not resign and not span_is_intact(span):
            bad_spans.append(span)
        elif resign or is_legacy(span.signature):
            FoldedSpan.objects.filter(pk=span.pk).update(signature=sign_span(span))
            upgraded_spans.append(span.pk)
    if bad_summaries:
        report_tampered(bad_summaries)
    for span in bad_spans:
        report_tampered_span(span)
    return {
        "summaries": [summary.pk for summary in bad_summaries],
        "spans": [span.pk for span in bad_spans],
        "resigned_summaries": upgraded_summaries,
        "resigned_spans": upgraded_spans,
    }
