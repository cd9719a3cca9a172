"""How a receipt is written (issue 24): one statement on either database, in a caller's
transaction or on its own: the receipt with what it shows in its own row, from the
locked thread row, if every entry shown is stored and (PostgreSQL) the thread's
``erasures`` did not move while it waited for the lock. A receipt names only stored rows
under the turn the row holds, an erasure that lands between the load and the receipt
writes nothing and raises, and erasure finds every receipt that shows what it takes.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmemory import services
from agentmemory.exceptions import EntryGoneError, ThreadGoneError
from agentmemory.models import MemoryEntry, RecallReceipt, Thread
from agentmemory.pipeline.config import RecallConfig
from agentmemory.trust.receipt_schema import FILE_RECEIPT
from agentmemory.trust.receipts import (
    config_record,
    delete_receipts_showing,
    receipt_columns,
    receipts_showing,
    record_receipt,
)
from tests.helpers import add_turns

pytestmark = pytest.mark.django_db(transaction=True)


def arguments(picked: list[MemoryEntry], **changes: Any) -> dict[str, Any]:
    given: dict[str, Any] = dict(
        config=RecallConfig.build(), budget_tokens=1000, tokens=10, decline=None,
        budget_decline=None, folded_summary=None, now=datetime.now(UTC), expires_at=None)
    return given | changes


def a_thread(turns: int = 3) -> tuple[Thread, list[MemoryEntry]]:
    thread = Thread.objects.create()
    add_turns(thread, turns)
    return thread, list(MemoryEntry.objects.filter(thread=thread).order_by("position"))


def writes(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries]


@pytest.mark.parametrize("inside_a_transaction", [False, True])
def test_a_receipt_names_what_was_shown_in_order_under_the_rows_turn(
    inside_a_transaction: bool,
) -> None:
    thread, picked = a_thread()
    Thread.objects.filter(pk=thread.pk).update(last_turn=41)  # appends made elsewhere
    given = arguments(picked, omitted=2, expires_at=datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC))
    with CaptureQueriesContext(connection) as queries:
        if inside_a_transaction:
            with transaction.atomic():
                receipt = record_receipt(thread, picked, **given)
        else:
            receipt = record_receipt(thread, picked, **given)
    stored = RecallReceipt.objects.get()
    assert (receipt.id, receipt.turn) == (stored.pk, 41) and stored.omitted == 2
    assert stored.config == config_record(given["config"])
    assert (stored.created_at, stored.expires_at) == (given["now"], given["expires_at"])
    assert (stored.budget_tokens, stored.tokens, stored.thread_id) == (1000, 10, thread.pk)
    assert [(i.order, i.entry_id, i.kind, i.tokens) for i in stored.items] == [
        (n, e.pk, e.kind, e.token_count) for n, e in enumerate(picked)]
    assert (stored.oldest_position, stored.newest_position) == (
        min(e.position for e in picked), max(e.position for e in picked))
    # One statement: the lock, the check and the receipt (committed on its own outside
    # a transaction; the caller's BEGIN and COMMIT are the caller's).
    sent = [sql for sql in writes(queries)
            if not sql.startswith(("SAVEPOINT", "RELEASE", "BEGIN", "COMMIT"))]
    assert len(sent) == 1, sent
    if connection.vendor == "postgresql":
        assert sent[0].startswith(f"SELECT receipt_id, receipt_turn FROM {FILE_RECEIPT}(")
    else:
        assert sent[0].startswith("INSERT") and "json_each" in sent[0]


@pytest.mark.parametrize("inside_a_transaction", [False, True])
def test_an_erasure_before_the_receipt_writes_nothing_and_raises(
    inside_a_transaction: bool,
) -> None:
    thread, picked = a_thread()
    services.erase_entry(picked[1])

    def write() -> None:
        if inside_a_transaction:
            with transaction.atomic():
                record_receipt(thread, picked, **arguments(picked))
        else:
            record_receipt(thread, picked, **arguments(picked))

    with pytest.raises(EntryGoneError):
        write()
    # The folded summary is shown too: erased, the same.
    folded = picked[0]
    services.erase_entry(folded)
    with pytest.raises(EntryGoneError):
        record_receipt(thread, picked[2:], **arguments(picked, folded_summary=folded))
    services.erase_thread(thread)
    with pytest.raises(ThreadGoneError):
        write()
    assert not RecallReceipt.objects.exists()


@pytest.mark.postgres_only
@pytest.mark.parametrize("seen", [False, True], ids=["counted", "the load's erasures"])
def test_an_erasure_that_holds_the_lock_while_the_receipt_waits_writes_nothing(
    seen: bool,
) -> None:
    """The overlap forced: another connection locks the thread row (as an erasure does),
    deletes a shown entry, and commits only once the receipt's statement waits on that
    lock. The statement's snapshot predates the delete, so its count still finds the
    entry; the thread row it locks is re-read once granted, and the delete's trigger
    moved its ``erasures`` (from the one the load read, when it is given)."""
    if connection.vendor != "postgresql":
        pytest.skip("a row lock another connection waits on needs PostgreSQL")
    thread, picked = a_thread()
    extra = {"seen_erasures": erasures_of(thread)} if seen else {}
    given = connection.settings_dict
    eraser = psycopg.connect(host=given["HOST"], port=given["PORT"], user=given["USER"],
                             password=given["PASSWORD"] or None, dbname=given["NAME"])
    table, entries = Thread._meta.db_table, MemoryEntry._meta.db_table
    eraser.execute(f'SELECT 1 FROM "{table}" WHERE id = %s FOR UPDATE', [thread.pk])
    eraser.execute(f'DELETE FROM "{entries}" WHERE id = %s', [picked[1].pk])
    outcome: list[BaseException | None] = []

    def write() -> None:
        try:
            record_receipt(thread, picked, **arguments(picked), **extra)
            outcome.append(None)
        except BaseException as error:  # noqa: BLE001 -- handed to the test thread
            outcome.append(error)
        finally:
            connection.close()

    writer = threading.Thread(target=write)
    writer.start()
    waiting = False
    watcher = psycopg.connect(host=given["HOST"], port=given["PORT"], user=given["USER"],
                              password=given["PASSWORD"] or None, dbname=given["NAME"],
                              autocommit=True)
    for _ in range(500):  # until the receipt's statement waits on the eraser's row lock
        waiting = bool(watcher.execute(
            "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            f" AND query LIKE '%%{FILE_RECEIPT}(%%'"
            " AND datname = current_database()"
        ).fetchone())
        if waiting:
            break
        time.sleep(0.01)
    eraser.commit()
    writer.join(timeout=30)
    eraser.close()
    watcher.close()
    assert waiting, "the receipt never waited on the lock"
    assert len(outcome) == 1 and isinstance(outcome[0], EntryGoneError), outcome
    assert not RecallReceipt.objects.exists()


@pytest.mark.parametrize("count", [0, 1, 1000])
def test_a_receipt_is_one_statement_whatever_it_shows(count: int) -> None:
    """No statement per item, nor per batch of items: the ids go as one parameter."""
    thread = Thread.objects.create()
    services.append(thread, [{"role": "user", "content": f"m{n}"} for n in range(count)])
    picked = list(MemoryEntry.objects.filter(thread=thread).order_by("position"))
    with CaptureQueriesContext(connection) as queries:
        receipt = record_receipt(thread, picked, **arguments(picked))
    assert len(writes(queries)) == 1
    stored = RecallReceipt.objects.get(pk=receipt.id)
    assert stored.entry_ids() == [e.pk for e in picked]
    assert (stored.oldest_position, stored.newest_position) == (
        (picked[0].position, picked[-1].position) if picked else (None, None))


def test_every_delete_of_entries_advances_its_threads_erasures_once() -> None:
    """PostgreSQL: the trigger, once per statement and thread, whoever deletes; a delete
    of nothing moves nothing. SQLite has no trigger: its receipt needs none."""
    (first, entries), (second, others) = a_thread(), a_thread()
    MemoryEntry.objects.filter(pk__in=[e.pk for e in (*entries[:2], others[0])]).delete()
    MemoryEntry.objects.filter(pk=-1).delete()
    services.erase_entry(entries[3])
    moved = connection.vendor == "postgresql"
    counts = dict(Thread.objects.values_list("pk", "erasures"))
    assert counts == {first.pk: 2 * moved, second.pk: 1 * moved}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), sizes=st.lists(st.integers(1, 12), min_size=1, max_size=3))
def test_showing_finds_exactly_the_receipts_that_show_an_entry(
    data: st.DataObject, sizes: list[int],
) -> None:
    """Over random threads and random receipts (any entries, in any order), the receipts
    `showing` finds for random entries are those whose items name one of them."""
    threads = [a_thread(size) for size in sizes]
    receipts = []
    for thread, entries in threads:
        for _ in range(data.draw(st.integers(0, 4))):
            shown = data.draw(st.lists(st.sampled_from(entries), unique_by=lambda e: e.pk))
            receipts.append(record_receipt(thread, shown, **arguments(shown)))
    every = [entry for _, entries in threads for entry in entries]
    asked = data.draw(st.lists(st.sampled_from(every), unique_by=lambda e: e.pk, min_size=1))
    wanted = {entry.pk for entry in asked}
    ours = {r.id for r in receipts}
    found = {pk for pk, _ in receipts_showing([(e.pk, e.thread_id, e.position) for e in asked])}
    assert found & ours == {
        r.pk for r in RecallReceipt.objects.filter(pk__in=ours) if wanted & set(r.entry_ids())}


def test_erasure_deletes_every_receipt_that_shows_an_entry_a_chunk_at_a_time() -> None:
    """More receipts than a statement's chunk show the entry: every one goes, and only
    those."""
    thread, entries = a_thread()
    showing = [record_receipt(thread, entries, **arguments(entries)).id for _ in range(7)]
    other = record_receipt(thread, entries[-1:], **arguments(entries[-1:])).id
    with CaptureQueriesContext(connection) as queries:
        deleted = delete_receipts_showing(
            [(entries[0].pk, thread.pk, entries[0].position)], chunk=3)
    assert deleted == 7 and list(RecallReceipt.objects.values_list("pk", flat=True)) == [other]
    assert len([q for q in writes(queries) if q.startswith("DELETE")]) == 3
    assert not set(showing) & set(RecallReceipt.objects.values_list("pk", flat=True))


def test_the_filing_function_takes_the_receipts_columns_in_order() -> None:
    """PostgreSQL: the function the migration created names the columns the statement's
    parameters are built from, so a column added to the model without a new function
    fails here, not in a recall."""
    if connection.vendor != "postgresql":
        pytest.skip("the function is PostgreSQL's")
    with connection.cursor() as cursor:
        cursor.execute("SELECT proargnames FROM pg_proc WHERE proname = %s", [FILE_RECEIPT])
        [(names,)] = cursor.fetchall()
    taken = [name.removeprefix("new_") for name in names if name not in (
        "shown_ids", "shown_count", "seen_erasures", "receipt_id", "receipt_turn")]
    assert taken == receipt_columns()


def erasures_of(thread: Thread) -> int:
    return int(Thread.objects.values_list("erasures", flat=True).get(pk=thread.pk))


def test_the_loads_erasures_skip_the_count_while_they_hold() -> None:
    """PostgreSQL, given the ``erasures`` the load read: unchanged, the receipt is filed
    without counting what it shows (a shown entry deleted with the trigger off, which no
    erasure does, is not noticed: the count is skipped); moved by an erasure of an entry
    it does not show, the count decides and files it; moved by one it shows, nothing is
    written and it raises."""
    if connection.vendor != "postgresql":
        pytest.skip("the counter is PostgreSQL's")
    thread, picked = a_thread(4)
    seen = erasures_of(thread)
    shown = picked[2:]
    table = MemoryEntry._meta.db_table
    with connection.cursor() as cursor:  # under the counter: as if the load predated it
        cursor.execute(f'ALTER TABLE "{table}" DISABLE TRIGGER agentmemory_entry_erasures')
        try:
            cursor.execute(f'DELETE FROM "{table}" WHERE id = %s', [shown[0].pk])
        finally:
            cursor.execute(f'ALTER TABLE "{table}" ENABLE TRIGGER agentmemory_entry_erasures')
    record_receipt(thread, shown, **arguments(shown), seen_erasures=seen)
    with pytest.raises(EntryGoneError):  # counted, the same receipt is refused
        record_receipt(thread, shown, **arguments(shown))
    assert RecallReceipt.objects.count() == 1
    RecallReceipt.objects.all().delete()
    kept = shown[1:]
    services.erase_entry(picked[0])  # not shown: the counter moves, the count files it
    assert erasures_of(thread) != seen
    record_receipt(thread, kept, **arguments(kept), seen_erasures=seen)
    assert RecallReceipt.objects.get().entry_ids() == [e.pk for e in kept]
    services.erase_entry(kept[0])  # shown (its receipt goes with it): nothing written
    assert not RecallReceipt.objects.exists()
    with pytest.raises(EntryGoneError):
        record_receipt(thread, kept, **arguments(kept), seen_erasures=seen)
    assert not RecallReceipt.objects.exists()


def test_a_background_load_reads_the_erasures_a_receipt_compares() -> None:
    """The load's first statement reads the thread's ``erasures`` with its rows (each
    DELETE of entries moves it on PostgreSQL); a recall hands it to the receipt."""
    from agentmemory.pipeline.rows import read_context

    thread, picked = a_thread(3)
    now = datetime.now(UTC)
    assert read_context(thread.pk, None, now, limit=10).erasures == erasures_of(thread)
    services.erase_entry(picked[-1])
    after = read_context(thread.pk, None, now, limit=10).erasures
    assert after == erasures_of(thread)
    if connection.vendor == "postgresql":
        assert after == 1
    empty = Thread.objects.create()
    assert read_context(empty.pk, None, now, limit=10).erasures is None
    sent: list[Any] = []

    def spy(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if "receipt" in sql:
            sent.append(params)
        return execute(sql, params, many, context)

    with override_settings(AGENTMEMORY={"RECEIPTS": True}), connection.execute_wrapper(spy):
        services.recall(thread, 4000, mode="background")
    if connection.vendor == "postgresql":  # the function's last parameter
        assert list(sent[0].values())[-1] == erasures_of(thread)


def test_shown_is_compressed_with_lz4_where_the_server_has_it() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("column compression is PostgreSQL's")
    with connection.cursor() as cursor:
        try:
            with transaction.atomic():
                cursor.execute("CREATE TEMP TABLE probe (x jsonb COMPRESSION lz4)")
                cursor.execute("DROP TABLE probe")
            has_lz4 = True
        except Exception:  # noqa: BLE001 -- a server built without lz4
            has_lz4 = False
        cursor.execute("SELECT attcompression FROM pg_attribute WHERE attrelid ="
                       " 'agentmemory_recallreceipt'::regclass AND attname = 'shown'")
        [(method,)] = cursor.fetchall()
    assert method == ("l" if has_lz4 else "")


@given(st.lists(st.tuples(st.integers(1, 2**62), st.sampled_from(
    ["message", "summary", 'odd "kind"\n']), st.integers(0, 10**6)), max_size=30))
def test_shown_is_the_json_of_id_kind_and_tokens(items: list[tuple[int, str, int]]) -> None:
    from types import SimpleNamespace

    from agentmemory.trust.receipts import _shown_json

    picked: Any = [SimpleNamespace(id=i, kind=k, token_count=t) for i, k, t in items]
    assert json.loads(_shown_json(picked)) == [list(item) for item in items]
