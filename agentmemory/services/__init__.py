"""The Python API. Tasks, views, admin actions and commands are thin layers over this.

Every function takes model instances or ids. Each of their writes is a transaction, so
a call that raises leaves no half-written row. A call that writes more than once commits
each write on its own: a summarizer call's ledger row is written before the call (the
ledger keeps every call made before a call raised); `recall`, `fold` and
`fold_while_due` commit fold by fold, then the receipt; `verify` signs row by row;
`purge_expired` deletes batch by batch; `sweep`, `request_fold`, `give_up_fold` and
`unpark_fold` mark the thread, then send or warn; `fold_backlogs`, `erase_threads` and
`sweep_threads` commit thread by thread.

One module per concern: `threads` (policy), `appends`, `recalls` (recall and fold,
over `agentmemory.pipeline.recall`), `background` (request, enqueue, give-up),
`sweeping` (the sweep), `backfill` (folding many threads for an operator), `summaries`
(expand, unfold, regenerate, review, retire), `integrity` (verify), `retention` (erase,
purge) and `search` (search, expand for the model). Every name is
importable from here.

Async code calls the twins `aappend`, `arecall` and `asearch`: each runs its sync
service itself through ``sync_to_async(thread_sensitive=True)``, the way Django's own
async ORM methods run theirs.
"""

from __future__ import annotations

from agentmemory.broker import BROKER_BACKOFF_SECONDS, BrokerBackoff, broker
from agentmemory.folding.lease import (
    FoldRequest,
    FoldState,
    fold_state,
    held_lease,
    park_fold,
    release_fold_lease,
    take_fold_lease,
)
from agentmemory.services.appends import aappend, append, append_owned
from agentmemory.services.backfill import ThreadFold, fold_backlog, fold_backlogs
from agentmemory.services.background import (
    enqueue_fold,
    fold_blocker,
    fold_due,
    fold_for_room,
    fold_if_due,
    fold_retry_pending,
    fold_ruled_out,
    fold_task_options,
    fold_until_settled,
    give_up_fold,
    request_fold,
    unpark_fold,
)
from agentmemory.services.integrity import (
    report_tampered,
    report_tampered_span,
    verify,
    verify_count,
)
from agentmemory.services.pictures import (
    CallRow,
    PictureRow,
    RecallsAt,
    ThreadPicture,
    WindowFold,
    thread_picture,
)
from agentmemory.services.recalls import (
    FoldOutcome,
    RecalledMessage,
    RecallResult,
    arecall,
    fold,
    fold_while_due,
    load_intact,
    recall,
    retire_expired,
)
from agentmemory.services.retention import (
    Erased,
    Expired,
    PurgeResult,
    clear_thread,
    count_expired,
    derived_rows,
    erase_entry,
    erase_thread,
    erase_threads,
    erase_user,
    purge_expired,
)
from agentmemory.services.search import (
    EVERY_THREAD,
    MAX_SEARCH_LIMIT,
    MIN_EXPAND_BUDGET,
    Expansion,
    InvalidSearchQuery,
    SearchHit,
    UnknownHandleError,
    asearch,
    expand_for_model,
    search,
)
from agentmemory.services.summaries import (
    derived_summaries,
    derived_summary_ids,
    expand,
    regenerate,
    resign_summary,
    retire,
    review,
    unfold,
)
from agentmemory.services.sweeping import (
    Swept,
    settle_abandoned,
    sweep,
    sweep_candidates,
    sweep_threads,
)
from agentmemory.services.threads import thread_fold_budget, thread_ttl, thread_write_tier
from agentmemory.window.compact import Compaction, compact
from agentmemory.window.frame import entry_digest
from agentmemory.window.lookup import expand_span, folded_messages, folded_span_for

__all__ = [
    "BROKER_BACKOFF_SECONDS",
    "EVERY_THREAD",
    "MAX_SEARCH_LIMIT",
    "MIN_EXPAND_BUDGET",
    "BrokerBackoff",
    "CallRow",
    "Compaction",
    "Erased",
    "Expansion",
    "Expired",
    "InvalidSearchQuery",
    "SearchHit",
    "UnknownHandleError",
    "FoldOutcome",
    "FoldRequest",
    "FoldState",
    "PictureRow",
    "PurgeResult",
    "RecallResult",
    "RecallsAt",
    "RecalledMessage",
    "Swept",
    "ThreadFold",
    "ThreadPicture",
    "WindowFold",
    "aappend",
    "append",
    "append_owned",
    "arecall",
    "asearch",
    "broker",
    "clear_thread",
    "compact",
    "count_expired",
    "derived_rows",
    "derived_summaries",
    "derived_summary_ids",
    "enqueue_fold",
    "entry_digest",
    "erase_entry",
    "erase_thread",
    "erase_threads",
    "erase_user",
    "expand",
    "expand_for_model",
    "expand_span",
    "fold",
    "fold_backlog",
    "fold_backlogs",
    "fold_due",
    "fold_blocker",
    "fold_for_room",
    "fold_if_due",
    "fold_retry_pending",
    "fold_ruled_out",
    "fold_state",
    "fold_task_options",
    "fold_until_settled",
    "fold_while_due",
    "folded_messages",
    "folded_span_for",
    "give_up_fold",
    "held_lease",
    "load_intact",
    "park_fold",
    "purge_expired",
    "recall",
    "regenerate",
    "release_fold_lease",
    "report_tampered",
    "report_tampered_span",
    "request_fold",
    "resign_summary",
    "search",
    "settle_abandoned",
    "retire",
    "retire_expired",
    "review",
    "sweep",
    "sweep_candidates",
    "sweep_threads",
    "take_fold_lease",
    "thread_fold_budget",
    "thread_picture",
    "thread_ttl",
    "thread_write_tier",
    "unfold",
    "unpark_fold",
    "verify",
    "verify_count",
]
