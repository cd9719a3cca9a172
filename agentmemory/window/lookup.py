"""Lookup and expansion of window folds: the span that produced a summary message, and
the retained originals it folded (down through nested folds when asked)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from typing import Any

from agentmemory.models import FoldedSpan, Thread
from agentmemory.trust.signing import span_is_intact
from agentmemory.window.frame import looks_like_frame, summary_fingerprint
from agentmemory.writes.tampering import report_tampered_span

logger = logging.getLogger("agentmemory")


def _content_of(message: Mapping[str, Any] | str) -> str:
    if isinstance(message, str):
        return message
    content = message.get("content")
    return content if isinstance(content, str) else ""


def folded_span_for(thread: Thread, message: Mapping[str, Any] | str) -> FoldedSpan | None:
    """The fold that produced this summary message, or None when none was recorded.

    Joined by a hash of the whole content: a message that only imitates the frame's
    words has another hash and finds nothing. A span folded under ``discard`` comes
    back with ``messages`` = None, so "no span", "a span without originals" and "a
    span with originals" are three different answers. Only this thread's spans are
    searched. `compact` gives every frame its fold's reference, so no two of its spans
    share a frame; should two rows of a thread share one all the same (written some
    other way), the lookup answers None rather than either one.
    """
    fingerprint = summary_fingerprint(_content_of(message))
    candidates = list(
        FoldedSpan.objects.filter(thread=thread, fingerprint=fingerprint).untampered()[:2]
    )
    if len(candidates) > 1:
        # Picking one could hand back another run's originals.
        logger.warning(
            "agentmemory: %s folded spans of thread %s share the frame %s; the lookup "
            "answers none of them.",
            FoldedSpan.objects.filter(thread=thread, fingerprint=fingerprint).count(),
            thread.pk,
            fingerprint,
        )
        return None
    span = candidates[0] if candidates else None
    if span is not None and not span_is_intact(span):
        report_tampered_span(span)  # an edited record answers nothing
        return None
    return span


def folded_messages(thread: Thread) -> list[dict[str, Any]]:
    """Every retained folded message of the thread, oldest fold first."""
    spans = FoldedSpan.objects.filter(thread=thread, messages__isnull=False).order_by(
        "created_at", "id"
    )
    return [message for span in spans.only("messages") for message in span.messages or []]


def expand_span(span: FoldedSpan, *, recursive: bool = False) -> list[dict[str, Any]]:
    """The span's retained messages; with ``recursive``, earlier summary messages it
    swallowed are replaced by their own retained originals, down to plain messages."""
    messages = list(span.messages or [])
    seen, level = {span.pk}, {span.pk}
    while recursive:
        contents = [_content_of(message) for message in messages]
        keys = {summary_fingerprint(text) for text in contents if looks_like_frame(text)}
        # Only the folds each level recorded as swallowed: never another run's span
        # that happens to share a frame.
        found = list(
            FoldedSpan.objects.filter(swallowed_by__in=level, fingerprint__in=keys)
            .exclude(pk__in=seen)
            .exclude(messages__isnull=True)
            .distinct()
        )
        counts = Counter(s.fingerprint for s in found)
        nested = {s.fingerprint: s for s in found if counts[s.fingerprint] == 1}
        if not nested:
            break
        level = {s.pk for s in nested.values()}
        seen.update(level)
        expanded: list[dict[str, Any]] = []
        for message in messages:
            inner = nested.get(summary_fingerprint(_content_of(message)))
            expanded.extend((inner.messages or []) if inner else [message])
        messages = expanded
    return messages
