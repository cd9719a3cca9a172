"""A recall costs the same number of queries however long the thread is.

THE REQUIRED TEST: one recall on a thread of 50 entries and on one of 5,000 entries
makes the same number of queries, for a recall that folds and for one that does not.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.models.signals import post_init
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from agentmemory import services
from agentmemory.models import MemoryEntry, Thread
from agentmemory.pipeline.budget import context_room
from agentmemory.pipeline.config import RecallConfig
from agentmemory.pipeline.load import row_cap
from agentmemory.summarizers import testing
from tests.helpers import AT_LENGTH, add_turns, make_thread, recording_settings

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
BIG = 100_000
SIZES = (50, 5_000)


def build(entries: int) -> Thread:
    """A thread of ``entries`` rows (tool-using turns of 4), written in one batch."""
    thread = make_thread()
    add_turns(thread, entries // 4, now=NOW)
    remainder = entries % 4
    if remainder:
        services.append(
            thread,
            [{"role": "user", "content": f"Extra note {n}."} for n in range(remainder)],
            now=NOW,
        )
    assert MemoryEntry.objects.filter(thread=thread).count() == entries
    return thread


#: The statements the last `queries_of` counted, for a failure's message.
LAST: list[str] = []


def queries_of(action: Callable[[], object]) -> tuple[int, object]:
    with CaptureQueriesContext(connection) as captured:
        result = action()
    LAST[:] = [q["sql"][:90] for q in captured.captured_queries]
    return len(captured.captured_queries), result


def test_a_recall_that_folds_costs_the_same_on_50_and_5000_entries() -> None:
    counts = []
    for size in SIZES:
        thread = build(size)
        count, result = queries_of(lambda thread=thread: services.recall(thread, BIG, now=NOW))
        assert isinstance(result, services.RecallResult)
        assert result.folded_summary_id is not None, f"no fold on {size} entries"
        counts.append(count)

    assert counts[0] == counts[1], f"queries per size {dict(zip(SIZES, counts, strict=True))}"
    # 14 before the one lock order; the ledger row's reservation and its settlement each
    # lock the thread row first (a thread erased mid-call is counted, not a 500); the
    # summarizer's circuit is read before the call, and the span's earlier calls are
    # counted to number this one (issue 25).
    assert counts[0] <= 18


def test_a_recall_that_does_not_fold_costs_the_same_on_50_and_5000_entries() -> None:
    counts = []
    for size in SIZES:
        thread = build(size)
        count, result = queries_of(
            lambda thread=thread: services.recall(
                thread, BIG, now=NOW, trigger_min_entries=10_000
            )
        )
        assert isinstance(result, services.RecallResult)
        # The load edge may cut a tool call from its result: that result is left out, counted.
        assert result.folded_summary_id is None
        assert len(result.messages) + result.omitted == 20
        counts.append(count)

    assert counts[0] == counts[1], f"queries per size {dict(zip(SIZES, counts, strict=True))}"
    assert counts[0] == 1  # the load; nothing else


def test_a_recall_answered_by_a_latch_costs_the_same_on_50_and_5000_entries() -> None:
    testing.calls.clear()
    counts = []
    with override_settings(AGENTMEMORY=recording_settings(AT_LENGTH)):
        for size in SIZES:
            thread = build(size)
            assert services.recall(thread, BIG, now=NOW).decline == "not-smaller"
            count, result = queries_of(
                lambda thread=thread: services.recall(thread, BIG, now=NOW)
            )
            assert isinstance(result, services.RecallResult)
            assert result.decline == "not-smaller"
            assert len(result.messages) + result.omitted == 20
            counts.append(count)

    assert len(testing.calls) == 2  # one per thread: the latch answered the second recalls
    assert counts[0] == counts[1], f"queries per size {dict(zip(SIZES, counts, strict=True))}"
    assert counts[0] == 4  # the load, the lease taken and given back, and the latch


def test_a_background_recall_waiting_for_its_fold_reads_only_its_context() -> None:
    """A backlog the room cannot hold and a fold already queued: the recall says
    ``fold-pending`` and builds only the rows its context could use, never the row cap a
    fold plans over (the fold plans for itself when it runs)."""
    budget = 4_000
    thread = build(SIZES[-1])
    Thread.objects.filter(pk=thread.pk).update(
        fold_queued_until=datetime.now(UTC) + timedelta(hours=1)
    )
    built: list[object] = []

    def count(sender: object, instance: object, **kwargs: object) -> None:
        built.append(instance)

    driven = {"LOAD_COUNT": None, "TRIGGER_MIN_ENTRIES": None, "FOLD_HIGH_WATER": 0.6,
              "RECALL_MODE": "background"}
    with override_settings(AGENTMEMORY=driven):
        cap = row_cap(RecallConfig.build(), context_room(budget, RecallConfig.build()))
        post_init.connect(count, sender=MemoryEntry)
        try:
            queries, result = queries_of(lambda: services.recall(thread, budget, now=NOW))
        finally:
            post_init.disconnect(count, sender=MemoryEntry)
    assert isinstance(result, services.RecallResult)
    assert result.omitted_reason == "fold-pending" and result.omitted > 0
    assert len(built) < cap // 2, f"{len(built)} rows built (row cap {cap}): {LAST}"
    # the load (every visible summary and the first page of newest messages in one round
    # trip, `pipeline.rows`; these short messages take a second page), the count of the
    # visible rows it left unread, the thread's fold room (the first recall at this
    # budget records it), and whether a fold is on its way
    loads = [sql for sql in LAST if sql.startswith('SELECT "agentmemory_memoryentry"')]
    assert len(loads) <= 2 and queries == len(loads) + 3, LAST
    with override_settings(AGENTMEMORY=driven):
        again, _ = queries_of(lambda: services.recall(thread, budget, now=NOW))
    assert again == len(loads) + 2, LAST  # the fold room is recorded


def test_an_append_costs_the_same_on_50_and_5000_entries() -> None:
    counts = []
    for size in SIZES:
        thread = build(size)
        count, _ = queries_of(
            lambda thread=thread: services.append(
                thread, {"role": "user", "content": "One more question."}, now=NOW
            )
        )
        assert Thread.objects.get(pk=thread.pk).last_position == size + 1
        counts.append(count)

    assert counts[0] == counts[1], f"queries per size {dict(zip(SIZES, counts, strict=True))}"
    # the savepoint, the row lock and the counters in one UPDATE (were a lock and an
    # UPDATE), the insert, the savepoint's release
    assert counts[0] == 4, "\n".join(LAST)


@pytest.mark.django_db(transaction=True)  # the fold decision runs on a real commit
@pytest.mark.parametrize(("fold", "counters"), [
    ("on its way", "folded"), ("not due", "folded"), ("not due", "unfolded")])
def test_an_append_over_the_api_costs_the_same_on_50_and_5000_entries(
    fold: str, counters: str, on_postgres: bool
) -> None:
    """The request path of one message, background mode: the thread lookup, the append,
    and the fold decision (one query, which also says a fold is on its way), whatever the
    thread's length. On PostgreSQL the append is one statement (`append_schema.body`,
    as the function's call or sent itself, its own commit) which is the lookup too (only
    of the owner's thread), and asks no decision while a fold is on its way; on SQLite
    the lookup, then BEGIN, the row lock and the counters in one UPDATE, the insert,
    COMMIT. A thread no fold has written a summary in whose counters show no fold
    pressure (`background.fold_ruled_out`) asks no decision."""
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    user = get_user_model().objects.create_user("counted")
    client = APIClient()
    client.force_authenticate(user)
    threads = [build(size) for size in SIZES]  # inline: no fold is asked for meanwhile
    queued = NOW.replace(year=2999) if fold == "on its way" else None
    Thread.objects.update(owner=user, fold_queued_until=queued)
    if counters == "folded":  # as a fold's write-back leaves them
        Thread.objects.update(unfolded_tokens=None)
    counts = []
    budget = 10_000_000 if fold == "not due" else 4000  # budget-driven: no fold pressure
    driven = {"LOAD_COUNT": None, "TRIGGER_MIN_ENTRIES": None, "FOLD_HIGH_WATER": 1.0}
    with override_settings(AGENTMEMORY={"RECALL_MODE": "background", "FOLD_BUDGET": budget,
                                        **driven}):
        for thread in threads:
            count, response = queries_of(lambda thread=thread: client.post(
                f"/api/memory/threads/{thread.pk}/entries/",
                {"role": "user", "content": "One more question."}, format="json"))
            assert response.status_code == 201, response.content
            counts.append(count)
    assert counts[0] == counts[1], f"queries per size {dict(zip(SIZES, counts, strict=True))}"
    # the thread and the append (PostgreSQL: one statement, which also reads whether a
    # fold is on its way; SQLite: the thread, then BEGIN, the counters, the insert,
    # COMMIT), and the fold decision unless the counters rule it out (or, on PostgreSQL,
    # a fold is on its way)
    append = 1 if on_postgres else 1 + 4
    decides = counters != "unfolded" and not (on_postgres and fold == "on its way")
    assert counts[0] == append + decides, "\n".join(LAST)
