"""append: turns, positions, token counts, retention, and all-or-nothing validation."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import override_settings

from agentmemory import services
from agentmemory.exceptions import InvalidMessageError
from agentmemory.models import EntryKind, MemoryEntry, Thread
from agentmemory.tokens import count_tokens
from agentmemory.transcript import entry_line, render_message
from tests.helpers import add_turns, make_thread, user_text

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def test_append_one_message_stores_it_and_returns_it() -> None:
    thread = make_thread()

    entries = services.append(thread, {"role": "user", "content": "Hello there."}, now=NOW)

    assert len(entries) == 1
    stored = MemoryEntry.objects.get(thread=thread)
    assert stored.pk == entries[0].pk
    assert (stored.kind, stored.role, stored.content) == (EntryKind.MESSAGE, "user", "Hello there.")
    assert (stored.turn, stored.position) == (1, 1)
    assert stored.created_at == NOW
    assert stored.summary_key is None and stored.covered_by_id is None


def test_append_many_keeps_order_and_increasing_positions() -> None:
    thread = make_thread()

    add_turns(thread, 3)
    add_turns(thread, 2, start=4)

    rows = list(MemoryEntry.objects.filter(thread=thread).order_by("position"))
    assert [row.position for row in rows] == list(range(1, 21))
    assert (rows[0].content, rows[16].content) == (user_text(1), user_text(5))
    assert [row.role for row in rows[:4]] == ["user", "assistant", "tool", "assistant"]
    thread.refresh_from_db()
    assert (thread.last_position, thread.last_turn) == (20, 5)


def test_each_user_message_opens_a_turn_and_the_others_join_it() -> None:
    thread = make_thread()

    entries = services.append(
        thread,
        [
            {"role": "system", "content": "You are a helpful agent."},
            {"role": "user", "content": "First question?"},
            {"role": "assistant", "content": "First answer."},
            {"role": "user", "content": "Second question?"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "f"}]},
            {"role": "tool", "content": "42", "tool_call_id": "c1", "tool_name": "f"},
            {"role": "assistant", "content": "It is 42."},
        ],
    )
    later = services.append(thread, {"role": "assistant", "content": "Anything else?"})

    # A thread's opening non-user message opens turn 1; the first user message, turn 2.
    assert [entry.turn for entry in entries] == [1, 2, 2, 3, 3, 3, 3]
    assert later[0].turn == 3
    assert MemoryEntry.objects.get(pk=later[0].pk).turn == 3


def test_explicit_turn_is_kept_and_later_messages_continue_from_it() -> None:
    thread = make_thread()

    entries = services.append(
        thread,
        [
            {"role": "user", "content": "Question.", "turn": 7},
            {"role": "assistant", "content": "Answer.",
             "tool_calls": [{"id": "c9", "name": "lookup"}]},
            {"role": "tool", "content": "late result", "tool_call_id": "c9", "turn": 8},
            {"role": "user", "content": "Next question."},
        ],
    )

    assert [entry.turn for entry in entries] == [7, 7, 8, 9]
    thread.refresh_from_db()
    assert thread.last_turn == 9


def test_token_count_is_the_counter_on_the_rendered_line() -> None:
    thread = make_thread()

    entries = add_turns(thread, 1)

    for stored in MemoryEntry.objects.filter(pk__in=[entry.pk for entry in entries]):
        assert stored.token_count == count_tokens(render_message(stored))
        assert stored.token_count == count_tokens(entry_line(stored))
        assert stored.token_count > 0
    call = MemoryEntry.objects.get(pk=entries[1].pk)
    assert render_message(call).startswith('assistant (calls: lookup_order({"id": 1}))')


def test_tier_and_expiry_follow_the_thread_policy() -> None:
    thread = make_thread(ttl=timedelta(hours=2), write_tier="warm")

    entries = services.append(
        thread,
        [{"role": "user", "content": "Keep me warm."}, {"role": "user", "content": "Cold.",
                                                        "tier": "cold"}],
        now=NOW,
    )

    stored = {row.pk: row for row in MemoryEntry.objects.filter(thread=thread)}
    assert stored[entries[0].pk].tier == "warm"
    assert stored[entries[1].pk].tier == "cold"
    assert all(row.expires_at == NOW + timedelta(hours=2) for row in stored.values())


@pytest.mark.parametrize("default_ttl", [3600, 3600.0, timedelta(hours=1)])
def test_expiry_and_tier_fall_back_to_settings(default_ttl: Any) -> None:
    thread = make_thread()
    with override_settings(AGENTMEMORY={"DEFAULT_TTL": default_ttl, "WRITE_TIER": "cold"}):
        entry = services.append(thread, {"role": "user", "content": "Hi."}, now=NOW)[0]

    stored = MemoryEntry.objects.get(pk=entry.pk)
    assert stored.expires_at == NOW + timedelta(hours=1)
    assert stored.tier == "cold"


def test_no_ttl_anywhere_means_no_expiry() -> None:
    thread = make_thread()

    entry = services.append(thread, {"role": "user", "content": "Forever."}, now=NOW)[0]

    stored = MemoryEntry.objects.get(pk=entry.pk)
    assert stored.expires_at is None
    assert stored.tier == "hot"


GOOD = {"role": "user", "content": "A fine message."}


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"role": "robot", "content": "beep"}, "role"),
        ({"content": "no role at all"}, "role"),
        ({"role": "user", "content": "   "}, "content"),
        ({"role": "user", "content": 42}, "content"),
        ({"role": "tool", "content": "result without a call id"}, "tool_call_id"),
        (
            {"role": "user", "content": "call?", "tool_calls": [{"id": "c1", "name": "f"}]},
            "tool_calls",
        ),
        ({"role": "user", "content": "hello", "colour": "blue"}, "colour"),
        ({"role": "user", "content": "hello", "turn": 0}, "turn"),
        ({"role": "user", "content": "hello", "tier": "lukewarm"}, "tier"),
    ],
    ids=[
        "bad-role", "missing-role", "empty-content", "content-not-text", "tool-without-id",
        "tool-calls-on-user", "unknown-field", "turn-zero", "bad-tier",
    ],
)
def test_an_invalid_message_names_its_field_and_the_batch_writes_nothing(
    bad: dict[str, Any], field: str
) -> None:
    thread = make_thread()
    services.append(thread, GOOD)

    with pytest.raises(InvalidMessageError) as caught:
        services.append(thread, [GOOD, GOOD, bad, GOOD])

    assert caught.value.field == field
    assert caught.value.index == 2
    assert MemoryEntry.objects.filter(thread=thread).count() == 1
    thread.refresh_from_db()
    assert (thread.last_position, thread.last_turn) == (1, 1)


def test_a_turn_going_backwards_raises_and_writes_nothing() -> None:
    thread = make_thread()
    services.append(thread, {"role": "user", "content": "Turn five.", "turn": 5})

    with pytest.raises(InvalidMessageError) as caught:
        services.append(thread, [GOOD, {"role": "assistant", "content": "Back!", "turn": 3}])

    assert caught.value.field == "turn"
    assert caught.value.index == 1
    assert MemoryEntry.objects.filter(thread=thread).count() == 1
    thread.refresh_from_db()
    assert (thread.last_position, thread.last_turn) == (1, 5)


def test_a_turn_going_backwards_inside_one_batch_writes_nothing() -> None:
    thread = make_thread()

    with pytest.raises(InvalidMessageError) as caught:
        services.append(
            thread,
            [
                {"role": "user", "content": "Four.", "turn": 4},
                {"role": "user", "content": "Two.", "turn": 2},
            ],
        )

    assert caught.value.field == "turn"
    assert not MemoryEntry.objects.exists()
    assert Thread.objects.get(pk=thread.pk).last_position == 0


def test_openai_shaped_tool_calls_are_stored_flat() -> None:
    thread = make_thread()

    entry = services.append(
        thread,
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "weather", "arguments": '{"city": "Oslo"}'}}
            ],
        },
    )[0]

    stored = MemoryEntry.objects.get(pk=entry.pk)
    assert stored.tool_calls == [{"id": "c1", "name": "weather", "arguments": '{"city": "Oslo"}'}]
