"""Format: a header, one line per entry, a footer."""

from __future__ import annotations

from agentmemory.models import MemoryEntry
from agentmemory.pipeline.config import RecallConfig
from agentmemory.transcript import render_message


def entry_line(entry: MemoryEntry) -> str:
    """How one entry reads in the context; its stored token count is of this text."""
    return entry.content if entry.is_summary else render_message(entry)


def format_context(entries: list[MemoryEntry], config: RecallConfig) -> str:
    if not entries:
        return ""
    parts = [config.header] if config.header else []
    parts.extend(entry_line(entry) for entry in entries)
    if config.footer:
        parts.append(config.footer)
    return "\n".join(parts)
