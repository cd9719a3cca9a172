"""The recall pipeline: load -> summarize -> [decay] -> pick by budget -> format."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings

from agentmemory import services
from agentmemory.conf import DEFAULTS
from agentmemory.models import MemoryEntry
from agentmemory.pipeline.budget import BELOW_MINIMUM
from agentmemory.pipeline.config import InvalidRecallOption
from agentmemory.transcript import render_message
from tests.helpers import add_user_messages, make_thread

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
BIG = 100_000
# No fold in these tests unless a test asks for one: the stages are seen on their own.
NO_FOLD = {"trigger_min_entries": 10_000}


def contents(result: services.RecallResult) -> list[str]:
    return [message.content for message in result.messages]


def test_recall_returns_the_thread_oldest_first_with_ids_and_kinds() -> None:
    thread = make_thread()
    entries = add_user_messages(thread, 6, now=NOW)

    result = services.recall(thread, BIG, now=NOW, **NO_FOLD)

    assert [message.id for message in result.messages] == [entry.pk for entry in entries]
    assert {message.kind for message in result.messages} == {"message"}
    assert [message.turn for message in result.messages] == [1, 2, 3, 4, 5, 6]
    assert result.tokens > 0
    assert result.summaries_used == [] and result.folded_summary_id is None
    assert result.budget_decline is None


def test_load_count_takes_only_the_newest_entries() -> None:
    thread = make_thread()
    entries = add_user_messages(thread, 30, now=NOW)

    default = services.recall(thread, BIG, now=NOW, **NO_FOLD)
    small = services.recall(thread, BIG, now=NOW, load_count=7, **NO_FOLD)

    assert DEFAULTS["LOAD_COUNT"] == 20
    assert [m.id for m in default.messages] == [entry.pk for entry in entries[-20:]]
    assert [m.id for m in small.messages] == [entry.pk for entry in entries[-7:]]
    assert small.loaded_count == 7
    with override_settings(AGENTMEMORY={"LOAD_COUNT": 3, "TRIGGER_MIN_ENTRIES": 10_000}):
        configured = services.recall(thread, BIG, now=NOW)
    assert [m.id for m in configured.messages] == [entry.pk for entry in entries[-3:]]


def test_tiers_filter_what_is_loaded() -> None:
    thread = make_thread()
    hot = services.append(thread, {"role": "user", "content": "hot fact"})[0]
    warm = services.append(thread, {"role": "user", "content": "warm fact", "tier": "warm"})[0]
    cold = services.append(thread, {"role": "user", "content": "cold fact", "tier": "cold"})[0]

    everything = services.recall(thread, BIG, **NO_FOLD)
    hot_only = services.recall(thread, BIG, tiers=["hot"], summary_tier="hot", **NO_FOLD)
    warmish = services.recall(thread, BIG, tiers=("hot", "warm"), summary_tier="warm", **NO_FOLD)

    assert [m.id for m in everything.messages] == [hot.pk, warm.pk, cold.pk]
    assert [m.id for m in hot_only.messages] == [hot.pk]
    assert [m.id for m in warmish.messages] == [hot.pk, warm.pk]
    with override_settings(AGENTMEMORY={"TIERS": ["cold"], "SUMMARY_TIER": "cold"}):
        assert [m.id for m in services.recall(thread, BIG, **NO_FOLD).messages] == [cold.pk]


def test_budget_is_spent_newest_first_after_the_reserve() -> None:
    thread = make_thread()
    entries = add_user_messages(thread, 10, now=NOW)
    per_entry = MemoryEntry.objects.get(pk=entries[0].pk).token_count
    assert all(
        row.token_count == per_entry for row in MemoryEntry.objects.filter(thread=thread)
    )

    # Room for exactly three entries once the reserve is taken, not for a fourth.
    budget = 256 + 3 * per_entry + per_entry // 2
    result = services.recall(thread, budget, now=NOW, minimum_tokens=0, **NO_FOLD)

    assert [m.id for m in result.messages] == [entry.pk for entry in entries[-3:]]
    assert sum(m.tokens for m in result.messages) == 3 * per_entry
    smaller_reserve = services.recall(
        thread, budget, now=NOW, minimum_tokens=0, reserve_tokens=256 - per_entry, **NO_FOLD
    )
    assert [m.id for m in smaller_reserve.messages] == [entry.pk for entry in entries[-4:]]


def test_below_minimum_tokens_nothing_is_injected() -> None:
    thread = make_thread()
    add_user_messages(thread, 3, now=NOW)

    # 256 reserved leaves 99 tokens, under the default minimum of 100.
    result = services.recall(thread, 256 + 99, now=NOW, **NO_FOLD)

    assert result.messages == []
    assert result.text == ""
    assert result.tokens == 0
    assert result.budget_decline == BELOW_MINIMUM == "below-minimum-tokens"
    enough = services.recall(thread, 256 + 100, now=NOW, **NO_FOLD)
    assert enough.budget_decline is None
    assert enough.messages


def test_max_entries_caps_the_count_keeping_the_newest() -> None:
    thread = make_thread()
    entries = add_user_messages(thread, 8, now=NOW)

    result = services.recall(thread, BIG, now=NOW, max_entries=2, **NO_FOLD)

    assert [m.id for m in result.messages] == [entry.pk for entry in entries[-2:]]


def test_formatted_text_has_header_lines_and_footer() -> None:
    thread = make_thread()
    entries = add_user_messages(thread, 2, now=NOW)
    rows = list(MemoryEntry.objects.filter(pk__in=[e.pk for e in entries]).order_by("position"))

    default = services.recall(thread, BIG, now=NOW, **NO_FOLD)
    custom = services.recall(
        thread, BIG, now=NOW, header="== memory ==", footer="== end ==", **NO_FOLD
    )

    assert default.text.splitlines() == [
        "Relevant context from prior conversation (oldest first):",
        *(render_message(row) for row in rows),
    ]
    assert custom.text.splitlines() == [
        "== memory ==",
        *(render_message(row) for row in rows),
        "== end ==",
    ]
    with override_settings(
        AGENTMEMORY={"FORMAT_HEADER": "", "FORMAT_FOOTER": "-- fin --",
                     "TRIGGER_MIN_ENTRIES": 10_000}
    ):
        configured = services.recall(thread, BIG, now=NOW)
    assert configured.text.splitlines() == [*(render_message(row) for row in rows), "-- fin --"]


def test_no_decay_stage_keeps_old_entries() -> None:
    thread = make_thread()
    old = add_user_messages(thread, 2, now=NOW - timedelta(days=365))
    new = add_user_messages(thread, 2, start=3, now=NOW)

    result = services.recall(thread, BIG, now=NOW, **NO_FOLD)

    assert [m.id for m in result.messages] == [e.pk for e in old + new]


def test_decay_drops_entries_older_than_the_half_life_allows() -> None:
    thread = make_thread()
    day_old = add_user_messages(thread, 2, now=NOW - timedelta(hours=24))
    hour_old = add_user_messages(thread, 2, start=3, now=NOW - timedelta(hours=1))
    fresh = add_user_messages(thread, 2, start=5, now=NOW)
    # One hour half-life, keep scores >= 0.25: two hours old is the limit.
    decay = {"HALF_LIFE": 3600, "MIN_SCORE": 0.25}

    result = services.recall(thread, BIG, now=NOW, decay=decay, **NO_FOLD)
    later = services.recall(thread, BIG, now=NOW + timedelta(hours=2), decay=decay, **NO_FOLD)
    with override_settings(AGENTMEMORY={"DECAY": decay, "TRIGGER_MIN_ENTRIES": 10_000}):
        configured = services.recall(thread, BIG, now=NOW)

    assert [m.id for m in result.messages] == [e.pk for e in hour_old + fresh]
    assert [m.id for m in later.messages] == [e.pk for e in fresh]
    assert [m.id for m in configured.messages] == [e.pk for e in hour_old + fresh]
    assert day_old[0].pk not in {m.id for m in configured.messages}


def test_an_unknown_or_bad_recall_option_is_refused() -> None:
    thread = make_thread()

    with pytest.raises(InvalidRecallOption) as unknown:
        services.recall(thread, BIG, load_cuont=3)
    with pytest.raises(InvalidRecallOption) as negative:
        services.recall(thread, BIG, load_count=0)

    assert unknown.value.field == "load_cuont"
    assert negative.value.field == "load_count"


def test_a_recalled_message_is_its_entry_field_for_field() -> None:
    """RecalledMessage.of fills the frozen dataclass without its __init__: every field
    is set, equal to what the constructor would make, and still frozen."""
    import dataclasses

    from agentmemory.pipeline.recall import RecalledMessage

    thread = make_thread()
    services.append(thread, [
        {"role": "user", "content": "Where is order 7?\u200b"},
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "c1", "name": "track", "arguments": {"order": 7}}]},
        {"role": "tool", "content": '{"status": "late"}', "tool_call_id": "c1",
         "tool_name": "track"},
    ])
    result = services.recall(thread, BIG, now=NOW, **NO_FOLD)
    names = {field.name for field in dataclasses.fields(RecalledMessage)}
    for message, entry in zip(result.messages, thread.entries.order_by("position"), strict=True):
        assert set(vars(message)) == names
        assert message == RecalledMessage(
            id=entry.pk, kind=entry.kind, role=entry.role,
            content=entry.content.replace("\u200b", ""), turn=entry.turn,
            tokens=entry.token_count, tool_calls=list(entry.tool_calls),
            tool_name=entry.tool_name, tool_call_id=entry.tool_call_id,
        )
        with pytest.raises(dataclasses.FrozenInstanceError):
            message.content = "edited"  # type: ignore[misc]
    assert result.messages[1].tool_calls[0]["name"] == "track"
