"""Recall receipts and the savings ledger: what the agent saw, and what folding saved.

A receipt names the rows a recall put into the context, in order, with the settings in
force. Rows it names are never rewritten (originals are byte-identical, summaries are
retired rather than deleted), so the exact context can be rebuilt at any later time.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from django.db import connections, router, transaction
from django.db.models import Count, F, Field, Model, Q, QuerySet, Sum

from agentmemory.exceptions import EntryGoneError, ThreadGoneError
from agentmemory.models import (
    EntryKind,
    MemoryEntry,
    RecallReceipt,
    ReceiptItem,
    SummarizerCall,
    Thread,
)
from agentmemory.pipeline.config import RecallConfig
from agentmemory.pipeline.format import format_context
from agentmemory.statements import Insert, Statement


def config_record(config: RecallConfig) -> dict[str, Any]:
    """The settings a receipt keeps: everything but the instruction's full text."""
    record = dataclasses.asdict(config)
    record.pop("instruction")
    record["tiers"] = list(config.tiers) if config.tiers is not None else None
    return record


def record_receipt(
    thread: Thread,
    picked: list[MemoryEntry],
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
    """The thread's row lock (which reads its turn), a check that what was shown is
    still stored, the receipt, and its items (`insert_items`)."""
    with transaction.atomic():
        # The one lock order (`ThreadQuerySet.lock`); under it no erasure of this thread
        # runs, so what is checked here still stands at commit. The turn is read from the
        # row, not taken from ``thread``: an instance loaded before appends made elsewhere
        # would file the context under an older turn than the one it shows.
        locked = _LOCK_TURN.rows(thread=thread.pk)
        if not locked:
            raise ThreadGoneError(f"Thread {thread.pk} was erased during the recall.")
        [(turn,)] = locked
        shown = {entry.pk for entry in picked}
        if folded_summary is not None:
            shown.add(folded_summary.pk)
        if _stored_count(shown) != len(shown):
            raise EntryGoneError(
                f"An entry of thread {thread.pk} was erased during the recall; recall again."
            )
        receipt = RecallReceipt(
            thread=thread,
            turn=turn,
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
        _INSERT_RECEIPT.create([receipt])
        insert_items(receipt.pk, picked)
    return receipt


# Every recall with receipts takes this lock: its SQL is built once (`agentmemory.statements`).
_LOCK_TURN = Statement(
    lambda *, thread: Thread.objects.select_for_update().filter(pk=thread).order_by()
    .values_list("last_turn"),
    thread=int,
)


#: Every recall with receipts writes one: its INSERT is built once (`agentmemory.statements`).
_INSERT_RECEIPT = Insert(RecallReceipt)


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


def insert_items(receipt_id: int, picked: list[MemoryEntry]) -> None:
    """The receipt's items as plain values, never a model instance per item (as
    ``bulk_create`` would build): on PostgreSQL one INSERT of five arrays
    (``unnest``), a short statement whatever the context's length; elsewhere multi-row
    INSERTs, as many rows to a statement as the database takes parameters for (199 on
    SQLite's default limit of 999)."""
    connection = connections[router.db_for_write(ReceiptItem)]
    meta = ReceiptItem._meta
    quote = connection.ops.quote_name
    names = ("receipt", "entry", "order", "kind", "tokens")
    fields = [_column(ReceiptItem, name) for name in names]
    columns = ", ".join(quote(str(field.column)) for field in fields)
    rows = [(receipt_id, entry.pk, order, entry.kind, entry.token_count)
            for order, entry in enumerate(picked)]
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


@dataclass(frozen=True)
class ReplayedContext:
    entries: list[MemoryEntry]
    text: str


def replay(receipt: RecallReceipt) -> ReplayedContext:
    """The context exactly as that recall formatted it, rebuilt from the rows it names."""
    items = list(receipt.items.select_related("entry").order_by("order"))
    entries = [item.entry for item in items]
    config = receipt.config
    header, footer = config.get("header", ""), config.get("footer", "")
    shaped = dataclasses.replace(_FORMAT_ONLY, header=header, footer=footer)
    return ReplayedContext(entries=entries, text=format_context(entries, shaped))


# format_context reads only header and footer; the rest is a valid placeholder.
_FORMAT_ONLY = RecallConfig(
    mode="inline", load_count=1, tiers=None, trigger_min_entries=1, preserve_recent=1,
    min_fold_entries=1, summary_tier="cold", instruction="", decay=None, reserve_tokens=0,
    minimum_tokens=0, max_entries=None, header="", footer="",
)


def receipts_at_turn(thread: Thread, turn: int) -> QuerySet[RecallReceipt]:
    """What the model saw at turn N: every recall made while turn N was the latest."""
    return RecallReceipt.objects.filter(thread=thread, turn=turn).order_by("created_at", "id")


# ---------------------------------------------------------------- savings


def _saved(items: QuerySet[ReceiptItem]) -> tuple[int, int]:
    """Tokens saved by summaries loaded in place of their originals, and how many loads."""
    totals = items.filter(kind=EntryKind.SUMMARY).aggregate(
        saved=Sum(F("entry__coverage__original_tokens") - F("tokens")),
        loads=Count("id"),
    )
    return int(totals["saved"] or 0), int(totals["loads"] or 0)


def savings(*, thread: Thread | None = None, owner: Any = None) -> dict[str, Any]:
    """Tokens spent summarizing against tokens saved in recalls, for a thread or an owner."""
    scope = Q(thread=thread) if thread is not None else Q(owner=owner)
    item_scope = (
        Q(receipt__thread=thread) if thread is not None else Q(receipt__thread__owner=owner)
    )
    spent = SummarizerCall.objects.filter(scope).spent_tokens()
    saved, loads = _saved(ReceiptItem.objects.filter(item_scope))
    return {
        "spent_tokens": spent,
        "saved_tokens": saved,
        "summary_loads": loads,
        "net_tokens": saved - spent,
        "ratio": round(saved / spent, 3) if spent else None,
    }


def summary_savings(summary: MemoryEntry) -> dict[str, Any]:
    """What one summary cost (its ledger rows) and saved (every recall that loaded it)."""
    spent = SummarizerCall.objects.filter(summary=summary).spent_tokens()
    saved, loads = _saved(ReceiptItem.objects.filter(entry=summary))
    return {"spent_tokens": spent, "saved_tokens": saved, "summary_loads": loads}
