"""SQLite's index takes appends in batches (agentmemory.search.schema): whatever the order
of appends, folds, erasures and searches, it holds exactly the live indexed entries up
to its watermark, never more than a batch behind the newest, and a search finds every
entry committed before it. On PostgreSQL (no batches) the searches must agree too."""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from typing import Any

import pytest
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmemory import services
from agentmemory.models import EntryKind, MemoryEntry, Thread
from agentmemory.search.index import FTS_TABLE, MEMORY_TOOL_NAMES
from agentmemory.search.schema import (
    CATCH_UP,
    ENTRY_TABLE,
    FTS_TOKENIZE,
    INDEX_BATCH,
    INDEXED_THROUGH,
    NEWEST,
    catch_up,
    create_statements,
)

pytestmark = pytest.mark.django_db

sqlite_only = pytest.mark.skipif("connection.vendor != 'sqlite'")


def _scalar(sql: str, params: list[Any] | None = None) -> Any:
    with connection.cursor() as cursor:
        cursor.execute(sql, params or [])
        return cursor.fetchone()[0]


def watermark() -> int:
    return int(_scalar(f"SELECT {INDEXED_THROUGH}"))


def newest_id() -> int:
    return int(_scalar(f"SELECT coalesce(max(id), 0) FROM {ENTRY_TABLE}"))


def _instances(table: str, schema: str) -> set[tuple[str, int, int]]:
    """Every (term, row, offset) the FTS5 table ``table`` holds, as its queries see it."""
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS temp.batches_vocab")
        cursor.execute(f"CREATE VIRTUAL TABLE temp.batches_vocab USING "
                       f"fts5vocab({schema}, {table}, instance)")
        cursor.execute("SELECT term, doc, \"offset\" FROM temp.batches_vocab")
        found = {(term, int(doc), int(offset)) for term, doc, offset in cursor.fetchall()}
        cursor.execute("DROP TABLE temp.batches_vocab")
    return found


def rows_counted(block: bytes) -> int:
    """The row count FTS5 keeps in its averages record (``%_data`` row 1, its first
    SQLite varint): every insert adds one, every 'delete' takes one off, so a deletion of
    a row the index never held leaves it short of the rows it holds."""
    value = 0
    for byte in block[:9]:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            break
    return value


def index_instances() -> set[tuple[str, int, int]]:
    return _instances(FTS_TABLE, "main")


def expected_rows() -> list[tuple[int, str]]:
    """What the index should hold: the live messages up to the watermark, other than the
    memory tools' results."""
    return [(entry.pk, entry.content) for entry in MemoryEntry.objects.filter(
        kind=EntryKind.MESSAGE, pk__lte=watermark()).exclude(
        role="tool", tool_name__in=MEMORY_TOOL_NAMES)]


def instances_of(rows: list[tuple[int, str]]) -> set[tuple[str, int, int]]:
    """``rows`` tokenized as the index tokenizes them, in a table of their own."""
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS temp.batches_expected")
        cursor.execute("CREATE VIRTUAL TABLE temp.batches_expected USING "
                       f"fts5(content, tokenize='{FTS_TOKENIZE}')")
        cursor.executemany("INSERT INTO temp.batches_expected(rowid, content) VALUES (?, ?)",
                           rows)
    found = _instances("batches_expected", "temp")
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE temp.batches_expected")
    return found


def assert_index_exact() -> None:
    rows = expected_rows()
    assert index_instances() == instances_of(rows)
    counted = rows_counted(_scalar(f"SELECT block FROM {FTS_TABLE}_data WHERE id = 1"))
    assert counted == len(rows)
    # Below it when the newest entries were erased: ids are never given again.
    assert newest_id() - watermark() < INDEX_BATCH


def words(number: int) -> str:
    return f"note{number} about the parcel"


@sqlite_only
def test_the_append_that_fills_a_batch_indexes_it_in_its_own_transaction() -> None:
    thread = Thread.objects.create()
    services.append(thread, {"role": "user", "content": "before the batch"})
    catch_up(connection)
    start = watermark()
    assert start == newest_id()
    for number in range(INDEX_BATCH - 1):
        services.append(thread, {"role": "user", "content": words(number)})
    assert watermark() == start
    assert not {term for term, _, _ in index_instances()} & {"note0", "parcel"}
    services.append(thread, {"role": "user", "content": words(INDEX_BATCH - 1)})
    assert watermark() == newest_id() == start + INDEX_BATCH
    held = {term for term, _, _ in index_instances()}
    assert {f"note{n}" for n in range(INDEX_BATCH)} <= held
    assert_index_exact()


