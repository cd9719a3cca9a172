"""The context load in plain SQL: the newest visible messages and every visible summary,
with its coverage row and the ids of what it stands for, and the thread's ``erasures``,
in one round trip; and the count of visible entries a recall that left some unread
reports as ``omitted``.

`load.load_context` reads through this module. Its SQL states the querysets' rules:
messages as `MemoryEntryQuerySet.visible` (uncovered, live, unexpired, in the tiers),
summaries as `load._visible_rows` (uncovered and live whatever their expiry: until it
is retired an expired summary still hides what it stands for). tests/test_context_rows.py
holds the two to each other over random threads on both databases.

A summary row becomes a `MemoryEntry` instance without a queryset's per-row work
(`instances`); a message row becomes a `ContextMessage`, the values a context reads
(`entries.MESSAGE_FIELDS`) and nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import itemgetter
from typing import Any

from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model

from agentmemory.models import EntryKind, MemoryEntry, SummaryCoverage, SummarySource, Thread
from agentmemory.pipeline.entries import MESSAGE_FIELDS, ContextMessage, context_messages
from agentmemory.pipeline.instances import (
    convert,
    converters_of,
    field_of,
    instance_of,
    named,
    named_placeholders,
    typed_null,
)


@dataclass(frozen=True)
class ContextRows:
    """``messages``: the newest first, as many as were asked for (fewer: none are left).
    ``summaries``: every visible one, in no order. ``sources``: each summary's entry ids,
    sorted (what `signing.sources_by_summary` reads)."""

    messages: list[ContextMessage]
    summaries: list[MemoryEntry]
    sources: dict[int, list[int]]
    #: The thread's ``erasures`` as the same statement read it (None: it read no row). A
    #: receipt that finds it unchanged shows entries no erasure has touched since
    #: (`trust.receipts.record_receipt`).
    erasures: int | None = None


def read_context(
    thread_id: int, tiers: Sequence[str] | None, now: datetime, *, limit: int
) -> ContextRows:
    """Every visible summary of the thread and its ``limit`` newest visible messages."""
    shape = _shape(tiers)
    params = [thread_id, *shape.summary_params(thread_id, tiers),
              thread_id, *shape.message_params(thread_id, tiers, now, limit, 0)]
    connection = connections[shape.alias]
    with connection.cursor() as cursor:
        cursor.execute(shape.first_sql, named(params))
        found = cursor.fetchall()
    kind_at = shape.kind_at
    summary_rows = [row for row in found if row[kind_at] == EntryKind.SUMMARY]
    message_rows = [row for row in found if row[kind_at] != EntryKind.SUMMARY]
    summaries = [shape.summary(row, connection) for row in summary_rows]
    sources = {summary.pk: _ids(row[-2])
               for summary, row in zip(summaries, summary_rows, strict=True)}
    erasures = found[0][-1] if found else None
    return ContextRows(shape.messages(message_rows, connection), summaries, sources,
                       None if erasures is None else int(erasures))


def more_messages(
    thread_id: int, tiers: Sequence[str] | None, now: datetime, *, offset: int, limit: int
) -> list[ContextMessage]:
    """The next ``limit`` visible messages, newest first, after the ``offset`` newest."""
    shape = _shape(tiers)
    connection = connections[shape.alias]
    with connection.cursor() as cursor:
        cursor.execute(shape.page_sql,
                       named(shape.message_params(thread_id, tiers, now, limit, offset)))
        return shape.messages(cursor.fetchall(), connection)


def count_visible_rows(
    thread_id: int, tiers: Sequence[str] | None, now: datetime, *, limit: int,
    offset: int = 0,
) -> int:
    """The thread's visible entries (`MemoryEntryQuerySet.visible`) after the ``offset``
    newest, counted up to ``limit``: the database stops there. An offset, not a
    position bound: ``position < %s`` steered SQLite onto the order index, through every
    covered row of a folded thread (and PostgreSQL onto every thread's uncovered rows)."""
    shape = _shape(tiers)
    with connections[shape.alias].cursor() as cursor:
        cursor.execute(shape.count_sql, named([*shape.count_params(thread_id, tiers, now, limit),
                                               offset]))
        return int(cursor.fetchone()[0])


def read_oldest(
    thread_id: int, tiers: Sequence[str] | None, now: datetime, *, offset: int, limit: int
) -> list[MemoryEntry]:
    """The visible entries oldest first (as `load._visible_rows`: messages unexpired,
    summaries whatever their expiry), ``limit`` of them after the ``offset`` oldest, with
    every field; a summary with its coverage row. Not its sources: PostgreSQL prices a
    sources subquery for every row of the page, and past ``jit_above_cost`` spent more
    compiling the query (300 ms) than running it; the few summaries of a slice are
    read with `signing.sources_by_summary`."""
    shape = _shape(tiers)
    connection = connections[shape.alias]
    with connection.cursor() as cursor:
        cursor.execute(shape.oldest_sql, named(shape.oldest_params(thread_id, tiers, now, limit,
                                                                   offset)))
        found = cursor.fetchall()
    entries = []
    for row in found:
        entry = shape.summary(row, connection)
        if row[shape.kind_at] != EntryKind.SUMMARY:
            shape._cached(entry)
        entries.append(entry)
    return entries


def _ids(joined: str | None) -> list[int]:
    return sorted(int(part) for part in joined.split(",")) if joined else []


class _Shape:
    """The SQL and the row builders of one database and one number of tiers."""

    def __init__(self, connection: BaseDatabaseWrapper, tier_count: int | None) -> None:
        self.alias = connection.alias
        self.adapt_datetime = connection.ops.adapt_datetimefield_value
        quote = connection.ops.quote_name
        entry, coverage = MemoryEntry._meta, SummaryCoverage._meta
        e, c, s = (quote(meta.db_table) for meta in (entry, coverage, SummarySource._meta))

        def column(table: str, model: type[Model], name: str) -> str:
            return f"{table}.{quote(field_of(model, name).column)}"

        self.entry_fields = list(entry.concrete_fields)
        self.coverage_fields = list(coverage.concrete_fields)
        self.kind_at = next(i for i, f in enumerate(self.entry_fields) if f.attname == "kind")
        tiers = ""
        if tier_count is not None:
            marks = ", ".join(["%s"] * tier_count) or "NULL"
            tiers = f" AND {column(e, MemoryEntry, 'tier')} IN ({marks})"
        uncovered_live = (
            f"{column(e, MemoryEntry, 'thread')} = %s"
            f" AND {column(e, MemoryEntry, 'covered_by')} IS NULL"
            f" AND {column(e, MemoryEntry, 'retired_at')} IS NULL"
            f" AND {column(e, MemoryEntry, 'held_at')} IS NULL{tiers}"
        )
        visible = f"{uncovered_live} AND {column(e, MemoryEntry, 'kind')} = %s"
        expires = column(e, MemoryEntry, "expires_at")
        unexpired = f"({expires} IS NULL OR {expires} > %s)"
        if connection.vendor == "postgresql":
            joined = f"string_agg({column(s, SummarySource, 'entry')}::text, ',')"
        else:
            joined = f"group_concat({column(s, SummarySource, 'entry')}, ',')"
        entry_id = column(e, MemoryEntry, "id")
        sources = (f"(SELECT {joined} FROM {s}"
                   f" WHERE {column(s, SummarySource, 'summary')} = {entry_id})")
        order = (f"{column(e, MemoryEntry, 'position')} DESC,"
                 f" {entry_id} DESC")
        # Newest first, on the index the load reads, up to the limit.
        self.count_sql = (f"SELECT COUNT(*) FROM (SELECT 1 FROM {e} WHERE {uncovered_live}"
                          f" AND {unexpired} ORDER BY {order} LIMIT %s OFFSET %s) counted")
        summary_columns = [
            *(f"{e}.{quote(str(f.column))}" for f in self.entry_fields),
            *(f"{c}.{quote(str(f.column))}" for f in self.coverage_fields),
            sources,
        ]
        # A message row has NULL where a summary has its coverage and sources: typed, as
        # PostgreSQL types a UNION's columns by its arms.
        message_columns = [
            *(f"{e}.{quote(str(f.column))}" if f.attname in MESSAGE_FIELDS
              else typed_null(f, connection) for f in self.entry_fields),
            *(typed_null(f, connection) for f in self.coverage_fields),
            "CAST(NULL AS TEXT)",
        ]
        self.page_sql = (f"SELECT {', '.join(message_columns)} FROM {e} WHERE {visible}"
                         f" AND {unexpired} ORDER BY {order} LIMIT %s OFFSET %s")
        joined_coverage = (f"{e} LEFT OUTER JOIN {c}"
                           f" ON {column(c, SummaryCoverage, 'summary')} = {entry_id}")
        # Each row ends with the thread's erasures, read in the same statement (a
        # subquery of no row's values: run once).
        t = quote(Thread._meta.db_table)
        erasures = (f"(SELECT {column(t, Thread, 'erasures')} FROM {t}"
                    f" WHERE {column(t, Thread, 'id')} = %s)")
        self.first_sql = (
            f"SELECT {', '.join(summary_columns)}, {erasures} FROM {joined_coverage}"
            f" WHERE {visible}"
            f" UNION ALL SELECT newest.*, {erasures} FROM ({self.page_sql}) newest"
        )
        # Both kinds, oldest first, without sources (`read_oldest`).
        kind = column(e, MemoryEntry, "kind")
        self.oldest_sql = (
            f"SELECT {', '.join(summary_columns[:-1])} FROM {joined_coverage}"
            f" WHERE {uncovered_live} AND ({kind} = %s OR {unexpired})"
            f" ORDER BY {column(e, MemoryEntry, 'position')} ASC, {entry_id} ASC"
            f" LIMIT %s OFFSET %s"
        )
        self.count_sql, self.page_sql, self.first_sql, self.oldest_sql = map(
            named_placeholders, (self.count_sql, self.page_sql, self.first_sql, self.oldest_sql))
        self.entry_converters = [converters_of(f, connection) for f in self.entry_fields]
        self.entry_converted = [i for i, found in enumerate(self.entry_converters) if found]
        self.coverage_converters = [converters_of(f, connection) for f in self.coverage_fields]
        at = {f.attname: i for i, f in enumerate(self.entry_fields)}
        message_at = [at[name] for name in MESSAGE_FIELDS]
        self.read = itemgetter(*message_at)  # a message's values, in MESSAGE_FIELDS order
        self.message_converted = [(name, i, self.entry_converters[i])
                                  for name, i in zip(MESSAGE_FIELDS, message_at, strict=True)
                                  if self.entry_converters[i]]
        self.entry_names = [f.attname for f in self.entry_fields]
        self.coverage_names = [f.attname for f in self.coverage_fields]
        self.coverage_cache = field_of(MemoryEntry, "coverage")
        self.summary_cache = field_of(SummaryCoverage, "summary")
        # Looked up once: Django's cache_name is a property that builds it on every call.
        self.coverage_key = self.coverage_cache.cache_name

    def summary_params(self, thread_id: int, tiers: Sequence[str] | None) -> list[Any]:
        return [thread_id, *(tiers or ()), EntryKind.SUMMARY.value]

    def oldest_params(
        self, thread_id: int, tiers: Sequence[str] | None, now: datetime, limit: int,
        offset: int,
    ) -> list[Any]:
        return [thread_id, *(tiers or ()), EntryKind.SUMMARY.value, self.adapt_datetime(now),
                limit, offset]

    def count_params(
        self, thread_id: int, tiers: Sequence[str] | None, now: datetime, limit: int
    ) -> list[Any]:
        return [thread_id, *(tiers or ()), self.adapt_datetime(now), limit]

    def message_params(
        self, thread_id: int, tiers: Sequence[str] | None, now: datetime, limit: int,
        offset: int,
    ) -> list[Any]:
        return [thread_id, *(tiers or ()), EntryKind.MESSAGE.value,
                self.adapt_datetime(now), limit, offset]

    def messages(
        self, found: Sequence[Sequence[Any]], connection: BaseDatabaseWrapper
    ) -> list[ContextMessage]:
        """Message rows as values, a field converted only where Django would convert it
        (most are stored as they are read)."""
        built = context_messages(map(self.read, found))
        for name, i, field_converters in self.message_converted:
            for message, row in zip(built, found, strict=True):
                setattr(message, name, convert(row[i], field_converters, connection))
        return built

    def _cached(self, entry: MemoryEntry) -> MemoryEntry:
        # A message covers nothing: its (reverse) coverage is known without a query.
        entry._state.fields_cache = {self.coverage_key: None}
        return entry

    def summary(self, row: Sequence[Any], connection: BaseDatabaseWrapper) -> MemoryEntry:
        """A row with every field (a summary's, or any entry's), and its coverage when it
        has one. A field without converters is stored as it is read."""
        count = len(self.entry_fields)
        values = list(row[:count])
        for i in self.entry_converted:
            values[i] = convert(values[i], self.entry_converters[i], connection)
        entry = instance_of(MemoryEntry, self.alias, self.entry_names, values)
        coverage_row = row[count : count + len(self.coverage_fields)]
        if coverage_row[0] is not None:  # its id: a summary without coverage reads it later
            coverage = instance_of(SummaryCoverage, self.alias, self.coverage_names, [
                convert(value, converters, connection)
                for value, converters in zip(coverage_row, self.coverage_converters, strict=True)])
            self.coverage_cache.set_cached_value(entry, coverage)
            self.summary_cache.set_cached_value(coverage, entry)
        return entry



_shapes: dict[tuple[str, int | None], _Shape] = {}


def _shape(tiers: Sequence[str] | None) -> _Shape:
    alias = router.db_for_read(MemoryEntry)
    key = (alias, None if tiers is None else len(tiers))
    shape = _shapes.get(key)
    if shape is None:
        shape = _shapes[key] = _Shape(connections[alias], key[1])
    return shape
