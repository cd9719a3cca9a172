"""Folding many threads for an operator (``agentmemory_fold``): each thread a background
fold would fold now is folded forward until nothing is due, under its fold lease, and
what that cost is counted from the ledger."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Max, QuerySet

from agentmemory.folding import DeclineReason
from agentmemory.folding.lease import FoldState, fold_state, held_lease, take_fold_lease
from agentmemory.models import FoldPurpose, SummarizerCall, Thread
from agentmemory.paging import pages
from agentmemory.pipeline.budget import context_room
from agentmemory.pipeline.config import RecallConfig
from agentmemory.pipeline.recall import fold_while_due
from agentmemory.services.background import NOTHING_TO_FOLD, fold_blocker
from agentmemory.summarizers import get_summarizer

#: Why a due fold was not made that says the summarizer let it down: the work is not done.
FAILURES = frozenset({DeclineReason.SUMMARIZER_FAILED, DeclineReason.SUMMARIZER_UNAVAILABLE})


@dataclass(frozen=True)
class ThreadFold:
    """What `fold_backlog` did to one thread.

    ``due``: a fold was due when it was asked. ``summaries`` written and summarizer
    ``calls`` made (the thread's ledger rows, paid or not). ``reason``: why it stopped
    short, the decline that ended it or why it did not start (a latch, the quota, the
    summarizer's open circuit, another fold holding the lease, a parked fold); None when
    it folded until nothing was due (or, in a dry run, when it would fold).
    """

    thread_id: int
    due: bool
    summaries: int = 0
    calls: int = 0
    reason: str | None = None

    @property
    def failed(self) -> bool:
        """The summarizer failed or its circuit is open: the fold is still to be made."""
        return self.reason in FAILURES


def fold_backlog(
    thread: Thread, *, dry_run: bool = False, now: datetime | None = None
) -> ThreadFold:
    """Fold the thread as its background fold would (for its fold budget), but without
    a bound on the number of folds: a long history that was never folded (a backfill) is
    folded forward, oldest span first, each call within FOLD_INPUT_LIMIT, until nothing
    is due. Asks `fold_blocker` first, so a thread with nothing to fold costs its fold
    decision and nothing more; then takes the fold lease (another fold holding it, or a
    parked fold, is a ``reason``, not a wait). With ``dry_run`` it only asks: nothing is
    written."""
    blocker = fold_blocker(thread, now=now)
    if blocker == NOTHING_TO_FOLD:
        return ThreadFold(thread.pk, due=False)
    if blocker is not None or dry_run:
        return ThreadFold(thread.pk, due=True, reason=blocker)
    owner = uuid.uuid4().hex
    if not take_fold_lease(thread.pk, owner):
        parked = fold_state(thread.pk).state == FoldState.PARKED
        reason = DeclineReason.FOLD_PARKED if parked else DeclineReason.FOLD_IN_PROGRESS
        return ThreadFold(thread.pk, due=True, reason=reason)
    calls = SummarizerCall.objects.filter(thread=thread, purpose=FoldPurpose.RECALL_FOLD)
    before = calls.aggregate(last=Max("pk"))["last"] or 0
    config = RecallConfig.build(mode="inline")
    with held_lease(thread.pk, owner):
        room = context_room(thread.effective_fold_budget(), config)
        outcomes = fold_while_due(thread, config, room, get_summarizer(), max_folds=None)
    stopped = outcomes[-1] if outcomes and not outcomes[-1].folded else None
    return ThreadFold(
        thread.pk,
        due=True,
        summaries=sum(outcome.folded for outcome in outcomes),
        calls=calls.filter(pk__gt=before).count(),
        reason=stopped.decline if stopped else None,
    )


def fold_backlogs(
    threads: QuerySet[Thread], *, dry_run: bool = False, batch_size: int = 500
) -> Iterator[ThreadFold]:
    """`fold_backlog` for each of ``threads``, in id order, read ``batch_size`` at a
    time (`agentmemory.paging.pages`): one thread's result as soon as it is folded."""
    for page in pages(threads, batch_size):
        for thread in page:
            yield fold_backlog(thread, dry_run=dry_run)
