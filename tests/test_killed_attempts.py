"""Every attempt settles (issue 25, part 3), in-process.

A reserved ledger row whose attempt died is settled as ``killed`` by the fold that
takes its lease over, by the one that parks the fold, or by the sweep; its estimate
stays its cost. The real-worker side (SIGKILL mid-call, a poison fold) is in
``tests/test_worker.py``; a paid call whose write-back failed, in ``tests/test_faults.py``.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from agentmemory import services
from agentmemory.folding.lease import take_fold_lease
from agentmemory.models import CallOutcome, FoldPurpose, SummarizerCall, Thread
from agentmemory.summarizers import get_summarizer
from agentmemory.summarizers.base import SummaryResult
from agentmemory.trust import ledger

pytestmark = pytest.mark.django_db

DEAD = "a-worker-that-died"


def reserved(thread: Thread, *, purpose: str = FoldPurpose.RECALL_FOLD,
             span_key: str = "span-1", estimate: int = 900) -> SummarizerCall:
    row = ledger.reserve(thread, get_summarizer(), purpose=purpose, span_key=span_key,
                         entry_count=10, estimated_tokens=estimate)
    assert row is not None
    return row


def lease_lapsed(thread: Thread, owner: str = DEAD) -> None:
    """The thread's lease as a worker killed mid-call leaves it: held, run out."""
    Thread.objects.filter(pk=thread.pk).update(
        fold_lease_owner=owner, fold_lease_until=timezone.now() - timedelta(seconds=1))


def outcome(row: SummarizerCall) -> tuple[str, str]:
    row.refresh_from_db()
    return row.outcome, row.error_class


def test_the_fold_that_takes_a_dead_lease_over_settles_its_call_as_killed(settings: Any) -> None:
    owner = get_user_model().objects.create_user("ada")
    thread = Thread.objects.create(owner=owner)
    row = reserved(thread, estimate=900)
    window = reserved(thread, purpose=FoldPurpose.WINDOW_FOLD, span_key="window")
    other = reserved(Thread.objects.create(owner=owner))
    lease_lapsed(thread)

    assert take_fold_lease(thread.pk, "the-next-worker")

    assert outcome(row) == (CallOutcome.KILLED, ledger.KILLED_ERROR)
    assert "took the lease over" in row.error_message
    # Only the lease holder's calls died with it: a window fold takes no lease, and
    # another thread's call is not this lease's.
    assert outcome(window) == (CallOutcome.RESERVED, "")
    assert outcome(other) == (CallOutcome.RESERVED, "")
    # The estimate stays the cost: quota and totals count it.
    assert SummarizerCall.objects.filter(pk=row.pk).charged_tokens() == 900
    assert ledger.tokens_used_today(owner.pk) == 900 * 3


def test_a_lease_taken_from_a_live_fold_settles_nothing() -> None:
    thread = Thread.objects.create()
    row = reserved(thread)
    assert take_fold_lease(thread.pk, "the-holder")  # a free lease: nobody died
    assert not take_fold_lease(thread.pk, "another")  # held and renewed: nobody died
    assert outcome(row) == (CallOutcome.RESERVED, "")


def test_the_delivery_that_parks_a_fold_settles_the_last_killed_call(settings: Any) -> None:
    settings.AGENTMEMORY = {"FOLD_MAX_DEATHS": 1}
    thread = Thread.objects.create()
    row = reserved(thread)
    lease_lapsed(thread)

    assert services.fold_until_settled(thread.pk, lease_owner="redelivered")[0].decline == (
        "fold-parked")

    assert Thread.objects.get(pk=thread.pk).fold_parked_until is not None
    assert outcome(row) == (CallOutcome.KILLED, ledger.KILLED_ERROR)


def test_a_call_still_running_settles_its_own_row_over_the_killed_mark() -> None:
    thread = Thread.objects.create()
    row = reserved(thread)
    lease_lapsed(thread)
    assert take_fold_lease(thread.pk, "the-next-worker")
    assert outcome(row)[0] == CallOutcome.KILLED

    ledger.settle(row, started=time.monotonic(), outcome=CallOutcome.FOLDED,
                  result=SummaryResult(text="late", prompt_tokens=700, completion_tokens=50))

    row.refresh_from_db()
    assert (row.outcome, row.error_class, row.prompt_tokens) == (CallOutcome.FOLDED, "", 700)


def test_the_sweep_settles_calls_older_than_any_call_can_last(settings: Any) -> None:
    settings.AGENTMEMORY = {"FOLD_LEASE": 60}
    longest = max(60.0, get_summarizer().timeout)
    now = timezone.now()
    abandoned = Thread.objects.create()
    held = Thread.objects.create()
    old_window = reserved(abandoned, purpose=FoldPurpose.WINDOW_FOLD, span_key="w")
    old_recall = reserved(abandoned)
    recent = reserved(abandoned, span_key="span-2")
    under_a_live_lease = reserved(held)
    gone = reserved(Thread.objects.create())
    Thread.objects.filter(pk=gone.thread_id).delete()  # the row keeps no thread
    old = now - timedelta(seconds=2 * longest + 1)
    SummarizerCall.objects.exclude(pk=recent.pk).update(created_at=old)
    SummarizerCall.objects.filter(pk=recent.pk).update(
        created_at=now - timedelta(seconds=2 * longest - 5))
    Thread.objects.filter(pk=held.pk).update(
        fold_lease_owner="alive", fold_lease_until=now + timedelta(seconds=30))

    services.sweep(now=now)

    for row in (old_window, old_recall, gone):
        assert outcome(row) == (CallOutcome.KILLED, ledger.KILLED_ERROR)
        assert "settled by the sweep" in row.error_message
    assert outcome(recent) == (CallOutcome.RESERVED, "")
    assert outcome(under_a_live_lease) == (CallOutcome.RESERVED, "")


def test_calls_of_one_span_are_numbered() -> None:
    thread = Thread.objects.create()
    first, second = reserved(thread), reserved(thread)
    elsewhere = reserved(thread, span_key="span-2")
    retried = ledger.reserve(thread, get_summarizer(), purpose=FoldPurpose.RECALL_FOLD,
                             span_key="span-3", entry_count=1, estimated_tokens=1, attempt=3)
    assert retried is not None
    assert [first.attempt, second.attempt, elsewhere.attempt, retried.attempt] == [1, 2, 1, 3]
