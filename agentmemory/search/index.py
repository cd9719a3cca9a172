"""The full-text index of originals, one per database, and its ranked lookups.

What is indexed: messages (never summaries), except the results of the memory tools
themselves (`MEMORY_TOOL_NAMES`), so a search never finds its own earlier answers.

* SQLite: an FTS5 table with external content (the entry table), kept in step by
  triggers that the initial migration creates, so every write path (append,
  erasure, expiry purge, a cascade from a deleted thread or user) updates it in the
  writing transaction. FTS5 keeps a deleted row's terms in older segments until they
  are merged, so erasure and purge call `forget_deleted` (FTS5's ``optimize``).
* PostgreSQL: a stored generated column ``search_vector`` (``to_tsvector(language,
  words of content)``, `pg_text`, NULL for rows not indexed) with a GIN index,
  created by the initial migration; a deleted row takes it along. The
  language is ``SEARCH_LANGUAGE`` as it was when the migration ran.

Both rank only the newest `RANKED_MATCHES` matches in scope, so a search's time does
not grow with the history a common word matches.
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


#: How many of the newest matches in scope a search ranks: the best of them are
#: returned. Ranking every match of a common word costs time in proportion to the
#: history (all of a million entries may hold "order"); the newest matches are the
#: ones an agent most likely means, and a rarer word or a phrase narrows them.
RANKED_MATCHES = 1_000


def _sqlite(query: SearchQuery, scope: Scope, limit: int) -> list[Candidate]:
    # Every term quoted: FTS5 reads each as a string (a phrase when it has several
    # words), never as an operator, so no query can fail to parse.
    match = " ".join('"' + " ".join(term) + '"' for term in query.terms)
    scoped: list[Any] = [match]
    where = _filters(scope, scoped)
    joins = (f"JOIN agentmemory_memoryentry e ON e.id = {FTS_TABLE}.rowid "
             "JOIN agentmemory_thread t ON t.id = e.thread_id")
    matching = f"{FTS_TABLE} MATCH %s AND {indexed_row('e')} AND {where}"
    # FTS5 yields matches newest first from its doclists and stops at the
    # RANKED_MATCHES-th in scope; only matches from that one on are ranked (a rowid
    # range FTS5 applies inside the index).
    sql = (
        f"SELECT e.id, bm25({FTS_TABLE}), snippet({FTS_TABLE}, 0, %s, %s, %s, 24) "
        f"FROM {FTS_TABLE} {joins} WHERE {matching} AND {FTS_TABLE}.rowid >= ("
        f"SELECT coalesce(min(id), 0) FROM (SELECT {FTS_TABLE}.rowid AS id FROM {FTS_TABLE} "
        f"{joins} WHERE {matching} ORDER BY {FTS_TABLE}.rowid DESC LIMIT %s)) "
        f"ORDER BY bm25({FTS_TABLE}), e.id LIMIT %s"
    )
    params = [MARK_OPEN, MARK_CLOSE, ELLIPSIS, *scoped, *scoped, RANKED_MATCHES, limit]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        # bm25 is lower for better matches: the score is its negation.
        return [Candidate(pk, -float(rank), snippet) for pk, rank, snippet in cursor.fetchall()]


def _postgres(query: SearchQuery, scope: Scope, limit: int, language: str) -> list[Candidate]:
    # Each term through phraseto_tsquery, which accepts any text: no query can fail.
    # Written out where it is used (not a CTE): the planner folds it to a constant and
    # reads the column's statistics, so a word most rows hold is found by walking the
    # newest rows, a rare one through the GIN index.
    tsquery = "(" + " && ".join(
        f"phraseto_tsquery('{language}'::regconfig, %s)" for _ in query.terms
    ) + ")"
    words: list[Any] = [" ".join(term) for term in query.terms]
    scoped: list[Any] = [*words]
    where = _filters(scope, scoped)
    # The stored vector (the initial migration) is ranked without being computed again; only
    # the newest RANKED_MATCHES matches in scope are ranked, and only the rows kept get
    # a headline (it reads the whole text).
    sql = (
        "WITH recent AS (SELECT e.id, e.search_vector FROM agentmemory_memoryentry e "
        "JOIN agentmemory_thread t ON t.id = e.thread_id "
        f"WHERE e.search_vector @@ {tsquery} AND {where} ORDER BY e.id DESC LIMIT %s), "
        f"best AS (SELECT recent.id, ts_rank_cd(recent.search_vector, {tsquery}) AS rank "
        "FROM recent ORDER BY rank DESC, recent.id LIMIT %s) "
        f"SELECT best.id, best.rank, ts_headline('{language}'::regconfig, "
        f"{pg_text('e.content')}, {tsquery}, %s) "
        "FROM best JOIN agentmemory_memoryentry e ON e.id = best.id "
        "ORDER BY best.rank DESC, best.id"
    )
    params = [*scoped, RANKED_MATCHES, *words, limit, *words,
              f"StartSel={MARK_OPEN}, StopSel={MARK_CLOSE}, "
              f"FragmentDelimiter={ELLIPSIS}, MaxFragments=2, MaxWords=24, MinWords=8"]
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
