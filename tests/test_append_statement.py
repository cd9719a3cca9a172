"""An append of plain messages on PostgreSQL outside a transaction is one statement
(`sql.append_in_one_statement`): a call of the function that moves the counters and
inserts the rows numbered from them (`sql.append_schema`).

Held against the path it stands for, the counters' UPDATE and the INSERT in a
transaction (what an append inside a caller's transaction still takes), over random
batches: the same rows field for field, the same counters. Then what the row lock keeps
when appends really overlap (a holder keeps the lock while the appends are seen
waiting on it), and an erased thread. PostgreSQL only: SQLite always takes the
transaction path.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmemory import services, sql
from agentmemory.exceptions import ThreadGoneError
from agentmemory.models import MemoryEntry, Thread
from agentmemory.querysets import no_fold_on_its_way_q
from agentmemory.sql import append_schema
from agentmemory.sql.append_schema import APPEND
from tests.test_sql import FOLD_STATES, at, overlapped

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]

NOW = datetime(2026, 12, 1, tzinfo=UTC)
#: How the one-statement append opens: the function's call (a connection kept past a
#: request), or its body sent itself (a connection a request).
FUNCTION_CALL, STATEMENT = f"SELECT * FROM {APPEND}(", "WITH locked AS ("
ONE_STATEMENT = (FUNCTION_CALL, STATEMENT)

batches = st.lists(st.lists(st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system"]),
     "content": st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"),
                        max_size=20).filter(str.strip)},
    optional={"tier": st.sampled_from(["hot", "warm", "cold"]),
              "metadata": st.dictionaries(st.sampled_from(["k", "ü"]),
                                          st.one_of(st.integers(), st.text("ab✓", max_size=3)),
                                          max_size=2)}),
    min_size=1, max_size=6), min_size=1, max_size=5)


@pytest.fixture(params=["kept", "a request's"])
def postgres(request: pytest.FixtureRequest, on_postgres: bool,
             monkeypatch: pytest.MonkeyPatch) -> str:
    """Either connection: kept past a request (the function's call), or opened for one
    (the statement itself); how its append opens."""
    if not on_postgres:
        pytest.skip("SQLite serialises writers per database; its append is a transaction")
    kept = request.param == "kept"
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 60 if kept else 0)
    return FUNCTION_CALL if kept else STATEMENT


def statements(call: Any) -> tuple[Any, list[str]]:
    with CaptureQueriesContext(connection) as captured:
        result = call()
    return result, [query["sql"] for query in captured.captured_queries]


def rows_of(thread: Thread) -> list[tuple[Any, ...]]:
    compared = [f.attname for f in MemoryEntry._meta.concrete_fields
                if f.attname not in ("id", "thread_id")]
    return list(MemoryEntry.objects.filter(thread=thread).order_by("position")
                .values_list(*compared))


def counters_of(thread: Thread) -> tuple[Any, ...]:
    row = Thread.objects.get(pk=thread.pk)
    return row.last_position, row.last_turn, row.unfolded_tokens, row.updated_at


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=batches, ttl=st.sampled_from([None, timedelta(days=2)]),
       folded=st.booleans())
def test_one_statement_writes_what_the_transaction_writes(
    postgres: str, batches: list[list[dict[str, Any]]], ttl: timedelta | None, folded: bool,
) -> None:
    """Positions, turns (a thread's first message opens turn 1 whatever its role, each
    user message opens the next), every column, and the counters, NULL unfolded tokens
    (a folded thread's) staying NULL."""
    mine, theirs = (Thread.objects.create(ttl=ttl, unfolded_tokens=None if folded else 0)
                    for _ in range(2))
    for number, batch in enumerate(batches):
        now = NOW + timedelta(minutes=number)
        entries, sent = statements(lambda batch=batch, now=now: services.append(
            mine, batch, now=now))
        assert len(sent) == 1 and sent[0].startswith(postgres), sent
        with transaction.atomic():  # a caller's transaction: the two statements
            _, two = statements(lambda batch=batch, now=now: services.append(
                theirs, batch, now=now))
        assert not any(sql.startswith(ONE_STATEMENT) for sql in two), two
        stored = MemoryEntry.objects.filter(thread=mine).order_by("position")
        assert [(e.pk, e.position, e.turn) for e in entries] == list(
            stored.values_list("pk", "position", "turn"))[-len(batch):]
        assert (mine.last_position, mine.last_turn) == (entries[-1].position,
                                                        entries[-1].turn)
    assert rows_of(mine) == rows_of(theirs)
    assert counters_of(mine) == counters_of(theirs)
    assert mine.unfolded_tokens == Thread.objects.get(pk=mine.pk).unfolded_tokens


def test_an_erased_thread_takes_nothing(postgres: str) -> None:
    thread = Thread.objects.create()
    Thread.objects.filter(pk=thread.pk).delete()
    with pytest.raises(ThreadGoneError):
        services.append(thread, [{"role": "user", "content": "anyone?"},
                                 {"role": "assistant", "content": "no"}])
    assert not MemoryEntry.objects.filter(thread_id=thread.pk).exists()


def test_tool_rounds_and_explicit_turns_take_the_transaction(postgres: str) -> None:
    """Their checks read the thread's entries under the lock."""
    thread = Thread.objects.create()
    _, sent = statements(lambda: services.append(thread, [
        {"role": "user", "content": "where is it?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "name": "track", "arguments": "{}"}]},
        {"role": "tool", "tool_call_id": "c1", "tool_name": "track", "content": "{}"}]))
    assert not any(sql.startswith(ONE_STATEMENT) for sql in sent), sent
    _, sent = statements(lambda: services.append(
        thread, {"role": "user", "content": "later", "turn": 5}))
    assert not any(sql.startswith(ONE_STATEMENT) for sql in sent), sent
    assert list(MemoryEntry.objects.filter(thread=thread).order_by("position")
                .values_list("turn", flat=True)) == [1, 1, 1, 5]


def test_appends_in_one_statement_queue_on_the_row_lock(postgres: str) -> None:
    """A holder keeps the thread's row lock while three appends send their statement:
    they are seen waiting on the lock, then each takes the next positions; no position
    is lost, repeated or skipped, and each batch's turns follow its own user messages."""
    thread = Thread.objects.create()
    services.append(thread, {"role": "user", "content": "first"})
    locked, release = threading.Event(), threading.Event()

    def holder() -> None:
        try:
            with transaction.atomic():
                list(Thread.objects.select_for_update().filter(pk=thread.pk))
                locked.set()
                assert release.wait(30)
        finally:
            connections.close_all()

    results: dict[int, Any] = {}

    def appender(size: int) -> None:
        try:
            batch = [{"role": "user" if n == 0 else "assistant", "content": f"{size} {n}"}
                     for n in range(size)]
            results[size] = services.append(Thread.objects.get(pk=thread.pk), batch)
        except BaseException as exc:  # noqa: BLE001 (reported below)
            results[size] = exc
        finally:
            connections.close_all()

    held = threading.Thread(target=holder)
    held.start()
    assert locked.wait(30)
    appenders = [threading.Thread(target=appender, args=(size,)) for size in (1, 2, 3)]
    waiting = overlapped(held, release, appenders, postgres)
    assert waiting == len(appenders), "the appends were not seen waiting on the lock"
    assert all(isinstance(found, list) for found in results.values()), results
    positions = sorted(e.position for found in results.values() for e in found)
    assert positions == list(range(2, 2 + 1 + 2 + 3))
    for found in results.values():  # each batch: one new turn, its entries together
        assert [e.position for e in found] == list(range(found[0].position,
                                                         found[0].position + len(found)))
        assert len({e.turn for e in found}) == 1
    assert sorted(found[0].turn for found in results.values()) == [2, 3, 4]
    final = Thread.objects.get(pk=thread.pk)
    assert (final.last_position, final.last_turn) == (7, 4)
    assert list(MemoryEntry.objects.filter(thread=thread).order_by("position")
                .values_list("position", flat=True)) == list(range(1, 8))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(state=FOLD_STATES)
def test_the_statement_says_a_fold_is_on_its_way_as_the_decision_reads_it(
    postgres: str, state: dict[str, Any],
) -> None:
    """What the append then skips: the fold decision's tally answers nothing while a fold
    is queued, leased (each until a time that has not passed) or parked; the statement
    reads the same under the row lock."""
    thread = Thread.objects.create(**at(state, NOW))
    entry = MemoryEntry(thread=thread, kind="message", role="user", content="hello",
                        tool_calls=[], metadata={}, tier="hot", token_count=1, created_at=NOW)
    found = sql.append_in_one_statement(thread.pk, [entry], users=1, opens=0, tokens=2,
                                        now=NOW)
    assert found is not None
    decided = Thread.objects.filter(no_fold_on_its_way_q(NOW), pk=thread.pk,
                                    fold_parked_until__isnull=True).exists()
    assert found[3] is not decided


def test_the_append_function_takes_the_entrys_columns_in_order(postgres: str) -> None:
    """The function the migration created names the columns the call's arrays are built
    from, so a column added to the model without a new function fails here, not in an
    append."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT proargnames FROM pg_proc WHERE proname = %s", [APPEND])
        [(names,)] = cursor.fetchall()
    taken = [name.removeprefix("new_") for name in names if name.startswith("new_")]
    assert taken == [str(f.column) for f in MemoryEntry._meta.concrete_fields
                     if not f.primary_key]
    assert taken == [name for name, _ in append_schema.ENTRY_COLUMNS]


def test_a_model_column_the_function_does_not_take_is_refused_before_a_write(
    postgres: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The call is built from the model's fields; where they and the function's columns
    part, the append raises before it sends anything."""
    from agentmemory.sql import base, one_statement

    monkeypatch.setattr(base, "_built", {})
    monkeypatch.setattr(one_statement, "ENTRY_COLUMNS", append_schema.ENTRY_COLUMNS[::-1])
    thread = Thread.objects.create()
    with pytest.raises(ImproperlyConfigured, match="not the ones agentmemory_append takes"):
        statements(lambda: services.append(thread, {"role": "user", "content": "hello"}))
    assert not MemoryEntry.objects.filter(thread=thread).exists()
    assert Thread.objects.get(pk=thread.pk).last_position == 0


AWKWARD = ["$1", "%s", "%(for_thread)s", "%%", "it's", "\\x00\\", "' OR 1=1 --",
           "E'\\n'", "ü✓ 🚚", " x ", "$$ END $$"]


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.one_of(st.sampled_from(AWKWARD), st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), min_size=1,
    max_size=12).filter(str.strip)), min_size=1, max_size=4))
