"""The statements every append and every request to a thread makes, in plain SQL.

Django builds a query's SQL anew on every call, and for these small statements that
costs more than the database spends running them (the fold decision's aggregate: 3.7 ms
to build, 0.15 ms to run). Each is written here once per database, its table and column
names read from the models' ``_meta`` (a renamed column is renamed here too), its values
prepared as the fields prepare them; the recall's load is its sibling,
`agentmemory.pipeline.rows`. Each states a queryset, and tests/test_sql.py holds the two
to each other on SQLite and PostgreSQL:

* `advance_counters`: the append's row lock and counters, one ``UPDATE ... RETURNING``
  (a ``select_for_update()`` of the thread row, then its ``update()``);
* `insert_entries`: the append's rows (``bulk_create``);
* `visible_tally`: the fold decision's aggregate over `load._visible_rows`;
* `owned_thread`: ``Thread.objects.owned_by(owner).filter(pk=...)``;
* `fold_on_its_way`: ``Thread.objects.fold_on_its_way(now).filter(pk=...)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model

from agentmemory.models import EntryKind, MemoryEntry, Thread
from agentmemory.pipeline.instances import convert, converters_of, field_of, instance_of

#: The range of the integer columns: Django answers a lookup beyond it with no row (the
#: database would refuse the parameter).
_BIGINT = range(-(2**63), 2**63)
#: At most this many rows in one INSERT (fewer where the database takes fewer parameters).
_INSERT_ROWS = 500

_built: dict[tuple[str, Any], str] = {}


def _sql(alias: str, key: Any, build: Callable[[BaseDatabaseWrapper], str]) -> str:
    """``build``'s SQL for this database, built on first use."""
    text = _built.get((alias, key))
    if text is None:
        text = _built[(alias, key)] = build(connections[alias])
    return text


def _names(connection: BaseDatabaseWrapper, model: type[Model]) -> Callable[[str], str]:
    """A field's quoted column, by field name."""
    return lambda name: connection.ops.quote_name(str(field_of(model, name).column))


