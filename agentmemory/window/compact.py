"""Compact a live window: fold its oldest part into one framed summary message.

One attempt per compaction, no retries in the run's path (law 11). The fold is
journaled as a FoldedSpan before the new window is returned, so a replay of the same
dropped messages reads the journal instead of calling again (law 12).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError

from agentmemory.conf import memory_settings
from agentmemory.exceptions import InvalidMessageError
from agentmemory.folding import (
    Declined,
    DeclineReason,
    Span,
    SpanTokens,
    attempt_fold,
    decline,
)
from agentmemory.messages import clean_message
from agentmemory.models import (
    FoldedSpan,
    FoldPurpose,
    RetainPolicy,
    Thread,
)
from agentmemory.summarizers import get_summarizer
from agentmemory.tokens import count_tokens
from agentmemory.transcript import DEFAULT_INSTRUCTION, render_message
from agentmemory.trust.signing import span_is_intact
from agentmemory.window.frame import (
    fold_reference,
    frame_label,
    looks_like_frame,
    span_fingerprint,
)
from agentmemory.window.seams import Selection, WindowMessage, WindowSeam, get_window
from agentmemory.writes.spans import journal_span
from agentmemory.writes.tampering import report_tampered_span

logger = logging.getLogger("agentmemory")


@dataclass(frozen=True)
class Compaction:
    """The window to send next, and the span that explains it (or why there is none)."""

    window: list[dict[str, Any]]
    span: FoldedSpan | None
    refusal: str | None = None
    reused: bool = False

    @property
    def compacted(self) -> bool:
        return self.span is not None


def resolve_retain(thread: Thread, retain: str | None) -> str:
    value = retain or thread.window_retain or memory_settings.WINDOW_RETAIN
    if value not in RetainPolicy.values:
        raise InvalidMessageError(
            f"retain must be one of {', '.join(RetainPolicy.values)}, got {value!r}.",
            field="retain",
        )
    return str(value)


def compact(
    thread: Thread,
    messages: Sequence[Mapping[str, Any]],
    *,
    budget_tokens: int | None = None,
    iteration: int = 0,
    retain: str | None = None,
    window: WindowSeam | None = None,
) -> Compaction:
    """Fold the oldest part of ``messages`` if the seam drops anything.

    Returns the new window (pinned head with the current request, then the summary
    message, then the kept messages) and the recorded span; or the window unchanged
    with ``refusal`` set to a `DeclineReason`: ``not-worth-a-call``, ``tampered``, a
    latched span's reason, ``quota-exceeded``, ``summarizer-failed``, ``lost-facts`` or
    ``not-smaller``.
    """
    originals = [WindowMessage.of(clean_message(m, i)) for i, m in enumerate(messages)]
    if not originals:
        raise InvalidMessageError("messages must not be empty.", field="messages")
    if not isinstance(iteration, int) or isinstance(iteration, bool) or iteration < 0:
        raise InvalidMessageError("iteration must be a non-negative integer.", field="iteration")
    if budget_tokens is not None and (
        not isinstance(budget_tokens, int) or isinstance(budget_tokens, bool) or budget_tokens < 0
    ):
        raise InvalidMessageError(
            "budget_tokens must be None or a non-negative integer.", field="budget_tokens"
        )
    retain = resolve_retain(thread, retain)
    selection = (window or get_window()).select(originals, budget_tokens=budget_tokens)
    unchanged = [message.as_dict() for message in originals]
    summarizer = get_summarizer()

    if len(selection.drop) < max(memory_settings.WINDOW_MIN_FOLD, 1):
        if selection.drop:
            decline(thread, summarizer, FoldPurpose.WINDOW_FOLD, DeclineReason.NOT_WORTH_A_CALL)
        return Compaction(window=unchanged, span=None, refusal=DeclineReason.NOT_WORTH_A_CALL)

    key = span_fingerprint(selection.drop)
    recorded = FoldedSpan.objects.filter(thread=thread, span_fingerprint=key).first()
    if recorded is not None:
        if recorded.tampered_at is None and span_is_intact(recorded):
            return Compaction(window=_new_window(selection, recorded), span=recorded, reused=True)
        # An edited journal entry is never replayed into a model's window.
        if recorded.tampered_at is None:
            report_tampered_span(recorded)
        return Compaction(window=unchanged, span=None, refusal=DeclineReason.TAMPERED)
    fold = Span(
        purpose=FoldPurpose.WINDOW_FOLD,
        items=selection.drop,
        key=key,
        # Where the span starts: a refused span backs off the longer spans starting there.
        start_key=span_fingerprint(selection.drop[:1]),
        tokens=SpanTokens(count_tokens(render_message(message)) for message in selection.drop),
        instruction=_instruction(),
        label=lambda model: frame_label(
            message_count=len(selection.drop),
            iteration=iteration,
            model=model,
            retain=retain,
            fold=fold_reference(key),
        ),
        is_summary=lambda message: looks_like_frame(message.content),
        cost=lambda content: count_tokens(f"user: {content}"),
    )
    draft = attempt_fold(thread, fold, summarizer)
    if isinstance(draft, Declined):
        return Compaction(window=unchanged, span=None, refusal=draft.reason)
    try:
        span = journal_span(thread, selection.drop, iteration, retain, draft)
    except BaseException as exc:
        draft.record_unstored(exc)
        raise
    if span is None:  # a concurrent run journaled the same span first: use its record
        draft.record_lost(IntegrityError("span recorded"))
        span = FoldedSpan.objects.get(thread=thread, span_fingerprint=key)
        return Compaction(window=_new_window(selection, span), span=span, reused=True)
    draft.record_folded()
    draft.send_completed(span)
    return Compaction(window=_new_window(selection, span), span=span)


def _instruction() -> str:
    return str(memory_settings.SUMMARY_INSTRUCTION or DEFAULT_INSTRUCTION)


def _new_window(selection: Selection, span: FoldedSpan) -> list[dict[str, Any]]:
    summary = {"role": "user", "content": span.content}
    return [
        *(message.as_dict() for message in selection.head),
        summary,
        *(message.as_dict() for message in selection.keep),
    ]
