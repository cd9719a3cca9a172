"""Pick by budget: newest first until the budget is spent, returned oldest first."""

from __future__ import annotations

from agentmemory.models import MemoryEntry
from agentmemory.pipeline.config import RecallConfig

BELOW_MINIMUM = "below-minimum-tokens"


def pick_by_budget(
    entries: list[MemoryEntry], budget_tokens: int, config: RecallConfig
) -> tuple[list[MemoryEntry], str | None]:
    """Returns the picked entries and, when nothing may be injected, the reason."""
    available = budget_tokens - config.reserve_tokens
    if available < config.minimum_tokens:
        return [], BELOW_MINIMUM
    picked: list[MemoryEntry] = []
    used = 0
    for entry in reversed(entries):
        if config.max_entries is not None and len(picked) >= config.max_entries:
            break
        if used + entry.token_count > available:
            # Stop rather than skip: a gap in the middle of the recent past reads as a
            # conversation that never happened.
            break
        picked.append(entry)
        used += entry.token_count
    picked.reverse()
    return picked, None
