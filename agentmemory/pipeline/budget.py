"""Pick by budget: the newest whole turn, then summaries, then the newest whole turns.

The recall contract's budget half: whatever the budget, the context never splits a
turn or a tool call from its results, ends with the newest whole turn (or declines out
loud when that alone does not fit), and counts what it left out and why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentmemory.folding.reasons import ContextReason
from agentmemory.pipeline.blocks import Block, blocks_of
from agentmemory.pipeline.config import RecallConfig
from agentmemory.pipeline.entries import ContextEntry
from agentmemory.tokens import count_fixed

BELOW_MINIMUM = ContextReason.BELOW_MINIMUM
NEWEST_TURN_TOO_LARGE = ContextReason.NEWEST_TURN_TOO_LARGE

# Why a context left visible entries out (RecallResult.omitted_reason).
OVER_BUDGET = ContextReason.OVER_BUDGET
MAX_ENTRIES = ContextReason.MAX_ENTRIES
UNPAIRED_TOOL_MESSAGE = ContextReason.UNPAIRED_TOOL_MESSAGE
DECAYED = ContextReason.DECAYED


@dataclass(frozen=True)
class Picked:
    entries: list[ContextEntry]
    decline: str | None = None
    omitted: int = 0
    omitted_reason: str | None = None
    #: It took the oldest whole turn it was given (or was given none): it stopped for
    #: want of entries, not of room, and given older ones it might have taken more.
    took_oldest_turn: bool = False


def context_room(budget_tokens: int, config: RecallConfig) -> int:
    """Tokens the entries may take: the budget less the reserve and the frame."""
    frame = sum(count_fixed(text) + 1 for text in (config.header, config.footer) if text)
    return budget_tokens - config.reserve_tokens - frame


def pick_by_budget(
    entries: Sequence[ContextEntry], budget_tokens: int, config: RecallConfig
) -> Picked:
    if budget_tokens - config.reserve_tokens < config.minimum_tokens:
        return Picked([], BELOW_MINIMUM, len(entries), BELOW_MINIMUM if entries else None)
    grouped = blocks_of(entries)
    blocks = grouped.blocks
    if not blocks:
        return _picked([], entries, grouped.unpaired, None, took_oldest_turn=True)
    room = context_room(budget_tokens, config)
    cap = config.max_entries
    newest = blocks[-1]
    if newest.tokens > room or (cap is not None and len(newest.entries) > cap):
        return Picked([], NEWEST_TURN_TOO_LARGE, len(entries), NEWEST_TURN_TOO_LARGE)
    chosen = {len(blocks) - 1}
    used, count = newest.tokens, len(newest.entries)
    limited_by = None
    # Summaries first (they stand for everything older), newest summary first...
    summaries = [i for i, b in enumerate(blocks[:-1]) if b.is_summary]
    messages = [i for i, b in enumerate(blocks[:-1]) if not b.is_summary]
    for group in (summaries, messages):
        # ...then the newest whole turns, stopping at the first that does not fit: a hole
        # in the middle of the recent past would read as a conversation that never was.
        for index in reversed(group):
            block = blocks[index]
            if used + block.tokens > room:
                limited_by = limited_by or OVER_BUDGET
                break
            if cap is not None and count + len(block.entries) > cap:
                limited_by = limited_by or MAX_ENTRIES
                break
            chosen.add(index)
            used += block.tokens
            count += len(block.entries)
    picked = [entry for i in sorted(chosen) for entry in blocks[i].entries]
    oldest_turn = next((i for i, block in enumerate(blocks) if not block.is_summary), None)
    return _picked(picked, entries, grouped.unpaired, limited_by,
                   took_oldest_turn=oldest_turn is None or oldest_turn in chosen)


def _picked(
    picked: list[ContextEntry],
    entries: Sequence[ContextEntry],
    unpaired: list[ContextEntry],
    limited_by: str | None,
    *,
    took_oldest_turn: bool,
) -> Picked:
    omitted = len(entries) - len(picked)
    reason = limited_by if limited_by else (UNPAIRED_TOOL_MESSAGE if unpaired else None)
    return Picked(picked, None, omitted, reason if omitted else None, took_oldest_turn)


__all__ = ["Block", "Picked", "context_room", "pick_by_budget"]
