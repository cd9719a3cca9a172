"""W004: receipts on an SQLite database whose journal waits for the disk at every commit.

With RECEIPTS every recall commits a write. On SQLite's rollback journal (Django's
default) that commit waits for the disk's sync, about as long as a whole small recall
(docs/operations.md, "SQLite with receipts: use WAL"); in WAL mode it does not. The
check reads the database's journal mode, so it is a database check: ``migrate`` and
``manage.py check --database`` run it, a plain ``check`` does not.
"""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Tags, Warning, register
from django.db import connections

from agentmemory.conf import SETTINGS_NAME, memory_settings
from agentmemory.exceptions import AgentMemoryConfigurationError

#: SQLite journal modes whose every commit waits for the disk's sync of a journal file.
SYNCED_JOURNALS = ("delete", "truncate", "persist")
WAL_OPTIONS = "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"


@register(Tags.database)
def check_receipt_journal(app_configs: Any = None, databases: Any = None,
                          **kwargs: Any) -> list[CheckMessage]:
    """W004 for each SQLite database checked (not in memory) whose journal is synced at
    every commit, while RECEIPTS is on."""
    try:
        if not databases or memory_settings.RECEIPTS is not True:
            return []
    except AgentMemoryConfigurationError:
        return []  # E001 reports settings that are not a dict
    warnings: list[CheckMessage] = []
    for alias in databases or ():
        connection: Any = connections[alias]  # SQLite's wrapper knows whether it is in memory
        if connection.vendor != "sqlite" or connection.is_in_memory_db():
            continue
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode")
            mode = str(cursor.fetchone()[0]).lower()
        if mode in SYNCED_JOURNALS:
            warnings.append(Warning(
                f"{SETTINGS_NAME}['RECEIPTS'] writes a receipt at every recall, and database "
                f"'{alias}' (SQLite, journal_mode={mode}) waits for the disk at every commit.",
                hint=f'Set DATABASES["{alias}"]["OPTIONS"]["init_command"] = "{WAL_OPTIONS}" '
                '(docs/operations.md, "SQLite with receipts: use WAL").',
                id="agentmemory.W004",
            ))
    return warnings
