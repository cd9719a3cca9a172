"""Celery tasks: thin wrappers over services. Ids in, never model instances.

``fold_thread`` is idempotent (the unique summary key makes a repeated fold a no-op),
so ``acks_late`` and ``reject_on_worker_lost`` are safe: a worker killed mid-fold
leaves no partial summary, and the redelivered task folds once.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from agentmemory import services
from agentmemory.conf import memory_settings
from agentmemory.exceptions import TransientSummarizerError


@shared_task(
    bind=True,
    name="agentmemory.fold_thread",
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=False,
)
def fold_thread(self: Any, thread_id: int) -> dict[str, Any]:
    """Fold a thread until no fold is due; transient summarizer errors retry with backoff."""
    try:
        outcomes = services.fold_until_settled(
            thread_id, attempt=self.request.retries + 1, lease_owner=self.request.id
        )
    except TransientSummarizerError as exc:
        if self.request.retries >= memory_settings.FOLD_RETRY_MAX:
            # Out of retries: the same decline a recall would make, said out loud.
            services.give_up_fold(thread_id, exc)
            return {"thread_id": thread_id, "folded": [], "declined": ["summarizer-failed"]}
        countdown = memory_settings.FOLD_RETRY_BACKOFF * (2**self.request.retries)
        raise self.retry(exc=exc, countdown=countdown, max_retries=None) from exc
    return {
        "thread_id": thread_id,
        "folded": [outcome.summary.pk for outcome in outcomes if outcome.summary],
        "declined": [outcome.decline for outcome in outcomes if outcome.decline],
    }


@shared_task(name="agentmemory.purge_expired")
def purge_expired() -> dict[str, int]:
    """Delete expired entries, summaries and spans in bounded, atomic batches."""
    result = services.purge_expired()
    return {"entries": result.entries, "spans": result.spans, "batches": result.batches}


@shared_task(name="agentmemory.sweep")
def sweep() -> list[int]:
    """Enqueue folds that are due but were lost (broker outage, killed worker)."""
    return services.sweep()
