"""The one-statement append on PostgreSQL (`one_statement.append_in_one_statement`,
`one_statement.append_owned_in_one_statement`), and the function a migration creates for it.

One statement (`body`) moves the thread's counters under its row lock and inserts the
rows numbered from them; outside a transaction it is its own. Where connections outlive
a request, it is sent as the body of a PL/pgSQL function, which keeps its plan for the
session: sent as a statement of its own, the append is parsed and planned again on
every call, which takes more of the server's time than running it (pgbench, one plain
message, ``synchronous_commit`` off, measured once: 0.50 ms as a statement, 0.21 as a
prepared one, 0.29 as the function's call; a bare INSERT of the row 0.22). Django sends
no prepared statements by default (poolers); a function's plans need none. On a
connection opened for one request the function would be compiled and planned at its
first call (about 1.5 ms more than the statement, pgbench with a connection a call), so
there the statement is sent itself.

The rows come in the order of `ENTRY_COLUMNS` (the model's concrete fields but its key;
a test holds the two to each other), to the function as one array a column, to the
statement as a VALUES list: a row's turn and position as offsets back from the counters
it moved.
A migration that changes those columns replaces the function too.
"""

from __future__ import annotations

from collections.abc import Callable

from agentmemory.sql.base import no_fold_on_its_way

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
#: The columns' names, as the INSERT and the rows' source list them.
COLUMNS = ", ".join(f'"{name}"' for name, _ in ENTRY_COLUMNS)
#: What the call takes before the columns: the thread (and its owner, NULL for any);
#: how far the counters move (rows, turns, one more opening turn, tokens); the time of
#: the append; the tier of a row that has none where the thread has none either;
#: whether a row's expiry is the time plus the thread's ttl where it has one (else the
#: row's own).
HEAD = [
    ("for_thread", "bigint"), ("for_owner", "bigint"), ("rows_added", "integer"),
    ("users", "integer"), ("opens", "integer"), ("tokens", "bigint"),
    ("at", "timestamptz"), ("default_tier", "varchar"), ("ttl_of_thread", "boolean"),
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


def body(value: Callable[[str, str], str], rows: str) -> str:
    """The append as one statement, returning `RESULT`: the function's body, and what
    is sent in its place (`one_statement.append_in_one_statement`). ``value(name, type)``
    writes a `HEAD` parameter; ``rows`` is the rows' source, named ``given`` with the
    `ENTRY_COLUMNS` (the function's arrays unnested, or a VALUES list)."""

    def row(name: str) -> str:
        # A column's value: the counters' offsets applied, the tier and the expiry
        # falling back as `services.append` takes them from the thread.
        if name == "turn":
            return "locked.last_turn - given.turn"
        if name == "position":
            return "locked.last_position - given.position"
        if name == "tier":
            return (f"COALESCE(NULLIF(given.tier, ''), NULLIF(locked.write_tier, ''),"
                    f" {value('default_tier', 'varchar')})")
        if name == "expires_at":
            # In seconds: an interval's days would be the session time zone's days.
            return (f"CASE WHEN {value('ttl_of_thread', 'boolean')} AND locked.ttl IS NOT NULL"
                    f" THEN {value('at', 'timestamptz')}"
                    f" + make_interval(secs => EXTRACT(EPOCH FROM locked.ttl))"
                    f" ELSE given.expires_at END")
        return f"given.{name}"

    at, owner = value("at", "timestamptz"), value("for_owner", "bigint")
    return f"""WITH locked AS (
        UPDATE {THREAD_TABLE} thread
           SET last_position = thread.last_position + {value('rows_added', 'integer')},
               last_turn = thread.last_turn + {value('users', 'integer')}
                           + CASE WHEN thread.last_turn = 0 THEN {value('opens', 'integer')}
                                  ELSE 0 END,
               unfolded_tokens = thread.unfolded_tokens + {value('tokens', 'bigint')},
               updated_at = {at}
         WHERE thread.id = {value('for_thread', 'bigint')}
           AND ({owner} IS NULL OR thread.owner_id = {owner})
        RETURNING thread.last_position, thread.last_turn, thread.unfolded_tokens,
                  -- A fold queued, leased or parked (querysets.no_fold_on_its_way_q); a
                  -- NULL comparison counts as one on its way.
                  CASE WHEN {no_fold_on_its_way("thread.", str, now=at, no_owner="''")}
                            AND thread.fold_parked_until IS NULL
                       THEN FALSE ELSE TRUE END AS fold_waits,
                  thread.ttl, thread.write_tier, thread.fold_budget, thread.recall_budget),
    written AS (
        INSERT INTO {ENTRY_TABLE} ({COLUMNS})
        SELECT {", ".join(row(name) for name, _ in ENTRY_COLUMNS)}
          FROM locked, {rows}
        RETURNING id, "position", turn, tier, expires_at)
    SELECT written.*, locked.unfolded_tokens, locked.fold_waits, locked.ttl,
           locked.write_tier, locked.fold_budget, locked.recall_budget
      FROM written, locked"""


_unnested = (f"unnest({', '.join(f'new_{name}' for name, _ in ENTRY_COLUMNS)})"
             f" AS given({COLUMNS})")
_arguments = ", ".join([*(f"{name} {kind}" for name, kind in HEAD),
                        *(f"new_{name} {kind}[]" for name, kind in ENTRY_COLUMNS)])
_result = ", ".join(f"{name} {kind}" for name, kind in RESULT)

CREATE_STATEMENTS = [
    f"""CREATE FUNCTION {APPEND}({_arguments}) RETURNS TABLE ({_result})
    LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    {body(lambda name, kind: name, _unnested)};
END $$""",
]
DROP_STATEMENTS = [f"DROP FUNCTION IF EXISTS {APPEND}"]
