"""A background recall reads only what the budget stage could pick, and picks the same.

`load_context` stops reading newest rows once they hold more than the room, then reads
the older visible summaries; the recall falls back on the full load when the budget
stage used up that short load (`Picked.took_oldest_turn`). The claim: the context is
the one the full load (`load_visible`, the row cap) gives, whatever the thread. Over
random threads (long and short messages, tool calls, summaries from inline folds at
random budgets, tool results orphaned by erasing their call) and random budgets, each
background recall is compared with the same recall made on the full load.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmemory import services
from agentmemory.models import EntryKind, MemoryEntry, Thread
from agentmemory.pipeline import intact, load
from agentmemory.pipeline.blocks import Tally
from agentmemory.pipeline.budget import context_room
from agentmemory.pipeline.config import RecallConfig
from agentmemory.services import recalls
from tests.test_recall_contract import turns

pytestmark = pytest.mark.django_db


def context(result: services.RecallResult) -> tuple[Any, ...]:
    return (result.messages, result.text, result.tokens, result.omitted,
            result.omitted_reason, result.budget_decline, result.summaries_used)


def background_recall_both_ways(
    thread: Thread, budget: int, monkeypatch: pytest.MonkeyPatch
) -> tuple[services.RecallResult, services.RecallResult, int]:
    """(short load, full load, rows the short load read)."""
    read: list[int] = []
    short_load = load.load_context

    def counting(*args: Any, **kwargs: Any) -> load.Loaded:
        loaded = short_load(*args, **kwargs)
        read.append(len(loaded.entries))
        return loaded

    # The load stage alone: no fold requested between the two recalls (`fold_for_room`).
    with monkeypatch.context() as patch:
        patch.setattr(recalls, "fold_for_room", lambda *args, **kwargs: None)
        patch.setattr(intact, "load_context", counting)
        short = services.recall(thread, budget, mode="background")
    with monkeypatch.context() as patch:
        patch.setattr(recalls, "fold_for_room", lambda *args, **kwargs: None)
        patch.setattr(intact, "load_context", load.load_visible)
        full = services.recall(thread, budget, mode="background")
    return short, full, read[0]


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(
    conversation=turns(),
    repeat=st.integers(min_value=1, max_value=4),
    # Small pages make the short load, its later pages and the summaries beyond it
    # common on threads of tens of rows; the claim holds for any page size.
    paging=st.sampled_from([(load.CONTEXT_MIN_PAGE, load.CONTEXT_PAGE_DIVISOR),
                            (1, 10**9), (4, 10**9), (16, 64)]),
    fold_budgets=st.lists(st.sampled_from([300, 600, 1500]), max_size=3),
    orphans=st.integers(min_value=0, max_value=3),
    budgets=st.lists(st.sampled_from([150, 300, 600, 1000, 2000, 4000]), min_size=1,
                     max_size=4),
)
def test_a_background_recall_gives_the_context_of_the_full_load(
    monkeypatch: pytest.MonkeyPatch, conversation: list[list[dict[str, Any]]], repeat: int,
    fold_budgets: list[int], orphans: int, budgets: list[int], paging: tuple[int, int],
) -> None:
    monkeypatch.setattr(load, "CONTEXT_MIN_PAGE", paging[0])
    monkeypatch.setattr(load, "CONTEXT_PAGE_DIVISOR", paging[1])
    thread = Thread.objects.create()
    for copy in range(repeat):  # long threads: the conversation again, with fresh call ids
        for turn in conversation:
            services.append(thread, [
                {**message, **({"tool_call_id": f"{message['tool_call_id']}-{copy}"}
                               if message.get("tool_call_id") else {}),
                 **({"tool_calls": [{**call, "id": f"{call['id']}-{copy}"}
                                    for call in message["tool_calls"]]}
                    if message.get("tool_calls") else {})}
                for message in turn
            ])
        if copy < len(fold_budgets):  # summaries somewhere in the middle
            services.recall(thread, fold_budgets[copy], mode="inline")
    callers = MemoryEntry.objects.filter(thread=thread, kind=EntryKind.MESSAGE,
                                         role="assistant").exclude(tool_calls=[])
    for caller in list(callers.order_by("?")[:orphans]):  # results left without their call
        services.erase_entry(caller)
    for budget in budgets:
        short, full, read = background_recall_both_ways(thread, budget, monkeypatch)
        assert context(short) == context(full)
        # Never more than the full load's rows and the summaries older than them.
        summaries = MemoryEntry.objects.filter(thread=thread).visible(None, None).summaries()
        assert read <= full.loaded_count + summaries.count()


def test_a_long_unfolded_thread_is_read_in_one_short_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    thread = Thread.objects.create()
    services.append(thread, [
        {"role": "user" if n % 2 == 0 else "assistant",
         "content": f"message {n} about order {n}, the parcel and the carrier"}
        for n in range(3000)
    ])
    short, full, read = background_recall_both_ways(thread, 4000, monkeypatch)
    assert context(short) == context(full)
    assert full.loaded_count > 1500
    assert read < full.loaded_count / 3, (read, full.loaded_count)


def chat_turns(start: int, count: int) -> list[dict[str, Any]]:
    return [
        message
        for n in range(start, start + count)
        for message in (
            {"role": "user", "content": f"Turn {n}: where is order {n}? The parcel is late "
             "and the tracking page has said the same thing for a week now."},
            {"role": "assistant", "content": f"Order {n} left the warehouse on Monday; the "
             "carrier expects to deliver it on Friday."},
        )
    ]


def test_a_summary_older_than_the_rows_read_is_still_recalled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    thread = Thread.objects.create()
    services.append(thread, chat_turns(0, 30))
    folded = services.recall(thread, 600, mode="inline")
    assert folded.summaries_used, "the inline recall made no summary to test with"
    services.append(thread, chat_turns(30, 80))  # newer than the room by far
    short, full, read = background_recall_both_ways(thread, 1000, monkeypatch)
    assert set(folded.summaries_used) & set(short.summaries_used)
    assert context(short) == context(full)
    assert read < full.loaded_count


def test_a_short_load_used_up_by_orphaned_results_falls_back_on_the_full_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    thread = Thread.objects.create()
    services.append(thread, chat_turns(0, 40))
    calls = [f"call-{n}" for n in range(100)]  # more than the first page of rows
    services.append(thread, [
        {"role": "user", "content": "Check all hundred orders."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": call, "name": "lookup", "arguments": "{}"} for call in calls]},
        *({"role": "tool", "tool_name": "lookup", "tool_call_id": call,
           "content": "in transit, " * 5} for call in calls),
    ])
    services.append(thread, chat_turns(40, 1))
    caller = next(entry for entry in MemoryEntry.objects.filter(thread=thread, role="assistant")
                  if len(entry.tool_calls) == 100)
    services.erase_entry(caller)  # a hundred results, over 1,000 tokens, left without a call
    short, full, read = background_recall_both_ways(thread, 1000, monkeypatch)
    assert context(short) == context(full)
    # The older turns fit once the orphans are set aside: the full load was needed.
    assert any(m.content.startswith("Turn 39:") for m in short.messages)


# ---------------------------------------------------------------- fold_due's tally


def fold_due_both_ways(thread: Thread, monkeypatch: pytest.MonkeyPatch) -> tuple[bool, bool]:
    """(fold_due with the tally's short cut, fold_due always reading the rows)."""
    from agentmemory.services import background

    quick = background.fold_due(thread)
    real = background.tally_visible

    def over_the_row_cap(*args: Any, **kwargs: Any) -> tuple[Tally, bool, bool]:
        counted = real(*args, **kwargs)  # as if over the row cap: the rows are read
        return (counted[0] if counted else Tally(0, 0, 0, 0)), False, False

    with monkeypatch.context() as patch:
        patch.setattr(background, "tally_visible", over_the_row_cap)
        full = background.fold_due(thread)
    return quick, full


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(
    conversation=turns(),
    fold_budget=st.sampled_from([None, 300, 800, 2000]),
    folds=st.lists(st.sampled_from([300, 600, 1500]), max_size=2),
)
def test_the_tally_decides_a_fold_as_reading_the_rows_does(
    monkeypatch: pytest.MonkeyPatch, conversation: list[list[dict[str, Any]]],
    fold_budget: int | None, folds: list[int],
) -> None:
    thread = Thread.objects.create(fold_budget=fold_budget)
    for number, turn in enumerate(conversation):
        services.append(thread, turn)
        if number < len(folds):
            services.recall(thread, folds[number], mode="inline")
        quick, full = fold_due_both_ways(thread, monkeypatch)
        assert quick == full


def test_an_append_to_a_short_thread_decides_in_one_query_reading_no_row() -> None:
    from agentmemory.services import background

    thread = Thread.objects.create()
    services.append(thread, chat_turns(0, 5))
    with CaptureQueriesContext(connection) as queries:
        assert background.fold_due(thread) is False
    assert len(queries) == 1 and "SUM(" in queries[0]["sql"].upper()


@pytest.mark.parametrize("extra", [-300, 500])
def test_a_backlog_is_counted_to_a_bound(extra: int) -> None:
    """``omitted`` of a backlog longer than the load: exact up to `OMITTED_COUNT_LIMIT`,
    that bound beyond it (the count stops reading there, and reads none of the rows the
    load read)."""
    budget = 600
    cap = load.row_cap(RecallConfig.build(), context_room(budget, RecallConfig.build()))
    size = cap + load.OMITTED_COUNT_LIMIT + extra
    thread = Thread.objects.create(fold_queued_until=timezone.now() + timedelta(hours=1))
    services.append(thread, [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"message {n} of the backlog"}
        for n in range(size)
    ])
    with CaptureQueriesContext(connection) as queries:
        result = services.recall(thread, budget, mode="background")
    assert result.omitted_reason == "fold-pending"
    read = result.loaded_count
    assert read < size
    assert result.omitted == min(size - len(result.messages), load.OMITTED_COUNT_LIMIT)
    # The count skips the rows the load read (a backlog has no summaries: all of them)
    # and reads no further than the bound.
    [count] = [q["sql"] for q in queries if q["sql"].upper().startswith("SELECT COUNT(*)")]
    assert int(re.findall(r"OFFSET (\d+)", count)[-1]) == read
    assert int(re.findall(r"LIMIT (\d+)", count)[-1]) <= load.OMITTED_COUNT_LIMIT
