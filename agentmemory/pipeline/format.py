"""Format: a header, one line per entry, a footer."""

from __future__ import annotations

from collections.abc import Sequence

from agentmemory.pipeline.config import RecallConfig
from agentmemory.pipeline.entries import ContextEntry
from agentmemory.tokens import count_fixed, line_breaks_cost
from agentmemory.transcript import entry_line


def format_context(entries: Sequence[ContextEntry], config: RecallConfig) -> str:
    return formatted(entries, config)[0]


def formatted(entries: Sequence[ContextEntry], config: RecallConfig) -> tuple[str, int]:
    """The context's text and its exact token count, counted from each entry's stored
    count and what each line break adds (`tokens.line_break_cost`), never by reading the
    whole text again. Header and footer are counted as they are (short, fixed texts)."""
    if not entries:
        return "", 0
    parts = [entry_line(entry) for entry in entries]
    tokens = sum([entry.token_count for entry in entries])
    if config.header:
        parts.insert(0, config.header)
        tokens += count_fixed(config.header)
    if config.footer:
        parts.append(config.footer)
        tokens += count_fixed(config.footer)
    tokens += line_breaks_cost(parts)
    return "\n".join(parts), tokens
