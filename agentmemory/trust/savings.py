"""The savings ledger: tokens spent summarizing against tokens saved in recalls.

A summary a receipt shows in place of its originals saved their tokens less its own;
the usage ledger (`SummarizerCall`) says what folding cost. `savings` totals both for a
thread or an owner, `summary_savings` for one summary.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, Sum

from agentmemory.models import (
    MemoryEntry,
    RecallReceipt,
    SummarizerCall,
    SummaryCoverage,
    Thread,
)
from agentmemory.trust.receipts import receipts_showing


def savings(*, thread: Thread | None = None, owner: Any = None) -> dict[str, Any]:
    """Tokens spent summarizing against tokens saved in recalls, for a thread or an owner."""
    scope = Q(thread=thread) if thread is not None else Q(owner=owner)
    receipt_scope = Q(thread=thread) if thread is not None else Q(thread__owner=owner)
    spent = SummarizerCall.objects.filter(scope).spent_tokens()
    # Each receipt counted what its summaries saved as it was written.
    totals = RecallReceipt.objects.filter(receipt_scope).aggregate(
        saved=Sum("saved_tokens"), loads=Sum("summary_loads"))
    saved, loads = int(totals["saved"] or 0), int(totals["loads"] or 0)
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
    coverage = SummaryCoverage.objects.filter(summary=summary).first()
    loads = saved = 0
    for _, shown in receipts_showing([(summary.pk, summary.thread_id, summary.position)]):
        for entry_id, _, tokens in shown:
            if entry_id == summary.pk:
                loads += 1
                if coverage is not None:
                    saved += coverage.original_tokens - tokens
    return {"spent_tokens": spent, "saved_tokens": saved, "summary_loads": loads}
