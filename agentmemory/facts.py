"""Moved to `agentmemory.trust.facts`. Kept only for admin.py until it imports the new
path; delete it then."""

from agentmemory.trust.facts import FACT_NOTE_OPENING, split_fact_note

__all__ = ["FACT_NOTE_OPENING", "split_fact_note"]
