"""The append in one statement, on PostgreSQL outside a transaction: the counters'
UPDATE and the rows' INSERT of `agentmemory.sql.appends` as one body
(`append_schema.body`), called as a function where connections outlive a request, else
sent itself."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from django.core.exceptions import ImproperlyConfigured
from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper

from agentmemory.models import MemoryEntry, Role, Thread
from agentmemory.pipeline.instances import convert, converters_of, field_of
from agentmemory.sql.append_schema import APPEND, COLUMNS, ENTRY_COLUMNS, HEAD, body
from agentmemory.sql.appends import entry_fields
from agentmemory.sql.base import INSERT_ROWS, bound_cursor, statement


def can_append_in_one_statement(rows: int) -> bool:
    """Whether `append_in_one_statement` may write ``rows`` rows: on PostgreSQL, outside
    any transaction (the statement is its own), within one INSERT's rows."""
    connection = connections[router.db_for_write(MemoryEntry)]
    return (connection.vendor == "postgresql" and connection.get_autocommit()
            and not connection.in_atomic_block and 0 < rows <= INSERT_ROWS)


def append_in_one_statement(
    thread_id: int, entries: Sequence[MemoryEntry], *, users: int, opens: int, tokens: int,
    now: datetime,
) -> tuple[int, int, int | None, bool] | None:
    """`advance_counters` and `insert_entries` in one statement, one round trip and its
    own commit (`can_append_in_one_statement` says when): `append_schema.body`, which
    moves the counters and takes each row's position and turn from them, as
    `services.append` numbers them without explicit turns (each of the ``users`` user
    messages opens a turn, any other message joins the current one).
    Sets the entries' keys, positions and turns; returns what `advance_counters` returns
    and whether a fold of the thread was queued, leased or parked under the row lock, or
    None, with nothing written, when the thread is gone."""
    written = _append_call(None, thread_id, entries, users=users, opens=opens,
                           tokens=tokens, now=now, tier="", ttl_of_thread=False)
    if not written:
        return None
    last = written[-1]
    return int(last[1]), int(last[2]), last[5], bool(last[6])


#: What an append to an owner's thread (`append_owned_in_one_statement`) reads of the
#: thread under its row lock besides the counters: what its rows' tier and expiry take
#: (`Thread.effective_write_tier`, `Thread.effective_ttl`) and the fold decision after it
#: (`Thread.effective_fold_budget`).
OWNED_READS = ("ttl", "write_tier", "fold_budget", "recall_budget")


class OwnedAppend(NamedTuple):
    """What `append_owned_in_one_statement` read of the thread under its row lock: the
    counters after the append, whether a fold waits (as `append_in_one_statement`
    returns them), and `OWNED_READS` by name."""

    last_position: int
    last_turn: int
    unfolded_tokens: int | None
    fold_waits: bool
    read: dict[str, Any]


def append_owned_in_one_statement(
    owner_id: int, thread_id: int, entries: Sequence[MemoryEntry], *, users: int,
    opens: int, tokens: int, now: datetime, tier: str,
) -> OwnedAppend | None:
    """`append_in_one_statement` of the thread ``thread_id`` if ``owner_id`` owns it, and
    without having read it: the rows' tier and expiry come from the thread row the
    statement locks, as `services.append` takes them from the thread (an entry's own
    tier, else the thread's ``write_tier``, else ``tier``; ``now`` plus the thread's
    ``ttl``, else the entry's ``expires_at``). Sets the entries' keys, positions, turns,
    tiers and expiries; None, with nothing written, when the thread is gone or not the
    owner's."""
    written = _append_call(owner_id, thread_id, entries, users=users, opens=opens,
                           tokens=tokens, now=now, tier=tier, ttl_of_thread=True)
    if not written:
        return None
    alias = router.db_for_write(MemoryEntry)
    connection = connections[alias]
    expiry, *converters = _owned_converters(alias)
    for entry, row in zip(entries, written, strict=True):
        entry.tier = row[3]
        entry.expires_at = convert(row[4], expiry, connection) if expiry else row[4]
    last = written[-1]
    read = {name: convert(value, found, connection) if found else value
            for name, value, found in zip(OWNED_READS, last[7:], converters, strict=True)}
    return OwnedAppend(int(last[1]), int(last[2]), last[5], bool(last[6]), read)


_converters: dict[str, list[Any]] = {}


def _owned_converters(alias: str) -> list[Any]:
    """The converters of an entry's ``expires_at``, then of each of `OWNED_READS`, once
    per database: looking them up cost an append more than applying them."""
    found = _converters.get(alias)
    if found is None:
        connection = connections[alias]
        found = _converters[alias] = [
            converters_of(field_of(MemoryEntry, "expires_at"), connection),
            *(converters_of(field_of(Thread, name), connection) for name in OWNED_READS)]
    return found


