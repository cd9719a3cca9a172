"""How a receipt is written (issue 24): on PostgreSQL outside a transaction, the thread
row's lock, the receipt and its items in one statement; on SQLite, and inside a caller's
transaction, the receipt from the locked row, a check that what was shown is stored (on
SQLite in a transaction of its own, the foreign key check at its commit), and the items.
Either way a receipt names only stored rows under the turn the row holds, and
an erasure that lands between the load and the receipt writes nothing and raises.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from agentmemory import services
from agentmemory.exceptions import EntryGoneError, ThreadGoneError
from agentmemory.models import MemoryEntry, RecallReceipt, ReceiptItem, Thread
from agentmemory.pipeline.config import RecallConfig
from agentmemory.trust.receipts import record_receipt
from tests.helpers import add_turns

pytestmark = pytest.mark.django_db(transaction=True)


def arguments(picked: list[MemoryEntry], **changes: Any) -> dict[str, Any]:
    given: dict[str, Any] = dict(
        config=RecallConfig.build(), budget_tokens=1000, tokens=10, decline=None,
        budget_decline=None, folded_summary=None, now=datetime.now(UTC), expires_at=None)
    return given | changes


def a_thread(turns: int = 3) -> tuple[Thread, list[MemoryEntry]]:
    thread = Thread.objects.create()
    add_turns(thread, turns)
    return thread, list(MemoryEntry.objects.filter(thread=thread).order_by("position"))


def writes(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries]


@pytest.mark.parametrize("inside_a_transaction", [False, True])
def test_a_receipt_names_what_was_shown_in_order_under_the_rows_turn(
    inside_a_transaction: bool,
) -> None:
    thread, picked = a_thread()
    Thread.objects.filter(pk=thread.pk).update(last_turn=41)  # appends made elsewhere
    with CaptureQueriesContext(connection) as queries:
        if inside_a_transaction:
            with transaction.atomic():
                receipt = record_receipt(thread, picked, **arguments(picked, omitted=2))
        else:
            receipt = record_receipt(thread, picked, **arguments(picked, omitted=2))
    stored = RecallReceipt.objects.get()
    assert (receipt.pk, receipt.turn) == (stored.pk, 41) and stored.omitted == 2
    assert stored.config == receipt.config and stored.created_at == receipt.created_at
    assert list(stored.items.order_by("order").values_list("entry_id", "kind", "tokens")) == [
        (e.pk, e.kind, e.token_count) for e in picked]
    sent = writes(queries)
    if connection.vendor == "postgresql" and not inside_a_transaction:
        # One round trip: the lock, the receipt and the items, committed on their own.
        assert len(sent) == 1 and sent[0].startswith("WITH") and "FOR UPDATE" in sent[0]
    else:
        inserts = [sql for sql in sent if sql.startswith("INSERT")]
        counts = [sql for sql in sent if sql.startswith("SELECT COUNT(*)")]
        # On SQLite in a transaction of its own, the commit's foreign key check is the check.
        checks = 0 if connection.vendor == "sqlite" and not inside_a_transaction else 1
        assert len(inserts) == 2 and len(counts) == checks, sent


@pytest.mark.parametrize("inside_a_transaction", [False, True])
def test_an_erasure_before_the_receipt_writes_nothing_and_raises(
    inside_a_transaction: bool,
) -> None:
    thread, picked = a_thread()
    services.erase_entry(picked[1])

    def write() -> None:
        if inside_a_transaction:
            with transaction.atomic():
                record_receipt(thread, picked, **arguments(picked))
        else:
            record_receipt(thread, picked, **arguments(picked))

    with pytest.raises(EntryGoneError):
        write()
    # The folded summary is shown too: erased, the same.
    folded = picked[0]
    services.erase_entry(folded)
    with pytest.raises(EntryGoneError):
        record_receipt(thread, picked[2:], **arguments(picked, folded_summary=folded))
    services.erase_thread(thread)
    with pytest.raises(ThreadGoneError):
        write()
    assert not RecallReceipt.objects.exists() and not ReceiptItem.objects.exists()


@pytest.mark.postgres_only
def test_an_erasure_that_holds_the_lock_while_the_receipt_waits_writes_nothing() -> None:
    """The overlap forced: another connection locks the thread row (as an erasure does),
    deletes a shown entry, and commits only once the receipt's statement waits on that
    lock; the statement's snapshot predates the delete, the foreign key check at its
    commit does not."""
    if connection.vendor != "postgresql":
        pytest.skip("a row lock another connection waits on needs PostgreSQL")
    thread, picked = a_thread()
    given = connection.settings_dict
    eraser = psycopg.connect(host=given["HOST"], port=given["PORT"], user=given["USER"],
                             password=given["PASSWORD"] or None, dbname=given["NAME"])
    table, entries = Thread._meta.db_table, MemoryEntry._meta.db_table
    eraser.execute(f'SELECT 1 FROM "{table}" WHERE id = %s FOR UPDATE', [thread.pk])
    eraser.execute(f'DELETE FROM "{entries}" WHERE id = %s', [picked[1].pk])
    outcome: list[BaseException | None] = []

    def write() -> None:
        try:
            record_receipt(thread, picked, **arguments(picked))
            outcome.append(None)
        except BaseException as error:  # noqa: BLE001 -- handed to the test thread
            outcome.append(error)
        finally:
            connection.close()

    writer = threading.Thread(target=write)
    writer.start()
    waiting = False
    watcher = psycopg.connect(host=given["HOST"], port=given["PORT"], user=given["USER"],
                              password=given["PASSWORD"] or None, dbname=given["NAME"],
                              autocommit=True)
    for _ in range(500):  # until the receipt's statement waits on the eraser's row lock
        waiting = bool(watcher.execute(
            "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
            " AND query LIKE 'WITH receipt AS%%' AND datname = current_database()"
        ).fetchone())
        if waiting:
            break
        time.sleep(0.01)
    eraser.commit()
    writer.join(timeout=30)
    eraser.close()
    watcher.close()
    assert waiting, "the receipt never waited on the lock"
    assert len(outcome) == 1 and isinstance(outcome[0], EntryGoneError), outcome
    assert not RecallReceipt.objects.exists() and not ReceiptItem.objects.exists()
