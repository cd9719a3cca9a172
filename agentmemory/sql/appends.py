"""The append's statements in a transaction: the thread's row lock and counters, then
the rows (`agentmemory.sql.one_statement` joins them on PostgreSQL outside one)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper

from agentmemory.models import MemoryEntry, Thread
from agentmemory.sql.base import INSERT_ROWS, column_names, statement, table_name


def _counters_sql(connection: BaseDatabaseWrapper, returning: bool) -> str:
    """The counters' UPDATE (returning them where the database can)."""
    t = column_names(connection, Thread)
    position, turn, tokens = t("last_position"), t("last_turn"), t("unfolded_tokens")
    update = (f"UPDATE {table_name(connection, Thread)} SET {position} = {position} + %s,"
              f" {turn} = {turn} + %s + CASE WHEN {turn} = 0 THEN %s ELSE 0 END,"
              f" {tokens} = {tokens} + %s, {t('updated_at')} = %s WHERE {t('id')} = %s")
    if returning:
        return f"{update} RETURNING {position}, {turn}, {tokens}"
    return update


def _read_counters_sql(connection: BaseDatabaseWrapper) -> str:
    t = column_names(connection, Thread)
    return (f"SELECT {t('last_position')}, {t('last_turn')}, {t('unfolded_tokens')}"
            f" FROM {table_name(connection, Thread)} WHERE {t('id')} = %s")


def advance_counters(
    thread_id: int, *, rows: int, turns: int, opens: int, tokens: int, now: datetime
) -> tuple[int, int, int | None] | None:
    """Take the thread's row lock and move its counters, in one statement (inside a
    transaction): ``last_position`` by ``rows``, ``last_turn`` by ``turns`` (and by
    ``opens`` more when it is 0), ``unfolded_tokens`` by ``tokens`` (NULL stays NULL),
    ``updated_at`` to ``now``. Returns the new (last_position, last_turn,
    unfolded_tokens), or None when the thread is gone.

    An UPDATE takes the row lock every writer of the thread takes first
    (`ThreadQuerySet.lock`), so concurrent appends queue here. SQLite before 3.35 has no
    RETURNING: its writes are serialised, and the row is read after the UPDATE."""
    alias = router.db_for_write(Thread)
    connection = connections[alias]
    returning = bool(connection.features.can_return_columns_from_insert)
    params = [rows, turns, opens, tokens, connection.ops.adapt_datetimefield_value(now),
              thread_id]
    with connection.cursor() as cursor:
        cursor.execute(statement(alias, ("counters", returning),
                            lambda c: _counters_sql(c, returning)), params)
        if not returning:
            cursor.execute(statement(alias, "read counters", _read_counters_sql), [thread_id])
        found = cursor.fetchone()
    return None if found is None else (int(found[0]), int(found[1]), found[2])


def set_turn(thread_id: int, turn: int) -> None:
    """Set ``last_turn`` (the append already holds the row lock)."""
    alias = router.db_for_write(Thread)

    def build(connection: BaseDatabaseWrapper) -> str:
        t = column_names(connection, Thread)
        return (f"UPDATE {table_name(connection, Thread)} SET {t('last_turn')} = %s"
                f" WHERE {t('id')} = %s")

    with connections[alias].cursor() as cursor:
        cursor.execute(statement(alias, "turn", build), [turn, thread_id])


def entry_fields() -> list[Any]:
    return [field for field in MemoryEntry._meta.concrete_fields if not field.primary_key]


def _insert_sql(connection: BaseDatabaseWrapper, rows: int, returning: bool) -> str:
    e = column_names(connection, MemoryEntry)
    columns = ", ".join(connection.ops.quote_name(str(f.column)) for f in entry_fields())
    row = f"({', '.join(['%s'] * len(entry_fields()))})"
    insert = (f"INSERT INTO {table_name(connection, MemoryEntry)} ({columns})"
              f" VALUES {', '.join([row] * rows)}")
    return f"{insert} RETURNING {e('id')}, {e('position')}" if returning else insert


def insert_entries(entries: Sequence[MemoryEntry]) -> None:
    """Insert new entries of one thread, each with its own position, and set their
    primary keys, as ``bulk_create`` does: every field's value as the field prepares it
    for saving (``pre_save``, then ``get_db_prep_save``). The keys come back with the
    positions they were inserted with, so their order does not matter."""
    if not entries:
        return
    alias = router.db_for_write(MemoryEntry)
    connection = connections[alias]
    fields = entry_fields()
    # Without RETURNING (SQLite before 3.35): a row a statement, its key read from the cursor.
    returning = bool(connection.features.can_return_columns_from_insert)
    size = min(INSERT_ROWS, max(1, connection.ops.bulk_batch_size(fields, list(entries))))
    if not returning:
        size = 1
    by_position = {entry.position: entry for entry in entries}
    with connection.cursor() as cursor:
        for start in range(0, len(entries), size):
            chunk = entries[start : start + size]
            values = [field.get_db_prep_save(field.pre_save(entry, add=True),
                                             connection=connection)
                      for entry in chunk for field in fields]
            count = len(chunk)
            text = statement(alias, ("insert", count, returning),
                             functools.partial(_insert_sql, rows=count, returning=returning))
            cursor.execute(text, values)
            keys = cursor.fetchall() if returning else [(cursor.lastrowid, chunk[0].position)]
            for key, position in keys:
                entry = by_position[position]
                entry.pk = key
                entry._state.adding = False
                entry._state.db = alias
