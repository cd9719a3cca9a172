"""The recall contract (SPEC law 13), clause by clause, over random conversations.

Random turns (short and long messages, tool calls with one or two results, turns with
no tool at all) are appended the way an agent does: the user's message, a recall at a
random budget, then the agent's replies. Every recall is checked against every clause,
and recalled again to check that nothing changes and nothing is paid for twice.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmemory import services
from agentmemory.folding import DeclineReason
from agentmemory.models import EntryKind, MemoryEntry, SummarizerCall, Thread
from agentmemory.pipeline.budget import NEWEST_TURN_TOO_LARGE, context_room
from agentmemory.pipeline.config import RecallConfig
from agentmemory.pipeline.recall import FOLD_PENDING
from agentmemory.services import RecallResult

pytestmark = pytest.mark.django_db

#: Declines that leave a fold undone whatever the planner does: the summarizer's answer
#: (failed, refused as not smaller, facts lost), the quota, review, a fold elsewhere.
SUMMARIZER_DECLINES = {
    DeclineReason.SUMMARIZER_FAILED, DeclineReason.NOT_SMALLER, DeclineReason.LOST_FACTS,
    DeclineReason.QUOTA_EXCEEDED, DeclineReason.HELD_FOR_REVIEW, DeclineReason.FOLD_IN_PROGRESS,
}

WORDS = ["parcel", "NW-48217", "refund", "$12.50", "carrier", "2026-12-03", "Ada", "late",
         "address", "label", "warehouse", "order", "DHL", "tracking", "please", "check"]


@st.composite
def turns(draw: st.DrawFn) -> list[list[dict[str, Any]]]:
    """A conversation: each turn a user message, maybe tool calls and results, a reply."""
    conversation = []
    for number in range(draw(st.integers(min_value=1, max_value=24))):
        def text(low: int, high: int) -> str:
            count = draw(st.integers(min_value=low, max_value=high))
            return " ".join(draw(st.sampled_from(WORDS)) for _ in range(count))

        turn: list[dict[str, Any]] = [{"role": "user", "content": text(2, 60)}]
        calls = draw(st.integers(min_value=0, max_value=2))
        if calls:
            ids = [f"call-{number}-{index}" for index in range(calls)]
            turn.append({
                "role": "assistant", "content": "",
                "tool_calls": [
                    {"id": call_id, "name": "lookup", "arguments": json.dumps({"q": text(1, 4)})}
                    for call_id in ids
                ],
            })
            turn.extend(
                {"role": "tool", "tool_name": "lookup", "tool_call_id": call_id,
                 "content": text(3, 120)}
                for call_id in ids
            )
        turn.append({"role": "assistant", "content": text(1, 40)})
        conversation.append(turn)
    return conversation


def stood_for(summary_id: int) -> set[int]:
    summary = MemoryEntry.objects.get(pk=summary_id)
    return {entry.pk for entry in services.expand(summary, recursive=True)}


def check_contract(
    thread: Thread, result: RecallResult, budget: int, newest_turn: int, *, pending: bool = False
) -> None:
    """Every clause of the contract; with ``pending`` (a background recall before its
    worker ran), a gap may also be one a queued fold will close (``fold-pending``)."""
    context_ids = [message.id for message in result.messages]
    messages = list(MemoryEntry.objects.filter(thread=thread, kind=EntryKind.MESSAGE))
    newest = [entry for entry in messages if entry.turn == newest_turn]
    room = context_room(budget, RecallConfig.build())

    # (b) the newest turn, its user message first, verbatim at the end; or a decline.
    if result.budget_decline == NEWEST_TURN_TOO_LARGE:
        assert result.messages == [] and result.omitted > 0
        assert sum(e.token_count + 1 for e in newest) > room
        return
    assert result.budget_decline is None
    assert context_ids[-len(newest):] == [entry.pk for entry in newest]
    assert newest[0].role == "user"

    if pending and result.omitted_reason == FOLD_PENDING:
        # Read before the fold it queued (which an eager worker has run since): the
        # thread's rows no longer show what it left out. The next recall is checked whole.
        assert result.omitted > 0
        return

    # (a) gapless: every earlier message verbatim or stood for by a summary in the context,
    # or the result says how many visible entries it left out and why.
    covered = set(context_ids)
    for summary_id in result.summaries_used:
        covered |= stood_for(summary_id)
    missing = [entry for entry in messages if entry.pk not in covered]
    visible = set(
        MemoryEntry.objects.filter(thread=thread).visible().values_list("pk", flat=True)
    )
    left_out = visible - set(context_ids)
    assert result.omitted == len(left_out)
    if missing:
        assert result.omitted > 0 and result.omitted_reason
        # A gap only when nothing could prevent it: the summarizer could not fold (its
        # decline says why), or the room cannot hold the newest turn beside one summary
        # standing for everything older. A count floor or "not worth a call" never.
        if result.decline not in SUMMARIZER_DECLINES:
            older = [e for e in MemoryEntry.objects.filter(pk__in=visible)
                     if e.turn != newest_turn or e.is_summary]
            assert len(older) == 1 and older[0].is_summary, (
                f"{len(missing)} originals left out ({result.omitted_reason}, decline "
                f"{result.decline}) while {len(older)} older entries could have been folded"
            )
            assert sum(e.token_count + 1 for e in newest) + older[0].token_count + 1 > room
    else:
        assert result.omitted == 0 and result.omitted_reason is None

    # (c) no tool call without its results, no result without its call.
    calls = {
        call["id"] for message in result.messages for call in message.tool_calls
    }
    answered = {m.tool_call_id for m in result.messages if m.role == "tool"}
    assert answered <= calls
    for call_id in calls:
        results = [e.pk for e in messages if e.role == "tool" and e.tool_call_id == call_id]
        assert set(results) <= set(context_ids), f"call {call_id} without its results"

    # (d) room goes to summaries first: the newest summary left out did not fit beside the
    # newest turn and the summaries picked, whatever verbatim turns took the rest.
    summaries_out = MemoryEntry.objects.filter(pk__in=left_out, kind=EntryKind.SUMMARY)
    if summaries_out:
        newest_out = max(summaries_out, key=lambda entry: entry.position)
        taken = sum(e.token_count + 1 for e in newest) + sum(
            m.tokens + 1 for m in result.messages if m.kind == "summary"
        )
        assert taken + newest_out.token_count + 1 > room

    # The context fits the budget less its reserve.
    assert result.tokens <= budget - RecallConfig.build().reserve_tokens


def check_idempotent(thread: Thread, result: RecallResult, budget: int) -> None:
    """(e) the same context again, and no summarizer call."""
    calls = SummarizerCall.objects.filter(thread=thread).count()
    again = services.recall(thread, budget)
    assert again.messages == result.messages and again.text == result.text
    assert SummarizerCall.objects.filter(thread=thread).count() == calls


#: Rooms from a few messages to a whole conversation.
BUDGETS = st.lists(st.sampled_from([500, 600, 1000, 1500, 4000, 16_000, 128_000]),
                   min_size=1, max_size=3)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.data_too_large])
@given(
    conversation=turns(),
    budgets=BUDGETS,
)
def test_every_recall_keeps_the_contract(
    conversation: list[list[dict[str, Any]]], budgets: list[int]
) -> None:
    thread = Thread.objects.create()
    for number, turn in enumerate(conversation):
        services.append(thread, turn[0])
        budget = budgets[number % len(budgets)]
        result = services.recall(thread, budget)
        check_contract(thread, result, budget, thread.last_turn)
        # (e) idempotent: the same context again, and no call.
        check_idempotent(thread, result, budget)
        if len(turn) > 1:
            services.append(thread, turn[1:])


@settings(max_examples=12, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture,
])
@given(
    conversation=turns(),
    budgets=BUDGETS,
)
def test_every_background_recall_keeps_the_contract_once_its_fold_has_run(
    eager_celery: None, conversation: list[list[dict[str, Any]]], budgets: list[int]
) -> None:
    """Background mode, the worker run eagerly (as soon as the recall queues it): a
    recall may leave history out only while a fold for its room is pending; the next
    recall, after the worker, keeps the whole contract, and so does the one after it."""
    thread = Thread.objects.create()
    with override_settings(AGENTMEMORY={"RECALL_MODE": "background"}):
        for number, turn in enumerate(conversation):
            services.append(thread, turn[0])
            budget = budgets[number % len(budgets)]
            first = services.recall(thread, budget)
            check_contract(thread, first, budget, thread.last_turn, pending=True)
            result = services.recall(thread, budget)
            check_contract(thread, result, budget, thread.last_turn)
            check_idempotent(thread, result, budget)
            if len(turn) > 1:
                services.append(thread, turn[1:])
