"""Recall receipts, written: what a recall put into the context, filed as it is shown.

A receipt names the rows a recall put into the context, in order, with the settings in
force. Rows it names are never rewritten (originals are byte-identical, summaries are
retired rather than deleted), so the exact context can be rebuilt at any later time
(`agentmemory.trust.replay`), and what folding saved can be counted from them
(`agentmemory.trust.savings`). `record_receipt` files one under the thread's turn in
one statement (its SQL built once per database).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, NamedTuple, cast

from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, connections, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, JSONField, Model, Q

from agentmemory.exceptions import EntryGoneError, ThreadGoneError
from agentmemory.models import MemoryEntry, RecallReceipt, SummaryCoverage, Thread
from agentmemory.pipeline.config import RecallConfig
from agentmemory.pipeline.entries import ContextEntry
from agentmemory.pipeline.instances import named, named_placeholders
from agentmemory.trust import receipt_schema

#: Receipts deleted to a statement when erasure deletes those that show what it takes.
DELETE_CHUNK = 500


def config_record(config: RecallConfig) -> dict[str, Any]:
    """The settings a receipt keeps: everything but the instruction's full text."""
    return cast("dict[str, Any]", json.loads(_config_json(config)))


@functools.lru_cache(maxsize=64)
def _config_json(config: RecallConfig) -> str:
    """`config_record` as the receipt's column stores it, once per config: a process
    recalls with a few configs, and every receipt of one holds the same text."""
    record = dataclasses.asdict(config)
    record.pop("instruction")
    record["tiers"] = list(config.tiers) if config.tiers is not None else None
    column = cast("JSONField[Any]", RecallReceipt._meta.get_field("config"))
    return json.dumps(record, cls=column.encoder)


class FiledReceipt(NamedTuple):
    """A receipt as `record_receipt` filed it: its id and the turn it is filed under."""

    id: int
    turn: int


def record_receipt(
    thread: Thread,
    picked: Sequence[ContextEntry],
    *,
    config: RecallConfig,
    budget_tokens: int,
    tokens: int,
    decline: str | None,
    budget_decline: str | None,
    folded_summary: MemoryEntry | None,
    now: datetime,
    expires_at: datetime | None,
    omitted: int = 0,
    omitted_reason: str | None = None,
    seen_erasures: int | None = None,
) -> FiledReceipt:
    """The receipt, filed under the thread's turn read under its row lock, in one
    statement (one round trip, and on its own one commit).

    Raises `ThreadGoneError` if the thread was erased during the recall, `EntryGoneError`
    if an entry it shows was; either way nothing is written. The statement writes only
    if every entry shown is stored as it runs, and, on PostgreSQL, only if the thread's
    ``erasures`` did not move while it waited for the row lock (an erasure holding it
    deletes what the statement's snapshot still sees). ``seen_erasures``: the thread's
    ``erasures`` read by the statement that read ``picked`` (`Loaded.erasures`); on
    PostgreSQL, while the row still holds it, nothing was erased since and the entries
    are not counted (`receipt_schema`). The turn is read from the row, not taken from
    ``thread``: an instance loaded before appends made elsewhere would file the context
    under an older turn than the one it shows.
    """
    connection = connections[router.db_for_write(RecallReceipt)]
    statement = _STATEMENT.get(connection.alias) or _prepare(connection)
    # In single passes: a receipt at 128,000 tokens shows thousands of entries.
    checked = {entry.id for entry in picked}
    positions = [entry.position for entry in picked]
    if folded_summary is not None:
        checked.add(folded_summary.pk)
    loads, saved = _savings(picked)
    adapt = statement.adapt_datetime
    # In the order of `WRITTEN` (`_prepare` holds it to the model's columns); JSON as its
    # text, which the column's type takes on both databases.
    values: list[Any] = [
        thread.pk, budget_tokens, tokens, decline or "", budget_decline or "", omitted,
        omitted_reason or "", folded_summary.pk if folded_summary is not None else None,
        _config_json(config), _shown_json(picked), min(positions, default=None),
        max(positions, default=None), loads, saved, adapt(now), adapt(expires_at),
        *(() if statement.postgresql else (thread.pk,)),
        _ids_param(statement.postgresql, checked), len(checked),
        *((seen_erasures,) if statement.postgresql else ()),
    ]
    try:
        with connection.cursor() as cursor:
            cursor.execute(statement.sql, named(values))
            row = cursor.fetchone()
    except IntegrityError as error:  # the folded summary, erased before the commit
        raise _entry_gone(thread.pk) from error
    if row is None or row[0] is None:  # none inserted (the function answers NULLs)
        if Thread.objects.filter(pk=thread.pk).exists():
            raise _entry_gone(thread.pk)
        raise ThreadGoneError(f"Thread {thread.pk} was erased during the recall.")
    return FiledReceipt(int(row[0]), int(row[1]))


