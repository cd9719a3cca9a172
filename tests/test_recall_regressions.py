"""Each failure measured on the count-driven recall (issue 11), as a test of the fix."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from agentmemory import services
from agentmemory.exceptions import AgentMemoryError
from agentmemory.models import (
    EntryKind,
    MemoryEntry,
    SummarizerCall,
    SummaryCoverage,
    Thread,
)
from agentmemory.pipeline.budget import NEWEST_TURN_TOO_LARGE
from agentmemory.pipeline.config import InvalidRecallOption
from agentmemory.pipeline.summary_area import MAX_SUMMARY_LEVEL
from agentmemory.summarizers import testing
from tests.helpers import SHORT_SUMMARY, recording_settings, turn_messages

pytestmark = pytest.mark.django_db

NOW = timezone.now().replace(microsecond=0)


def converse(
    thread: Thread, turns: range, budget: int, *, now: datetime | None = None,
    **overrides: object,
) -> list:
    """The agent's order: the user's message, a recall, then the replies (at ``now``)."""
    results = []
    for number in turns:
        messages = turn_messages(number, with_tools=number % 3 == 0)
        services.append(thread, messages[0], now=now)
        results.append(services.recall(thread, budget, now=now, **overrides))
        services.append(thread, messages[1:], now=now)
    return results


def live_summaries(thread: Thread) -> list[MemoryEntry]:
    return list(
        MemoryEntry.objects.filter(
            thread=thread, kind=EntryKind.SUMMARY, retired_at__isnull=True,
            covered_by__isnull=True,
        ).select_related("coverage")
    )


@pytest.mark.parametrize("budget", [1000, 1250, 1506])
def test_once_history_is_folded_every_context_holds_a_summary_and_no_split_pair(
    budget: int,
) -> None:
    thread = Thread.objects.create()
    results = converse(thread, range(1, 81), budget)
    first_fold = next(i for i, r in enumerate(results) if r.summaries_used)
    for result in results[first_fold:]:
        assert result.summaries_used, "a context without the summary of older history"
        assert result.omitted == 0 and result.omitted_reason is None
        first = next(m for m in result.messages if m.kind == "message")
        assert first.role != "tool", "a context that opens with a result whose call was cut"
        assert result.messages[-1].role == "user"


def test_a_newest_message_larger_than_the_room_is_declined_out_loud() -> None:
    thread = Thread.objects.create()
    converse(thread, range(1, 4), 1000)
    services.append(thread, {"role": "user", "content": "word " * 2000})
    result = services.recall(thread, 1000)
    assert result.budget_decline == NEWEST_TURN_TOO_LARGE
    assert result.messages == [] and result.text == ""
    assert result.omitted == len(MemoryEntry.objects.filter(thread=thread).visible())
    assert result.omitted_reason == NEWEST_TURN_TOO_LARGE


def test_a_budget_that_is_not_a_count_of_tokens_is_refused() -> None:
    thread = Thread.objects.create()
    for bad in (-1, "7", 8.0, True):
        with pytest.raises(InvalidRecallOption) as error:
            services.recall(thread, bad)  # type: ignore[arg-type]
        assert error.value.field == "budget_tokens"


def test_a_long_history_is_folded_forward_once_then_never_again() -> None:
    thread = Thread.objects.create()
    services.append(thread, [m for n in range(1, 101) for m in turn_messages(n)])  # 400
    first = services.recall(thread, 1000)
    calls = list(SummarizerCall.objects.filter(thread=thread).order_by("id"))
    assert calls and all(call.outcome == "folded" for call in calls)
    chunks = sorted(
        (s for s in MemoryEntry.objects.filter(thread=thread, kind=EntryKind.SUMMARY)
         .select_related("coverage") if s.coverage.level == 1),
        key=lambda s: s.pk,
    )
    # Forward: each chunk written starts where the one before it ended.
    starts = [chunk.coverage.from_turn for chunk in chunks]
    assert starts == sorted(starts) and starts[0] == 1
    assert first.omitted == 0 and first.summaries_used
    for _ in range(6):
        again = services.recall(thread, 1000)
        assert again.messages == first.messages
    assert SummarizerCall.objects.filter(thread=thread).count() == len(calls)


def test_a_backfill_in_background_mode_folds_in_bounded_spans_with_bounded_nesting() -> None:
    thread = Thread.objects.create()
    with override_settings(AGENTMEMORY={"RECALL_MODE": "background", "FOLDS_PER_TASK": 100,
                                        "FOLD_INPUT_LIMIT": 8000}):
        services.append(thread, [m for n in range(1, 1251) for m in turn_messages(n)])
        assert services.fold_due(thread)
        services.fold_until_settled(thread.pk)  # what the enqueued task runs
        calls = SummarizerCall.objects.filter(thread=thread)
        history = sum(e.token_count for e in MemoryEntry.objects.filter(
            thread=thread, kind=EntryKind.MESSAGE))
        # Each original is sent once, in spans of at most the input limit; a few merges.
        assert calls.count() <= history / 8000 * 1.5 + 4
        summaries = live_summaries(thread)
        # Each fold absorbs the summaries it must in its own call: nesting stops at the cap.
        assert max(s.coverage.level for s in summaries) <= MAX_SUMMARY_LEVEL
        result = services.recall(thread, 4000)
        assert result.omitted == 0 and result.summaries_used
        assert services.fold_due(thread) is False


def test_a_summary_expires_with_the_earliest_original_it_stands_for() -> None:
    start = timezone.now()
    thread = Thread.objects.create(ttl=timedelta(days=30))
    converse(thread, range(1, 20), 1000, now=start)
    # The TTL is lowered mid-thread: later originals expire before earlier ones.
    Thread.objects.filter(pk=thread.pk).update(ttl=timedelta(days=1))
    thread.refresh_from_db()
    canary = "card 4111-1111-1111-1111"
    services.append(thread, {"role": "user", "content": f"Charge my {canary} please."},
                    now=start)
    converse(thread, range(20, 40), 1000, now=start)
    # Written two hours on: at the canary's expiry these still live, beside summaries
    # that expired with it and left short runs of them verbatim (the recall must not
    # fold such a run alone, which no summary could make smaller, but merge first).
    converse(thread, range(40, 60), 1000, now=start + timedelta(hours=2))
    holding = MemoryEntry.objects.filter(
        thread=thread, kind=EntryKind.MESSAGE, content__contains=canary
    ).get()
    summary = MemoryEntry.objects.filter(
        thread=thread, kind=EntryKind.SUMMARY, sources__entry=holding
    ).first()
    assert summary is not None and summary.expires_at is not None
    assert summary.expires_at <= holding.expires_at
    later = holding.expires_at + timedelta(seconds=1)
    result = services.recall(thread, 1000, now=later)
    assert result.omitted == 0
    services.purge_expired(now=later)
    assert not MemoryEntry.objects.filter(thread=thread, content__contains=canary).exists()
    assert not MemoryEntry.objects.filter(pk=summary.pk).exists()


def test_a_ttl_added_mid_thread_never_leaves_a_summary_that_outlives_its_originals() -> None:
    thread = Thread.objects.create()
    converse(thread, range(1, 10), 1000)
    Thread.objects.filter(pk=thread.pk).update(ttl=timedelta(hours=1))
    thread.refresh_from_db()
    converse(thread, range(10, 60), 1000)
    for summary in MemoryEntry.objects.filter(thread=thread, kind=EntryKind.SUMMARY):
        expiries = [
            e.expires_at for e in services.expand(summary, recursive=True) if e.expires_at
        ]
        if expiries:
            assert summary.expires_at is not None and summary.expires_at <= min(expiries)


PARALLEL = 8
BARRIER = threading.Barrier(PARALLEL)


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_parallel_inline_recalls_of_a_due_thread_pay_for_one_summary(on_postgres: bool) -> None:
    if not on_postgres:
        pytest.skip("concurrent writers need PostgreSQL")
    # Slow: every other recall arrives while this call is in flight.
    settings = recording_settings(SHORT_SUMMARY, delay=0.5)
    with override_settings(AGENTMEMORY=settings):
        thread = Thread.objects.create()
        services.append(thread, [m for n in range(1, 41) for m in turn_messages(n)])
        results: list[object] = []

        def recall() -> None:
            try:
                BARRIER.wait(timeout=10)
                results.append(services.recall(thread, 1000))
            except Exception as exc:  # surfaced below
                results.append(exc)
            finally:
                connection.close()

        workers = [threading.Thread(target=recall) for _ in range(PARALLEL)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)
        assert testing.calls
        assert not [r for r in results if isinstance(r, Exception | AgentMemoryError)]
        calls = SummarizerCall.objects.filter(thread=thread)
        assert calls.count() == calls.filter(outcome="folded").count()
        contexts = {tuple(m.id for m in r.messages) for r in results}  # type: ignore[union-attr]
        assert len(contexts) == 1, "every recall waited for the one fold and saw its summary"


#: About a hundred tokens whatever the span, like a model asked to be brief.
FIXED_SUMMARY = (
    "The user is chasing late parcel orders and refunds. The agent looked each order "
    "up, reported carrier, status and delivery dates, confirmed the refunds approved "
    "and their amounts, and promised to follow up on the parcels still in transit. "
    "Open: the newest orders named and any refund still pending."
)


def test_a_small_room_never_nests_summaries_deeper_than_the_cap() -> None:
    # At 1,000 tokens the room holds one summary: every fold is merged with the last one.
    with override_settings(AGENTMEMORY=recording_settings(FIXED_SUMMARY)):
        thread = Thread.objects.create()
        results = converse(thread, range(1, 101), 1000)
    levels = SummaryCoverage.objects.filter(summary__thread=thread)
    assert levels.filter(level__gt=1).exists()
    assert max(levels.values_list("level", flat=True)) <= MAX_SUMMARY_LEVEL
    assert all(result.omitted == 0 for result in results)
    # The last context still stands for every earlier message, through at most the cap.
    last = results[-1]
    earlier = MemoryEntry.objects.filter(thread=thread, kind=EntryKind.MESSAGE, turn__lt=100)
    stood_for = {m.id for m in last.messages} | {
        e.pk
        for summary in MemoryEntry.objects.filter(pk__in=last.summaries_used)
        for e in services.expand(summary, recursive=True)
    }
    assert set(earlier.values_list("pk", flat=True)) <= stood_for


def test_a_budget_below_the_minimum_pays_for_no_fold() -> None:
    thread = Thread.objects.create()
    services.append(thread, [m for n in range(1, 61) for m in turn_messages(n)])
    result = services.recall(thread, 300)  # 300 - 256 reserve < 100 minimum
    assert result.budget_decline == "below-minimum-tokens" and result.messages == []
    assert not SummarizerCall.objects.filter(thread=thread).exists()
