"""Module-level functions that CallableSummarizer imports by dotted path in the tests."""

from __future__ import annotations

import os

from agentmemory.summarizers.base import ChatMessage
from agentmemory.transcript import TRANSCRIPT_CLOSE, TRANSCRIPT_OPEN

#: Every prompt :func:`count_lines` received, so a test can read what was handed over.
received: list[list[ChatMessage]] = []


def count_lines(messages: list[ChatMessage]) -> str:
    """A stand-in for the user's own LLM call: says how many transcript lines it read."""
    received.append(messages)
    lines = [
        line
        for line in messages[-1]["content"].splitlines()
        if line not in (TRANSCRIPT_OPEN, TRANSCRIPT_CLOSE)
    ]
    return f"{len(lines)} messages condensed."


def returns_none(messages: list[ChatMessage]) -> None:
    """A broken function: it forgets to return the text."""
    del messages


def kills_its_process(messages: list[ChatMessage]) -> str:
    """A poison fold: the process dies in the call, as on out-of-memory or a segfault."""
    del messages
    os._exit(1)