def receipts_showing(entries: Iterable[tuple[int, int, int]]) -> list[tuple[int, Any]]:
    """The id and ``shown`` of every receipt that shows any of ``entries`` (id, thread id,
    position each): of a thread's receipts, those whose span of positions shown holds
    one asked for (the index on thread and oldest position), then by their ``shown``."""
    wanted, at = set[int](), dict[int, list[int]]()
    for entry_id, thread_id, position in entries:
        wanted.add(entry_id)
        at.setdefault(thread_id, []).append(position)
    near = Q(pk__in=[])
    for thread_id, positions in at.items():
        near |= Q(thread_id=thread_id, oldest_position__lte=max(positions),
                  newest_position__gte=min(positions))
    return [(pk, shown) for pk, shown in RecallReceipt.objects.filter(near).values_list(
        "pk", "shown") if any(item[0] in wanted for item in shown)]


def delete_receipts_showing(entries: Iterable[tuple[int, int, int]], *,
                            chunk: int = DELETE_CHUNK) -> int:
    """Delete the receipts `receipts_showing` finds, ``chunk`` ids to a statement (a
    summary can be shown by more receipts than SQLite takes parameters); how many."""
    ids = [pk for pk, _ in receipts_showing(entries)]
    return sum(RecallReceipt.objects.filter(pk__in=ids[start : start + chunk]).delete()[0]
               for start in range(0, len(ids), chunk))


def _savings(picked: Sequence[ContextEntry]) -> tuple[int, int]:
    """The summaries shown, and the tokens of the originals they stood for less their
    own (a summary without its coverage row saves nothing it can show)."""
    loads = saved = 0
    for entry in picked:
        if entry.is_summary:
            loads += 1
            try:
                coverage = cast("MemoryEntry", entry).coverage
            except SummaryCoverage.DoesNotExist:
                continue
            saved += coverage.original_tokens - entry.token_count
    return loads, saved


#: Each kind's JSON, for `_shown_json`.
_KIND_JSON = {kind: json.dumps(kind) for kind in ("message", "summary")}


def _shown_json(picked: Sequence[ContextEntry]) -> str:
    """``shown`` as the column stores it, ``[id, kind, tokens]`` each, written directly:
    `json.dumps` of the lists took 1.7 times as long, at thousands of entries."""
    kinds = _KIND_JSON
    try:
        return "[" + ",".join([f"[{entry.id},{kinds[entry.kind]},{entry.token_count}]"
                               for entry in picked]) + "]"
    except KeyError:  # a kind without its text here
        return json.dumps([[entry.id, str(entry.kind), entry.token_count] for entry in picked],
                          separators=(",", ":"))


def _entry_gone(thread_id: int) -> EntryGoneError:
    return EntryGoneError(
        f"An entry of thread {thread_id} was erased during the recall; recall again."
    )


#: The receipt's columns `record_receipt` writes from Python, in its values' order:
#: every column but its id and turn (`_prepare` holds them to the model's).
WRITTEN = ("thread", "budget_tokens", "tokens", "decline", "budget_decline", "omitted",
           "omitted_reason", "folded_summary", "config", "shown", "oldest_position",
           "newest_position", "summary_loads", "saved_tokens", "created_at", "expires_at")