def _table(connection: BaseDatabaseWrapper, model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


# ------------------------------------------------------------------------- the append


def _counters_sql(connection: BaseDatabaseWrapper, returning: bool) -> str:
    t = _names(connection, Thread)
    position, turn, tokens = t("last_position"), t("last_turn"), t("unfolded_tokens")
    update = (f"UPDATE {_table(connection, Thread)} SET {position} = {position} + %s,"
              f" {turn} = {turn} + %s + CASE WHEN {turn} = 0 THEN %s ELSE 0 END,"
              f" {tokens} = {tokens} + %s, {t('updated_at')} = %s WHERE {t('id')} = %s")
    if returning:
        return f"{update} RETURNING {position}, {turn}, {tokens}"
    return update


def _read_counters_sql(connection: BaseDatabaseWrapper) -> str:
    t = _names(connection, Thread)
    return (f"SELECT {t('last_position')}, {t('last_turn')}, {t('unfolded_tokens')}"
            f" FROM {_table(connection, Thread)} WHERE {t('id')} = %s")


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
        cursor.execute(_sql(alias, ("counters", returning),
                            lambda c: _counters_sql(c, returning)), params)
        if not returning:
            cursor.execute(_sql(alias, "read counters", _read_counters_sql), [thread_id])
        found = cursor.fetchone()
    return None if found is None else (int(found[0]), int(found[1]), found[2])


def set_turn(thread_id: int, turn: int) -> None:
    """Set ``last_turn`` (the append already holds the row lock)."""
    alias = router.db_for_write(Thread)

    def build(connection: BaseDatabaseWrapper) -> str:
        t = _names(connection, Thread)
        return (f"UPDATE {_table(connection, Thread)} SET {t('last_turn')} = %s"
                f" WHERE {t('id')} = %s")

    with connections[alias].cursor() as cursor:
        cursor.execute(_sql(alias, "turn", build), [turn, thread_id])


def _entry_fields() -> list[Any]:
    return [field for field in MemoryEntry._meta.concrete_fields if not field.primary_key]


def _insert_sql(connection: BaseDatabaseWrapper, rows: int, returning: bool) -> str:
    e = _names(connection, MemoryEntry)
    columns = ", ".join(connection.ops.quote_name(str(f.column)) for f in _entry_fields())
    row = f"({', '.join(['%s'] * len(_entry_fields()))})"
    insert = (f"INSERT INTO {_table(connection, MemoryEntry)} ({columns})"
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
    size = min(_INSERT_ROWS, max(1, connection.ops.bulk_batch_size(fields, list(entries))))
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
            text = _built.get((alias, ("insert", count, returning)))
            if text is None:
                text = _built[(alias, ("insert", count, returning))] = _insert_sql(
                    connection, count, returning)
            cursor.execute(text, values)
            keys = cursor.fetchall() if returning else [(cursor.lastrowid, chunk[0].position)]
            for key, position in keys:
                entry = by_position[position]
                entry.pk = key
                entry._state.adding = False
                entry._state.db = alias


# ---------------------------------------------------------------- the fold decision


def _tally_sql(connection: BaseDatabaseWrapper, tier_count: int | None,
               unless_on_its_way: bool) -> str:
    e, t = _names(connection, MemoryEntry), _names(connection, Thread)
    entry, thread = _table(connection, MemoryEntry), _table(connection, Thread)

    def column(name: str) -> str:
        return f"{entry}.{e(name)}"

    is_summary = f"{column('kind')} = %s"
    cost = f"{column('token_count')} + 1"  # `blocks.entry_cost`, summed by the database
    where = [
        f"{column('thread')} = %s", f"{column('covered_by')} IS NULL",
        f"{column('retired_at')} IS NULL", f"{column('held_at')} IS NULL",
        f"({column('expires_at')} IS NULL OR {column('expires_at')} > %s OR {is_summary})",
    ]
    if tier_count is not None:
        where.append(f"{column('tier')} IN ({', '.join(['%s'] * tier_count) or 'NULL'})")
    joined = ""
    if unless_on_its_way:  # the thread's row joined: one query answers both questions
        joined = f" INNER JOIN {thread} ON {thread}.{t('id')} = {column('thread')}"
        where.append(_no_fold_on_its_way(f"{thread}.", t))
        where.append(f"{thread}.{t('fold_parked_until')} IS NULL")
    return (
        f"SELECT COUNT({column('id')}), COALESCE(SUM({cost}), 0),"
        f" COUNT(CASE WHEN {is_summary} THEN 1 END),"
        f" COALESCE(SUM(CASE WHEN {is_summary} THEN {cost} END), 0),"
        f" COUNT(CASE WHEN {is_summary} AND {column('expires_at')} <= %s THEN 1 END)"
        f" FROM {entry}{joined} WHERE {' AND '.join(where)} GROUP BY {column('thread')}"
    )


def _no_fold_on_its_way(table: str, t: Callable[[str], str]) -> str:
    """`querysets.no_fold_on_its_way_q`, as a filter (a NULL compares as no match)."""
    return (f"({table}{t('fold_queued_until')} IS NULL OR {table}{t('fold_queued_until')} < %s)"
            f" AND ({table}{t('fold_lease_owner')} = %s"
            f" OR {table}{t('fold_lease_until')} < %s)")


def visible_tally(
    thread_id: int, tiers: Sequence[str] | None, now: datetime, *, unless_on_its_way: bool
) -> tuple[int, int, int, int, int] | None:
    """Of the entries `load._visible_rows` reads: how many, their cost, how many are
    summaries and their cost, how many summaries have expired; None when there are none,
    or (with ``unless_on_its_way``) while a fold of the thread is queued, leased or
    parked."""
    alias = router.db_for_read(MemoryEntry)
    connection = connections[alias]
    at = connection.ops.adapt_datetimefield_value(now)
    summary = EntryKind.SUMMARY.value
    params: list[Any] = [summary, summary, summary, at, thread_id, at, summary, *(tiers or ())]
    if unless_on_its_way:
        params += [at, "", at]
    key = ("tally", None if tiers is None else len(tiers), unless_on_its_way)
    with connection.cursor() as cursor:
        cursor.execute(_sql(alias, key, lambda c: _tally_sql(c, key[1], unless_on_its_way)),
                       params)
        found = cursor.fetchone()
    if found is None:
        return None
    rows, cost, summaries, summary_cost, expired = (int(value) for value in found)
    return rows, cost, summaries, summary_cost, expired


def fold_on_its_way(thread_id: int, now: datetime) -> bool:
    """Whether a fold of the thread is queued, retrying or holding the lease, and not
    parked (`ThreadQuerySet.fold_on_its_way`)."""
    if thread_id not in _BIGINT:
        return False
    alias = router.db_for_read(Thread)
    connection = connections[alias]

    def build(connection: BaseDatabaseWrapper) -> str:
        t = _names(connection, Thread)
        queued, lease = t("fold_queued_until"), t("fold_lease_until")
        # `no_fold_on_its_way_q` excluded: a NULL time is no time, as Django's exclude
        # reads a NULL column.
        return (f"SELECT 1 FROM {_table(connection, Thread)} WHERE {t('id')} = %s"
                f" AND {t('fold_parked_until')} IS NULL"
                f" AND (({queued} IS NOT NULL AND {queued} >= %s)"
                f" OR ({t('fold_lease_owner')} <> %s AND ({lease} IS NULL OR {lease} >= %s)))")

    at = connection.ops.adapt_datetimefield_value(now)
    with connection.cursor() as cursor:
        cursor.execute(_sql(alias, "on its way", build), [thread_id, at, "", at])
        return cursor.fetchone() is not None


# ----------------------------------------------------------------------- the API


def owned_thread(owner_id: int, thread_id: int) -> Thread | None:
    """The thread ``thread_id`` if ``owner_id`` owns it, with every field converted as a
    queryset converts it; None otherwise."""
    if owner_id not in _BIGINT or thread_id not in _BIGINT:
        return None
    alias = router.db_for_read(Thread)
    connection = connections[alias]
    fields = list(Thread._meta.concrete_fields)

    def build(connection: BaseDatabaseWrapper) -> str:
        t = _names(connection, Thread)
        columns = ", ".join(connection.ops.quote_name(str(f.column)) for f in fields)
        return (f"SELECT {columns} FROM {_table(connection, Thread)}"
                f" WHERE {t('owner')} = %s AND {t('id')} = %s")

    with connection.cursor() as cursor:
        cursor.execute(_sql(alias, "owned", build), [owner_id, thread_id])
        found = cursor.fetchone()
    if found is None:
        return None
    values = [convert(value, converters, connection) if converters else value
              for value, converters in zip(found, _thread_converters(alias), strict=True)]
    thread: Thread = instance_of(Thread, alias, [f.attname for f in fields], values)
    return thread


_converters: dict[str, list[Any]] = {}


def _thread_converters(alias: str) -> list[Any]:
    found = _converters.get(alias)
    if found is None:
        connection = connections[alias]
        found = _converters[alias] = [converters_of(f, connection)
                                      for f in Thread._meta.concrete_fields]
    return found