def test_a_search_finds_the_appends_of_a_batch_not_yet_full() -> None:
    thread = Thread.objects.create()
    entries = services.append(thread, [{"role": "user", "content": words(n)} for n in range(5)])
    if connection.vendor == "sqlite":
        assert watermark() < newest_id()
    hits = services.search(thread, "parcel", limit=10)
    assert sorted(hit.entry_id for hit in hits) == sorted(entry.pk for entry in entries)
    if connection.vendor == "sqlite":
        assert watermark() == newest_id()
        assert_index_exact()


@sqlite_only
def test_an_entry_erased_before_its_batch_is_never_taken_out_of_the_index() -> None:
    # FTS5 has no way to refuse a 'delete' of a row it never held: it would subtract the
    # row's terms from the index. The delete trigger must not send one.
    thread = Thread.objects.create()
    catch_up(connection)
    kept, doomed = services.append(thread, [{"role": "user", "content": "kettle refund kept"},
                                            {"role": "user", "content": "kettle refund gone"}])
    services.erase_entry(doomed)
    assert [hit.entry_id for hit in services.search(thread, "kettle refund")] == [kept.pk]
    assert_index_exact()


Step = tuple[str, int]
steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 45)),
        st.tuples(st.just("erase"), st.integers(0, 80)),  # counted from the newest
        st.tuples(st.just("search"), st.integers(0, 10_000)),
        st.tuples(st.just("fold"), st.just(0)),
        st.tuples(st.just("tool"), st.just(0)),
    ),
    min_size=1, max_size=8,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=steps)
def test_the_index_holds_exactly_the_live_entries_up_to_its_watermark(
    plan: list[Step],
) -> None:
    thread = Thread.objects.create()
    counter = MemoryEntry.objects.count()
    for action, number in plan:
        live = list(MemoryEntry.objects.filter(thread=thread, kind=EntryKind.MESSAGE,
                                               role="user").order_by("pk"))
        if action == "append":
            services.append(thread, [
                {"role": "user" if n % 2 == 0 else "assistant",
                 "content": words(counter + n)} for n in range(number)])
            counter += number
        elif action == "erase" and live:
            services.erase_entry(live[-1 - number % len(live)])
        elif action == "search" and live:
            # A word only one message holds: found, and nothing that was erased is.
            target = live[number % len(live)]
            unique = target.content.split()[0]
            assert [hit.entry_id for hit in services.search(thread, unique)] == [target.pk]
            found = {hit.entry_id for hit in services.search(thread, "parcel", limit=50)}
            assert found <= {entry.pk for entry in MemoryEntry.objects.filter(thread=thread)}
        elif action == "fold":
            services.fold(thread, budget_tokens=300)
        elif action == "tool":  # a memory tool's result: stored, never indexed
            services.append(thread, [
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": f"c{counter}", "type": "function",
                     "function": {"name": "memory_search", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": f"c{counter}",
                 "content": words(counter + 1)}])
            counter += 2
        if connection.vendor == "sqlite":
            assert_index_exact()


# ------------------------------------------------------------- writers and searchers at once


def _file_instances(db: sqlite3.Connection, table: str, schema: str) -> set[tuple[str, int, int]]:
    db.execute("DROP TABLE IF EXISTS temp.race_vocab")
    db.execute(f"CREATE VIRTUAL TABLE temp.race_vocab USING fts5vocab({schema}, {table}, "
               "instance)")
    found = {(t, int(d), int(o)) for t, d, o in
             db.execute('SELECT term, doc, "offset" FROM temp.race_vocab')}
    db.execute("DROP TABLE temp.race_vocab")
    return found


