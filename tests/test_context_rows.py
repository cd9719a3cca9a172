"""The context load's plain SQL (`pipeline.rows`) reads what the querysets it states say.

Over random threads (tool calls, summaries from inline folds, summaries held for review
or retired, entries expired, tiers mixed, text outside ASCII) and random filters, each
read is compared field by field with the ORM reading the same rules: messages with
`MemoryEntryQuerySet.visible`, summaries with `load._visible_rows` (their coverage row
and their sources too), `rows.count_visible_rows` with a sliced ``count()``, and
`rows.read_oldest` with `load._visible_rows` read oldest first.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db.models.signals import post_init
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmemory import services
from agentmemory.models import EntryKind, MemoryEntry, SummaryCoverage, Thread, Tier
from agentmemory.pipeline import load, rows
from agentmemory.pipeline.entries import MESSAGE_FIELDS, ContextMessage
from agentmemory.trust.signing import sources_by_summary
from tests.test_context_load import chat_turns
from tests.test_recall_contract import turns

pytestmark = pytest.mark.django_db

TIERS = [None, (), ("hot",), ("hot", "cold"), ("warm", "cold")]


def values(instance: Any, names: Any) -> dict[str, Any]:
    return {name: getattr(instance, name) for name in names}


def entry_names(kind: str) -> list[str]:
    fields = MemoryEntry._meta.concrete_fields
    return [f.attname for f in fields
            if kind == EntryKind.SUMMARY or f.attname in MESSAGE_FIELDS]


def build(conversation: list[list[dict[str, Any]]], folds: list[int],
          touches: list[tuple[int, str]]) -> Thread:
    thread = Thread.objects.create()
    for number, turn in enumerate(conversation):
        services.append(thread, [{**m, "content": m["content"] + (" café ✓" if number % 3 else "")}
                                 for m in turn])
        if number < len(folds):
            services.recall(thread, folds[number], mode="inline")
    ids = list(MemoryEntry.objects.filter(thread=thread).order_by("position", "id")
               .values_list("pk", flat=True))
    now = timezone.now()
    for index, change in touches:  # what visibility turns on, applied to random rows
        pk = ids[index % len(ids)]
        update: dict[str, Any] = {
            "expire": {"expires_at": now - timedelta(minutes=1)},
            "later": {"expires_at": now + timedelta(days=1)},
            "hold": {"held_at": now},
            "retire": {"retired_at": now},
            "warm": {"tier": Tier.WARM},
            "cold": {"tier": Tier.COLD},
        }[change]
        MemoryEntry.objects.filter(pk=pk).update(**update)
    return thread


#: `build`'s arguments: the inline folds' budgets, and what is done to random rows.
FOLDS = st.lists(st.sampled_from([200, 400, 900]), max_size=3)
TOUCHES = st.lists(st.tuples(st.integers(min_value=0, max_value=500),
                             st.sampled_from(["expire", "later", "hold", "retire", "warm",
                                              "cold"])), max_size=8)
#: Hypothesis settings for tests that build a thread per example.
BUILT = settings(max_examples=30, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                        HealthCheck.function_scoped_fixture])


@BUILT
@given(
    conversation=turns(),
    folds=FOLDS,
    touches=TOUCHES,
    tiers=st.sampled_from(TIERS),
    limit=st.integers(min_value=1, max_value=40),
    offset=st.integers(min_value=0, max_value=30),
    count_limit=st.integers(min_value=1, max_value=80),
)
def test_the_plain_sql_reads_what_the_querysets_say(
    conversation: list[list[dict[str, Any]]], folds: list[int],
    touches: list[tuple[int, str]], tiers: tuple[str, ...] | None, limit: int, offset: int,
    count_limit: int,
) -> None:
    thread = build(conversation, folds, touches)
    now = timezone.now()
    read = rows.read_context(thread.pk, tiers, now, limit=limit)

    visible = MemoryEntry.objects.filter(thread=thread).visible(now, tiers)
    messages = list(visible.messages().newest_first()[:limit])
    names = entry_names(EntryKind.MESSAGE)
    assert [values(m, names) for m in read.messages] == [values(m, names) for m in messages]

    summaries = sorted(
        load._visible_rows(thread.pk, tiers, now).summaries().select_related("coverage"),
        key=lambda s: s.pk)
    got = sorted(read.summaries, key=lambda s: s.pk)
    names = entry_names(EntryKind.SUMMARY)
    assert [values(s, names) for s in got] == [values(s, names) for s in summaries]
    coverage = [f.attname for f in SummaryCoverage._meta.concrete_fields]
    assert [values(s.coverage, coverage) for s in got] == [
        values(s.coverage, coverage) for s in summaries]
    assert read.sources == sources_by_summary(summaries)

    assert rows.count_visible_rows(thread.pk, tiers, now, limit=count_limit) == (
        visible.order_by()[:count_limit].count())
    assert rows.count_visible_rows(
        thread.pk, tiers, now, limit=count_limit, offset=offset
    ) == visible.order_by()[offset : offset + count_limit].count()

    more = rows.more_messages(thread.pk, tiers, now, offset=offset, limit=limit)
    names = entry_names(EntryKind.MESSAGE)
    assert [values(m, names) for m in more] == [
        values(m, names) for m in visible.messages().newest_first()[offset : offset + limit]]

    # The oldest slice a backfill folds from: both kinds, every field, in order.
    oldest = rows.read_oldest(thread.pk, tiers, now, offset=offset, limit=limit)
    expected = list(load._visible_rows(thread.pk, tiers, now).select_related("coverage")
                    .order_by("position", "id")[offset : offset + limit])
    names = entry_names(EntryKind.SUMMARY)  # every field
    assert [values(e, names) for e in oldest] == [values(e, names) for e in expected]
    assert [values(e.coverage, coverage) if e.is_summary else None for e in oldest] == [
        values(e.coverage, coverage) if e.is_summary else None for e in expected]


def test_a_message_the_load_reads_holds_its_stored_values_and_nothing_else(
    django_assert_num_queries: Any,
) -> None:
    """A context message is a value: the fields a context reads, as stored, with no
    model behind it that could read a field it left out or write the row."""
    thread = Thread.objects.create()
    services.append(thread, [{"role": "user", "content": "where is order 7? café",
                              "metadata": {"channel": "email"}},
                             {"role": "assistant", "content": "", "tool_calls": [
                                 {"id": "c1", "name": "lookup", "arguments": {"order": 7}}]}])
    with django_assert_num_queries(1):
        read = rows.read_context(thread.pk, None, timezone.now(), limit=5)
    stored = {m.pk: m for m in MemoryEntry.objects.filter(thread=thread)}
    assert len(read.messages) == 2
    with django_assert_num_queries(0):
        for message in read.messages:
            assert isinstance(message, ContextMessage)
            assert not message.is_summary and message.pk == message.id
            assert values(message, MESSAGE_FIELDS) == values(stored[message.pk], MESSAGE_FIELDS)
    with pytest.raises(AttributeError):
        read.messages[0].metadata  # noqa: B018 - not read, and never read on demand
    assert not hasattr(read.messages[0], "save")


def test_init_receivers_see_every_summary_the_load_builds() -> None:
    """Summaries are still model instances: a pre_init or post_init receiver sees each.
    Messages are values (`ContextMessage`), built without the model."""
    thread = Thread.objects.create()
    services.append(thread, chat_turns(0, 30))
    services.recall(thread, 600, mode="inline")
    seen: list[int] = []

    def count(sender: Any, instance: Any, **kwargs: Any) -> None:
        seen.append(instance.pk)

    post_init.connect(count, sender=MemoryEntry)
    try:
        read = rows.read_context(thread.pk, None, timezone.now(), limit=50)
    finally:
        post_init.disconnect(count, sender=MemoryEntry)
    assert read.summaries, "the inline recall made no summary to test with"
    assert sorted(seen) == sorted(summary.pk for summary in read.summaries)
    assert read.messages and all(isinstance(m, ContextMessage) and m.content
                                 for m in read.messages)


def test_the_oldest_slice_holds_an_expired_summary_and_no_expired_message() -> None:
    """Until it is retired an expired summary still hides its originals: the slice a
    backfill folds from reads it (and the fold's check then retires it)."""
    thread = build([chat_turns(n, 1) for n in range(40)], [], [])
    services.recall(thread, 1_000, mode="inline")
    summary = MemoryEntry.objects.filter(thread=thread, kind=EntryKind.SUMMARY).first()
    assert summary is not None
    now = timezone.now()
    message = MemoryEntry.objects.filter(thread=thread, kind=EntryKind.MESSAGE,
                                         covered_by__isnull=True).first()
    assert message is not None
    MemoryEntry.objects.filter(pk__in=[summary.pk, message.pk]).update(
        expires_at=now - timedelta(minutes=1))
    oldest = rows.read_oldest(thread.pk, None, now, offset=0, limit=100)
    assert summary.pk in [e.pk for e in oldest] and message.pk not in [e.pk for e in oldest]
    assert [e.pk for e in oldest] == list(
        load._visible_rows(thread.pk, None, now).order_by("position", "id")
        .values_list("pk", flat=True))
