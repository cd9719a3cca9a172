"""The full-text index of originals, one per database, and its ranked lookups.

What is indexed: messages (never summaries), except the results of the memory tools
themselves (`MEMORY_TOOL_NAMES`), so a search never finds its own earlier answers.

* SQLite: an FTS5 table with external content (the entry table), kept in step by
  triggers that the initial migration creates (`agentmemory.search.schema`): appends
  are indexed a batch at a time, by the append that fills it, and `services.search`
  indexes the rest first (`schema.catch_up`); erasure, expiry purge and a cascade from
  a deleted thread or user update what is indexed in the writing transaction. FTS5
  keeps a deleted row's terms in older segments until they are merged, so erasure and
  purge call `forget_deleted` (FTS5's ``optimize``).
* PostgreSQL: a stored generated column ``search_vector`` (``to_tsvector(language,
  words of content)``, `pg_text`, NULL for rows not indexed) with a GIN index,
  created by the initial migration; a deleted row takes it along. The
  language is ``SEARCH_LANGUAGE`` as it was when the migration ran.

Both rank only the newest `RANKED_MATCHES` matches in scope, so a search's time does
not grow with the history a common word matches: PostgreSQL with ``ts_rank_cd``, SQLite
in Python (`agentmemory.search.rank.bm25`: FTS5's ``bm25()`` reads every match of a
term in the whole index). Near-duplicates of a better hit come after the distinct hits
(`agentmemory.search.rank.distinct_first`); only the hits returned get a snippet
(`snippets`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from django.db import connection

from agentmemory.search import rank
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


def lookup(query: SearchQuery, scope: Scope, *, limit: int, distinct: int,
           language: str) -> list[Candidate]:
    """The best ``limit`` indexed entries in ``scope`` matching every term, best first,
    with up to ``distinct`` of them not near-duplicates of a better one first
    (`rank.distinct_first`). Expiry is not applied here (`services.search` applies the
    queryset's rule), nor are snippets made (`snippets`, for the hits kept)."""
    engine = _engine(language)
    ranked = engine.ranked(query, scope)
    if not ranked:
        return []
    scores = dict(ranked)
    order = rank.distinct_first([pk for pk, _ in ranked], engine.text, distinct)[:limit]
    return [Candidate(pk, scores[pk]) for pk in order]


def snippets(query: SearchQuery, ids: list[int], *, language: str) -> dict[int, str]:
    """Each entry's text around the words of ``query``, those marked (`MARK_OPEN`,
    `MARK_CLOSE`), by id; ``ids`` are entries that match it."""
    return _engine(language).snippets(query, ids) if ids else {}


def _engine(language: str) -> Lookup:
    return TsvectorLookup(language) if connection.vendor == "postgresql" else Fts5Lookup()


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
# CROSS JOIN keeps FTS5 the outer loop (SQLite never reorders it), so the matches come
# newest first from its doclists and the read stops at the LIMIT; a plain JOIN lets the
# planner start from the owner's threads and sort every match of each.
_JOINS = (f"CROSS JOIN agentmemory_memoryentry e ON e.id = {FTS_TABLE}.rowid "
          "CROSS JOIN agentmemory_thread t ON t.id = e.thread_id")


class Lookup(Protocol):
    def ranked(self, query: SearchQuery, scope: Scope) -> list[tuple[int, float]]: ...

    def text(self, pk: int) -> str: ...

    def snippets(self, query: SearchQuery, ids: list[int]) -> dict[int, str]: ...


def _fts_match(query: SearchQuery) -> str:
    # Every term quoted: FTS5 reads each as a string (a phrase when it has several
    # words), never as an operator, so no query can fail to parse.
    return " ".join('"' + " ".join(term) + '"' for term in query.terms)


class Fts5Lookup:
    """FTS5 finds the newest RANKED_MATCHES matches in scope (newest first from its
    doclists, so it stops there); they are scored in Python (`rank.bm25`), since FTS5's
    bm25() reads every match of every term in the whole index on each call."""

    def __init__(self) -> None:
        self.texts: dict[int, str] = {}

    def ranked(self, query: SearchQuery, scope: Scope) -> list[tuple[int, float]]:
        self.texts = self.pool(query, scope)
        if not self.texts:
            return []
        window, holding = self.rarity(query)
        scores = rank.bm25(query, list(self.texts.values()), window, holding)
        return sorted(zip(self.texts, scores, strict=True), key=lambda pair: (-pair[1], pair[0]))

    @staticmethod
    def pool(query: SearchQuery, scope: Scope) -> dict[int, str]:
        """The newest RANKED_MATCHES matches in scope and their texts."""
        scoped: list[Any] = [_fts_match(query)]
        where = _filters(scope, scoped)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT e.id, e.content FROM {FTS_TABLE} {_JOINS} WHERE {FTS_TABLE} MATCH %s "
                f"AND {indexed_row('e')} AND {where} ORDER BY {FTS_TABLE}.rowid DESC LIMIT %s",
                [*scoped, RANKED_MATCHES])
            return dict(cursor.fetchall())

    @staticmethod
    def rarity(query: SearchQuery) -> tuple[int, list[int]]:
        """The index's newest IDF_WINDOW ids, and how many of them hold each term: FTS5
        applies the rowid bound inside its doclists, so a count reads that many at most."""
        oldest = f"(SELECT max(coalesce(max(id), 0) - {rank.IDF_WINDOW}, 0) " \
                 "FROM agentmemory_memoryentry)"
        counts = "".join(f", (SELECT count(*) FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s "
                         f"AND rowid > {oldest})" for _ in query.terms)
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT (SELECT coalesce(max(id), 0) FROM agentmemory_memoryentry) "
                           f"- {oldest}{counts}",
                           [_fts_match(SearchQuery((term,))) for term in query.terms])
            window, *holding = cursor.fetchone()
        return int(window), [int(count) for count in holding]

    def text(self, pk: int) -> str:
        return self.texts[pk]

    def snippets(self, query: SearchQuery, ids: list[int]) -> dict[int, str]:
        # FTS5 reads the matches within the ids' rowid range (inside the pool's, so no
        # more than the pool read); the ids are a filter (``+rowid``: given to FTS5 as
        # an IN list, each would be a query of its own, a seek into every term's doclist).
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT rowid, snippet({FTS_TABLE}, 0, %s, %s, %s, 24) FROM {FTS_TABLE} "
                f"WHERE {FTS_TABLE} MATCH %s AND rowid >= %s AND rowid <= %s "
                f"AND +rowid IN ({', '.join(['%s'] * len(ids))})",
                [MARK_OPEN, MARK_CLOSE, ELLIPSIS, _fts_match(query), min(ids), max(ids), *ids])
            return dict(cursor.fetchall())


