"""The full-text index's tables, triggers and columns: what the initial migration creates
and `rebuild` recreates after SEARCH_LANGUAGE changes. The models do not describe them.

SQLite: an FTS5 table with external content (the entry table), a watermark table and
three triggers: appends are indexed INDEX_BATCH at a time, by the append that fills a
batch, and `catch_up` indexes the rest before a search reads; erasure, expiry and edits
update what is indexed in the writing transaction. PostgreSQL: a stored generated
tsvector column with a GIN index. Other databases: nothing (`services.search` then
raises a clear error). The initial migration runs these statements: a change to them
needs a migration of its own, or databases migrated before it keep the old index.
"""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction

from agentmemory.search.index import FTS_TABLE, indexed_row, pg_text

ENTRY_TABLE = "agentmemory_memoryentry"

#: The one-row table that says how far the SQLite index has read the entry table: every
#: entry with an id up to ``indexed_through`` that `indexed_row` admits is in the index,
#: none after it is. Ids only grow (AUTOINCREMENT), so the rows after it are the newest.
STATE_TABLE = "agentmemory_search_state"
#: Appends index in batches of this many entries: FTS5 writes a segment at each commit,
#: which took most of an indexed append's time when every append wrote one (bench/
#: search_speed.py). The entries of a batch not yet full are indexed by the next search
#: (`catch_up`) before it reads.
INDEX_BATCH = 64
INDEXED_THROUGH = f"(SELECT indexed_through FROM {STATE_TABLE})"
#: How FTS5 splits and stems what it indexes (and the queries it matches).
FTS_TOKENIZE = "porter unicode61 remove_diacritics 2"


def catch_up_sql(through: str) -> str:
    """Index every entry after the watermark up to ``through`` (an SQL expression)."""
    return (f"INSERT INTO {FTS_TABLE}(rowid, content) SELECT id, content FROM {ENTRY_TABLE} e "
            f"WHERE e.id > {INDEXED_THROUGH} AND e.id <= {through} AND {indexed_row('e')}")


def advance_sql(through: str) -> str:
    return (f"UPDATE {STATE_TABLE} SET indexed_through = {through} "
            f"WHERE indexed_through < {through}")


