"""The one fold attempt, for recall folds, background folds, regenerate and compaction.

`attempt_fold` makes the call and its checks; `latched` says whether a span would be
declined as latched; `DeclineReason` lists every reason a fold is not made, and
`ContextReason` every reason a recall's context declined or left entries out.
`agentmemory.folding.lease` holds a thread's fold lease: one fold of a thread at a time.
"""

from agentmemory.folding.attempt import (
    Declined,
    Draft,
    attempt_fold,
    decline,
    report_failure,
)
from agentmemory.folding.latches import latched
from agentmemory.folding.reasons import ContextReason, DeclineReason
from agentmemory.folding.span import Span, SpanTokens

__all__ = [
    "ContextReason",
    "DeclineReason",
    "Declined",
    "Draft",
    "Span",
    "SpanTokens",
    "attempt_fold",
    "decline",
    "latched",
    "report_failure",
]
