"""The function a migration creates on PostgreSQL for the one-statement append
(`appends.append_in_one_statement`, `appends.append_owned_in_one_statement`).

It moves the thread's counters under its row lock, then inserts the rows numbered from
them, as one statement outside a transaction would: every call is its own transaction.
It runs inside a PL/pgSQL function because the function keeps its statements' plans
for the session: sent as one statement of its own, an append was parsed and planned
again on every call, which took more of the server's time than running it (pgbench,
one plain message, ``synchronous_commit`` off, measured once: 0.50 ms as a statement,
0.21 as a prepared one, 0.29 as this function's call; a bare INSERT of the row 0.22).
Django sends no prepared statements by default (poolers), and a function's plans need
none: they stay in the server session that made them.

Each of the entry's columns is one array parameter, a row an element, in the order
`ENTRY_COLUMNS` gives (the model's concrete fields but its key; a test holds the two
to each other): a row's turn and position as offsets back from the counters it moved.
A migration that changes those columns replaces the function too.
"""

from __future__ import annotations

from typing import Any

THREAD_TABLE = "agentmemory_thread"
ENTRY_TABLE = "agentmemory_memoryentry"
APPEND = "agentmemory_append"

#: The entry's columns the function takes, each an array, in the model's field order.
ENTRY_COLUMNS = [
    ("thread_id", "bigint"), ("kind", "varchar"), ("role", "varchar"), ("content", "text"),
    ("tool_calls", "jsonb"), ("tool_name", "varchar"), ("tool_call_id", "varchar"),
    ("turn", "integer"), ("position", "bigint"), ("tier", "varchar"),
    ("token_count", "integer"), ("created_at", "timestamptz"),
    ("expires_at", "timestamptz"), ("metadata", "jsonb"), ("summary_key", "varchar"),
    ("retired_at", "timestamptz"), ("held_at", "timestamptz"), ("covered_by_id", "bigint"),
]
#: What the call takes before the columns: the thread (and its owner, NULL for any);
#: how far the counters move; the time of the append; the tier of a row that has none
#: where the thread has none either; whether a row's expiry is the time plus the
#: thread's ttl where it has one (else the row's own).
HEAD = [
    ("for_thread", "bigint"), ("for_owner", "bigint"), ("users", "integer"),
    ("opens", "integer"), ("tokens", "bigint"), ("at", "timestamptz"),
    ("default_tier", "varchar"), ("ttl_of_thread", "boolean"),
]
#: Per row written: its key, position, turn, tier and expiry; then what the thread's
#: row held after the counters moved (the same on every row).
RESULT = [
    ("entry_id", "bigint"), ("entry_position", "bigint"), ("entry_turn", "integer"),
    ("entry_tier", "varchar"), ("entry_expires_at", "timestamptz"),
    ("thread_unfolded_tokens", "bigint"), ("thread_fold_waits", "boolean"),
    ("thread_ttl", "interval"), ("thread_write_tier", "varchar"),
    ("thread_fold_budget", "integer"), ("thread_recall_budget", "integer"),
]


def _row(name: str) -> str:
    """A column's value in the INSERT: the counters' offsets applied, the tier and the
    expiry falling back as `services.append` takes them from the thread."""
    if name == "turn":
        return "locked.last_turn - given.turn"
    if name == "position":
        return "locked.last_position - given.position"
    if name == "tier":
        return "COALESCE(NULLIF(given.tier, ''), NULLIF(locked.write_tier, ''), default_tier)"
    if name == "expires_at":
        # In seconds: an interval's days would be the session time zone's days.
        return ("CASE WHEN ttl_of_thread AND locked.ttl IS NOT NULL"
                " THEN at + make_interval(secs => EXTRACT(EPOCH FROM locked.ttl))"
                " ELSE given.expires_at END")
    return f"given.{name}"


_arguments = ", ".join([*(f"{name} {kind}" for name, kind in HEAD),
                        *(f"new_{name} {kind}[]" for name, kind in ENTRY_COLUMNS)])
_columns = ", ".join(f'"{name}"' for name, _ in ENTRY_COLUMNS)
_given = ", ".join(f'"{name}"' for name, _ in ENTRY_COLUMNS)
_arrays = ", ".join(f"new_{name}" for name, _ in ENTRY_COLUMNS)
_values = ", ".join(_row(name) for name, _ in ENTRY_COLUMNS)
_result = ", ".join(f"{name} {kind}" for name, kind in RESULT)

CREATE_STATEMENTS = [
    f"""CREATE FUNCTION {APPEND}({_arguments}) RETURNS TABLE ({_result})
    LANGUAGE plpgsql AS $$
DECLARE
    locked record;
BEGIN
    UPDATE {THREAD_TABLE} thread
       SET last_position = thread.last_position + cardinality(new_kind),
           last_turn = thread.last_turn + users
                       + CASE WHEN thread.last_turn = 0 THEN opens ELSE 0 END,
           unfolded_tokens = thread.unfolded_tokens + tokens,
           updated_at = at
     WHERE thread.id = for_thread AND (for_owner IS NULL OR thread.owner_id = for_owner)
    RETURNING thread.last_position, thread.last_turn, thread.unfolded_tokens,
              -- A fold queued, leased or parked (querysets.no_fold_on_its_way_q); a NULL
              -- comparison counts as one on its way.
              CASE WHEN (thread.fold_queued_until IS NULL OR thread.fold_queued_until < at)
                        AND (thread.fold_lease_owner = '' OR thread.fold_lease_until < at)
                        AND thread.fold_parked_until IS NULL
                   THEN FALSE ELSE TRUE END AS fold_waits,
              thread.ttl, thread.write_tier, thread.fold_budget, thread.recall_budget
      INTO locked;
    IF NOT FOUND THEN
        RETURN;  -- gone, or not the owner's: nothing written
    END IF;
    RETURN QUERY
    WITH written AS (
        INSERT INTO {ENTRY_TABLE} ({_columns})
        SELECT {_values}
          FROM unnest({_arrays}) AS given({_given})
        RETURNING id, "position", turn, tier, expires_at)
    SELECT written.*, locked.unfolded_tokens, locked.fold_waits, locked.ttl,
           locked.write_tier, locked.fold_budget, locked.recall_budget
      FROM written;
END $$""",
]
DROP_STATEMENTS = [f"DROP FUNCTION IF EXISTS {APPEND}"]


def create(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        for statement in CREATE_STATEMENTS:
            schema_editor.execute(statement)


def drop(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        for statement in DROP_STATEMENTS:
            schema_editor.execute(statement)
