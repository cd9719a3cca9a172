"""The savings ledger: tokens spent summarizing against tokens saved in recalls.

A summary a receipt shows in place of its originals saved their tokens less its own;
the usage ledger (`SummarizerCall`) says what folding cost. `savings` totals both for a
thread or an owner, `summary_savings` for one summary.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, F, Q, QuerySet, Sum

from agentmemory.models import EntryKind, MemoryEntry, ReceiptItem, SummarizerCall, Thread


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
