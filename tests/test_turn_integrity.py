"""Turns are never split: not by a fold, a window compaction or a budget cut.

A turn is a user message and everything after it up to the next user message; a tool
call and its results are a pair. Random conversations (tool calls with one to three
results, results that arrive after the next user message, explicit turn numbers that
bump mid-turn or repeat on a user message, a system preamble) are stored with
``services.append``; then every seam runs over them at random budgets and knobs, and
each partition it makes (folded or kept, picked or left out, dropped or kept in the
window) must take every turn and every pair whole. Also: append and the API refuse a
tool result for a call the thread never stored, and call ids used twice.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from agentmemory import services
from agentmemory.exceptions import MessageConflictError, ToolCallIdError
from agentmemory.models import EntryKind, FoldedSpan, MemoryEntry, Thread
from agentmemory.pipeline.budget import pick_by_budget
from agentmemory.pipeline.config import RecallConfig
from agentmemory.pipeline.plan import next_fold
from agentmemory.pipeline.summarize import plan_fold
from agentmemory.window.seams import SlidingWindow, TokenBudgetWindow, WindowMessage

pytestmark = pytest.mark.django_db

WORDS = ["parcel", "NW-48217", "refund", "carrier", "late", "label", "order", "DHL", "check"]
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Messages in append's shape, in the order an agent appends them."""
    def text(low: int, high: int) -> str:
        return " ".join(draw(st.sampled_from(WORDS)) for _ in range(draw(st.integers(low, high))))

    messages: list[dict[str, Any]] = []
    turn, calls, late = 0, 0, []  # turn: the thread's turn counter, as append keeps it
    if draw(st.booleans()):
        messages.append({"role": "system", "content": "Answer briefly. " + text(1, 5)})
        turn = 1
    for _ in range(draw(st.integers(1, 12))):
        user: dict[str, Any] = {"role": "user", "content": text(1, 40)}
        if turn and draw(st.integers(0, 9)) == 0:
            user["turn"] = turn  # an explicit turn that joins the previous one
        else:
            turn += 1
        messages.append(user)
        messages.extend(late)  # results that came after the user's next message
        late = []
        for _ in range(draw(st.integers(0, 3))):
            ids = [f"call-{calls + n}" for n in range(draw(st.integers(1, 3)))]
            calls += len(ids)
            messages.append({
                "role": "assistant", "content": draw(st.sampled_from(["", "Checking."])),
                "tool_calls": [{"id": i, "name": "lookup", "arguments": json.dumps({"q": i})}
                               for i in ids],
            })
            results = [{"role": "tool", "tool_name": "lookup", "tool_call_id": i,
                        "content": text(1, 60)} for i in draw(st.permutations(ids))]
            if draw(st.integers(0, 9)) == 0:
                late = results
                break
            messages.extend(results)
        reply: dict[str, Any] = {"role": "assistant", "content": text(1, 30)}
        if draw(st.integers(0, 9)) == 0:
            turn += 1
            reply["turn"] = turn  # an explicit turn bumped without a user message
        messages.append(reply)
    messages.extend(late)
    return messages


def turns_of(roles: Sequence[str]) -> list[int]:
    """Each message's turn by the definition: -1 before the first user message."""
    numbers, current = [], -1
    for role in roles:
        current += role == "user"
        numbers.append(current)
    return numbers


def pair_ids(message: Any) -> list[str]:
    """The tool call ids a message calls or answers (a stored entry or a dict)."""
    if isinstance(message, dict):
        calls, role, answer = message.get("tool_calls") or [], message["role"], message.get(
            "tool_call_id")
    else:
        calls, role, answer = message.tool_calls or [], message.role, message.tool_call_id
    return [str(call["id"]) for call in calls] + ([answer] if role == "tool" else [])


def assert_whole(messages: Sequence[Any], side: Sequence[Any], *, what: str) -> None:
    """``side[i]`` says where message i went; every turn and every tool pair must go to
    one place. Messages before the first user message belong to no turn."""
    roles = [m["role"] if isinstance(m, dict) else m.role for m in messages]
    places: dict[tuple[str, Any], set[Any]] = {}
    for message, turn, where in zip(messages, turns_of(roles), side, strict=True):
        if turn >= 0:
            places.setdefault(("turn", turn), set()).add(where)
        for call_id in pair_ids(message):
            places.setdefault(("pair", call_id), set()).add(where)
    split = {key: value for key, value in places.items() if len(value) > 1}
    assert not split, f"{what} split {split}"


def stored(thread: Thread) -> list[MemoryEntry]:
    return list(MemoryEntry.objects.filter(thread=thread).order_by("position", "id"))