@functools.cache
def _row_names(rows: int) -> list[list[str]]:
    """Per entry column, the names of its ``rows`` parameters."""
    return [[f"{name}_{number}" for number in range(rows)] for name, _ in ENTRY_COLUMNS]


def _append_call(
    owner_id: int | None, thread_id: int, entries: Sequence[MemoryEntry], *, users: int,
    opens: int, tokens: int, now: datetime, tier: str, ttl_of_thread: bool,
) -> list[tuple[Any, ...]]:
    """The append's rows (`append_schema.RESULT`) in position order, with the entries'
    keys, positions and turns set from them; none when nothing was written.

    Where the connection outlives a request (``CONN_MAX_AGE`` not 0, or a pool), the
    function `append_schema` creates is called: it keeps its plans for the session. On a
    connection a request opens and closes, its first call would compile it and plan its
    statement again, more than planning the statement (`append_schema.body`) it sends
    in its place."""
    alias = router.db_for_write(MemoryEntry)
    connection = connections[alias]
    params: dict[str, Any] = {
        "for_thread": thread_id, "for_owner": owner_id, "rows_added": len(entries),
        "users": users, "opens": opens, "tokens": tokens,
        "at": connection.ops.adapt_datetimefield_value(now), "default_tier": tier,
        "ttl_of_thread": ttl_of_thread}
    for names, values in zip(_row_names(len(entries)), _columns(connection, entries, users),
                             strict=True):
        params.update(zip(names, values, strict=True))
    function = _keeps_sessions(connection)
    sql = statement(alias, ("append", len(entries), function),
                    functools.partial(_append_sql, rows=len(entries), function=function))
    with bound_cursor(connection) as cursor:
        cursor.execute(sql, params)
        written = sorted(cursor.fetchall(), key=lambda row: row[1])
    if not written:
        return written
    for entry, (key, position, turn, *_) in zip(entries, written, strict=True):
        entry.pk, entry.position, entry.turn = key, position, turn
        entry._state.adding, entry._state.db = False, alias
    return written


def _keeps_sessions(connection: BaseDatabaseWrapper) -> bool:
    """Whether the connection serves more than a request: persistent, or pooled."""
    settings = connection.settings_dict
    return settings.get("CONN_MAX_AGE", 0) != 0 or bool(settings["OPTIONS"].get("pool"))


def _columns(
    connection: BaseDatabaseWrapper, entries: Sequence[MemoryEntry], users: int,
) -> list[list[Any]]:
    """The append function's column arrays: each field's values as the field prepares
    them for saving, but a turn and a position as offsets back from the counters."""
    count, opened, turns, positions = len(entries), 0, [], []
    for number, entry in enumerate(entries, start=1):
        opened += entry.role == Role.USER
        turns.append(users - opened)
        positions.append(count - number)
    arrays = []
    for field in entry_fields():
        if field.attname == "turn":
            arrays.append(turns)
        elif field.attname == "position":
            arrays.append(positions)
        else:
            arrays.append([field.get_db_prep_save(field.pre_save(entry, add=True), connection)
                           for entry in entries])
    return arrays


def _append_sql(connection: BaseDatabaseWrapper, rows: int, function: bool) -> str:
    """The append of ``rows`` rows: the function's call (each column's array built by
    the server from one parameter a row: psycopg adapts a Python list on the client,
    slower), or its body sent in its place."""
    columns = [str(field.column) for field in entry_fields()]
    taken = [name for name, _ in ENTRY_COLUMNS]
    if columns != taken:  # a column added to the model and not to the function
        raise ImproperlyConfigured(
            f"MemoryEntry's columns {columns} are not the ones {APPEND} takes {taken}.")

    def value(name: str, kind: str) -> str:
        return f"CAST(%({name})s AS {kind})"

    if not function:  # the rows as a VALUES list: planned faster than unnested arrays
        values = ", ".join(
            "(" + ", ".join(value(f"{name}_{n}", kind) for name, kind in ENTRY_COLUMNS) + ")"
            for n in range(rows))
        return body(value, f"(VALUES {values}) AS given({COLUMNS})")
    arguments = [value(name, kind) for name, kind in HEAD]
    arguments += [f"ARRAY[{', '.join(value(f'{name}_{n}', kind) for n in range(rows))}]"
                  for name, kind in ENTRY_COLUMNS]
    return f"SELECT * FROM {APPEND}({', '.join(arguments)})"