def test_the_statement_sends_its_values_apart_and_keeps_them_exactly(
    postgres: str, texts: list[str],
) -> None:
    """The append goes with its parameters apart from its SQL (`sql.base.bound_cursor`:
    the server reads no value as SQL and spends less on the statement), only for itself:
    the connection's own cursors still write values in, and nothing is prepared. Values
    that look like placeholders, quotes or dollar quoting come back as sent."""
    thread = Thread.objects.create(title="bound")
    batch = [{"role": "user", "content": text, "metadata": {"note": text}} for text in texts]
    raw = connection.connection
    factory = raw.cursor_factory if raw is not None else None
    entries, sent = statements(lambda: services.append(thread, batch, now=NOW))
    assert len(sent) == 1 and sent[0].startswith(postgres), sent
    # psycopg numbers the parameters it sends apart; none of the values is in the SQL.
    assert "$1" in sent[0] and "CAST($" in sent[0], sent[0][:200]
    if factory is not None:
        assert connection.connection.cursor_factory is factory
    import psycopg

    with connection.cursor() as cursor:
        assert isinstance(cursor.cursor, psycopg.ClientCursor)  # the connection's own
        cursor.execute("SELECT count(*) FROM pg_prepared_statements")
        assert cursor.fetchone() == (0,)
    stored = MemoryEntry.objects.filter(thread=thread).order_by("position")
    assert [(e.content, e.metadata) for e in stored] == [
        (text, {"note": text}) for text in texts]
    assert [e.pk for e in entries] == [e.pk for e in stored]
