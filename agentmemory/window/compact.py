"""Compact a live window: fold its oldest part into one framed summary message.

One attempt per compaction, no retries in the run's path (law 11). The fold is
journaled as a FoldedSpan before the new window is returned, so a replay of the same
dropped messages reads the journal instead of calling again (law 12).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from agentmemory import __version__, ledger, signals
from agentmemory.conf import memory_settings
from agentmemory.exceptions import InvalidMessageError
from agentmemory.facts import FactCheck, check_facts, missing_facts_note
from agentmemory.messages import clean_message
from agentmemory.models import CallOutcome, FoldedSpan, FoldLatch, FoldPurpose, RetainPolicy, Thread
from agentmemory.pipeline.summarize import fact_gate, prompt_hash
from agentmemory.quarantine import injection_flags, message_flags, strip_invisible
from agentmemory.signing import sign_span, span_is_intact
from agentmemory.summarizers import BaseSummarizer, get_summarizer
from agentmemory.tokens import count_tokens
from agentmemory.transcript import render_message, render_tool_call
from agentmemory.window.frame import (
    frame_label,
    looks_like_frame,
    span_fingerprint,
    summary_fingerprint,
    summary_message_content,
)
from agentmemory.window.seams import Selection, WindowMessage, WindowSeam, get_window

NOT_WORTH_A_CALL = "not-worth-a-call"
SUMMARIZER_FAILED = "summarizer-failed"
NOT_SMALLER = "not-smaller"
LOST_FACTS = "lost-facts"
QUOTA_EXCEEDED = "quota-exceeded"
TAMPERED = "tampered"
PURPOSE = FoldPurpose.WINDOW_FOLD

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
    with ``refusal`` set to ``not-worth-a-call``, ``summarizer-failed`` or
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
            ledger.send_declined(thread, summarizer, purpose=PURPOSE, reason=NOT_WORTH_A_CALL)
        return Compaction(window=unchanged, span=None, refusal=NOT_WORTH_A_CALL)

    key = span_fingerprint(selection.drop)
    recorded = FoldedSpan.objects.filter(thread=thread, span_fingerprint=key).first()
    if recorded is not None:
        if recorded.tampered_at is None and span_is_intact(recorded):
            return Compaction(window=_new_window(selection, recorded), span=recorded, reused=True)
        # An edited journal entry is never replayed into a model's window.
        if recorded.tampered_at is None:
            report_tampered_span(recorded)
        return Compaction(window=unchanged, span=None, refusal=TAMPERED)
    latch = FoldLatch.objects.filter(thread=thread, purpose=PURPOSE, span_key=key)
    for reason in latch.values_list("reason", flat=True):
        ledger.send_declined(thread, summarizer, purpose=PURPOSE, reason=reason, latched=True)
        return Compaction(window=unchanged, span=None, refusal=reason)
    if ledger.quota_exceeded(thread):
        ledger.send_declined(thread, summarizer, purpose=PURPOSE, reason=QUOTA_EXCEEDED)
        return Compaction(window=unchanged, span=None, refusal=QUOTA_EXCEEDED)

    def record(outcome: str, **extra: Any) -> None:
        ledger.record_call(
            thread, summarizer, purpose=PURPOSE, span_key=key,
            entry_count=len(selection.drop), started=started, outcome=outcome, **extra,
        )

    started = time.monotonic()
    try:
        result = summarizer.summarize(selection.drop, instruction=_instruction())
        if not result.text.strip():
            raise ValueError(f"{summarizer.backend} returned no summary text.")
    except Exception as exc:  # one attempt; a broken summarizer never fails the run
        record(CallOutcome.FAILED, error=exc)
        ledger.warn_once(PURPOSE, summarizer, exc)
        ledger.send_declined(
            thread, summarizer, purpose=PURPOSE, reason=SUMMARIZER_FAILED, error=type(exc).__name__
        )
        return Compaction(window=unchanged, span=None, refusal=SUMMARIZER_FAILED)

    def refuse(outcome: str, reason: str) -> Compaction:
        record(outcome, result=result)
        FoldLatch.objects.get_or_create(
            thread=thread, purpose=PURPOSE, span_key=key,
            defaults={"reason": reason, "entry_count": len(selection.drop),
                      "model": summarizer.model},
        )
        ledger.send_declined(thread, summarizer, purpose=PURPOSE, reason=reason, result=result)
        return Compaction(window=unchanged, span=None, refusal=reason)

    text = strip_invisible(result.text)
    label = frame_label(
        message_count=len(selection.drop), iteration=iteration, model=summarizer.model,
        retain=retain,
    )
    content = summary_message_content(label, text)
    facts = check_facts((_fact_text(message) for message in selection.drop), text)
    threshold, action = fact_gate()
    if threshold is not None and facts.score < threshold:
        if action == "decline":
            return refuse(CallOutcome.REFUSED_LOST_FACTS, LOST_FACTS)
        content = f"{content}\n{missing_facts_note(facts.missing)}"
    if not _more_tokens_than(selection.drop, count_tokens(f"user: {content}")):
        return refuse(CallOutcome.REFUSED_NOT_SMALLER, NOT_SMALLER)

    flags = sorted(
        {flag for message in selection.drop for flag in message_flags(message)}
        | {f"output:{flag}" for flag in injection_flags(result.text)}
    )
    span = _journal(
        thread, selection, key, content, iteration, retain, summarizer, result,
        facts=facts, flags=flags,
    )
    if span is None:  # a concurrent run journaled the same span first: use its record
        record(CallOutcome.DECLINED, result=result, error=IntegrityError("span recorded"))
        span = FoldedSpan.objects.get(thread=thread, span_fingerprint=key)
        return Compaction(window=_new_window(selection, span), span=span, reused=True)
    record(CallOutcome.FOLDED, result=result)
    ledger.send_completed(
        thread, summarizer, purpose=PURPOSE, result=result, entry_count=len(selection.drop),
        summary=span,
    )
    return Compaction(window=_new_window(selection, span), span=span)


def _more_tokens_than(messages: Sequence[WindowMessage], limit: int) -> bool:
    """Whether ``messages`` hold more than ``limit`` tokens; counting stops once they do."""
    total = 0
    for message in messages:
        total += count_tokens(render_message(message))
        if total > limit:
            return True
    return False


def _instruction() -> str:
    from agentmemory.transcript import DEFAULT_INSTRUCTION

    return str(memory_settings.SUMMARY_INSTRUCTION or DEFAULT_INSTRUCTION)


def _fact_text(message: WindowMessage) -> str:
    """What the fact gate reads of a message. A swallowed summary message counts without
    its frame: the frame's numbers and model name are ours, not facts of the conversation."""
    content = message.content
    if looks_like_frame(content):
        content = content.partition("\n")[2]
    arguments = " ".join(render_tool_call(call) for call in message.tool_calls)
    return f"{content} {arguments}"


