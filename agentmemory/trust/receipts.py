"""Recall receipts, written: what a recall put into the context, filed as it is shown.

A receipt names the rows a recall put into the context, in order, with the settings in
force. Rows it names are never rewritten (originals are byte-identical, summaries are
retired rather than deleted), so the exact context can be rebuilt at any later time
(`agentmemory.trust.replay`), and what folding saved can be counted from them
(`agentmemory.trust.savings`). `record_receipt` files one under the thread's turn (its
SQL built once per database); `insert_items` writes its items.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from django.db import IntegrityError, connections, router, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, JSONField, Model

from agentmemory.exceptions import EntryGoneError, ThreadGoneError
from agentmemory.models import MemoryEntry, RecallReceipt, ReceiptItem, Thread
from agentmemory.pipeline.config import RecallConfig
from agentmemory.pipeline.entries import ContextEntry


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
) -> RecallReceipt:
    """The receipt and its items, filed under the thread's turn read under its row lock.

    Raises `ThreadGoneError` if the thread was erased during the recall, `EntryGoneError`
    if an entry it shows was; either way nothing is written. The row lock is the one lock
    order (`ThreadQuerySet.lock`): no erasure of this thread runs while it is held, so
    what is checked under it still stands at commit. The turn is read from the row, not
    taken from ``thread``: an instance loaded before appends made elsewhere would file
    the context under an older turn than the one it shows.
    """
    receipt = RecallReceipt(
        thread=thread,
        turn=0,  # the row's, once locked
        budget_tokens=budget_tokens,
        tokens=tokens,
        decline=decline or "",
        budget_decline=budget_decline or "",
        omitted=omitted,
        omitted_reason=omitted_reason or "",
        folded_summary=folded_summary,
        config=config_record(config),
        created_at=now,
        expires_at=expires_at,
    )
    connection = connections[router.db_for_write(RecallReceipt)]
    items = [(entry.pk, order, entry.kind, entry.token_count)
             for order, entry in enumerate(picked)]
    on_its_own = not connection.in_atomic_block and connection.get_autocommit()
    if connection.vendor == "postgresql" and on_its_own:
        written = _write_in_one_statement(connection, receipt, items, config)
    else:
        shown = {entry.pk for entry in picked}
        if folded_summary is not None:
            shown.add(folded_summary.pk)
        # SQLite checks foreign keys at the commit of a transaction of our own, after
        # every other writer's commit: what is gone by then fails it, as on PostgreSQL.
        checked_at_commit = on_its_own and connection.vendor == "sqlite"
        written = _write_in_a_transaction(connection, receipt, items,
                                          set() if checked_at_commit else shown, config)
    if written is None:
        raise ThreadGoneError(f"Thread {thread.pk} was erased during the recall.")
    receipt.pk, receipt.turn = written
    receipt._state.adding = False
    receipt._state.db = connection.alias
    return receipt


def _entry_gone(thread_id: int) -> EntryGoneError:
    return EntryGoneError(
        f"An entry of thread {thread_id} was erased during the recall; recall again."
    )


def _write_in_one_statement(
    connection: BaseDatabaseWrapper, receipt: RecallReceipt, items: list[Item],
    config: RecallConfig,
) -> tuple[int, int] | None:
    """PostgreSQL outside a transaction: the lock, the receipt and its items in one
    statement, so one round trip and its own commit. The items' foreign keys are checked
    at that commit against what is stored then, so an entry erased after the load
    (before or while this waited for the lock) fails it and nothing is written."""
    sql = _ONE_STATEMENT.get(connection.alias)
    if sql is None:
        sql = _ONE_STATEMENT[connection.alias] = _one_statement_sql(connection)
    # Each column as one comma-joined text, split by the server: psycopg would dump an
    # array parameter element by element in Python (1.5 ms for 776 items).
    columns = [",".join(map(str, column)) for column in zip(*items, strict=True)] or [""] * 4
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql, [*_receipt_values(connection, receipt, config),
                                 receipt.thread_id, *columns])
            row = cursor.fetchone()
    except IntegrityError as error:
        raise _entry_gone(receipt.thread_id) from error
    return (int(row[0]), int(row[1])) if row else None


def _write_in_a_transaction(
    connection: BaseDatabaseWrapper, receipt: RecallReceipt, items: list[Item],
    shown: set[int], config: RecallConfig,
) -> tuple[int, int] | None:
    """SQLite, or inside the caller's transaction: the receipt inserted from the locked
    thread row, then a check that the ``shown`` entries are still stored (its own
    statement, so under READ COMMITTED it sees what an erasure that held the lock before
    us committed; none when the commit's foreign key check stands for it), then the
    items."""
    try:
        with transaction.atomic(using=connection.alias):
            sql = _INSERT_LOCKED.get(connection.alias)
            if sql is None:
                sql = _INSERT_LOCKED[connection.alias] = _insert_locked_sql(connection)
            with connection.cursor() as cursor:
                cursor.execute(sql, [*_receipt_values(connection, receipt, config),
                                     receipt.thread_id])
                row = cursor.fetchone()
            if row is None:
                return None
            if shown and _stored_count(shown) != len(shown):
                raise _entry_gone(receipt.thread_id)
            insert_items(int(row[0]), items)
    except IntegrityError as error:
        raise _entry_gone(receipt.thread_id) from error
    return int(row[0]), int(row[1])


#: (entry id, order, kind, tokens): a receipt item as it is stored.
Item = tuple[int, int, str, int]
_ITEM_FIELDS = ("entry", "order", "kind", "tokens")
#: Each database's SQL, built on first use: it depends only on the connection.
_ONE_STATEMENT: dict[str, str] = {}
_INSERT_LOCKED: dict[str, str] = {}


def _receipt_fields() -> list[Field[Any, Any]]:
    """What a receipt's INSERT writes from Python: every column but its id and turn."""
    return [field for field in RecallReceipt._meta.concrete_fields
            if not field.primary_key and field.name != "turn"]


def _receipt_values(connection: BaseDatabaseWrapper, receipt: RecallReceipt,
                    config: RecallConfig) -> list[Any]:
    """The columns' values as Django prepares them; the config as its cached JSON text
    (the column's type takes text on both databases)."""
    return [_config_json(config) if field.name == "config"
            else field.get_db_prep_save(getattr(receipt, field.attname), connection)
            for field in _receipt_fields()]


def _locked_turn(connection: BaseDatabaseWrapper, values: str) -> tuple[str, str]:
    """The INSERT of a receipt whose turn is the locked thread row's, and its RETURNING."""
    quote = connection.ops.quote_name
    names = [quote(str(field.column)) for field in _receipt_fields()]
    turn = quote(str(_column(RecallReceipt, "turn").column))
    last_turn = quote(str(_column(Thread, "last_turn").column))
    thread_pk = quote(str(_column(Thread, "id").column))
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    insert = (f"INSERT INTO {quote(RecallReceipt._meta.db_table)} ({', '.join(names)}, {turn})"
              f" SELECT {values}, {last_turn} FROM {quote(Thread._meta.db_table)}"
              f" WHERE {thread_pk} = %s{lock}")
    return insert, f" RETURNING {quote(str(_column(RecallReceipt, 'id').column))}, {turn}"


def _insert_locked_sql(connection: BaseDatabaseWrapper) -> str:
    insert, returning = _locked_turn(connection, ", ".join(["%s"] * len(_receipt_fields())))
    return insert + returning


def _one_statement_sql(connection: BaseDatabaseWrapper) -> str:
    """A CTE: the receipt from the locked thread row, then one item per element of four
    arrays (``unnest``), each passed as its elements joined with commas (an entry's kind
    is a word). Every value is cast to its column's type, as ``SELECT`` leaves
    a bare parameter untyped."""
    quote = connection.ops.quote_name
    casts = ", ".join(f"%s::{field.cast_db_type(connection)}" for field in _receipt_fields())
    insert, returning = _locked_turn(connection, casts)
    item_fields = [_column(ReceiptItem, name) for name in _ITEM_FIELDS]
    arrays = ", ".join(f"string_to_array(%s, ',')::{field.cast_db_type(connection)}[]"
                       for field in item_fields)
    receipt_column = quote(str(_column(ReceiptItem, "receipt").column))
    item_columns = ", ".join(quote(str(field.column)) for field in item_fields)
    return (
        f"WITH receipt AS ({insert}{returning}),"
        f" items AS (INSERT INTO {quote(ReceiptItem._meta.db_table)}"
        f" ({receipt_column}, {item_columns})"
        f" SELECT receipt.{quote(str(_column(RecallReceipt, 'id').column))}, shown.*"
        f" FROM receipt, unnest({arrays}) AS shown)"
        f" SELECT * FROM receipt"
    )


def _stored_count(ids: set[int]) -> int:
    """How many of these entries are stored. The ids go as one parameter, an array on
    PostgreSQL and a JSON array on SQLite: a query's text with hundreds of ids in
    ``IN (...)`` costs the client more than the database takes to answer, and its SQL
    would differ with every number of ids."""
    connection = connections[router.db_for_read(MemoryEntry)]
    quote = connection.ops.quote_name
    table = quote(MemoryEntry._meta.db_table)
    column = quote(str(_column(MemoryEntry, "id").column))
    ids_param: Any
    if connection.vendor == "postgresql":
        where, ids_param = f"{column} = ANY(%s)", sorted(ids)
    elif connection.vendor == "sqlite":
        where = f"{column} IN (SELECT value FROM json_each(%s))"
        ids_param = json.dumps(sorted(ids))
    else:
        return MemoryEntry.objects.filter(pk__in=ids).count()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {table} WHERE {where}", [ids_param])
        return int(cursor.fetchone()[0])


def _column(model: type[Model], name: str) -> Field[Any, Any]:
    return cast("Field[Any, Any]", model._meta.get_field(name))


def insert_items(receipt_id: int, items: list[Item]) -> None:
    """The receipt's items as plain values, never a model instance per item (as
    ``bulk_create`` would build): on PostgreSQL one INSERT of five arrays
    (``unnest``), a short statement whatever the context's length; elsewhere multi-row
    INSERTs, as many rows to a statement as the database takes parameters for (199 on
    SQLite's default limit of 999)."""
    connection = connections[router.db_for_write(ReceiptItem)]
    meta = ReceiptItem._meta
    quote = connection.ops.quote_name
    fields = [_column(ReceiptItem, name) for name in ("receipt", *_ITEM_FIELDS)]
    columns = ", ".join(quote(str(field.column)) for field in fields)
    rows = [(receipt_id, *item) for item in items]
    if not rows:
        return
    table = quote(meta.db_table)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            arrays = ", ".join(f"%s::{field.cast_db_type(connection)}[]" for field in fields)
            cursor.execute(
                f"INSERT INTO {table} ({columns}) SELECT * FROM unnest({arrays})",
                [list(column) for column in zip(*rows, strict=True)],
            )
            return
        per_statement = max(1, (connection.features.max_query_params or 50_000) // 5)
        for start in range(0, len(rows), per_statement):
            chunk = rows[start : start + per_statement]
            cursor.execute(
                f"INSERT INTO {table} ({columns}) VALUES "
                + ", ".join(["(%s, %s, %s, %s, %s)"] * len(chunk)),
                [value for row in chunk for value in row],
            )
