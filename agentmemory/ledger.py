"""The usage ledger, the warn-once rule and the fold signals, shared by both folds.

Recall folds and window folds pay for summaries the same way, so they record and
announce them through the same three functions.
"""

from __future__ import annotations

import logging
import time

from django.db.models import F, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from agentmemory import signals
from agentmemory.conf import memory_settings
from agentmemory.models import MemoryEntry, OwnerQuota, SummarizerCall, Thread
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
        owner_id=thread.owner_id,
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


def daily_quota(owner_id: int) -> int | None:
    """The owner's daily token quota: their own override, else the project default."""
    override = OwnerQuota.objects.filter(owner_id=owner_id).values_list(
        "daily_tokens", flat=True
    )
    for daily_tokens in override:
        return daily_tokens
    default = memory_settings.DAILY_TOKEN_QUOTA
    return int(default) if default is not None else None


def tokens_used_today(owner_id: int) -> int:
    """Prompt plus completion tokens of the owner's summarizer calls since 00:00 UTC."""
    start = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    used = SummarizerCall.objects.filter(owner_id=owner_id, created_at__gte=start).aggregate(
        tokens=Sum(Coalesce(F("prompt_tokens"), 0) + Coalesce(F("completion_tokens"), 0))
    )["tokens"]
    return int(used or 0)


def quota_exceeded(thread: Thread) -> bool:
    """True when the thread's owner has spent their daily summarizer tokens."""
    if thread.owner_id is None:
        return False
    limit = daily_quota(thread.owner_id)
    return limit is not None and tokens_used_today(thread.owner_id) >= limit
