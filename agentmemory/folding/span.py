"""A span as the fold engine sees it, whoever folds it: what to show, how to key it,
how to label and measure what comes back."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from agentmemory.tokens import count_tokens
from agentmemory.transcript import MessageLike, fact_text


class SpanTokens:
    """A span's tokens, counted only as far as a question needs: a window's messages are
    counted as they are read, and a long span that clearly outweighs its summary is not
    counted to the end."""

    def __init__(self, counts: Iterable[int]) -> None:
        self._counts = iter(counts)
        self._total = 0

    def exceeds(self, limit: int) -> bool:
        """Whether the span holds more than ``limit`` tokens."""
        if self._total > limit:
            return True
        for count in self._counts:
            self._total += count
            if self._total > limit:
                return True
        return False

    @property
    def total(self) -> int:
        for count in self._counts:
            self._total += count
        return self._total


@dataclass(frozen=True)
class Span:
    """``items``: entries or window messages, oldest first (shown to the summarizer,
    flagged, counted in the ledger). ``key``: the exact span, for the latch and the
    ledger; ``start_key``: its first item, for backing off a span that keeps growing.
    ``label``: the authored first line, for a model name. ``is_summary``: an earlier
    summary, whose label the fact gate does not read (its numbers are ours). ``cost``:
    the tokens the summary takes where it replaces the span."""

    purpose: str
    items: Sequence[MessageLike]
    key: str
    start_key: str
    tokens: SpanTokens
    instruction: str
    label: Callable[[str], str]
    is_summary: Callable[[MessageLike], bool]
    cost: Callable[[str], int] = count_tokens

    def fact_texts(self) -> Iterable[str]:
        """What the fact gate reads: each item's words and tool-call arguments."""
        for item in self.items:
            yield fact_text(item, is_summary=self.is_summary(item))
