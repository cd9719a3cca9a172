"""The full-text index's tables, triggers and columns: what the initial migration creates
and `rebuild` recreates after SEARCH_LANGUAGE changes. The models do not describe them.

SQLite: an FTS5 table with external content (the entry table) and three triggers that
keep it in step with every write. PostgreSQL: a stored generated tsvector column with a
GIN index. Other databases: nothing (`services.search` then raises a clear error).
The initial migration runs these statements: a change to them needs a migration of its
own, or databases migrated before it keep the old index.
"""

from __future__ import annotations

import re
from typing import Any

from django.db import transaction

from agentmemory.search.index import FTS_TABLE, indexed_row, pg_text

ENTRY_TABLE = "agentmemory_memoryentry"

_SQLITE_CREATE = [
    # columnsize=0: no row of token counts per entry (the %_docsize table), a page less
    # written by every append; only FTS5's bm25() read it, and ranking does without
    # (agentmemory.search.rank). snippet() counts a hit's tokens itself.
    f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5(content, content='{ENTRY_TABLE}', "
    "content_rowid='id', columnsize=0, tokenize='porter unicode61 remove_diacritics 2')",
    f"CREATE TRIGGER {FTS_TABLE}_insert AFTER INSERT ON {ENTRY_TABLE} "
    f"WHEN {indexed_row('new')} BEGIN "
    f"INSERT INTO {FTS_TABLE}(rowid, content) VALUES (new.id, new.content); END",
    f"CREATE TRIGGER {FTS_TABLE}_delete AFTER DELETE ON {ENTRY_TABLE} "
    f"WHEN {indexed_row('old')} BEGIN "
    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, content) "
    "VALUES ('delete', old.id, old.content); END",
    f"CREATE TRIGGER {FTS_TABLE}_update AFTER UPDATE OF content, kind, role, tool_name "
    f"ON {ENTRY_TABLE} BEGIN INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, content) "
    f"SELECT 'delete', old.id, old.content WHERE {indexed_row('old')}; "
    f"INSERT INTO {FTS_TABLE}(rowid, content) SELECT new.id, new.content "
    f"WHERE {indexed_row('new')}; END",
    # The rows already there (none when the migration runs, all of them on a rebuild).
    f"INSERT INTO {FTS_TABLE}(rowid, content) SELECT id, content FROM {ENTRY_TABLE} e "
    f"WHERE {indexed_row('e')}",
]
_SQLITE_DROP = [
    f"DROP TRIGGER IF EXISTS {FTS_TABLE}_insert",
    f"DROP TRIGGER IF EXISTS {FTS_TABLE}_delete",
    f"DROP TRIGGER IF EXISTS {FTS_TABLE}_update",
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


def indexed_count(connection: Any) -> int:
    """How many stored entries the index holds (those `indexed_row` admits)."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {ENTRY_TABLE} e WHERE {indexed_row('e')}")
        return int(cursor.fetchone()[0])