class _Statement(NamedTuple):
    """A database's receipt statement and what its values need, built on first use. Its
    placeholders are named: Django passes SQLite such a statement through one ``%``
    formatting, where ``%s`` goes through a regular expression over the whole text."""

    sql: str
    #: The database's form of a datetime (what Django's field would send it).
    adapt_datetime: Callable[[datetime | None], Any]
    #: PostgreSQL's statement is a function call that takes the thread as a column;
    #: SQLite's reads the locked thread row by a parameter of its own after them.
    postgresql: bool


_STATEMENT: dict[str, _Statement] = {}


def _prepare(connection: BaseDatabaseWrapper) -> _Statement:
    names = [field.name for field in _receipt_fields()]
    if names != list(WRITTEN):  # a column added to the model and not to the statement
        raise ImproperlyConfigured(
            f"RecallReceipt's columns {names} are not the ones record_receipt writes "
            f"{list(WRITTEN)}.")
    statement = _Statement(named_placeholders(_statement_sql(connection)),
                           connection.ops.adapt_datetimefield_value,
                           connection.vendor == "postgresql")
    _STATEMENT[connection.alias] = statement
    return statement


def _receipt_fields() -> list[Field[Any, Any]]:
    """What a receipt's INSERT writes from Python: every column but its id and turn."""
    return [field for field in RecallReceipt._meta.concrete_fields
            if not field.primary_key and field.name != "turn"]


def _ids_param(postgresql: bool, ids: set[int]) -> str:
    """The entries to check, as one parameter: comma-joined text split by PostgreSQL, a
    JSON array elsewhere (the statement's text is the same whatever their number, and
    psycopg would dump an array parameter element by element in Python)."""
    if postgresql:
        return ",".join(map(str, ids))
    return json.dumps(list(ids))


def _statement_sql(connection: BaseDatabaseWrapper) -> str:
    """The receipt's INSERT ... SELECT from the locked thread row, if the count of the
    shown entries stored is theirs, RETURNING its id and turn. On PostgreSQL that
    statement is the function `receipt_schema.FILE_RECEIPT`, which also checks that the
    row's ``erasures`` is the one the statement's snapshot saw (the locked row is re-read
    once the lock is granted, the subquery is not)."""
    fields = _receipt_fields()
    if connection.vendor == "postgresql":
        return (f"SELECT receipt_id, receipt_turn FROM {receipt_schema.FILE_RECEIPT}("
                f"{', '.join(['%s'] * (len(fields) + 3))})")
    quote = connection.ops.quote_name
    thread_table, entry_table = quote(Thread._meta.db_table), quote(MemoryEntry._meta.db_table)
    thread_pk = quote(str(_column(Thread, "id").column))
    entry_pk = quote(str(_column(MemoryEntry, "id").column))
    turn = quote(str(_column(RecallReceipt, "turn").column))
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    names = ", ".join(quote(str(field.column)) for field in fields)
    return (
        f"INSERT INTO {quote(RecallReceipt._meta.db_table)} ({names}, {turn})"
        f" SELECT {', '.join(['%s'] * len(fields))},"
        f" {quote(str(_column(Thread, 'last_turn').column))}"
        f" FROM {thread_table} WHERE {thread_pk} = %s"
        f" AND (SELECT COUNT(*) FROM {entry_table}"
        f" WHERE {entry_pk} IN (SELECT value FROM json_each(%s))) = %s{lock}"
        f" RETURNING {quote(str(_column(RecallReceipt, 'id').column))}, {turn}"
    )


def receipt_columns() -> list[str]:
    """The columns a receipt's statement writes from Python, in its parameters' order."""
    return [str(field.column) for field in _receipt_fields()]


def _column(model: type[Model], name: str) -> Field[Any, Any]:
    return cast("Field[Any, Any]", model._meta.get_field(name))

