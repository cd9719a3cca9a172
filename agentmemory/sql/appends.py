"""The append's statements: the thread's row lock and counters, the rows, and both in
one statement on PostgreSQL outside a transaction."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper

from agentmemory.models import MemoryEntry, Role, Thread
from agentmemory.pipeline.instances import convert, converters_of, field_of
from agentmemory.sql.base import (
    INSERT_ROWS,
    column_names,
    no_fold_on_its_way,
    statement,
    table_name,
)


def _counters_sql(
    connection: BaseDatabaseWrapper, returning: bool, fold_state: bool = False,
    owned: bool = False,
) -> str:
    """The counters' UPDATE; ``fold_state``: it also returns whether a fold of the thread
    is queued, leased or parked, as the fold decision's tally reads it (three more
    parameters: now, an empty lease owner, now); ``owned``: only of the owner's thread
    (a parameter after the thread's id), also returning `OWNED_READS`."""
    t = column_names(connection, Thread)
    position, turn, tokens = t("last_position"), t("last_turn"), t("unfolded_tokens")
    update = (f"UPDATE {table_name(connection, Thread)} SET {position} = {position} + %s,"
              f" {turn} = {turn} + %s + CASE WHEN {turn} = 0 THEN %s ELSE 0 END,"
              f" {tokens} = {tokens} + %s, {t('updated_at')} = %s WHERE {t('id')} = %s")
    if owned:
        update += f" AND {t('owner')} = %s"
    if fold_state:
        waits = (f"CASE WHEN {no_fold_on_its_way('', t)} AND {t('fold_parked_until')} IS NULL"
                 f" THEN FALSE ELSE TRUE END")
        read = "".join(f", {t(name)}" for name in OWNED_READS) if owned else ""
        return f"{update} RETURNING {position}, {turn}, {tokens}, {waits}{read}"
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
    count = len(entries)
    at = connection.ops.adapt_datetimefield_value(now)
    params: list[Any] = [count, users, opens, tokens, at, thread_id, at, "", at,
                         *_row_params(connection, entries, users, {})]
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


#: What an append to an owner's thread (`append_owned_in_one_statement`) reads of the
#: thread under its row lock besides the counters: what its rows' tier and expiry take
#: (`Thread.effective_write_tier`, `Thread.effective_ttl`) and the fold decision after it
#: (`Thread.effective_fold_budget`).
OWNED_READS = ("ttl", "write_tier", "fold_budget", "recall_budget")


class OwnedAppend(NamedTuple):
    """What `append_owned_in_one_statement` read of the thread under its row lock: the
    counters after the append, whether a fold waits (as `append_in_one_statement`
    returns them), and `OWNED_READS` by name."""

    last_position: int
    last_turn: int
    unfolded_tokens: int | None
    fold_waits: bool
    read: dict[str, Any]


def append_owned_in_one_statement(
    owner_id: int, thread_id: int, entries: Sequence[MemoryEntry], *, users: int,
    opens: int, tokens: int, now: datetime, tier: str, expires_at: datetime | None,
) -> OwnedAppend | None:
    """`append_in_one_statement` of the thread ``thread_id`` if ``owner_id`` owns it, and
    without having read it: the rows' tier and expiry come from the thread row the
    statement locks, as `services.append` takes them from the thread (an entry's own
    tier, else the thread's ``write_tier``, else ``tier``; ``now`` plus the thread's
    ``ttl``, else ``expires_at``). Sets the entries' keys, positions, turns, tiers and
    expiries; None, with nothing written, when the thread is gone or not the owner's."""
    alias = router.db_for_write(MemoryEntry)
    connection = connections[alias]
    at = connection.ops.adapt_datetimefield_value(now)
    params = [len(entries), users, opens, tokens, at, thread_id, owner_id, at, "", at,
              *_row_params(connection, entries, users, {
                  "tier": lambda entry: [entry.tier or "", tier],
                  "expires_at": lambda entry: [
                      connection.ops.adapt_datetimefield_value(expires_at), at]})]
    with connection.cursor() as cursor:
        text = statement(alias, ("append owned", len(entries)),
                         lambda c: _append_sql(c, len(entries), owned=True))
        cursor.execute(text, params)
        written = sorted(cursor.fetchall(), key=lambda row: row[1])
    if not written:
        return None
    expiry = converters_of(field_of(MemoryEntry, "expires_at"), connection)
    for entry, row in zip(entries, written, strict=True):
        entry.pk, entry.position, entry.turn, entry.tier = row[:4]
        entry.expires_at = convert(row[4], expiry, connection) if expiry else row[4]
        entry._state.adding, entry._state.db = False, alias
    converters = [converters_of(field_of(Thread, name), connection) for name in OWNED_READS]
    last = written[-1]
    read = {name: convert(value, found, connection) if found else value
            for name, value, found in zip(OWNED_READS, last[7:], converters, strict=True)}
    return OwnedAppend(int(last[1]), int(last[2]), last[5], bool(last[6]), read)


def _row_params(
    connection: BaseDatabaseWrapper, entries: Sequence[MemoryEntry], users: int,
    computed: dict[str, Callable[[MemoryEntry], list[Any]]],
) -> list[Any]:
    """Each row's parameters for `_append_sql`, field by field: a turn and a position as
    offsets from the counters, ``computed`` fields as they say, any other field as it
    prepares its value for saving."""
    count, opened, params = len(entries), 0, []
    for number, entry in enumerate(entries, start=1):
        opened += entry.role == Role.USER
        for field in _entry_fields():
            if field.attname == "turn":
                params.append(users - opened)
            elif field.attname == "position":
                params.append(count - number)
            elif field.attname in computed:
                params += computed[field.attname](entry)
            else:
                params.append(field.get_db_prep_save(field.pre_save(entry, add=True),
                                                     connection))
    return params


def _append_sql(connection: BaseDatabaseWrapper, rows: int, owned: bool = False) -> str:
    e = column_names(connection, MemoryEntry)
    fields = _entry_fields()

    def value(field: Any) -> str:
        if field.attname == "turn":
            return "c.last_turn - %s"
        if field.attname == "position":
            return "c.last_position - %s"
        typed = f"CAST(%s AS {field.cast_db_type(connection)})"
        if owned and field.attname == "tier":  # its own, the thread's, the setting's
            return f"COALESCE(NULLIF({typed}, ''), NULLIF(c.write_tier, ''), {typed})"
        if owned and field.attname == "expires_at":  # the setting's, or now plus the ttl
            # In seconds: an interval's days would be the session time zone's days.
            return (f"CASE WHEN c.ttl IS NULL THEN {typed} ELSE {typed}"
                    f" + make_interval(secs => EXTRACT(EPOCH FROM c.ttl)) END")
        # A row's values typed as its columns: UNION ALL would otherwise read them as text.
        return typed

    values = ", ".join(map(value, fields))
    selects = " UNION ALL ".join([f"SELECT {values} FROM counters c"] * rows)
    columns = ", ".join(connection.ops.quote_name(str(f.column)) for f in fields)
    counters = _counters_sql(connection, returning=True, fold_state=True, owned=owned)
    insert = f"INSERT INTO {table_name(connection, MemoryEntry)} ({columns}) {selects}"
    if owned:
        return (f"WITH counters (last_position, last_turn, unfolded, fold_waits,"
                f" {', '.join(OWNED_READS)}) AS ({counters}),"
                f" written AS ({insert} RETURNING {e('id')}, {e('position')}, {e('turn')},"
                f" {e('tier')}, {e('expires_at')})"
                f" SELECT w.*, c.unfolded, c.fold_waits, {', '.join(f'c.{n}' for n in OWNED_READS)}"
                f" FROM written w CROSS JOIN counters c")
    return (f"WITH counters (last_position, last_turn, unfolded, fold_waits) AS ({counters})"
            f" {insert}"
            f" RETURNING {e('id')}, {e('position')}, {e('turn')},"
            f" (SELECT unfolded FROM counters), (SELECT fold_waits FROM counters)")
