"""The usage ledger, the warn-once rule and the fold signals, shared by both folds.

Recall folds and window folds pay for summaries the same way, so they reserve, record
and announce them through the same functions. A call's row is written before the call
(``reserve``, with its estimate held against the owner's quota) and settled after it.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import QuerySet, Subquery
from django.utils import timezone

from agentmemory import signals
from agentmemory.conf import memory_settings
from agentmemory.models import CallOutcome, MemoryEntry, OwnerQuota, SummarizerCall, Thread
from agentmemory.redaction import describe_error
from agentmemory.summarizers.base import BaseSummarizer, SummaryResult

logger = logging.getLogger("agentmemory")

# Law 4(b): one warning per process and strategy, however often the summarizer fails.
_warned: set[tuple[str, str]] = set()


def reserve(
    thread: Thread,
    summarizer: BaseSummarizer,
    *,
    purpose: str,
    span_key: str,
    entry_count: int,
    estimated_tokens: int,
    attempt: int = 1,
) -> SummarizerCall | None:
    """The ledger row of a call about to be made, holding its estimate against the
    owner's daily quota; None (and no row) when the quota cannot take the estimate.

    Admissions of one owner under a quota are serialized (PostgreSQL: an advisory lock
    for the transaction; SQLite: the write lock the insert takes), so each sees every
    earlier reservation and the estimates admitted never pass the quota together. The
    lock is released before the call, unless the caller's own transaction holds it.

    The row's ``attempt`` is the how-manieth call of this span in the thread (at least
    ``attempt``, the caller's own count).
    """

    owner_id = thread.owner_id
    limit = daily_quota(owner_id) if owner_id is not None else None
    # savepoint=False: inside a caller's transaction this costs no savepoint round trips.
    with transaction.atomic(savepoint=False):
        # The one lock order (`ThreadQuerySet.lock`): the thread, then the owner's quota
        # lock. A thread erased meanwhile still has its call counted, as its erasure
        # would have left the row: against the owner, with no thread.
        present = Thread.objects.lock(thread.pk)
        if owner_id is not None and limit is not None:
            _lock_owner(owner_id)
        # The how-manieth call of this span: a killed attempt's redelivery is not a
        # retry to Celery, so its count alone would number every one of them 1.
        earlier = SummarizerCall.objects.filter(
            thread=thread, purpose=purpose, span_key=span_key
        ).count() if present else 0
        row = SummarizerCall.objects.create(
            thread=thread if present else None,
            owner_id=owner_id,
            purpose=purpose,
            backend=summarizer.backend,
            model=summarizer.model,
            span_key=span_key,
            entry_count=entry_count,
            attempt=max(attempt, earlier + 1),
            outcome=CallOutcome.RESERVED,
            estimated_tokens=estimated_tokens,
        )
        if owner_id is not None and limit is not None and tokens_used_today(owner_id) > limit:
            row.delete()
            return None
    return row


_QUOTA_LOCK_CLASS = 0x616D  # the advisory lock namespace of quota admissions


def _lock_owner(owner_id: int) -> None:
    if connection.vendor == "postgresql":
        # Two int4 keys; a folded id only makes two owners wait for each other briefly.
        key = owner_id % 2_147_483_647
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_QUOTA_LOCK_CLASS, key])


def settle(
    row: SummarizerCall,
    *,
    started: float,
    outcome: str,
    result: SummaryResult | None = None,
    error: BaseException | None = None,
    summary: MemoryEntry | None = None,
) -> None:
    """Write what the reserved call came to: its outcome, the usage the backend reported
    (the prompt tokens its provider served from cache among them), and a failure's class
    and redacted description."""
    row.outcome = outcome
    row.prompt_tokens = result.prompt_tokens if result else None
    row.completion_tokens = result.completion_tokens if result else None
    row.cached_tokens = result.cached_tokens if result else None
    row.duration_ms = int((time.monotonic() - started) * 1000)
    row.error_class = type(error).__name__ if error else ""
    row.error_message = describe_error(error) if error else ""
    row.summary = summary
    with transaction.atomic(savepoint=False):
        if row.thread_id is not None:
            Thread.objects.lock(row.thread_id)  # the one lock order
        SummarizerCall.objects.filter(pk=row.pk).update(
            # A summary erased since its write-back is not named (the row keeps its cost).
            summary_id=Subquery(MemoryEntry.objects.filter(pk=summary.pk).values("pk"))
            if summary is not None else None,
            outcome=row.outcome, prompt_tokens=row.prompt_tokens,
            completion_tokens=row.completion_tokens, cached_tokens=row.cached_tokens,
            duration_ms=row.duration_ms,
            error_class=row.error_class, error_message=row.error_message,
        )


#: The error class a killed attempt's row is settled with.
KILLED_ERROR = "AttemptDied"


def settle_killed(calls: QuerySet[SummarizerCall], reason: str) -> int:
    """Settle the reserved rows among ``calls`` as killed: their attempt died during the
    call, so no usage was reported and the estimate stays their cost (quota and cost
    count it); ``reason`` says who found them so. Returns how many.

    A call that was in fact still running settles its own row when it returns, over
    this one (`settle` writes by id, whatever the row says)."""
    return calls.filter(outcome=CallOutcome.RESERVED).update(
        outcome=CallOutcome.KILLED, error_class=KILLED_ERROR, error_message=reason
    )


def settle_abandoned(now: datetime, longest_call: float) -> int:
    """`settle_killed` for the reserved rows older than twice ``longest_call`` seconds
    whose thread's fold lease is not held: an attempt that died and that no fold took
    over (the thread was not folded again, or it was a window fold)."""
    calls = SummarizerCall.objects.filter(
        created_at__lt=now - timedelta(seconds=2 * longest_call)
    ).exclude(thread__fold_lease_until__gte=now)
    return settle_killed(
        calls, "The call's attempt died (no call lasts this long and no fold holds the "
        "thread's lease); settled by the sweep.",
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
        "agentmemory: the summarizer %s (model %s) failed during a %s (%s); the "
        "conversation proceeds unfolded. Further failures of this summarizer are recorded "
        "in the usage ledger without another warning in this process.",
        summarizer.backend,
        summarizer.model,
        purpose,
        describe_error(exc),
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
    """What the owner's summarizer calls since 00:00 UTC count against the quota.

    What each call counts is `SummarizerCallQuerySet.charged_tokens`: the usage its
    backend reported, or its estimate while in flight or when none was reported.
    """
    start = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    return SummarizerCall.objects.filter(owner_id=owner_id, created_at__gte=start).charged_tokens()


def quota_exceeded(thread: Thread) -> bool:
    """True when the thread's owner has spent their daily summarizer tokens."""
    if thread.owner_id is None:
        return False
    limit = daily_quota(thread.owner_id)
    return limit is not None and tokens_used_today(thread.owner_id) >= limit
