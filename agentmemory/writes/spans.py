"""The window's journal: a fold of a live window recorded as a signed FoldedSpan, with
what it was made from (`SpanSource`, law 7)."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import IntegrityError, transaction
from django.utils import timezone

from agentmemory.exceptions import ThreadGoneError
from agentmemory.folding import Draft
from agentmemory.models import FoldedSpan, MemoryEntry, RetainPolicy, SpanSource, Thread
from agentmemory.trust.signing import sign_span
from agentmemory.window.frame import (
    entry_digest,
    looks_like_frame,
    message_digests,
    summary_fingerprint,
)
from agentmemory.window.seams import WindowMessage


def journal_span(
    thread: Thread, drop: Sequence[WindowMessage], iteration: int, retain: str, draft: Draft
) -> FoldedSpan | None:
    """Record a window fold of ``drop`` as a signed FoldedSpan with its sources, under the
    thread's lock; None when a concurrent run journaled the same span first."""
    now = timezone.now()
    ttl = thread.effective_ttl()
    nested_keys = {
        summary_fingerprint(message.content)
        for message in drop
        if looks_like_frame(message.content)
    }
    try:
        with transaction.atomic():
            # The one lock order (`ThreadQuerySet.lock`), before the span and its sources.
            if not Thread.objects.lock(thread.pk):
                raise ThreadGoneError(f"Thread {thread.pk} was erased; nothing was journaled.")
            span = FoldedSpan(
                thread=thread,
                fingerprint=summary_fingerprint(draft.content),
                span_fingerprint=draft.span.key,
                content=draft.content,
                message_count=len(drop),
                iteration=iteration,
                retain=retain,
                **draft.provenance(),
                messages=[message.as_dict() for message in drop]
                if retain == RetainPolicy.CONVERSATION
                else None,
                created_at=now,
                expires_at=now + ttl if ttl is not None else None,
            )
            span.signature = sign_span(span, derivation=message_digests(drop))
            span.save(force_insert=True)
            if nested_keys:
                span.nested_spans.set(
                    FoldedSpan.objects.filter(thread=thread, fingerprint__in=nested_keys)
                )
            record_sources(span, drop)
    except IntegrityError:
        return None
    return span


def record_sources(span: FoldedSpan, messages: Sequence[WindowMessage]) -> None:
    """Write what the span was made from, whatever ``retain`` is: per folded message its
    digest and every entry of the thread that is that message (law 7)."""
    digests = message_digests(messages)
    entries: dict[str, list[int | None]] = {}
    candidates = MemoryEntry.objects.filter(
        thread_id=span.thread_id, content__in={m.content for m in messages}
    ).only("pk", "role", "content", "tool_calls", "tool_call_id")
    for entry in candidates:
        entries.setdefault(entry_digest(entry), []).append(entry.pk)
    SpanSource.objects.bulk_create(
        SpanSource(span=span, position=position, entry_id=entry_id, digest=digest)
        for position, digest in enumerate(digests)
        for entry_id in entries.get(digest) or [None]
    )