def _journal(
    thread: Thread,
    selection: Selection,
    key: str,
    content: str,
    iteration: int,
    retain: str,
    summarizer: BaseSummarizer,
    result: Any,
    *,
    facts: FactCheck,
    flags: list[str],
) -> FoldedSpan | None:
    from agentmemory.services import thread_ttl

    now = timezone.now()
    ttl = thread_ttl(thread)
    nested_keys = {
        summary_fingerprint(message.content)
        for message in selection.drop
        if looks_like_frame(message.content)
    }
    try:
        with transaction.atomic():
            span = FoldedSpan(
                thread=thread,
                fingerprint=summary_fingerprint(content),
                span_fingerprint=key,
                content=content,
                message_count=len(selection.drop),
                iteration=iteration,
                model=summarizer.model,
                prompt_hash=prompt_hash(_instruction()),
                temperature=summarizer.temperature,
                seed=summarizer.seed,
                library_version=__version__,
                fact_score=facts.score,
                missing_facts=[fact.text for fact in facts.missing],
                injection_flags=flags,
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
                retain=retain,
                messages=[message.as_dict() for message in selection.drop]
                if retain == RetainPolicy.CONVERSATION
                else None,
                created_at=now,
                expires_at=now + ttl if ttl is not None else None,
            )
            span.signature = sign_span(span)
            span.save(force_insert=True)
            if nested_keys:
                span.nested_spans.set(
                    FoldedSpan.objects.filter(thread=thread, fingerprint__in=nested_keys)
                )
    except IntegrityError:
        return None
    return span


def _new_window(selection: Selection, span: FoldedSpan) -> list[dict[str, Any]]:
    summary = {"role": "user", "content": span.content}
    return [
        *(message.as_dict() for message in selection.head),
        summary,
        *(message.as_dict() for message in selection.keep),
    ]


# ---------------------------------------------------------------- lookup


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
    span with originals" are three different answers.
    """
    fingerprint = summary_fingerprint(_content_of(message))
    span = FoldedSpan.objects.filter(
        thread=thread, fingerprint=fingerprint, tampered_at__isnull=True
    ).first()
    if span is not None and not span_is_intact(span):
        report_tampered_span(span)  # an edited record answers nothing
        return None
    return span


def report_tampered_span(span: FoldedSpan) -> None:
    FoldedSpan.objects.filter(pk=span.pk).update(tampered_at=timezone.now())
    logger.warning(
        "agentmemory: folded span %s of thread %s does not match its signature; lookups "
        "no longer return it.",
        span.pk,
        span.thread_id,
    )
    signals.summary_tampered.send(sender=FoldedSpan, thread=span.thread, summary=None, span=span)


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
    seen = {span.pk}
    while recursive:
        contents = [_content_of(message) for message in messages]
        keys = {summary_fingerprint(text) for text in contents if looks_like_frame(text)}
        nested = {
            s.fingerprint: s
            for s in FoldedSpan.objects.filter(thread_id=span.thread_id, fingerprint__in=keys)
            .exclude(pk__in=seen)
            .exclude(messages__isnull=True)
        }
        if not nested:
            break
        seen.update(s.pk for s in nested.values())
        expanded: list[dict[str, Any]] = []
        for message in messages:
            inner = nested.get(summary_fingerprint(_content_of(message)))
            expanded.extend((inner.messages or []) if inner else [message])
        messages = expanded
    return messages
