"""Latches: spans the summarizer was refused on, and the spans that back off from them.

A refused span is latched by its exact key and by where it starts. A span that starts
at the same place is declined too until it holds twice the latched tokens: a span that
grows by a turn at a time would otherwise pay for one refused call per turn.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from django.db import transaction
from django.db.models import Q

from agentmemory.folding.span import Span, SpanTokens
from agentmemory.models import FoldLatch, Thread


def latched(
    thread: Thread, purpose: str, *, span_key: str, start_key: str, span_tokens: int
) -> str | None:
    """The reason a fold of this span would be declined as latched, or None."""
    return latch_reason(
        thread, purpose, span_key=span_key, start_key=start_key, tokens=SpanTokens([span_tokens])
    )


def latch_reason(
    thread: Thread, purpose: str, *, span_key: str, start_key: str, tokens: SpanTokens
) -> str | None:
    """One query; ``tokens`` is counted only when a latch at the same start needs it."""
    match = Q(span_key=span_key)
    if start_key:
        match |= Q(start_key=start_key)
    rows = list(
        FoldLatch.objects.filter(match, thread=thread, purpose=purpose).values_list(
            "span_key", "reason", "span_tokens"
        )
    )
    for key, reason, _ in rows:
        if key == span_key:
            return reason
    if not rows:
        return None
    _, reason, widest = max(rows, key=lambda row: row[2])
    # Asked again only once the span has doubled: span_tokens * 2 > tokens declines.
    return None if tokens.exceeds(2 * widest - 1) else reason


def latch_refusal(thread: Thread, span: Span, reason: str, model: str) -> None:
    with transaction.atomic():
        if not Thread.objects.lock(thread.pk):  # the one lock order; erased: nothing to latch
            return
        FoldLatch.objects.get_or_create(
            thread=thread,
            purpose=span.purpose,
            span_key=span.key,
            defaults={
                "reason": reason,
                "entry_count": len(span.items),
                "model": model,
                "start_key": span.start_key,
                "span_tokens": span.tokens.total,
            },
        )


def span_key_of(ids: Iterable[int]) -> str:
    """The latch key: the span's exact entry ids, in thread order. A grown span is a
    new key (it still backs off by its start: `FoldPlan.start_key`)."""
    return hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()
