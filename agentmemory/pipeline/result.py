"""What a recall returns: the context's messages (`RecalledMessage`) and the result with
why it looks the way it does (`RecallResult`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agentmemory.integrations.openai_messages import (
    chat_messages,
    response_input,
    summary_instructions,
)
from agentmemory.pipeline.entries import ContextEntry
from agentmemory.trust.quarantine import strip_invisible


@dataclass(frozen=True)
class RecalledMessage:
    id: int
    kind: str
    role: str
    content: str
    turn: int
    tokens: int
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    tool_name: str = ""
    tool_call_id: str = ""

    @classmethod
    def of(cls, entry: ContextEntry) -> RecalledMessage:
        return cls.each_of([entry])[0]

    @classmethod
    def each_of(cls, entries: Iterable[ContextEntry]) -> list[RecalledMessage]:
        """One for each entry, in order: a recall builds one per recalled entry."""
        built = []
        new = object.__new__
        for entry in entries:
            # Filled as the generated __init__ would, without its per-field
            # object.__setattr__ (a frozen dataclass's), one key at a time (no keyword
            # dict built per message).
            message = new(cls)
            values = message.__dict__
            values["id"] = entry.id
            values["kind"] = entry.kind
            values["role"] = entry.role
            # What the model is given never carries characters a reviewer cannot see;
            # the stored original keeps them, byte for byte.
            values["content"] = strip_invisible(entry.content)
            values["turn"] = entry.turn
            values["tokens"] = entry.token_count
            values["tool_calls"] = list(entry.tool_calls) if entry.tool_calls else []
            values["tool_name"] = entry.tool_name
            values["tool_call_id"] = entry.tool_call_id
            built.append(message)
        return built


@dataclass(frozen=True)
class RecallResult:
    """The context one recall produced, and why it looks the way it does.

    ``omitted`` counts the visible entries of the thread the context left out, up to
    `OMITTED_COUNT_LIMIT` (0 when every earlier original is verbatim in it or stood for
    by a summary in it; a longer backlog is not read to its end), and
    ``omitted_reason`` says why: ``over-budget``, ``fold-pending`` (background mode: a
    fold for this room is on its way), ``max-entries``, ``decayed``,
    ``unpaired-tool-message``, ``newest-turn-too-large`` or ``below-minimum-tokens``.
    """

    messages: list[RecalledMessage]
    text: str
    tokens: int
    summaries_used: list[int]
    decline: str | None
    folded_summary_id: int | None
    loaded_count: int
    budget_decline: str | None = None
    receipt_id: int | None = None
    omitted: int = 0
    omitted_reason: str | None = None

    def as_chat_messages(
        self, *, summaries: str = "message", system: str = ""
    ) -> list[dict[str, Any]]:
        """The context as Chat Completions messages; a summary is a leading ``system``
        message, or with ``summaries="instructions"`` part of one leading ``system``
        message after ``system`` (see `agentmemory.integrations.openai_messages`)."""
        return chat_messages(self.messages, summaries=summaries, system=system)

    def as_response_input(self, *, summaries: str = "message") -> list[dict[str, Any]]:
        """The context as Responses API input items; a summary is a leading ``system``
        message item, or left out with ``summaries="instructions"`` (then pass
        `instructions` as the request's ``instructions``)."""
        return response_input(self.messages, summaries=summaries)

    def instructions(self, system: str = "") -> str:
        """``system``, then the context's summaries, for ``summaries="instructions"``."""
        return summary_instructions(self.messages, system)
