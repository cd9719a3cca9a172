"""What tells a receipt that an erasure overlapped it: every statement that deletes
entries advances their threads' ``erasures``.

A receipt is one statement (`agentmemory.trust.receipts`): it counts the entries it shows
in its snapshot and locks the thread row. On PostgreSQL an erasure that held that lock
while the receipt waited deletes rows the snapshot still sees; the locked row is re-read
once the lock is granted, so the statement compares the ``erasures`` it reads there with
the one its snapshot saw, and writes nothing when they differ. A trigger advances the
counter for every DELETE of entries, through the services or not, once per statement.
SQLite needs none: a write statement holds the database's write lock from its start, so
its count sees every commit before it. The initial migration runs these statements.
"""

from __future__ import annotations

from typing import Any

THREAD_TABLE = "agentmemory_thread"
ENTRY_TABLE = "agentmemory_memoryentry"
TRIGGER = "agentmemory_entry_erasures"

CREATE_STATEMENTS = [
    f"""CREATE FUNCTION {TRIGGER}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE {THREAD_TABLE} SET erasures = erasures + 1
    WHERE id IN (SELECT DISTINCT thread_id FROM erased);
    RETURN NULL;
END $$""",
    f"CREATE TRIGGER {TRIGGER} AFTER DELETE ON {ENTRY_TABLE} REFERENCING OLD TABLE AS erased"
    f" FOR EACH STATEMENT EXECUTE FUNCTION {TRIGGER}()",
]
DROP_STATEMENTS = [f"DROP TRIGGER IF EXISTS {TRIGGER} ON {ENTRY_TABLE}",
                   f"DROP FUNCTION IF EXISTS {TRIGGER}()"]


def create_trigger(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        for statement in CREATE_STATEMENTS:
            schema_editor.execute(statement)


def drop_trigger(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        for statement in DROP_STATEMENTS:
            schema_editor.execute(statement)
