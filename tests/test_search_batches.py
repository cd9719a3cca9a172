"""SQLite's index takes appends in batches (agentmemory.search.schema): whatever the order
of appends, folds, erasures and searches, it holds exactly the live indexed entries up
to its watermark, never more than a batch behind the newest, and a search finds every
entry committed before it. On PostgreSQL (no batches) the searches must agree too."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmemory import services
from agentmemory.models import EntryKind, MemoryEntry, Thread
from agentmemory.search.index import FTS_TABLE, MEMORY_TOOL_NAMES
from agentmemory.search.schema import (
    ENTRY_TABLE,
    FTS_TOKENIZE,
    INDEX_BATCH,
    INDEXED_THROUGH,
    catch_up,
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


def index_instances() -> set[tuple[str, int, int]]:
    return _instances(FTS_TABLE, "main")


def expected_instances() -> set[tuple[str, int, int]]:
    """What the index should hold: the live messages up to the watermark, other than the
    memory tools' results, tokenized as the index tokenizes them, in a table of their own."""
    through = watermark()
    rows = [(entry.pk, entry.content) for entry in MemoryEntry.objects.filter(
        kind=EntryKind.MESSAGE, pk__lte=through).exclude(
        role="tool", tool_name__in=MEMORY_TOOL_NAMES)]
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
    assert index_instances() == expected_instances()
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
