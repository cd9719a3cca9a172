"""The full-text index of originals, one per database, and its ranked lookups.

What is indexed: messages (never summaries), except the results of the memory tools
themselves (`MEMORY_TOOL_NAMES`), so a search never finds its own earlier answers.

* SQLite: an FTS5 table with external content (the entry table), kept in step by
  triggers that migration ``0011_search_index`` creates, so every write path (append,
  erasure, expiry purge, a cascade from a deleted thread or user) updates it in the
  writing transaction. FTS5 keeps a deleted row's terms in older segments until they
  are merged, so erasure and purge call `forget_deleted` (FTS5's ``optimize``).
* PostgreSQL: a GIN expression index on ``to_tsvector(language, words of content)``
  (`pg_vector`) over the same rows; a deleted row leaves it with the row. The language is
  ``SEARCH_LANGUAGE`` as it was when the migration ran.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection

from agentmemory.search.query import SearchQuery

#: Tool results that are never indexed: what the memory tools returned.
MEMORY_TOOL_NAMES = ("memory_search", "memory_expand", "memory_around")

FTS_TABLE = "agentmemory_entry_fts"
#: The characters of an entry PostgreSQL indexes (a tsvector holds at most 1 MB).
PG_INDEXED_CHARS = 100_000
MARK_OPEN, MARK_CLOSE, ELLIPSIS = "**", "**", "…"

_INDEXED_ROW = (
    "{t}.kind = 'message' AND NOT ({t}.role = 'tool' AND {t}.tool_name IN ("
    + ", ".join(f"'{name}'" for name in MEMORY_TOOL_NAMES) + "))"
)


def indexed_row(table: str) -> str:
    """The SQL condition on the entry row ``table`` (an alias, ``new`` or ``old``)."""
    return _INDEXED_ROW.format(t=table)


def pg_text(column: str = "content") -> str:
    """What PostgreSQL indexes of an entry: its words, every other character a space, so
    that its parser splits text where `agentmemory.search.query` does (it would read
    ``ORD-55`` as ``ord`` and ``-55``, and an email or a URL as one token)."""
    return f"regexp_replace(left({column}, {PG_INDEXED_CHARS}), '[^[:alnum:]]+', ' ', 'g')"


def pg_vector(language: str, column: str = "content") -> str:
    """The indexed expression; ``language`` is checked to be a plain identifier."""
    return f"to_tsvector('{language}'::regconfig, {pg_text(column)})"


@dataclass(frozen=True)
class Candidate:
    entry_id: int
    score: float
    snippet: str


@dataclass(frozen=True)
class Scope:
    """Whose entries: one thread, every thread of one owner, or (``every_thread``, for
    staff tools such as the admin) every thread; and the optional filters."""

    thread_id: int | None
    owner_id: int | None
    roles: tuple[str, ...] | None
    after: datetime | None
    before: datetime | None
    every_thread: bool = False


def lookup(query: SearchQuery, scope: Scope, *, limit: int, language: str) -> list[Candidate]:
    """The best ``limit`` indexed entries in ``scope`` matching every term, best first.
    Expiry is not applied here (`services.search` applies the queryset's rule)."""
    if connection.vendor == "postgresql":
        return _postgres(query, scope, limit, language)
    return _sqlite(query, scope, limit)


def _filters(scope: Scope, params: list[Any]) -> str:
    where = []
    if scope.thread_id is not None:
        where.append("e.thread_id = %s")
        params.append(scope.thread_id)
    elif scope.owner_id is not None:
        where.append("t.owner_id = %s")
        params.append(scope.owner_id)
    elif not scope.every_thread:  # never every thread by omission
        raise ValueError("A search scope names a thread, an owner or every_thread.")
    if scope.roles:
        where.append(f"e.role IN ({', '.join(['%s'] * len(scope.roles))})")
        params.extend(scope.roles)
    # Adapted as the ORM adapts a DateTimeField: SQLite compares the stored UTC text, so
    # an aware value in another offset (or with "+00:00" appended) would compare wrong.
    if scope.after is not None:
        where.append("e.created_at > %s")
        params.append(connection.ops.adapt_datetimefield_value(scope.after))
    if scope.before is not None:
        where.append("e.created_at < %s")
        params.append(connection.ops.adapt_datetimefield_value(scope.before))
    return " AND ".join(where) or "1 = 1"


def _sqlite(query: SearchQuery, scope: Scope, limit: int) -> list[Candidate]:
    # Every term quoted: FTS5 reads each as a string (a phrase when it has several
    # words), never as an operator, so no query can fail to parse.
    match = " ".join('"' + " ".join(term) + '"' for term in query.terms)
    params: list[Any] = [MARK_OPEN, MARK_CLOSE, ELLIPSIS, match]
    where = _filters(scope, params)
    params.append(limit)
    sql = (
        f"SELECT e.id, bm25({FTS_TABLE}), snippet({FTS_TABLE}, 0, %s, %s, %s, 24) "
        f"FROM {FTS_TABLE} JOIN agentmemory_memoryentry e ON e.id = {FTS_TABLE}.rowid "
        "JOIN agentmemory_thread t ON t.id = e.thread_id "
        f"WHERE {FTS_TABLE} MATCH %s AND {indexed_row('e')} AND {where} "
        f"ORDER BY bm25({FTS_TABLE}), e.id LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        # bm25 is lower for better matches: the score is its negation.
        return [Candidate(pk, -float(rank), snippet) for pk, rank, snippet in cursor.fetchall()]


def _postgres(query: SearchQuery, scope: Scope, limit: int, language: str) -> list[Candidate]:
    # Each term through phraseto_tsquery, which accepts any text: no query can fail.
    tsquery = " && ".join(
        f"phraseto_tsquery('{language}'::regconfig, %s)" for _ in query.terms
    )
    params: list[Any] = [" ".join(term) for term in query.terms]
    params.append(f"StartSel={MARK_OPEN}, StopSel={MARK_CLOSE}, "
                  f"FragmentDelimiter={ELLIPSIS}, MaxFragments=2, MaxWords=24, MinWords=8")
    vector = pg_vector(language, "e.content")
    where = _filters(scope, params)
    params.append(limit)
    sql = (
        f"WITH q AS (SELECT {tsquery} AS query) "
        f"SELECT e.id, ts_rank_cd({vector}, q.query) AS rank, "
        f"ts_headline('{language}'::regconfig, {pg_text('e.content')}, q.query, %s) "
        "FROM q, agentmemory_memoryentry e JOIN agentmemory_thread t ON t.id = e.thread_id "
        f"WHERE {vector} @@ q.query AND {indexed_row('e')} AND {where} "
        "ORDER BY rank DESC, e.id LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [Candidate(pk, float(rank), snippet) for pk, rank, snippet in cursor.fetchall()]


def forget_deleted() -> None:
    """Drop deleted rows' terms from the SQLite index's older segments (FTS5 keeps them
    until a merge), so an erased or purged original leaves no trace in it. PostgreSQL
    needs nothing: the index entry goes with the row."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES('optimize')")
