"""The admin: threads, entries, summaries, folded spans and the records of folding.

Staff answer two questions here: what did the agent see, and what does this summary
stand for. Records are read-only; entries are written by ``services.append`` and by
folding (law 1), so only an entry's tier and metadata are editable, and deleting goes
through the erasure services (law 7). Text of an original hidden by a summary (its
content, the facts a fact note or a coverage lists from it, a receipt's context, a
span's messages) is shown by the one rule of :mod:`agentmemory.permissions`.

One module per area; importing this package registers every admin with the default
site, as ``admin.autodiscover()`` expects.
"""

from agentmemory.admin.entries import MemoryEntryAdmin
from agentmemory.admin.receipts import RecallReceiptAdmin
from agentmemory.admin.records import (
    FoldLatchAdmin,
    OwnerQuotaAdmin,
    SummarizerCallAdmin,
    SummarizerCircuitAdmin,
)
from agentmemory.admin.spans import FoldedSpanAdmin
from agentmemory.admin.summaries import SummaryAdmin
from agentmemory.admin.threads import ThreadAdmin

__all__ = [
    "FoldLatchAdmin",
    "FoldedSpanAdmin",
    "MemoryEntryAdmin",
    "OwnerQuotaAdmin",
    "RecallReceiptAdmin",
    "SummarizerCallAdmin",
    "SummarizerCircuitAdmin",
    "SummaryAdmin",
    "ThreadAdmin",
]
