"""Moved to `agentmemory.trust.receipts`; this path keeps working for existing imports."""

from agentmemory.trust.receipts import (
    ReplayedContext,
    config_record,
    insert_items,
    receipts_at_turn,
    record_receipt,
    replay,
    savings,
    summary_savings,
)

__all__ = [
    "ReplayedContext",
    "config_record",
    "insert_items",
    "receipts_at_turn",
    "record_receipt",
    "replay",
    "savings",
    "summary_savings",
]
