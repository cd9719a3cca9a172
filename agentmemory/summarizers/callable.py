"""A summarizer that hands the composed prompt to your own function."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.utils.module_loading import import_string

from agentmemory.exceptions import AgentMemoryConfigurationError, SummarizerError
from agentmemory.summarizers.base import BaseSummarizer, ChatMessage, SummaryResult


class CallableSummarizer(BaseSummarizer):
    """``OPTIONS = {"FUNCTION": "myproject.llm.summarize"}``: ``f(messages) -> str``.

    ``messages`` is the library's prompt (instruction, then the delimited transcript).
    The function makes its own call, so token usage is recorded as unknown. ``MODEL``
    still names what the function calls, for the ledger.
    """

    option_names = frozenset({"FUNCTION"})

    def __init__(self, *, model: str, options: dict[str, Any] | None = None) -> None:
        super().__init__(model=model, options=options)
        path = self.options.get("FUNCTION")
        if not isinstance(path, str) or not path:
            raise AgentMemoryConfigurationError(
                "AGENTMEMORY['SUMMARIZER']['OPTIONS']['FUNCTION'] must be the dotted path of "
                "a function f(messages) -> str."
            )
        try:
            self.function: Callable[[list[ChatMessage]], str] = import_string(path)
        except ImportError as exc:
            raise AgentMemoryConfigurationError(
                f"AGENTMEMORY['SUMMARIZER']['OPTIONS']['FUNCTION'] = {path!r} cannot be "
                f"imported: {exc}"
            ) from exc

    def complete(self, prompt: list[ChatMessage]) -> SummaryResult:
        text = self.function(prompt)
        if not isinstance(text, str):
            raise SummarizerError(
                f"{self.options['FUNCTION']} returned {type(text).__name__}, not str."
            )
        return SummaryResult(text=text)
