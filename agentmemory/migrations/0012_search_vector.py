"""PostgreSQL: the search index as a stored tsvector (``search_vector``, generated from
the row) with a GIN index, in place of 0011's expression index, so that ranking reads
the stored vector instead of computing it again for every match. SQLite: nothing."""

from __future__ import annotations

import re
from typing import Any

from django.db import migrations

ENTRY = "agentmemory_memoryentry"
TOOLS = "('memory_search', 'memory_expand', 'memory_around')"
INDEXED = f"kind = 'message' AND NOT (role = 'tool' AND tool_name IN {TOOLS})"


def _language() -> str:
    from agentmemory.conf import memory_settings

    language = str(memory_settings.SEARCH_LANGUAGE)
    if not re.fullmatch(r"[a-z_]+", language):
        raise ValueError(f"AGENTMEMORY['SEARCH_LANGUAGE'] must be a text search "
                         f"configuration name such as 'english', got {language!r}.")
    return language


def _vector(language: str) -> str:
    return (f"to_tsvector('{language}'::regconfig, regexp_replace(left(content, 100000), "
            "'[^[:alnum:]]+', ' ', 'g'))")


def forwards(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    language = _language()
    schema_editor.execute("DROP INDEX IF EXISTS agentmemory_entry_search")
    schema_editor.execute(
        f"ALTER TABLE {ENTRY} ADD COLUMN search_vector tsvector GENERATED ALWAYS AS "
        f"(CASE WHEN {INDEXED} THEN {_vector(language)} END) STORED"
    )
    schema_editor.execute(
        f"CREATE INDEX agentmemory_entry_search_vector ON {ENTRY} USING GIN (search_vector) "
        "WHERE search_vector IS NOT NULL"
    )


def backwards(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("DROP INDEX IF EXISTS agentmemory_entry_search_vector")
    schema_editor.execute(f"ALTER TABLE {ENTRY} DROP COLUMN IF EXISTS search_vector")
    schema_editor.execute(
        f"CREATE INDEX agentmemory_entry_search ON {ENTRY} USING GIN "
        f"({_vector(_language())}) WHERE {INDEXED}"
    )


class Migration(migrations.Migration):
    dependencies = [("agentmemory", "0011_search_index")]
    operations = [migrations.RunPython(forwards, backwards)]
