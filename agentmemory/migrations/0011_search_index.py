"""The full-text index of originals (agentmemory.search.index): an FTS5 table kept in step
by triggers on SQLite, a GIN expression index on PostgreSQL. Other databases get none
(`services.search` then raises a clear error)."""

from __future__ import annotations

import re
from typing import Any

from django.db import migrations

# Written out, not imported: a migration keeps the schema it created.
TOOLS = "('memory_search', 'memory_expand', 'memory_around')"
FTS = "agentmemory_entry_fts"
ENTRY = "agentmemory_memoryentry"


def indexed(row: str) -> str:
    return f"{row}.kind = 'message' AND NOT ({row}.role = 'tool' AND {row}.tool_name IN {TOOLS})"


SQLITE = [
    f"CREATE VIRTUAL TABLE {FTS} USING fts5(content, content='{ENTRY}', content_rowid='id', "
    "tokenize='porter unicode61 remove_diacritics 2')",
    f"CREATE TRIGGER {FTS}_insert AFTER INSERT ON {ENTRY} WHEN {indexed('new')} BEGIN "
    f"INSERT INTO {FTS}(rowid, content) VALUES (new.id, new.content); END",
    f"CREATE TRIGGER {FTS}_delete AFTER DELETE ON {ENTRY} WHEN {indexed('old')} BEGIN "
    f"INSERT INTO {FTS}({FTS}, rowid, content) VALUES ('delete', old.id, old.content); END",
    f"CREATE TRIGGER {FTS}_update AFTER UPDATE OF content, kind, role, tool_name ON {ENTRY} "
    f"BEGIN INSERT INTO {FTS}({FTS}, rowid, content) SELECT 'delete', old.id, old.content "
    f"WHERE {indexed('old')}; INSERT INTO {FTS}(rowid, content) SELECT new.id, new.content "
    f"WHERE {indexed('new')}; END",
    f"INSERT INTO {FTS}(rowid, content) SELECT id, content FROM {ENTRY} e WHERE {indexed('e')}",
]
SQLITE_REVERSE = [
    f"DROP TRIGGER IF EXISTS {FTS}_insert",
    f"DROP TRIGGER IF EXISTS {FTS}_delete",
    f"DROP TRIGGER IF EXISTS {FTS}_update",
    f"DROP TABLE IF EXISTS {FTS}",
]


def _language() -> str:
    from agentmemory.conf import memory_settings

    language = str(memory_settings.SEARCH_LANGUAGE)
    if not re.fullmatch(r"[a-z_]+", language):
        raise ValueError(f"AGENTMEMORY['SEARCH_LANGUAGE'] must be a text search "
                         f"configuration name such as 'english', got {language!r}.")
    return language


def forwards(apps: Any, schema_editor: Any) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        for statement in SQLITE:
            schema_editor.execute(statement)
    elif vendor == "postgresql":
        schema_editor.execute(
            f"CREATE INDEX agentmemory_entry_search ON {ENTRY} USING GIN "
            f"(to_tsvector('{_language()}'::regconfig, regexp_replace(left(content, 100000), "
            "'[^[:alnum:]]+', ' ', 'g'))) "
            f"WHERE {indexed(ENTRY)}"
        )


def backwards(apps: Any, schema_editor: Any) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        for statement in SQLITE_REVERSE:
            schema_editor.execute(statement)
    elif vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS agentmemory_entry_search")


class Migration(migrations.Migration):
    dependencies = [("agentmemory", "0010_fold_room_and_message_count")]
    operations = [migrations.RunPython(forwards, backwards)]
