"""Where a turn starts: the one rule every seam over stored entries cuts by.

A turn is a user message and everything after it up to the next user message. Turn
numbers refine that, never split it: a user message that keeps the previous turn's
number (explicit turns) joins that turn. Before the first user message (a system
preamble, a thread written without user messages, or a load that begins mid-turn)
turns follow the turn numbers. A summary stands alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentmemory.models import Role
from agentmemory.pipeline.entries import ContextEntry


def turn_starts(entries: Sequence[ContextEntry]) -> list[bool]:
    """``starts[i]``: a new turn (or a summary) begins at ``entries[i]``."""
    starts: list[bool] = []
    seen_user = False
    previous: ContextEntry | None = None
    previous_summary = False
    for entry in entries:
        summary = entry.is_summary
        if previous is None or summary or previous_summary:
            starts.append(True)
        else:
            starts.append(
                entry.turn != previous.turn and (entry.role == Role.USER or not seen_user)
            )
        seen_user = seen_user or (not summary and entry.role == Role.USER)
        previous, previous_summary = entry, summary
    return starts


def turn_answered(entries: Sequence[ContextEntry]) -> bool:
    """Whether the newest turn has its answer: it ends with an assistant message that
    calls no tool (not a user message waiting, nor a call or a result mid-round)."""
    newest = entries[-1] if entries else None
    return (
        newest is not None and not newest.is_summary and newest.role == Role.ASSISTANT
        and not newest.tool_calls
    )
