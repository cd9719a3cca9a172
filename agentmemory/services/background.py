"""Background folding: request, enqueue, the task's work, retry, give-up (the sweep
that sends what was missed is `agentmemory.services.sweeping`).

The database is the record of pending work (``Thread.fold_queued_until``, the lease in
`agentmemory.folding.lease`); the one piece of process state is `broker`, the back-off
after a broker outage.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from agentmemory.broker import (
    BROKER_BACKOFF_SECONDS,
    FOLD_TASK,
    broker,
    registered_task,
    send_within,
)
from agentmemory.conf import memory_settings
from agentmemory.exceptions import BrokerBusyError
from agentmemory.extras import require
from agentmemory.folding import DeclineReason, latched
from agentmemory.folding import circuit as circuits
from agentmemory.folding.lease import (
    FoldRequest,
    FoldState,
    fold_state,
    held_lease,
    take_fold_lease,
)
from agentmemory.models import FoldPurpose, Thread
from agentmemory.pipeline.blocks import Tally
from agentmemory.pipeline.budget import context_room
from agentmemory.pipeline.config import RecallConfig
from agentmemory.pipeline.load import load_visible, row_cap, tally_visible
from agentmemory.pipeline.plan import pressure
from agentmemory.pipeline.policy import fold_view, plan_next
from agentmemory.pipeline.recall import FOLD_PENDING, fold_while_due
from agentmemory.pipeline.summarize import FoldOutcome, report_summarizer_failure
from agentmemory.sql import fold_on_its_way
from agentmemory.summarizers import BaseSummarizer, get_summarizer
from agentmemory.trust import ledger

logger = logging.getLogger("agentmemory")



def fold_for_room(thread: Thread, budget_tokens: int, *, left_out: bool) -> str | None:
    """A background recall at ``budget_tokens``: the thread's fold room follows it down
    (unless ``Thread.fold_budget`` pins one), and when the context ``left_out`` history a
    fold for that room is requested. Returns ``fold-pending`` when a fold is on its way
    (queued, running, or recorded while the broker is down, for the sweep to send), the
    reason the fold would be declined (a latch, the quota), or None."""
    if thread.fold_budget is None and (
        thread.recall_budget is None or budget_tokens < thread.recall_budget
    ):
        if Thread.objects.follow_recall_budget(thread.pk, budget_tokens):
            thread.recall_budget = budget_tokens
    if not left_out:
        return None
    if fold_on_its_way(thread.pk, timezone.now()):
        # The fold on its way plans for itself when it runs (and re-checks when done):
        # recalls that wait for it read no more than their context.
        return FOLD_PENDING
    blocker = fold_blocker(thread)
    if blocker is not None:
        return None if blocker == NOTHING_TO_FOLD else blocker
    return FOLD_PENDING if request_fold(thread.pk).state in PENDING_STATES else None


#: Where a requested fold stands when a recall may say ``fold-pending``: the broker being
#: down loses nothing, the database records the request and the sweep sends it.
PENDING_STATES = frozenset(
    {FoldState.QUEUED, FoldState.ALREADY_QUEUED, FoldState.FOLDING, FoldState.BROKER_DOWN}
)


def fold_if_due(thread: Thread) -> None:
    """Request a background fold of the thread if one is due and none is on its way."""
    if fold_due(thread, unless_on_its_way=True):
        request_fold(thread.pk)


def fold_ruled_out(thread: Thread, *, rows: int, tokens: int | None) -> bool:
    """Whether the thread's counters alone show that `fold_if_due` would find no fold due,
    so an append need not ask: ``rows`` positions given out and ``tokens`` appended
    (`Thread.unfolded_tokens`, None once a fold has written a summary) have no fold
    pressure for the thread's room.

    Budget-driven, the decision's first question is the pressure of the visible entries'
    tally (`fold_blocker`). While no summary was written, every visible entry is a message
    the counters counted (at most ``rows`` of them, their cost at most ``tokens``) and none
    is a summary, and pressure only grows with rows and cost: counters without pressure
    mean a tally without it (tests/test_fold_shortcut.py holds the two together)."""
    if tokens is None:
        return False
    config = RecallConfig.build()
    if not config.budget_driven:
        return False
    room = context_room(thread.effective_fold_budget(), config)
    bound = Tally(rows, tokens, 0, 0)
    return not pressure(bound, room, config, complete=rows < row_cap(config, room))


def fold_due(
    thread: Thread, *, now: datetime | None = None, unless_on_its_way: bool = False
) -> bool:
    """Would a background fold fold now? The load, the latch check, and the quota.

    With ``unless_on_its_way`` (an append's question), no while a fold of the thread is
    queued, leased or parked: the fold on its way re-checks when it is done. Budget-driven,
    that is read in the same query as the tally, and most appends make no other."""
    return fold_blocker(thread, now=now, unless_on_its_way=unless_on_its_way) is None


#: `fold_blocker`'s answer when there is nothing to fold (or a fold is on its way).
NOTHING_TO_FOLD = "nothing-to-fold"


def fold_blocker(
    thread: Thread, *, now: datetime | None = None, unless_on_its_way: bool = False
) -> str | None:
    """Why a background fold would not fold now (`fold_due`): `NOTHING_TO_FOLD`, the
    latch's reason, or ``quota-exceeded``; None when it would."""
    config = RecallConfig.build()
    now = now or timezone.now()
    room = context_room(thread.effective_fold_budget(), config)
    if config.budget_driven:
        # Most appends find no pressure: one aggregate says so without reading a row.
        counted = tally_visible(thread, config, now, room, unless_on_its_way=unless_on_its_way)
        if counted is None:
            return NOTHING_TO_FOLD  # nothing visible, or a fold on its way
        tally, complete, expired = counted
        if complete and not expired and not pressure(tally, room, config, complete=True):
            return NOTHING_TO_FOLD
    elif unless_on_its_way and not (
        Thread.objects.without_fold_on_its_way(now)
        .filter(pk=thread.pk, fold_parked_until__isnull=True).exists()
    ):
        return NOTHING_TO_FOLD
    loaded, entries, complete = fold_view(thread, config, now, room, load=load_visible)
    if loaded.expired_summaries:
        return None
    plan = plan_next(entries, room, config, complete=complete)
    if plan is None:
        return NOTHING_TO_FOLD
    reason = latched(
        thread, FoldPurpose.RECALL_FOLD, span_key=plan.span_key, start_key=plan.start_key,
        span_tokens=plan.span_tokens,
    )
    if reason is not None:
        return reason
    if circuits.is_open(get_summarizer(), now):  # the sweep asks again once it closes
        return DeclineReason.SUMMARIZER_UNAVAILABLE
    return DeclineReason.QUOTA_EXCEEDED if ledger.quota_exceeded(thread) else None


def request_fold(thread_id: int, *, by_sweep: bool = False) -> FoldRequest:
    """Send ``fold_thread`` for a thread unless one is already on its way.

    One chain per thread: the send claims ``Thread.fold_queued_until`` by a conditional
    update (FOLD_LEASE seconds, renewed by a retrying task), so while a fold is queued,
    retrying or holding the lease, more requests answer with that state and send
    nothing. A parked thread is sent only by the sweep, once its back-off is over.
    The database is the record of pending work: when the broker is down or does not
    answer within BROKER_TIMEOUT this logs a warning, stops sending from this process
    for BROKER_BACKOFF_SECONDS (the sweep excepted) and answers BROKER_DOWN; the sweep
    enqueues the fold once the broker is back. Without Celery installed it raises
    MissingExtraError (the ``celery`` extra).
    """
    require("Background folding", "celery")
    if broker.is_down() and not by_sweep:
        # The broker failed moments ago: do not make this request wait too.
        return FoldRequest(FoldState.BROKER_DOWN)
    now = timezone.now()
    parked = Q(fold_parked_until__isnull=True)
    if by_sweep:
        parked |= Q(fold_parked_until__lte=now)
    else:
        parked &= Q(fold_cooling=False)
    # Only the sweep may claim a fold that gave up (`give_up_fold`); it clears the mark.
    cooling = by_sweep and Thread.objects.filter(pk=thread_id, fold_cooling=True).exists()
    claimed = (
        Thread.objects.without_fold_on_its_way(now)
        .filter(parked, pk=thread_id)
        .update(fold_queued_until=now + timedelta(seconds=float(memory_settings.FOLD_LEASE)),
                fold_cooling=False)
    )
    if not claimed:
        return fold_state(thread_id)
    try:
        task_id = send_within(
            registered_task(FOLD_TASK), (thread_id,), fold_task_options(get_summarizer()),
            float(memory_settings.BROKER_TIMEOUT), probe=by_sweep,
        )
    except Exception as exc:
        # Not sent: a fold that gave up stays the sweep's to retry.
        Thread.objects.filter(pk=thread_id).update(fold_queued_until=None, fold_cooling=cooling)
        if isinstance(exc, BrokerBusyError):  # the send that failed has said so
            return FoldRequest(FoldState.BROKER_DOWN)
        logger.warning(
            "agentmemory: could not enqueue the fold of thread %s (%s: %s); no fold is "
            "enqueued from this process for %s s, and the periodic sweep enqueues the "
            "missed ones when the broker is reachable.",
            thread_id,
            type(exc).__name__,
            exc,
            BROKER_BACKOFF_SECONDS,
        )
        return FoldRequest(FoldState.BROKER_DOWN)
    return FoldRequest(FoldState.QUEUED, task_id=task_id)


def enqueue_fold(thread_id: int, *, after_outage: bool = False) -> str | None:
    """`request_fold` for callers that need only the id of the task it sent, or None."""
    return request_fold(thread_id, by_sweep=after_outage).task_id


def fold_task_options(summarizer: BaseSummarizer) -> dict[str, Any]:
    """Queue and time limits for ``fold_thread``, above the summarizer's own timeout."""
    timeout = float(summarizer.timeout)
    options: dict[str, Any] = {
        "soft_time_limit": timeout + 30,
        "time_limit": timeout + 60,
        "retry": False,
    }
    if memory_settings.FOLD_QUEUE:
        options["queue"] = memory_settings.FOLD_QUEUE
    return options


def fold_until_settled(
    thread_id: int, *, attempt: int = 1, lease_owner: str | None = None
) -> list[FoldOutcome]:
    """The background fold: fold while a fold is due, at most FOLDS_PER_TASK times.

    Transient summarizer errors propagate (recorded in the ledger first) so the
    Celery task can retry; every other summarizer outcome is a result. Database errors
    propagate too (the task retries them).
    """
    thread = Thread.objects.filter(pk=thread_id).first()
    if thread is None:
        return []  # erased while the task waited: nothing to do
    # Between turns: a turn that has its answer folds like any older one (`plan.next_fold`).
    config = RecallConfig.build(mode="background")
    summarizer = get_summarizer()
    # A redelivered or retried task keeps its id, so it takes back the lease a killed
    # worker left behind instead of waiting for it to run out.
    owner = lease_owner or uuid.uuid4().hex
    if not take_fold_lease(thread_id, owner):  # another fold re-checks when done; or parked
        parked = fold_state(thread_id).state == FoldState.PARKED
        return [FoldOutcome(summary=None, decline=DeclineReason.FOLD_PARKED)] if parked else []
    with held_lease(thread_id, owner, retried=True):
        room = context_room(thread.effective_fold_budget(), config)
        outcomes = fold_while_due(thread, config, room, summarizer, attempt=attempt,
                                  raise_transient=True, max_folds=memory_settings.FOLDS_PER_TASK)
    if outcomes and outcomes[-1].folded and fold_due(thread):
        enqueue_fold(thread_id)  # appends that arrived meanwhile were turned away
    return outcomes


def fold_retry_pending(thread_id: int, countdown: float) -> None:
    """The task retries in ``countdown`` seconds: until then it stands for the thread's
    queued fold, so appends start no second retry chain."""
    until = timezone.now() + timedelta(seconds=countdown + float(memory_settings.FOLD_LEASE))
    Thread.objects.filter(pk=thread_id).update(fold_queued_until=until)


def give_up_fold(thread_id: int, exc: BaseException) -> None:
    """The background fold ran out of retries: the thread cools down (its fold counts
    as queued for CIRCUIT_BACKOFF seconds, and after that only the sweep sends it, so
    appends start no new chain); warn (once per process and summarizer) and send the
    decline signal."""
    cool = timezone.now() + timedelta(seconds=float(memory_settings.CIRCUIT_BACKOFF))
    Thread.objects.filter(pk=thread_id).update(fold_queued_until=cool, fold_cooling=True)
    thread = Thread.objects.filter(pk=thread_id).first()
    if thread is not None:
        report_summarizer_failure(thread, get_summarizer(), exc)


def unpark_fold(thread: Thread) -> FoldRequest:
    """A person's retry of a parked fold: forget its deaths and enqueue it now."""
    Thread.objects.filter(pk=thread.pk).update(fold_parked_until=None, fold_deaths=0,
                                               fold_cooling=False)
    thread.fold_parked_until, thread.fold_deaths = None, 0
    return request_fold(thread.pk)
