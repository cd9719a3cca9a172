"""Celery tasks: thin wrappers over services. Ids in, never model instances.

``fold_thread`` is idempotent (the unique summary key makes a repeated fold a no-op),
so ``acks_late`` and ``reject_on_worker_lost`` are safe: a worker killed mid-fold
leaves no partial summary, and the redelivered task folds once.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

from celery import shared_task
from django.db import DatabaseError, InterfaceError, OperationalError, close_old_connections

from agentmemory import services
from agentmemory.broker import FOLD_TASK
from agentmemory.conf import memory_settings
from agentmemory.exceptions import TransientSummarizerError


@shared_task(
    bind=True,
    name=FOLD_TASK,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=False,
)
def fold_thread(self: Any, thread_id: int) -> dict[str, Any]:
    """Fold a thread until no fold is due.

    Transient summarizer errors retry with exponential backoff, no sooner than the
    provider's ``Retry-After``; transient database errors (OperationalError,
    InterfaceError) retry the same way instead of acknowledging the task as done. Both
    are bounded by FOLD_RETRY_MAX; while a retry waits, it is the thread's one queued fold.
    """
    try:
        outcomes = services.fold_until_settled(
            thread_id, attempt=self.request.retries + 1, lease_owner=self.request.id
        )
    except TransientSummarizerError as exc:
        if self.request.retries >= memory_settings.FOLD_RETRY_MAX:
            # Out of retries: the same decline a recall would make, said out loud.
            services.give_up_fold(thread_id, exc)
            return {"thread_id": thread_id, "folded": [], "declined": ["summarizer-failed"]}
        countdown = max(retry_countdown(self.request.retries), exc.retry_after or 0.0)
        countdown = min(countdown, MAX_RETRY_AFTER)
        services.fold_retry_pending(thread_id, countdown)
        raise self.retry(exc=exc, countdown=countdown, max_retries=None) from exc
    except (OperationalError, InterfaceError) as exc:
        close_old_connections()  # a broken connection is not reused by the retry
        if self.request.retries >= memory_settings.FOLD_RETRY_MAX:
            raise  # Celery logs the failure; the sweep enqueues the fold again later
        countdown = retry_countdown(self.request.retries)
        with suppress(DatabaseError):  # the database may still be away: best effort
            services.fold_retry_pending(thread_id, countdown)
        raise self.retry(exc=exc, countdown=countdown, max_retries=None) from exc
    return {
        "thread_id": thread_id,
        "folded": [outcome.summary.pk for outcome in outcomes if outcome.summary],
        "declined": [outcome.decline for outcome in outcomes if outcome.decline],
    }


# A provider's Retry-After is honoured up to an hour; a longer one is a misreading.
MAX_RETRY_AFTER = 3600.0


def retry_countdown(retries: int) -> float:
    return float(memory_settings.FOLD_RETRY_BACKOFF) * (2**retries)


@shared_task(name="agentmemory.purge_expired")
def purge_expired() -> dict[str, int]:
    """Delete expired entries, summaries and spans in bounded, atomic batches."""
    result = services.purge_expired()
    return {"entries": result.entries, "spans": result.spans, "batches": result.batches}


@shared_task(name="agentmemory.sweep")
def sweep() -> list[int]:
    """Enqueue folds that are due but were lost (broker outage, killed worker)."""
    return services.sweep()
