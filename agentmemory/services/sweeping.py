"""The sweep: send the folds that are due and were never sent (a task lost with a broker
outage or a killed worker, a parked fold whose back-off is over), and settle the ledger
rows of attempts that died unnoticed. The periodic task sweeps the threads written
lately; ``agentmemory_sweep`` does the same, wider if asked, thread by thread."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from agentmemory.conf import memory_settings
from agentmemory.folding.lease import FoldState, fold_state
from agentmemory.models import Thread
from agentmemory.services.background import fold_due, request_fold
from agentmemory.summarizers import get_summarizer
from agentmemory.trust import ledger


@dataclass(frozen=True)
class Swept:
    """What the sweep did for one thread: ``state`` is None when no fold was due, else
    where the fold's request stands (`FoldState.QUEUED`: sent now; in a dry run, it
    would be sent)."""

    thread_id: int
    state: FoldState | None


def sweep(*, now: datetime | None = None) -> list[int]:
    """Enqueue folds that are due but were never done (a lost task, a broker outage, a
    parked fold whose back-off is over); settle the ledger rows of attempts that died
    unnoticed (`settle_abandoned`).

    Looks at threads written within ``SWEEP_WINDOW`` seconds, newest first, at most
    ``SWEEP_LIMIT`` of them; returns the ids it enqueued.
    """
    now = now or timezone.now()
    settle_abandoned(now=now)
    return [
        swept.thread_id
        for swept in sweep_threads(sweep_candidates(now=now), now=now)
        if swept.state == FoldState.QUEUED
    ]


def settle_abandoned(*, now: datetime | None = None) -> int:
    """Settle as killed the ledger rows still reserved long after any call could last
    (twice FOLD_LEASE or the summarizer's timeout) whose thread no fold holds; returns
    how many."""
    longest_call = max(float(memory_settings.FOLD_LEASE), get_summarizer().timeout)
    return ledger.settle_abandoned(now or timezone.now(), longest_call)


def sweep_candidates(
    *, now: datetime | None = None, window: float | None = None, limit: int | None = None
) -> list[int]:
    """The ids of the threads a sweep looks at: written within ``window`` seconds
    (default SWEEP_WINDOW), newest first, at most ``limit`` (default SWEEP_LIMIT). Ids
    only, in one query; `sweep_threads` reads the threads a page at a time."""
    now = now or timezone.now()
    since = now - timedelta(seconds=window or memory_settings.SWEEP_WINDOW)
    return list(
        Thread.objects.filter(updated_at__gte=since)
        .order_by("-updated_at", "-pk")
        .values_list("pk", flat=True)[: limit or memory_settings.SWEEP_LIMIT]
    )


def sweep_threads(
    thread_ids: list[int], *, now: datetime | None = None, dry_run: bool = False,
    batch_size: int = 500,
) -> Iterator[Swept]:
    """For each thread of ``thread_ids`` in order (read ``batch_size`` at a time; gone
    ones are passed over), send its fold when `fold_due` says one is due, trying the
    broker even while it backs off (`request_fold` by the sweep). With ``dry_run``
    nothing is sent or written: a due fold is QUEUED when the sweep's claim would take
    it (no fold on its way, not parked or its back-off over), else its state now."""
    now = now or timezone.now()
    for start in range(0, len(thread_ids), batch_size):
        ids = thread_ids[start : start + batch_size]
        threads = Thread.objects.in_bulk(ids)
        for thread in (threads[pk] for pk in ids if pk in threads):
            if not fold_due(thread, now=now):
                yield Swept(thread.pk, None)
            elif not dry_run:
                yield Swept(thread.pk, request_fold(thread.pk, by_sweep=True).state)
            else:
                yield Swept(thread.pk, _claimable(thread, now))


def _claimable(thread: Thread, now: datetime) -> FoldState:
    """What the sweep's `request_fold` would find, without claiming anything."""
    claimable = Thread.objects.without_fold_on_its_way(now).filter(
        Q(fold_parked_until__isnull=True) | Q(fold_parked_until__lte=now), pk=thread.pk
    )
    return FoldState.QUEUED if claimable.exists() else fold_state(thread.pk).state
