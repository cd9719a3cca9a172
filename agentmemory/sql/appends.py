"""The append's statements: the thread's row lock and counters, the rows, and both in
one statement on PostgreSQL outside a transaction."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper

from agentmemory.models import MemoryEntry, Role, Thread
from agentmemory.sql.base import (
    INSERT_ROWS,
    column_names,
    no_fold_on_its_way,
    statement,
    table_name,
)


def _counters_sql(
    connection: BaseDatabaseWrapper, returning: bool, fold_state: bool = False
) -> str:
    """The counters' UPDATE; ``fold_state``: it also returns whether a fold of the thread
    is queued, leased or parked, as the fold decision's tally reads it (three more
    parameters: now, an empty lease owner, now)."""
    t = column_names(connection, Thread)
    position, turn, tokens = t("last_position"), t("last_turn"), t("unfolded_tokens")
    update = (f"UPDATE {table_name(connection, Thread)} SET {position} = {position} + %s,"
              f" {turn} = {turn} + %s + CASE WHEN {turn} = 0 THEN %s ELSE 0 END,"
              f" {tokens} = {tokens} + %s, {t('updated_at')} = %s WHERE {t('id')} = %s")
    if fold_state:
        waits = (f"CASE WHEN {no_fold_on_its_way('', t)} AND {t('fold_parked_until')} IS NULL"
                 f" THEN FALSE ELSE TRUE END")
        return f"{update} RETURNING {position}, {turn}, {tokens}, {waits}"
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


def _entry_fields() -> list[Any]:
    return [field for field in MemoryEntry._meta.concrete_fields if not field.primary_key]


def _insert_sql(connection: BaseDatabaseWrapper, rows: int, returning: bool) -> str:
    e = column_names(connection, MemoryEntry)
    columns = ", ".join(connection.ops.quote_name(str(f.column)) for f in _entry_fields())
    row = f"({', '.join(['%s'] * len(_entry_fields()))})"
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
    fields = _entry_fields()
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


def can_append_in_one_statement(rows: int) -> bool:
    """Whether `append_in_one_statement` may write ``rows`` rows: on PostgreSQL, outside
    any transaction (the statement is its own), within one INSERT's rows."""
    connection = connections[router.db_for_write(MemoryEntry)]
    return (connection.vendor == "postgresql" and connection.get_autocommit()
            and not connection.in_atomic_block and 0 < rows <= INSERT_ROWS)


def append_in_one_statement(
    thread_id: int, entries: Sequence[MemoryEntry], *, users: int, opens: int, tokens: int,
    now: datetime,
) -> tuple[int, int, int | None, bool] | None:
    """`advance_counters` and `insert_entries` in one statement, one round trip and its
    own commit (`can_append_in_one_statement` says when): the counters' UPDATE is a WITH
    of the INSERT, which takes each row's position and turn from what it returns, as
    `services.append` numbers them without explicit turns (each of the ``users`` user
    messages opens a turn, any other message joins the current one). Sets the entries'
    keys, positions and turns; returns what `advance_counters` returns and whether a
    fold of the thread was queued, leased or parked under the row lock, or None, with
    nothing written, when the thread is gone."""
    alias = router.db_for_write(MemoryEntry)
    connection = connections[alias]
    count, opened = len(entries), 0
    at = connection.ops.adapt_datetimefield_value(now)
    params: list[Any] = [count, users, opens, tokens, at, thread_id, at, "", at]
    for number, entry in enumerate(entries, start=1):
        opened += entry.role == Role.USER
        params += [users - opened if field.attname == "turn"
                   else count - number if field.attname == "position"
                   else field.get_db_prep_save(field.pre_save(entry, add=True), connection)
                   for field in _entry_fields()]
    with connection.cursor() as cursor:
        text = statement(alias, ("append", count), lambda c: _append_sql(c, count))
        cursor.execute(text, params)
        written = sorted(cursor.fetchall(), key=lambda row: row[1])
    if not written:
        return None
    for entry, (key, position, turn, _, _) in zip(entries, written, strict=True):
        entry.pk, entry.position, entry.turn = key, position, turn
        entry._state.adding, entry._state.db = False, alias
    _, last_position, last_turn, unfolded, waits = written[-1]
    return int(last_position), int(last_turn), unfolded, bool(waits)


def _append_sql(connection: BaseDatabaseWrapper, rows: int) -> str:
    e = column_names(connection, MemoryEntry)
    fields = _entry_fields()
    # A row's values typed as its columns: UNION ALL would otherwise read them as text.
    values = ", ".join("c.last_turn - %s" if f.attname == "turn"
                       else "c.last_position - %s" if f.attname == "position"
                       else f"CAST(%s AS {f.cast_db_type(connection)})" for f in fields)
    selects = " UNION ALL ".join([f"SELECT {values} FROM counters c"] * rows)
    columns = ", ".join(connection.ops.quote_name(str(f.column)) for f in fields)
    return (f"WITH counters (last_position, last_turn, unfolded, fold_waits) AS"
            f" ({_counters_sql(connection, returning=True, fold_state=True)})"
            f" INSERT INTO {table_name(connection, MemoryEntry)} ({columns}) {selects}"
            f" RETURNING {e('id')}, {e('position')}, {e('turn')},"
            f" (SELECT unfolded FROM counters), (SELECT fold_waits FROM counters)")
