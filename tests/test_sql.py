"""`agentmemory.sql`: each hand-written statement answers as the queryset it stands for.

On SQLite and on PostgreSQL (the suite's two runs), over random rows and values: the
fold decision's tally against the ORM's aggregate over `load._visible_rows`, the
fold-on-its-way check against ``Thread.objects.fold_on_its_way``, the owned thread
against ``owned_by`` (every field, converted), the append's rows against
``bulk_create``, and the append's counters against the algorithm they replace (a lock,
the turns counted message by message, an UPDATE). Then the laws the counters keep:
positions gapless and unique under appends that really overlap (PostgreSQL), and a failed
append writes nothing.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.db.models import Count, F, Q, Sum
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from agentmemory import services, sql
from agentmemory.exceptions import MessageConflictError
from agentmemory.models import EntryKind, MemoryEntry, Thread
from agentmemory.pipeline import load
from agentmemory.querysets import expired_q, no_fold_on_its_way_q
from agentmemory.services import appends
from tests.test_context_rows import BUILT, FOLDS, TIERS, TOUCHES, build
from tests.test_recall_contract import turns

pytestmark = pytest.mark.django_db

EPOCH = datetime(2026, 11, 1, tzinfo=UTC)
moments = st.one_of(st.none(), st.integers(-3, 3).map(lambda h: EPOCH + timedelta(hours=h)))
hours = st.one_of(st.none(), st.integers(-3, 3))
#: A thread's fold state: each time NULL or hours from now (0: now itself); an owner or none.
FOLD_STATES = st.fixed_dictionaries({
    "fold_queued_until": hours, "fold_lease_until": hours,
    "fold_lease_owner": st.sampled_from(["", "worker-1"]), "fold_parked_until": hours,
})


def at(state: dict[str, Any], now: datetime) -> dict[str, Any]:
    """A drawn fold state, its times set from ``now``."""
    return {name: now + timedelta(hours=value) if isinstance(value, int) else value
            for name, value in state.items()}


def orm_tally(thread: Thread, tiers: Any, now: datetime, unless_on_its_way: bool) -> Any:
    """What `sql.visible_tally` states, as the ORM counts it."""
    rows = load._visible_rows(thread.pk, tiers, now)
    if unless_on_its_way:
        rows = rows.filter(no_fold_on_its_way_q(now, "thread__"),
                           thread__fold_parked_until__isnull=True)
    is_summary = Q(kind=EntryKind.SUMMARY)
    cost = F("token_count") + 1
    found = list(rows.order_by().values("thread").annotate(
        rows=Count("id"), cost=Sum(cost, default=0), summaries=Count("id", filter=is_summary),
        summary_cost=Sum(cost, filter=is_summary, default=0),
        expired=Count("id", filter=is_summary & expired_q(now)),
    ).values_list("rows", "cost", "summaries", "summary_cost", "expired"))
    return found[0] if found else None


@BUILT
@given(conversation=turns(), folds=FOLDS, touches=TOUCHES, tiers=st.sampled_from(TIERS),
       state=FOLD_STATES, unless_on_its_way=st.booleans())
def test_the_tally_counts_what_the_orm_counts(
    conversation: list[list[dict[str, Any]]], folds: list[int], touches: list[tuple[int, str]],
    tiers: Any, state: dict[str, Any], unless_on_its_way: bool,
) -> None:
    thread = build(conversation, folds, touches)
    now = timezone.now()
    Thread.objects.filter(pk=thread.pk).update(**at(state, now))
    expected = orm_tally(thread, tiers, now, unless_on_its_way)
    got = sql.visible_tally(thread.pk, tiers, now, unless_on_its_way=unless_on_its_way)
    assert got == expected
    assert sql.visible_tally(thread.pk + 10_000, tiers, now, unless_on_its_way=False) is None


@given(state=FOLD_STATES, other=st.booleans())
def test_a_fold_on_its_way_is_the_querysets(state: dict[str, Any], other: bool) -> None:
    now = EPOCH
    thread = Thread.objects.create(**at(state, now))
    asked = thread.pk + 1_000 if other else thread.pk
    assert sql.fold_on_its_way(asked, now) == (
        Thread.objects.fold_on_its_way(now).filter(pk=asked).exists())
    # and the tally's filter is its opposite, for a thread that is not parked
    if state["fold_parked_until"] is None:
        assert sql.fold_on_its_way(thread.pk, now) != (
            Thread.objects.filter(no_fold_on_its_way_q(now), pk=thread.pk).exists())


texts = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"),
                max_size=20)


@BUILT
@given(title=texts, key=texts, metadata=st.dictionaries(texts, st.one_of(
           st.integers(), st.none(), texts,
           st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=2)),
           max_size=3),
       ttl=st.one_of(st.none(), st.integers(1, 10**6).map(lambda s: timedelta(seconds=s))),
       budget=st.one_of(st.none(), st.integers(1, 10**6)), state=FOLD_STATES,
       mine=st.booleans())
def test_the_owned_thread_is_the_one_the_orm_builds(
    title: str, key: str, metadata: dict[str, Any], ttl: timedelta | None, budget: int | None,
    state: dict[str, Any], mine: bool, django_user_model: Any,
) -> None:
    owner, other = (django_user_model.objects.get_or_create(username=name)[0]
                    for name in ("owner", "other"))
    Thread.objects.filter(owner=owner).delete()  # the key is unique per owner
    thread = Thread.objects.create(owner=owner, title=title, client_key=key, metadata=metadata,
                                   ttl=ttl, fold_budget=budget, **at(state, EPOCH))
    asker = owner if mine else other
    found = sql.owned_thread(asker.pk, thread.pk)
    expected = Thread.objects.owned_by(asker).filter(pk=thread.pk).first()
    assert (found is None) == (expected is None) == (not mine)
    if found is not None:
        for field in Thread._meta.concrete_fields:
            assert getattr(found, field.attname) == getattr(expected, field.attname), field.name
        assert found._state.db == "default" and not found._state.adding
        found.title = "saved again"  # an instance like any other
        found.save(update_fields=["title"])
        assert Thread.objects.get(pk=thread.pk).title == "saved again"


@pytest.mark.parametrize("value", [2**31, 2**63 - 1, 2**63, -(2**63) - 1, 10**30])
def test_an_id_beyond_the_column_finds_what_the_orm_finds(value: int) -> None:
    """Beyond 64 bits the database would refuse the parameter; Django finds no row."""
    Thread.objects.create(title="there")
    assert sql.owned_thread(1, value) is Thread.objects.filter(owner=1, pk=value).first()
    assert sql.owned_thread(value, 1) is None  # no user has that key (the ORM overflows)
    assert sql.fold_on_its_way(value, EPOCH) == (
        Thread.objects.fold_on_its_way(EPOCH).filter(pk=value).exists())


# ----------------------------------------------------------------------- the append

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


def stored(thread: Thread) -> list[tuple[Any, ...]]:
    compared = [f.attname for f in MemoryEntry._meta.concrete_fields
                if f.attname not in ("id", "thread_id")]
    return list(MemoryEntry.objects.filter(thread=thread).order_by("position")
                .values_list("id", *compared))


@BUILT
@given(specs=rows, returning=st.booleans())
def test_the_insert_writes_the_rows_bulk_create_writes(
    specs: list[dict[str, Any]], returning: bool, monkeypatch: Any,
) -> None:
    """With RETURNING, and without it (SQLite before 3.35: a row a statement)."""
    returning = returning or connection.vendor != "sqlite"  # PostgreSQL always has it
    mine, theirs = Thread.objects.create(title="insert"), Thread.objects.create(title="bulk")
    inserted, created = entries_for(mine, specs), entries_for(theirs, specs)
    inserted.reverse()  # the keys find their rows by position, not by order
    with monkeypatch.context() as patch:
        patch.setattr(connection.features, "can_return_columns_from_insert", returning)
        sql.insert_entries(inserted)
    MemoryEntry.objects.bulk_create(created)
    assert all(entry.pk is not None and not entry._state.adding for entry in inserted)
    assert {entry.pk: entry.position for entry in inserted} == dict(
        MemoryEntry.objects.filter(thread=mine).values_list("pk", "position"))
    assert [row[1:] for row in stored(mine)] == [row[1:] for row in stored(theirs)]


def reference(start: tuple[int, int], batch: list[dict[str, Any]]) -> Any:
    """The turns and positions the append gave before its counters were one UPDATE:
    read under the lock, counted message by message."""
    position, turn = start
    out = []
    for message in batch:
        position += 1
        if message.get("turn") is not None:
            if message["turn"] < turn:
                return MessageConflictError
            turn = message["turn"]
        elif message["role"] == "user" or turn == 0:
            turn += 1
        out.append((position, turn))
    return out


batches = st.lists(st.lists(st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system"])},
    optional={"turn": st.integers(1, 12)}), max_size=5), min_size=1, max_size=8)


@BUILT
@given(batches=batches, returning=st.booleans())
def test_the_counters_give_the_positions_and_turns_the_lock_gave(
    batches: list[list[dict[str, Any]]], returning: bool, monkeypatch: Any,
) -> None:
    """Turns from the counters' UPDATE (each user message opens one; so does the first
    message of a thread, whatever its role; explicit turns move it) are those the old
    loop gave; a conflict writes nothing. Without RETURNING (SQLite before 3.35) the row
    is read after the UPDATE."""
    returning = returning or connection.vendor != "sqlite"  # PostgreSQL always has it
    monkeypatch.setattr(connection.features, "can_return_columns_from_insert", returning)
    thread = Thread.objects.create()
    for number, batch in enumerate(batches):
        before = Thread.objects.get(pk=thread.pk)
        counted = MemoryEntry.objects.filter(thread=thread).count()
        messages = [{**message, "content": f"batch {number} message {index}"}
                    for index, message in enumerate(batch)]
        expected = reference((before.last_position, before.last_turn), messages)
        if expected is MessageConflictError:
            with pytest.raises(MessageConflictError):
                services.append(thread, messages)
            after = Thread.objects.get(pk=thread.pk)
            assert (after.last_position, after.last_turn, after.unfolded_tokens) == (
                before.last_position, before.last_turn, before.unfolded_tokens)
            assert MemoryEntry.objects.filter(thread=thread).count() == counted
            continue
        entries = services.append(thread, messages)
        assert [(entry.position, entry.turn) for entry in entries] == expected
        after = Thread.objects.get(pk=thread.pk)
        last = expected[-1] if expected else (before.last_position, before.last_turn)
        assert (after.last_position, after.last_turn) == last
        assert (thread.last_position, thread.last_turn) == last
        assert after.unfolded_tokens == before.unfolded_tokens + sum(
            entry.token_count + 1 for entry in entries)
        assert list(MemoryEntry.objects.filter(thread=thread).order_by("position").values_list(
            "pk", "position", "turn"))[counted:] == [
            (entry.pk, entry.position, entry.turn) for entry in entries]


def test_a_failed_insert_leaves_the_counters_as_they_were(monkeypatch: Any) -> None:
    thread = Thread.objects.create()
    services.append(thread, {"role": "user", "content": "first"})
    before = Thread.objects.get(pk=thread.pk)

    def broken(entries: Any) -> None:
        raise RuntimeError("the insert failed")

    monkeypatch.setattr(appends, "insert_entries", broken)
    with pytest.raises(RuntimeError):
        services.append(thread, [{"role": "user", "content": "second"},
                                 {"role": "assistant", "content": "answer"}])
    after = Thread.objects.get(pk=thread.pk)
    assert (after.last_position, after.last_turn, after.unfolded_tokens, after.updated_at) == (
        before.last_position, before.last_turn, before.unfolded_tokens, before.updated_at)
    assert MemoryEntry.objects.filter(thread=thread).count() == 1


def test_an_append_to_an_erased_thread_raises_thread_gone() -> None:
    from agentmemory.exceptions import ThreadGoneError

    thread = Thread.objects.create()
    Thread.objects.filter(pk=thread.pk).delete()
    with pytest.raises(ThreadGoneError):
        services.append(thread, {"role": "user", "content": "anyone?"})


def overlapped(holder: threading.Thread, release: threading.Event,
               workers: list[threading.Thread], statement: str) -> int:
    """Start ``workers`` while ``holder`` holds a lock, count them waiting on it in
    ``statement`` (`seen_waiting`), then ``release`` the holder and join every thread;
    returns the count."""
    for worker in workers:
        worker.start()
    waiting = seen_waiting(len(workers), statement)
    release.set()
    for worker in (holder, *workers):
        worker.join(60)
    return waiting


def seen_waiting(count: int, statement: str) -> int:
    """How many sessions of the test database wait on a lock in a statement that begins
    with ``statement`` (PostgreSQL), asked until ``count`` do or 30 seconds pass."""
    waiting, deadline = 0, time.monotonic() + 30
    with connections["default"].cursor() as cursor:
        while waiting < count and time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock' AND query LIKE %s", [f"{statement}%"])
            waiting = cursor.fetchone()[0]
            time.sleep(0.01)
    return waiting


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_appends_that_overlap_queue_on_the_counters_and_keep_positions_gapless(
    on_postgres: bool, monkeypatch: Any,
) -> None:
    """The first append holds the row lock (its counters moved, its rows not yet written)
    while the others send their UPDATE: they are seen waiting on the lock, then each
    takes the next positions; no position is lost, repeated or skipped. Each append runs
    in a transaction of its caller's, so the rows follow the counters' UPDATE in two
    statements (tests/test_append_statement.py overlaps appends in one statement)."""
    if not on_postgres:
        pytest.skip("SQLite serialises writers per database, not per row")
    thread = Thread.objects.create()
    holding, release = threading.Event(), threading.Event()
    real_insert = appends.insert_entries

    def held_insert(entries: Any) -> None:
        if threading.current_thread().name == "first":
            holding.set()
            assert release.wait(30)
        real_insert(entries)

    monkeypatch.setattr(appends, "insert_entries", held_insert)
    results: dict[str, Any] = {}

    def appender(name: str, size: int) -> None:
        try:
            batch = [{"role": "user" if n == 0 else "assistant", "content": f"{name} {n}"}
                     for n in range(size)]
            with transaction.atomic():
                results[name] = services.append(Thread.objects.get(pk=thread.pk), batch)
        except BaseException as exc:  # noqa: BLE001 (reported below)
            results[name] = exc
        finally:
            connections.close_all()

    first = threading.Thread(target=appender, args=("first", 3), name="first")
    first.start()
    assert holding.wait(30)
    others = [threading.Thread(target=appender, args=(f"other {n}", n + 1)) for n in range(3)]
    waiting = overlapped(first, release, others, f'UPDATE "{Thread._meta.db_table}"')
    assert waiting == len(others), "the other appends were not seen waiting on the lock"
    assert all(isinstance(found, list) for found in results.values()), results
    positions = sorted(e.position for found in results.values() for e in found)
    assert positions == list(range(1, 3 + 1 + 2 + 3 + 1))
    assert [e.position for e in results["first"]] == [1, 2, 3]  # it held the lock first
    stored_rows = list(MemoryEntry.objects.filter(thread=thread).order_by("position")
                       .values_list("position", "turn"))
    assert [p for p, _ in stored_rows] == positions
    assert [t for _, t in stored_rows] == sorted(t for _, t in stored_rows)
    final = Thread.objects.get(pk=thread.pk)
    assert (final.last_position, final.last_turn) == (len(positions), 4)
