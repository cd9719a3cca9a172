"""The reads every append and every request to a thread makes: the fold decision's
aggregate, whether a fold is on its way, and the owned thread."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper

from agentmemory.models import EntryKind, MemoryEntry, Thread
from agentmemory.pipeline.instances import convert, converters_of, instance_of
from agentmemory.sql.base import (
    BIGINT,
    column_names,
    no_fold_on_its_way,
    statement,
    table_name,
)


def _tally_sql(connection: BaseDatabaseWrapper, tier_count: int | None,
               unless_on_its_way: bool) -> str:
    e, t = column_names(connection, MemoryEntry), column_names(connection, Thread)
    entry, thread = table_name(connection, MemoryEntry), table_name(connection, Thread)

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
        where.append(no_fold_on_its_way(f"{thread}.", t))
        where.append(f"{thread}.{t('fold_parked_until')} IS NULL")
    return (
        f"SELECT COUNT({column('id')}), COALESCE(SUM({cost}), 0),"
        f" COUNT(CASE WHEN {is_summary} THEN 1 END),"
        f" COALESCE(SUM(CASE WHEN {is_summary} THEN {cost} END), 0),"
        f" COUNT(CASE WHEN {is_summary} AND {column('expires_at')} <= %s THEN 1 END)"
        f" FROM {entry}{joined} WHERE {' AND '.join(where)} GROUP BY {column('thread')}"
    )


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
        text = statement(alias, key, lambda c: _tally_sql(c, key[1], unless_on_its_way))
        cursor.execute(text, params)
        found = cursor.fetchone()
    if found is None:
        return None
    rows, cost, summaries, summary_cost, expired = (int(value) for value in found)
    return rows, cost, summaries, summary_cost, expired


def fold_on_its_way(thread_id: int, now: datetime) -> bool:
    """Whether a fold of the thread is queued, retrying or holding the lease, and not
    parked (`ThreadQuerySet.fold_on_its_way`)."""
    if thread_id not in BIGINT:
        return False
    alias = router.db_for_read(Thread)
    connection = connections[alias]

    def build(connection: BaseDatabaseWrapper) -> str:
        t = column_names(connection, Thread)
        queued, lease = t("fold_queued_until"), t("fold_lease_until")
        # `no_fold_on_its_way_q` excluded: a NULL time is no time, as Django's exclude
        # reads a NULL column.
        return (f"SELECT 1 FROM {table_name(connection, Thread)} WHERE {t('id')} = %s"
                f" AND {t('fold_parked_until')} IS NULL"
                f" AND (({queued} IS NOT NULL AND {queued} >= %s)"
                f" OR ({t('fold_lease_owner')} <> %s AND ({lease} IS NULL OR {lease} >= %s)))")

    at = connection.ops.adapt_datetimefield_value(now)
    with connection.cursor() as cursor:
        cursor.execute(statement(alias, "on its way", build), [thread_id, at, "", at])
        return cursor.fetchone() is not None


def owned_thread(owner_id: int, thread_id: int) -> Thread | None:
    """The thread ``thread_id`` if ``owner_id`` owns it, with every field converted as a
    queryset converts it; None otherwise."""
    if owner_id not in BIGINT or thread_id not in BIGINT:
        return None
    alias = router.db_for_read(Thread)
    connection = connections[alias]
    fields = list(Thread._meta.concrete_fields)

    def build(connection: BaseDatabaseWrapper) -> str:
        t = column_names(connection, Thread)
        columns = ", ".join(connection.ops.quote_name(str(f.column)) for f in fields)
        return (f"SELECT {columns} FROM {table_name(connection, Thread)}"
                f" WHERE {t('owner')} = %s AND {t('id')} = %s")

    with connection.cursor() as cursor:
        cursor.execute(statement(alias, "owned", build), [owner_id, thread_id])
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