class TsvectorLookup:
    """The newest RANKED_MATCHES matches in scope ranked by ts_rank_cd over the stored
    vectors, with the start of their texts (what `rank.distinct_first` compares); only
    the rows returned get a headline (it reads the whole text)."""

    def __init__(self, language: str) -> None:
        self.language = language
        self.texts: dict[int, str] = {}

    def _tsquery(self, query: SearchQuery) -> tuple[str, list[Any]]:
        # Each term through phraseto_tsquery, which accepts any text: no query can fail.
        return ("(" + " && ".join(f"phraseto_tsquery('{self.language}'::regconfig, %s)"
                                  for _ in query.terms) + ")",
                [" ".join(term) for term in query.terms])

    def ranked(self, query: SearchQuery, scope: Scope) -> list[tuple[int, float]]:
        # Written out where it is used (not a CTE): the planner folds it to a constant and
        # reads the column's statistics, so a word most rows hold is found by walking the
        # newest rows, a rare one through the GIN index.
        tsquery, words = self._tsquery(query)
        scoped: list[Any] = [*words]
        where = _filters(scope, scoped)
        with connection.cursor() as cursor:
            # The content is cut after the LIMIT: cut in the CTE, every match of a phrase
            # the GIN index finds would be (+35% at a million entries); passed up as it is,
            # a long one is a TOAST pointer until then.
            cursor.execute(
                "WITH recent AS (SELECT e.id, e.search_vector, e.content FROM "
                "agentmemory_memoryentry e JOIN agentmemory_thread t ON t.id = e.thread_id "
                f"WHERE e.search_vector @@ {tsquery} AND {where} ORDER BY e.id DESC LIMIT %s) "
                f"SELECT recent.id, ts_rank_cd(recent.search_vector, {tsquery}) AS rank, "
                "left(recent.content, %s) FROM recent ORDER BY rank DESC, recent.id",
                [*scoped, RANKED_MATCHES, *words, rank.SIMILAR_CHARS])
            rows = cursor.fetchall()
        self.texts = {int(pk): text for pk, _, text in rows}
        return [(int(pk), float(score)) for pk, score, _ in rows]

    def text(self, pk: int) -> str:
        return self.texts[pk]

    def snippets(self, query: SearchQuery, ids: list[int]) -> dict[int, str]:
        tsquery, words = self._tsquery(query)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id, ts_headline('{self.language}'::regconfig, {pg_text('content')}, "
                f"{tsquery}, %s) FROM agentmemory_memoryentry WHERE id = ANY(%s)",
                [*words, f"StartSel={MARK_OPEN}, StopSel={MARK_CLOSE}, "
                 f"FragmentDelimiter={ELLIPSIS}, MaxFragments=2, MaxWords=24, MinWords=8",
                 ids])
            return dict(cursor.fetchall())


def forget_deleted() -> None:
    """Drop deleted rows' terms from the SQLite index's older segments (FTS5 keeps them
    until a merge), so an erased or purged original leaves no trace in it. PostgreSQL
    needs nothing: the index entry goes with the row."""
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES('optimize')")
