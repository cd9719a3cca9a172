"""`agentmemory.statements`: SQL built once answers as the queryset it was built from.

Each property runs a statement and its queryset side by side over random values and
random rows, on SQLite and on PostgreSQL (the suite's two runs); the refusals show that a
queryset whose values the statement cannot place is never run.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.models import Count, Q, Sum
from django.db.transaction import TransactionManagementError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmemory import services
from agentmemory.models import EntryKind, MemoryEntry, Thread
from agentmemory.statements import Insert, Statement, StatementError, Update

pytestmark = pytest.mark.django_db

EPOCH = datetime(2026, 11, 1, tzinfo=UTC)
moments = st.integers(min_value=-50, max_value=50).map(lambda hours: EPOCH + timedelta(hours=hours))


def entries_of(*, thread: int, since: datetime, after: int) -> Any:
    """Two values of each kind, one of them used twice, beside constants of the query."""
    return (
        MemoryEntry.objects.filter(thread=thread, position__gt=after)
        .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=since) | Q(kind="summary"))
        .order_by().values("thread")
        .annotate(rows=Count("id"), tokens=Sum("token_count", default=0),
                  late=Count("id", filter=Q(created_at__gte=since)))
        .values_list("rows", "tokens", "late")
    )


ENTRIES = Statement(entries_of, thread=int, since=datetime, after=int)


def stored(thread: Thread, hours: list[int | None]) -> None:
    """One message per item: its expiry, ``hours`` from the epoch (None: never)."""
    for position, offset in enumerate(hours, start=1):
        at = EPOCH + timedelta(hours=offset) if offset is not None else None
        MemoryEntry.objects.create(
            thread=thread, role="user", content=f"message {position}", position=position,
            turn=position, token_count=position, created_at=at or EPOCH, expires_at=at,
        )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    hours=st.lists(st.one_of(st.none(), st.integers(-60, 60)), max_size=12),
    since=moments,
    after=st.integers(-3, 14),
    other=st.booleans(),
)
def test_a_statement_returns_the_rows_of_its_queryset(
    hours: list[int | None], since: datetime, after: int, other: bool
) -> None:
    thread = Thread.objects.create(title="rows")
    stored(thread, hours)
    asked = thread.pk + 1000 if other else thread.pk  # a thread with no rows: no row
    assert ENTRIES.rows(thread=asked, since=since, after=after) == list(
        entries_of(thread=asked, since=since, after=after)
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(position=st.integers(0, 10**6), turn=st.integers(0, 10**6), now=moments)
def test_an_update_sets_each_value_in_its_own_place(position: int, turn: int, now: datetime
                                                    ) -> None:
    """Three integers of one statement: a marker shared between them would put one
    value in every place (the position in the WHERE clause, say)."""
    mine, neighbour = Thread.objects.create(title="mine"), Thread.objects.create(title="next")
    changed = COUNTERS.run(thread=mine.pk, position=position, turn=turn, now=now)
    assert changed == 1
    mine.refresh_from_db()
    assert (mine.last_position, mine.last_turn, mine.updated_at) == (position, turn, now)
    untouched = Thread.objects.get(pk=neighbour.pk)
    assert (untouched.last_position, untouched.last_turn) == (0, 0)


COUNTERS = Update(
    lambda *, thread, position, turn, now: (
        Thread.objects.filter(pk=thread),
        {"last_position": position, "last_turn": turn, "updated_at": now},
    ),
    thread=int, position=int, turn=int, now=datetime,
)

WHOLE = Statement(lambda *, thread: Thread.objects.filter(pk=thread), thread=int)


def test_instances_are_the_rows_the_orm_builds_converters_and_all() -> None:
    thread = Thread.objects.create(
        title="ünïcode ✓", client_key="k-1", metadata={"nested": {"list": [1, 2.5, None]}},
        ttl=timedelta(hours=3), fold_budget=900, fold_queued_until=EPOCH,
    )
    [found] = WHOLE.instances(thread=thread.pk)
    expected = Thread.objects.get(pk=thread.pk)
    for field in Thread._meta.concrete_fields:
        assert getattr(found, field.attname) == getattr(expected, field.attname), field.name
    assert WHOLE.instances(thread=thread.pk + 1000) == []


def outcome(call: Any) -> Any:
    """What a call returned, or the class of what it raised."""
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 (compared, not swallowed)
        return type(exc)


@pytest.mark.parametrize("value", [2**31, 2**63 - 1, 2**63, -(2**63) - 1, 10**30, None])
def test_an_integer_beyond_the_column_means_what_it_means_to_django(value: int | None) -> None:
    """Beyond 64 bits the database would refuse the parameter, and ``= NULL`` matches
    nothing where Django's ``pk=None`` has its own meaning: the ORM answers for them
    (the primary key of an erased thread is None)."""
    Thread.objects.create(title="there")
    assert WHOLE.instances(thread=value) == list(Thread.objects.filter(pk=value))
    assert outcome(lambda: ENTRIES.rows(thread=value, since=EPOCH, after=0)) == outcome(
        lambda: list(entries_of(thread=value, since=EPOCH, after=0)))
    assert outcome(lambda: COUNTERS.run(thread=value, position=1, turn=1, now=EPOCH)) == (
        outcome(lambda: Thread.objects.filter(pk=value).update(last_position=1)))


def test_a_value_the_sql_does_not_take_as_a_parameter_is_refused() -> None:
    sliced = Statement(lambda *, size: MemoryEntry.objects.values_list("id")[:size], size=int)
    with pytest.raises(StatementError, match="changes with the values"):
        sliced.rows(size=3)
    shifted = Statement(
        lambda *, position: MemoryEntry.objects.filter(position=position + 1).values_list("id"),
        position=int,
    )
    with pytest.raises(StatementError, match="not one of the values"):
        shifted.rows(position=3)


def test_a_value_equal_to_a_constant_of_the_query_is_still_bound_apart() -> None:
    """The constant 1 of ``position__gt=1`` and a value 1 are different parameters."""
    thread = Thread.objects.create(title="constants")
    stored(thread, [None, None, None])
    pair = Statement(
        lambda *, thread, at: MemoryEntry.objects.filter(thread=thread, position__gt=1,
                                                         turn__gte=at).values_list("position"),
        thread=int, at=int,
    )
    assert sorted(pair.rows(thread=thread.pk, at=1)) == [(2,), (3,)]
    assert sorted(pair.rows(thread=thread.pk, at=3)) == [(3,)]


@pytest.mark.django_db(transaction=True)  # autocommit between the statements
def test_a_row_lock_outside_a_transaction_is_refused_as_django_refuses_it() -> None:
    def build(*, thread: int) -> Any:
        return Thread.objects.select_for_update().filter(pk=thread).values_list("id")

    locked = Statement(build, thread=int)
    thread = Thread.objects.create(title="locked")
    with transaction.atomic():
        assert locked.rows(thread=thread.pk) == [(thread.pk,)]
    # PostgreSQL: refused by both; SQLite has no row locks, and neither refuses.
    assert outcome(lambda: locked.rows(thread=thread.pk)) == outcome(
        lambda: list(build(thread=thread.pk)))
    if connection.features.has_select_for_update:
        with pytest.raises(TransactionManagementError):
            locked.rows(thread=thread.pk)


def test_instances_need_whole_rows_and_values_need_their_names() -> None:
    with pytest.raises(StatementError):
        ENTRIES.instances(thread=1, since=EPOCH, after=0)
    with pytest.raises(TypeError):
        ENTRIES.rows(thread=1, since=EPOCH)
    with pytest.raises(TypeError):
        Statement(lambda *, text: Thread.objects.filter(title=text), text=str)


def test_the_append_statements_keep_positions_and_turns_under_concurrent_threads() -> None:
    """The statements services.append runs, through the service: each thread's counters
    move by its own appends only."""
    first, second = Thread.objects.create(title="a"), Thread.objects.create(title="b")
    for number in range(6):
        services.append(first, {"role": "user", "content": f"first {number}"})
        if number % 2:
            services.append(second, {"role": "assistant", "content": f"second {number}"})
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.last_position, first.last_turn) == (6, 6)
    assert (second.last_position, second.last_turn) == (3, 1)
    positions = MemoryEntry.objects.filter(thread=first, kind=EntryKind.MESSAGE).values_list(
        "position", flat=True)
    assert sorted(positions) == [1, 2, 3, 4, 5, 6]


ENTRY_INSERT = Insert(MemoryEntry)
rows = st.lists(
    st.fixed_dictionaries({
        "role": st.sampled_from(["user", "assistant", "tool"]),
        "content": st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"),
                           max_size=30),
        "tool_calls": st.lists(st.fixed_dictionaries({"id": st.text("ab1", max_size=5),
                                                      "name": st.just("lookup")}), max_size=2),
        "metadata": st.dictionaries(st.sampled_from(["k", "ü", "n"]),
                                    st.one_of(st.integers(), st.none(),
                                              st.text("abcü✓ ", max_size=5)),
                                    max_size=2),
        "expires": st.one_of(st.none(), moments),
        "tier": st.sampled_from(["hot", "warm", "cold"]),
    }),
    min_size=1, max_size=160,  # beyond one statement's rows on SQLite (999 parameters)
)


def entries_for(thread: Thread, specs: list[dict[str, Any]]) -> list[MemoryEntry]:
    return [
        MemoryEntry(thread=thread, role=spec["role"], content=spec["content"],
                    tool_calls=spec["tool_calls"], metadata=spec["metadata"], turn=1,
                    position=position, tier=spec["tier"], token_count=position,
                    created_at=EPOCH, expires_at=spec["expires"])
        for position, spec in enumerate(specs, start=1)
    ]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=rows)
def test_an_insert_writes_the_rows_bulk_create_writes(specs: list[dict[str, Any]]) -> None:
    mine, theirs = Thread.objects.create(title="insert"), Thread.objects.create(title="bulk")
    inserted, created = entries_for(mine, specs), entries_for(theirs, specs)
    ENTRY_INSERT.create(inserted)
    MemoryEntry.objects.bulk_create(created)
    assert all(entry.pk is not None and not entry._state.adding for entry in inserted)
    compared = [f.attname for f in MemoryEntry._meta.concrete_fields
                if f.attname not in ("id", "thread_id")]

    def stored(thread: Thread) -> list[tuple[Any, ...]]:
        return list(MemoryEntry.objects.filter(thread=thread).order_by("position")
                    .values_list("id", *compared))

    assert [row[0] for row in stored(mine)] == [entry.pk for entry in inserted]
    assert [row[1:] for row in stored(mine)] == [row[1:] for row in stored(theirs)]


def test_rows_that_have_their_key_go_through_bulk_create() -> None:
    thread = Thread.objects.create(title="keyed")
    [keyed] = entries_for(thread, [{"role": "user", "content": "x", "tool_calls": [],
                                    "metadata": {}, "expires": None, "tier": "hot"}])
    keyed.pk = 10**6
    ENTRY_INSERT.create([keyed])
    assert MemoryEntry.objects.get(pk=10**6).content == "x"


def test_one_row_goes_through_the_sql_built_once() -> None:
    """The append's case on both databases: a single row, VALUES with a parameter per
    field (PostgreSQL gets several rows as arrays, which bulk_create then sends)."""
    thread = Thread.objects.create(title="one")
    spec = {"role": "user", "content": "only", "tool_calls": [], "metadata": {"k": 1},
            "expires": None, "tier": "hot"}
    inserter = Insert(MemoryEntry)
    [first] = entries_for(thread, [spec])
    inserter.create([first])
    [second] = entries_for(thread, [spec])
    second.position = 2
    inserter.create([second])
    assert list(inserter._sql.values()) and all(inserter._sql.values())
    assert list(MemoryEntry.objects.filter(thread=thread).order_by("position")
                .values_list("pk", "content", "metadata")) == [
        (first.pk, "only", {"k": 1}), (second.pk, "only", {"k": 1})]