_SQLITE_TRIGGERS = [
    # A full batch past the watermark: index it in this append's transaction. An entry
    # written at or below it (an id given explicitly, say): index it at once.
    f"CREATE TRIGGER {FTS_TABLE}_insert AFTER INSERT ON {ENTRY_TABLE} "
    f"WHEN new.id - {INDEXED_THROUGH} >= {INDEX_BATCH} OR new.id <= {INDEXED_THROUGH} BEGIN "
    f"{catch_up_sql('new.id')}; "
    f"INSERT INTO {FTS_TABLE}(rowid, content) SELECT new.id, new.content "
    f"WHERE new.id <= {INDEXED_THROUGH} AND {indexed_row('new')}; "
    f"{advance_sql('new.id')}; END",
    # Only what is indexed is taken out: FTS5's external-content 'delete' of a row it
    # never held would corrupt the index. An entry past the watermark is read as it is
    # when its batch is indexed, or never if it is gone by then.
    f"CREATE TRIGGER {FTS_TABLE}_delete AFTER DELETE ON {ENTRY_TABLE} "
    f"WHEN old.id <= {INDEXED_THROUGH} AND {indexed_row('old')} BEGIN "
    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, content) "
    "VALUES ('delete', old.id, old.content); END",
    f"CREATE TRIGGER {FTS_TABLE}_update AFTER UPDATE OF content, kind, role, tool_name "
    f"ON {ENTRY_TABLE} WHEN old.id <= {INDEXED_THROUGH} BEGIN "
    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, content) "
    f"SELECT 'delete', old.id, old.content WHERE {indexed_row('old')}; "
    f"INSERT INTO {FTS_TABLE}(rowid, content) SELECT new.id, new.content "
    f"WHERE {indexed_row('new')}; END",
]
# The watermark: after the newest entry the index holds (all of them, when it is built).
_SQLITE_STATE = [
    f"CREATE TABLE {STATE_TABLE} (id INTEGER PRIMARY KEY CHECK (id = 1), "
    "indexed_through INTEGER NOT NULL)",
    f"INSERT INTO {STATE_TABLE} (id, indexed_through) "
    f"SELECT 1, coalesce(max(id), 0) FROM {ENTRY_TABLE}",
]
_SQLITE_CREATE = [
    # columnsize=0: no row of token counts per entry (the %_docsize table), a page less
    # written by every batch; only FTS5's bm25() read it, and ranking does without
    # (agentmemory.search.rank). snippet() counts a hit's tokens itself.
    f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5(content, content='{ENTRY_TABLE}', "
    f"content_rowid='id', columnsize=0, tokenize='{FTS_TOKENIZE}')",
    # The rows already there (none when the migration runs, all of them on a rebuild).
    f"INSERT INTO {FTS_TABLE}(rowid, content) SELECT id, content FROM {ENTRY_TABLE} e "
    f"WHERE {indexed_row('e')}",
    *_SQLITE_STATE,
    *_SQLITE_TRIGGERS,
]
_SQLITE_DROP = [
    f"DROP TRIGGER IF EXISTS {FTS_TABLE}_insert",
    f"DROP TRIGGER IF EXISTS {FTS_TABLE}_delete",
    f"DROP TRIGGER IF EXISTS {FTS_TABLE}_update",
    f"DROP TABLE IF EXISTS {STATE_TABLE}",
    f"DROP TABLE IF EXISTS {FTS_TABLE}",
]
_POSTGRESQL_DROP = [
    "DROP INDEX IF EXISTS agentmemory_entry_search_vector",
    f"ALTER TABLE {ENTRY_TABLE} DROP COLUMN IF EXISTS search_vector",
]


def checked_language(language: object) -> str:
    """A text search configuration name, safe to write into SQL; ValueError otherwise."""
    if not isinstance(language, str) or not re.fullmatch(r"[a-z_]+", language):
        raise ValueError(f"AGENTMEMORY['SEARCH_LANGUAGE'] must be a text search "
                         f"configuration name such as 'english', got {language!r}.")
    return language


def _postgresql_create(language: str) -> list[str]:
    # Stored, so ranking reads the vector instead of computing it again for every match.
    vector = f"to_tsvector('{checked_language(language)}'::regconfig, {pg_text()})"
    return [
        f"ALTER TABLE {ENTRY_TABLE} ADD COLUMN search_vector tsvector GENERATED ALWAYS AS "
        f"(CASE WHEN {indexed_row(ENTRY_TABLE)} THEN {vector} END) STORED",
        f"CREATE INDEX agentmemory_entry_search_vector ON {ENTRY_TABLE} USING GIN (search_vector) "
        "WHERE search_vector IS NOT NULL",
    ]


def create_statements(vendor: str, language: str) -> list[str]:
    """The statements that build the index on a database of ``vendor``."""
    if vendor == "sqlite":
        return list(_SQLITE_CREATE)
    if vendor == "postgresql":
        return _postgresql_create(language)
    return []


def drop_statements(vendor: str) -> list[str]:
    """The statements that remove what `create_statements` built."""
    return {"sqlite": _SQLITE_DROP, "postgresql": _POSTGRESQL_DROP}.get(vendor, [])


def rebuild(connection: Any, language: str) -> int:
    """Drop the index and build it again over every stored entry, in one transaction (the
    entry table is locked meanwhile on PostgreSQL). Returns the statements run."""
    statements = [*drop_statements(connection.vendor),
                  *create_statements(connection.vendor, language)]
    with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)
    return len(statements)


NEWEST = f"(SELECT coalesce(max(id), 0) FROM {ENTRY_TABLE})"
#: What `catch_up` runs, in one transaction that holds the write lock.
CATCH_UP = [catch_up_sql(NEWEST), advance_sql(NEWEST)]


def catch_up(connection: Any) -> None:
    """Index the entries appended since the last full batch, so a search that follows
    finds every committed entry. On SQLite, and only when the watermark is behind.

    On its own it begins with ``BEGIN IMMEDIATE``: SQLite then waits for the write lock
    under its busy timeout, where a deferred ``BEGIN`` whose statements then write can be
    refused at once ("database is locked") while another connection writes (on a WAL
    file, even when its first statement writes: tests/test_search_batches.py's race).
    Inside the caller's transaction it runs there, as the caller's own writes do."""
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {INDEXED_THROUGH} < {NEWEST}")
        if not cursor.fetchone()[0]:
            return
        if connection.in_atomic_block:
            for statement in CATCH_UP:
                cursor.execute(statement)
            return
        cursor.execute("BEGIN IMMEDIATE")
        try:
            for statement in CATCH_UP:
                cursor.execute(statement)
            cursor.execute("COMMIT")
        except BaseException:
            if not connection.connection.in_transaction:
                raise
            cursor.execute("ROLLBACK")
            raise


def indexed_count(connection: Any) -> int:
    """How many stored entries the index holds (those `indexed_row` admits)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {ENTRY_TABLE} e WHERE {indexed_row('e')}")
        return int(cursor.fetchone()[0])
