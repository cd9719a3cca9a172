"""The tables, one module per kind of record: `threads` (threads, owners' quotas),
`entries` (messages, summaries, what a summary stands for and records), `folds` (window
spans, latches), `ledger` (summarizer calls, circuits), `receipts` (what recall showed).
Schema never depends on a setting; a thread's policy reads the settings only when asked
(`Thread.effective_ttl`...). The choices of their columns live in `agentmemory.choices`."""

from __future__ import annotations

from agentmemory.choices import CallOutcome, EntryKind, FoldPurpose, RetainPolicy, Role, Tier
from agentmemory.models.entries import (
    SUMMARY_KEY_PREFIX,
    MemoryEntry,
    MemoryEntryManager,
    Summary,
    SummaryCoverage,
    SummaryManager,
    SummarySource,
    key_of_handle,
    summary_handle,
    summary_key,
)
from agentmemory.models.folds import FoldedSpan, FoldLatch, SpanSource
from agentmemory.models.ledger import SummarizerCall, SummarizerCircuit
from agentmemory.models.provenance import FoldProvenance
from agentmemory.models.receipts import RecallReceipt, ReceiptItem
from agentmemory.models.threads import OwnerQuota, Thread

__all__ = [
    "CallOutcome",
    "EntryKind",
    "FoldLatch",
    "FoldProvenance",
    "FoldPurpose",
    "FoldedSpan",
    "MemoryEntry",
    "MemoryEntryManager",
    "OwnerQuota",
    "RecallReceipt",
    "ReceiptItem",
    "RetainPolicy",
    "Role",
    "SUMMARY_KEY_PREFIX",
    "SpanSource",
    "SummarizerCall",
    "SummarizerCircuit",
    "Summary",
    "SummaryCoverage",
    "SummaryManager",
    "SummarySource",
    "Thread",
    "Tier",
    "key_of_handle",
    "summary_handle",
    "summary_key",
]