def new_thread(messages: list[dict[str, Any]]) -> Thread:
    thread = Thread.objects.create(title="turns")
    services.append(thread, messages)
    return thread


# ------------------------------------------------------------------ plans and budget cuts


@SETTINGS
@given(messages=conversations(), knobs=st.lists(st.integers(1, 12), min_size=3, max_size=3),
       budgets=st.lists(st.integers(0, 3000), min_size=3, max_size=3))
def test_no_fold_plan_and_no_budget_cut_splits_a_turn_or_a_tool_pair(
    messages: list[dict[str, Any]], knobs: list[int], budgets: list[int]
) -> None:
    entries = stored(new_thread(messages))
    ids = [entry.pk for entry in entries]
    preserve, trigger, min_fold = knobs
    counted = RecallConfig.build(preserve_recent=preserve, trigger_min_entries=trigger,
                                 min_fold_entries=min_fold, high_water=None)
    plan = plan_fold(entries, counted)
    if plan is not None:
        folded = {entry.pk for entry in plan.span}
        assert_whole(entries, [pk in folded for pk in ids], what="the count-driven seam")
    for budget in budgets:
        driven = RecallConfig.build(preserve_recent=preserve, trigger_min_entries=None)
        plan = next_fold(entries, budget, driven, complete=True)
        if plan is not None:
            folded = {entry.pk for entry in plan.span}
            assert_whole(entries, [pk in folded for pk in ids], what="the budget-driven plan")
        picked = {entry.pk for entry in pick_by_budget(entries, budget, driven).entries}
        assert_whole(entries, [pk in picked for pk in ids], what="the budget cut")


# ------------------------------------------------------------------ folds, end to end


def assert_folds_whole(thread: Thread) -> None:
    """Every summary ever written covers whole turns and whole pairs: each message's
    direct cover is one summary (or none) across its turn and its pair."""
    messages = list(
        MemoryEntry.objects.filter(thread=thread, kind=EntryKind.MESSAGE).order_by("position")
    )
    assert_whole(messages, [m.covered_by_id for m in messages], what="a fold")


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=conversations(), budgets=st.lists(st.integers(150, 2500), min_size=2,
                                                  max_size=4),
       preserve=st.integers(1, 8), driven=st.booleans())
def test_recall_folds_and_contexts_never_split_a_turn(
    messages: list[dict[str, Any]], budgets: list[int], preserve: int, driven: bool
) -> None:
    thread = new_thread(messages)
    knobs: dict[str, Any] = {"mode": "inline", "preserve_recent": preserve,
                             "min_fold_entries": 1}
    if not driven:
        knobs.update(high_water=None, trigger_min_entries=preserve + 1)
    for budget in budgets:
        result = services.recall(thread, budget, **knobs)
        assert_folds_whole(thread)
        in_context = {m.id for m in result.messages}
        visible = list(MemoryEntry.objects.filter(thread=thread, kind=EntryKind.MESSAGE)
                       .visible().order_by("position"))
        assert_whole(visible, [m.pk in in_context for m in visible], what="the context")


# ------------------------------------------------------------------ windows


def window_of(messages: list[dict[str, Any]]) -> list[WindowMessage]:
    return [WindowMessage.of({k: v for k, v in m.items() if k != "turn"}) for m in messages]


def assert_window_whole(window: list[WindowMessage], head: int, dropped: int, *,
                        what: str) -> None:
    """In the body, a turn whose user message is there folds whole; the pinned request's
    own turn folds by whole tool rounds; no pair is ever split."""
    body = window[head:]
    assert_whole(body, ["drop" if i < dropped else "keep" for i in range(len(body))], what=what)


@SETTINGS
@given(messages=conversations(), max_messages=st.integers(3, 30),
       budget=st.integers(0, 2500), reserve=st.integers(0, 200))
def test_no_window_seam_splits_a_turn_or_a_tool_pair(
    messages: list[dict[str, Any]], max_messages: int, budget: int, reserve: int
) -> None:
    window = window_of(messages)
    for seam, knob in ((SlidingWindow(max_messages), None), (TokenBudgetWindow(reserve), budget)):
        selection = seam.select(window, budget_tokens=knob)
        assert selection.head + selection.drop + selection.keep == window
        assert_window_whole(window, len(selection.head), len(selection.drop),
                            what=type(seam).__name__)


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=conversations(), budget=st.integers(100, 1500))
def test_a_window_compaction_folds_whole_turns(messages: list[dict[str, Any]], budget: int
                                                ) -> None:
    thread = Thread.objects.create(title="window", window_retain="conversation")
    window = window_of(messages)
    result = services.compact(thread, [m.as_dict() for m in window], budget_tokens=budget,
                              window=TokenBudgetWindow(50))
    if result.span is None:
        return
    span = FoldedSpan.objects.get(pk=result.span.pk)
    dropped = [WindowMessage.of(m) for m in span.messages or []]
    head = next(i for i, m in enumerate(window) if m.role == "user") + 1
    assert window[head:head + len(dropped)] == dropped
    assert_window_whole(window, head, len(dropped), what="compact")


