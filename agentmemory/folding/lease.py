"""The thread's fold lease and where its fold stands.

One fold of a thread at a time, inline or background: the lease is a conditional
update on the thread row, renewed by a heartbeat, released when the fold is done; a
fold that keeps dying with it is parked. Recall's inline folds and the background task
both take it, so it sits below both.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import DatabaseError, connections, models
from django.db.models import F, Q
from django.utils import timezone

from agentmemory import signals
from agentmemory.conf import memory_settings
from agentmemory.models import FoldPurpose, SummarizerCall, Thread
from agentmemory.trust import ledger

logger = logging.getLogger("agentmemory")


def take_fold_lease(thread_id: int, owner: str) -> bool:
    """One fold of a thread at a time, inline or background: a conditional update, so two
    workers (or two recalls) that fold at once never pay twice for one summary.

    The lease lasts FOLD_LEASE seconds and its holder's heartbeat renews it. Taking a
    lease that was never released (it ran out, or this very owner holds it: a redelivered
    task keeps its id) means the process that held it died: that is counted, and the
    FOLD_MAX_DEATHS-th death parks the thread's fold instead (see `park_fold`). A parked
    thread lends its lease to no one until its back-off is over.
    """
    now = timezone.now()
    lease = {
        "fold_lease_until": now + timedelta(seconds=float(memory_settings.FOLD_LEASE)),
        "fold_lease_owner": owner,
        "fold_queued_until": None,  # the queued task (or an inline fold) now runs
    }
    unparked = Thread.objects.filter(pk=thread_id).filter(
        Q(fold_parked_until__isnull=True) | Q(fold_parked_until__lte=now)
    )
    if unparked.filter(fold_lease_owner="").update(**lease):
        return True
    died = Q(fold_lease_owner=owner) | Q(fold_lease_until__lt=now) | Q(fold_lease_until=None)
    if not unparked.filter(died).update(**lease, fold_deaths=F("fold_deaths") + 1):
        return False
    # Only the lease's holder calls for this thread's recall folds: a call it left
    # reserved died with it.
    ledger.settle_killed(
        SummarizerCall.objects.filter(thread_id=thread_id, purpose=FoldPurpose.RECALL_FOLD),
        "The fold's worker died during the call (its lease was never released); settled "
        "by the fold that took the lease over.",
    )
    deaths = Thread.objects.filter(pk=thread_id).values_list("fold_deaths", flat=True).first()
    if deaths is not None and deaths >= memory_settings.FOLD_MAX_DEATHS:
        park_fold(thread_id, deaths)
        return False
    logger.warning(
        "agentmemory: a fold of thread %s died holding its lease (%s of %s deaths before "
        "it is parked); folding it again.", thread_id, deaths, memory_settings.FOLD_MAX_DEATHS,
    )
    return True


def release_fold_lease(thread_id: int, owner: str, *, retrying: bool = False) -> None:
    """The holder finished (folded, declined or failed): its attempt did not die.

    ``retrying``: the holder's task is about to retry, so the release marks the thread's
    fold queued in the same update, leaving no moment for a second chain to start.
    """
    queued = {}
    if retrying:
        seconds = float(memory_settings.FOLD_LEASE)
        queued["fold_queued_until"] = timezone.now() + timedelta(seconds=seconds)
    Thread.objects.filter(pk=thread_id, fold_lease_owner=owner).update(
        fold_lease_until=None, fold_lease_owner="", fold_deaths=0, fold_parked_until=None,
        **queued,
    )


@contextmanager
def held_lease(thread_id: int, owner: str, *, retried: bool = False) -> Iterator[None]:
    """Renew the lease every third of FOLD_LEASE while the block runs, then release it.

    The heartbeat runs on its own thread and database connection, so a long summarizer
    call keeps the lease while a killed worker's lease runs out within FOLD_LEASE.
    ``retried``: an error out of the block is retried by the caller's task (see
    `release_fold_lease`).
    """
    stop = threading.Event()
    seconds = float(memory_settings.FOLD_LEASE)

    def beat() -> None:
        try:
            while not stop.wait(seconds / 3):
                try:
                    Thread.objects.filter(pk=thread_id, fold_lease_owner=owner).update(
                        fold_lease_until=timezone.now() + timedelta(seconds=seconds)
                    )
                except DatabaseError as exc:  # the next beat tries again
                    logger.info("agentmemory: a fold lease heartbeat failed: %s", exc)
        finally:
            connections.close_all()

    heart = threading.Thread(target=beat, name=f"agentmemory-lease-{thread_id}", daemon=True)
    heart.start()
    failed = False
    try:
        yield
    except BaseException:
        failed = True
        raise
    finally:
        stop.set()
        heart.join()
        release_fold_lease(thread_id, owner, retrying=retried and failed)


def park_fold(thread_id: int, deaths: int) -> None:
    """Stop folding a thread whose folds keep dying: warn, signal, and wait for the sweep
    after FOLD_PARK_BACKOFF seconds, or for `unpark_fold`."""
    until = timezone.now() + timedelta(seconds=float(memory_settings.FOLD_PARK_BACKOFF))
    Thread.objects.filter(pk=thread_id).update(
        fold_parked_until=until, fold_lease_until=None, fold_lease_owner="",
        fold_queued_until=None,
    )
    logger.warning(
        "agentmemory: the fold of thread %s died %s times (FOLD_MAX_DEATHS) and is parked "
        "until %s: the sweep tries it again then, or unpark it in the admin. Its "
        "summarizer calls are in the ledger as 'killed'.", thread_id, deaths, until,
    )
    thread = Thread.objects.filter(pk=thread_id).first()
    if thread is not None:
        signals.fold_parked.send(sender=Thread, thread=thread, deaths=deaths, until=until)



class FoldState(models.TextChoices):
    """Where a thread's background fold stands after it was asked for."""

    QUEUED = "queued", "a fold task was sent"
    ALREADY_QUEUED = "already-queued", "a fold task is queued or waiting to retry"
    FOLDING = "folding", "a fold holds the thread's lease"
    PARKED = "parked", "the fold died FOLD_MAX_DEATHS times and is parked"
    BROKER_DOWN = "broker-down", "nothing could be queued: the broker did not answer"


@dataclass(frozen=True)
class FoldRequest:
    state: FoldState
    task_id: str | None = None
    parked_until: datetime | None = None



def fold_state(thread_id: int) -> FoldRequest:
    """Why no fold task was sent for a thread just now (see `request_fold`)."""
    now = timezone.now()
    thread = Thread.objects.filter(pk=thread_id).only(
        "fold_parked_until", "fold_lease_owner", "fold_lease_until"
    ).first()
    if thread is None or thread.fold_parked_until is not None:
        until = thread.fold_parked_until if thread else None
        return FoldRequest(FoldState.PARKED, parked_until=until)
    if thread.fold_lease_owner and (thread.fold_lease_until or now) >= now:
        return FoldRequest(FoldState.FOLDING)
    return FoldRequest(FoldState.ALREADY_QUEUED)
