"""An append skips the fold decision only when the decision would find no fold due.

`background.fold_ruled_out` reads the counters the append's UPDATE returned (positions
given out, `Thread.unfolded_tokens`); `background.fold_blocker` reads the thread. Over
random conversations, settings, rooms, inline folds, erasures, expiries and clears, the
shortcut says "no pressure" only where the decision says `NOTHING_TO_FOLD`; and through
``services.append`` in background mode, a conversation requests its folds at the same
appends with the shortcut as without it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from agentmemory import services
from agentmemory.models import MemoryEntry, Thread
from agentmemory.services import background
from tests.test_context_load import chat_turns
from tests.test_context_rows import BUILT
from tests.test_recall_contract import turns

pytestmark = pytest.mark.django_db

SETTINGS = st.fixed_dictionaries({
    "FOLD_BUDGET": st.sampled_from([300, 600, 1_500, 4_000]),
    "FOLD_HIGH_WATER": st.sampled_from([0.3, 0.6, 1.0]),
    "FOLD_TRIGGER_MIN_TOKENS": st.sampled_from([0, 500]),
    "TRIGGER_MIN_ENTRIES": st.sampled_from([None, 6, 20]),
    "TIERS": st.sampled_from([None, ["hot", "cold"]]),
    "LOAD_COUNT": st.sampled_from([None, None, None, 20]),  # mostly budget-driven
})
#: What happens between appends: nothing, an inline fold at a room, an erasure, an expiry.
STEPS = st.lists(st.one_of(
    st.just(("none", 0)), st.tuples(st.just("fold"), st.sampled_from([200, 400, 900])),
    st.tuples(st.sampled_from(["erase", "expire", "warm", "clear"]), st.integers(0, 200)),
), max_size=24)


def touch(thread: Thread, step: tuple[str, int]) -> None:
    kind, value = step
    if kind == "fold":
        services.recall(thread, value, mode="inline")
        return
    if kind == "clear":
        services.clear_thread(thread)
        return
    ids = list(MemoryEntry.objects.filter(thread=thread).values_list("pk", flat=True))
    if not ids or kind == "none":
        return
    pk = sorted(ids)[value % len(ids)]
    if kind == "erase":
        services.erase_entry(MemoryEntry.objects.get(pk=pk))
    elif kind == "expire":
        MemoryEntry.objects.filter(pk=pk).update(expires_at=timezone.now() - timedelta(1))
    else:
        MemoryEntry.objects.filter(pk=pk).update(tier="warm")


@BUILT
@given(conversation=turns(), steps=STEPS, settings=SETTINGS,
       fold_budget=st.sampled_from([None, None, 500, 2_000]),
       recall_budget=st.sampled_from([None, 700]))
def test_the_shortcut_says_no_pressure_only_when_the_decision_finds_nothing_to_fold(
    conversation: list[list[dict[str, Any]]], steps: list[tuple[str, int]],
    settings: dict[str, Any], fold_budget: int | None, recall_budget: int | None,
) -> None:
    thread = Thread.objects.create(fold_budget=fold_budget)
    Thread.objects.filter(pk=thread.pk).update(recall_budget=recall_budget)
    thread.recall_budget = recall_budget
    with override_settings(AGENTMEMORY=settings):
        for number, turn in enumerate(conversation):
            services.append(thread, turn)
            ruled_out = background.fold_ruled_out(
                thread, rows=thread.last_position, tokens=thread.unfolded_tokens)
            if ruled_out:
                assert background.fold_blocker(thread) == background.NOTHING_TO_FOLD
            if number < len(steps):
                touch(thread, steps[number])


def requested_at(monkeypatch: Any, capture: Any, *, shortcut: bool) -> tuple[list[int], int]:
    """The appends (by number) after which a fold was requested, on a new thread in
    background mode, and how often the counters ruled the decision out."""
    requests: list[int] = []
    ruled = 0
    real = background.fold_ruled_out

    def counted(thread: Thread, *, rows: int, tokens: int | None) -> bool:
        nonlocal ruled
        found = real(thread, rows=rows, tokens=tokens) and shortcut
        ruled += found
        return found

    thread = Thread.objects.create()
    with monkeypatch.context() as patch:
        patch.setattr("agentmemory.services.appends.fold_ruled_out", counted)
        patch.setattr(background, "request_fold", lambda pk, **kw: requests.append(number))
        for number, message in enumerate(chat_turns(0, 60)):
            with capture(execute=True):
                services.append(thread, message)
            if number == 50:  # a fold as the worker would write it, then more appends
                services.recall(thread, 1_000, mode="inline")
    return requests, ruled


def test_a_conversation_requests_its_folds_at_the_same_appends(
    monkeypatch: Any, django_capture_on_commit_callbacks: Any,
) -> None:
    with override_settings(AGENTMEMORY={"RECALL_MODE": "background", "FOLD_BUDGET": 2_000}):
        with_it, ruled = requested_at(monkeypatch, django_capture_on_commit_callbacks,
                                      shortcut=True)
        without, never = requested_at(monkeypatch, django_capture_on_commit_callbacks,
                                      shortcut=False)
    assert with_it == without
    assert never == 0 and ruled > 10  # the shortcut took the young thread's appends
    assert with_it and with_it[0] > 10  # and the decision found folds due later
    assert max(with_it) > 50  # after the fold too: its thread asks the decision again


def test_a_written_summary_ends_the_shortcut_and_a_clear_restarts_it() -> None:
    thread = Thread.objects.create()
    services.append(thread, chat_turns(0, 30))
    assert thread.unfolded_tokens == sum(
        entry.token_count + 1 for entry in MemoryEntry.objects.filter(thread=thread))
    assert services.recall(thread, 600, mode="inline").summaries_used
    assert Thread.objects.get(pk=thread.pk).unfolded_tokens is None
    services.append(thread, chat_turns(30, 1))
    assert thread.unfolded_tokens is None
    assert not background.fold_ruled_out(thread, rows=thread.last_position, tokens=None)
    services.clear_thread(thread)
    assert Thread.objects.get(pk=thread.pk).unfolded_tokens == 0
    services.append(thread, chat_turns(0, 1))
    assert thread.unfolded_tokens == Thread.objects.get(pk=thread.pk).unfolded_tokens > 0