# ------------------------------------------------------------------ append refuses


def call(call_id: str) -> dict[str, Any]:
    return {"role": "assistant", "content": "",
            "tool_calls": [{"id": call_id, "name": "lookup", "arguments": "{}"}]}


def result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_name": "lookup", "tool_call_id": call_id, "content": "ok"}


ASK = {"role": "user", "content": "Where is my parcel?"}

REFUSED = [
    # (stored first, then the batch, the index and field refused, the id named)
    ([], [ASK, result("c-1")], 1, "tool_call_id", "c-1"),
    ([ASK, call("c-1")], [result("c-2")], 0, "tool_call_id", "c-2"),
    ([], [ASK, call("c-1"), call("c-1")], 2, "tool_calls", "c-1"),
    ([ASK, call("c-1"), result("c-1")], [ASK, call("c-1")], 1, "tool_calls", "c-1"),
    ([ASK, call("c-1"), result("c-1")], [result("c-1")], 0, "tool_call_id", "c-1"),
    ([], [ASK, call("c-1"), result("c-1"), result("c-1")], 3, "tool_call_id", "c-1"),
    ([], [ASK, result("c-1"), call("c-1")], 1, "tool_call_id", "c-1"),
]


def rows(thread: Thread) -> list[tuple[Any, ...]]:
    return list(MemoryEntry.objects.filter(thread=thread).values_list("pk", "content"))


@pytest.mark.parametrize(("before", "batch", "index", "field", "call_id"), REFUSED)
def test_append_refuses_unknown_and_reused_tool_call_ids(
    before: list[dict[str, Any]], batch: list[dict[str, Any]], index: int, field: str,
    call_id: str,
) -> None:
    thread = new_thread(before) if before else Thread.objects.create(title="t")
    kept = rows(thread)
    with pytest.raises(ToolCallIdError) as raised:
        services.append(thread, batch)
    assert isinstance(raised.value, MessageConflictError)
    assert (raised.value.index, raised.value.field, raised.value.call_id) == (
        index, field, call_id)
    assert repr(call_id) in str(raised.value)
    assert rows(thread) == kept  # a refused batch writes nothing
    thread.refresh_from_db()
    assert thread.last_position == len(before)


def test_a_result_may_answer_a_call_stored_earlier_or_earlier_in_the_batch() -> None:
    thread = new_thread([ASK, call("c-1")])
    services.append(thread, [result("c-1"), call("c-2"), result("c-2")])
    assert len(rows(thread)) == 5


@pytest.mark.parametrize(("before", "batch", "index", "field", "call_id"), REFUSED)
def test_the_api_answers_409_naming_the_field_and_the_id(
    before: list[dict[str, Any]], batch: list[dict[str, Any]], index: int, field: str,
    call_id: str,
) -> None:
    owner = get_user_model().objects.create_user("owner")
    thread = Thread.objects.create(owner=owner, title="t")
    if before:
        services.append(thread, before)
    client = APIClient()
    client.force_authenticate(owner)
    kept = rows(thread)
    url = f"/api/memory/threads/{thread.pk}/entries/"
    response = client.post(url, {"entries": batch}, format="json")
    assert response.status_code == 409, response.content
    errors = response.json()["entries"]
    item = errors[str(index)] if isinstance(errors, dict) else errors[index]
    assert list(item) == [field]
    assert repr(call_id) in item[field][0]
    assert rows(thread) == kept
    if len(batch) == 1:  # one message alone: the error names the field at the top
        response = client.post(url, batch[0], format="json")
        assert response.status_code == 409
        assert repr(call_id) in response.json()[field][0]
        assert rows(thread) == kept


def test_an_earlier_summary_message_starts_no_turn() -> None:
    """A grown window begins with the previous fold's summary message, sent as a user
    message: it stands for folded messages, so the rounds after it still fold."""
    from agentmemory.window.frame import WINDOW_FRAME_PREFIX
    from agentmemory.window.seams import align_cut

    steps = [WindowMessage("assistant", f"step {n}") for n in range(3)]
    frame = WindowMessage("user", f"{WINDOW_FRAME_PREFIX} 4 messages folded] they asked.")
    assert align_cut([frame, *steps], 2) == 2
    question = WindowMessage("user", "And order 8?")
    assert align_cut([question, *steps], 2) == 0  # a real turn: whole, or not at all
