"""The usage ledger, the warn-once rule and the fold signals, shared by both folds.

Recall folds and window folds pay for summaries the same way, so they record and
announce them through the same three functions.
"""

from __future__ import annotations

import logging
import time

from agentmemory import signals
from agentmemory.models import MemoryEntry, SummarizerCall, Thread
from agentmemory.summarizers.base import BaseSummarizer, SummaryResult

logger = logging.getLogger("agentmemory")

# Law 4(b): one warning per process and strategy, however often the summarizer fails.
_warned: set[tuple[str, str]] = set()


def record_call(
    thread: Thread,
    summarizer: BaseSummarizer,
    *,
    purpose: str,
    span_key: str,
    entry_count: int,
    started: float,
    outcome: str,
    result: SummaryResult | None = None,
    error: BaseException | None = None,
    summary: MemoryEntry | None = None,
    attempt: int = 1,
) -> SummarizerCall:
    """One ledger row for one summarizer call, whatever its outcome."""
    return SummarizerCall.objects.create(
        thread=thread,
        summary=summary,
        purpose=purpose,
        backend=summarizer.backend,
        model=summarizer.model,
        span_key=span_key,
        entry_count=entry_count,
        attempt=attempt,
        prompt_tokens=result.prompt_tokens if result else None,
        completion_tokens=result.completion_tokens if result else None,
        duration_ms=int((time.monotonic() - started) * 1000),
        outcome=outcome,
        error_class=type(error).__name__ if error else "",
    )


def send_declined(
    thread: Thread,
    summarizer: BaseSummarizer,
    *,
    purpose: str,
    reason: str,
    result: SummaryResult | None = None,
    latched: bool = False,
    error: str = "",
) -> None:
    signals.fold_declined.send(
        sender=type(summarizer),
        thread=thread,
        purpose=purpose,
        reason=reason,
        model=summarizer.model,
        prompt_tokens=result.prompt_tokens if result else None,
        completion_tokens=result.completion_tokens if result else None,
        latched=latched,
        error=error,
    )


def send_completed(
    thread: Thread,
    summarizer: BaseSummarizer,
    *,
    purpose: str,
    result: SummaryResult,
    entry_count: int,
    summary: object,
) -> None:
    signals.fold_completed.send(
        sender=type(summarizer),
        thread=thread,
        summary=summary,
        purpose=purpose,
        model=summarizer.model,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        entry_count=entry_count,
    )


def warn_once(purpose: str, summarizer: BaseSummarizer, exc: BaseException) -> None:
    key = (purpose, f"{summarizer.backend}:{summarizer.model}")
    if key in _warned:
        return
    _warned.add(key)
    logger.warning(
        "agentmemory: the summarizer %s (model %s) failed during a %s (%s: %s); the "
        "conversation proceeds unfolded. Further failures of this summarizer are recorded "
        "in the usage ledger without another warning in this process.",
        summarizer.backend,
        summarizer.model,
        purpose,
        type(exc).__name__,
        exc,
    )