@sqlite_only
def test_appends_erasures_and_catch_ups_at_once_leave_the_index_exact(tmp_path: Any) -> None:
    """Three writers append one message a transaction (so every 64th indexes a batch), one
    erases at random and one catches up as a search does (`schema.CATCH_UP`), each on its
    own connection to one WAL file holding the entry table and the index as the migration
    builds them. Every transaction takes the write lock first (BEGIN IMMEDIATE, as
    `catch_up` does): a deferred one that writes after another connection committed is
    refused at once. The catch-ups overlap the writes: every 25 rows a writer waits for
    one. Afterwards the index holds exactly the live rows."""
    thread = Thread.objects.create()
    (template,) = services.append(thread, {"role": "user", "content": "template row"})
    with connection.cursor() as cursor:
        cursor.execute("SELECT sql FROM sqlite_master WHERE name = %s", [ENTRY_TABLE])
        (create,) = cursor.fetchone()
        cursor.execute(f"SELECT * FROM {ENTRY_TABLE} WHERE id = %s", [template.pk])
        columns = [column[0] for column in cursor.description]
        values = list(cursor.fetchone())
    path = str(tmp_path / "race.sqlite3")
    first = sqlite3.connect(path, timeout=30, isolation_level=None)
    first.execute("PRAGMA journal_mode=WAL")
    first.execute(create)  # no foreign keys are enforced: its rows need no thread
    for statement in create_statements("sqlite", "english"):
        first.execute(statement)
    content_at, id_at = columns.index("content"), columns.index("id")
    insert = (f"INSERT INTO {ENTRY_TABLE} ({', '.join(columns)}) "
              f"VALUES ({', '.join('?' * len(columns))})")
    per_writer, writers = 150, 3
    done = threading.Event()
    errors: list[BaseException] = []
    catch_ups: list[int] = []  # the newest id each catch-up saw

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(path, timeout=30, isolation_level=None)

    def write(index: int) -> None:
        try:
            db = connect()
            for n in range(per_writer):
                row = list(values)
                row[id_at] = None
                row[content_at] = f"writer{index} line{n} quokka"
                db.execute("BEGIN IMMEDIATE")
                db.execute(insert, row)
                db.execute("COMMIT")
                if n % 25 == 24:  # a catch-up now, between this writer's rows
                    seen = len(catch_ups)
                    deadline = time.monotonic() + 10
                    while len(catch_ups) == seen and time.monotonic() < deadline:
                        time.sleep(0.001)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def erase() -> None:
        try:
            db, rng = connect(), random.Random(7)
            while not done.is_set():
                top = db.execute(f"SELECT {NEWEST}").fetchone()[0]
                if top:
                    db.execute("BEGIN IMMEDIATE")
                    db.execute(f"DELETE FROM {ENTRY_TABLE} WHERE id = ?", [rng.randint(1, top)])
                    db.execute("COMMIT")
                time.sleep(0.002)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    def search() -> None:
        try:
            db, last = connect(), 0
            while not done.is_set():
                top = db.execute(f"SELECT {NEWEST}").fetchone()[0]
                if top <= last:
                    time.sleep(0.001)
                    continue
                db.execute("BEGIN IMMEDIATE")
                for statement in CATCH_UP:
                    db.execute(statement)
                db.execute("COMMIT")
                last = top
                catch_ups.append(top)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    helpers = [threading.Thread(target=erase), threading.Thread(target=search)]
    for worker in helpers + threads:
        worker.start()
    for worker in threads:
        worker.join(timeout=120)
    done.set()
    for worker in helpers:
        worker.join(timeout=30)
    assert errors == []
    # The catch-ups ran between the writes, from early on.
    assert len(catch_ups) >= writers * per_writer // 25 // 2, catch_ups
    assert min(catch_ups) < writers * per_writer // 2, catch_ups
    first.execute("BEGIN IMMEDIATE")
    for statement in CATCH_UP:
        first.execute(statement)
    first.execute("COMMIT")
    # Merged into one segment, as erasure leaves it (`index.forget_deleted`): a deletion
    # of a row the index never held would corrupt the merge.
    first.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('optimize')")
    live = first.execute(f"SELECT id, content FROM {ENTRY_TABLE}").fetchall()
    assert 0 < len(live) < writers * per_writer  # the eraser took some
    first.execute("CREATE VIRTUAL TABLE temp.race_expected USING "
                  f"fts5(content, tokenize='{FTS_TOKENIZE}')")
    first.executemany("INSERT INTO temp.race_expected(rowid, content) VALUES (?, ?)", live)
    assert (_file_instances(first, FTS_TABLE, "main")
            == _file_instances(first, "race_expected", "temp"))
    (block,) = first.execute(f"SELECT block FROM {FTS_TABLE}_data WHERE id = 1").fetchone()
    assert rows_counted(block) == len(live)
    first.close()
