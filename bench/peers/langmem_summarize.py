"""langmem: ``summarize_messages``, the running-summary function for LangGraph agents.

Used as its docstring shows: the caller keeps the full message list and the
``RunningSummary``, and sends the model what the function returns.
"""

from __future__ import annotations

from typing import Any

from langmem.short_term import summarize_messages

from bench.peers import lc

COMPONENT = "`langmem.short_term.summarize_messages`"
PACKAGES = ("langmem", "langchain-core", "langchain-openai", "langgraph")
ORIGINALS = "kept by the caller (the function is stateless); `RunningSummary` lists the ids"


class Memory:
    def __init__(self, *, base_url: str, budget: int) -> None:
        self.model = lc.stub_model(base_url)
        self.budget = budget
        self.settings = f"max_tokens={budget}, max_summary_tokens=256 (default)"
        self.messages: list[Any] = []
        self.running_summary = None

    def add(self, message: dict[str, Any]) -> None:
        self.messages.append(lc.to_langchain(message, len(self.messages)))

    def context(self) -> list[dict[str, Any]]:
        result = summarize_messages(
            self.messages,
            running_summary=self.running_summary,
            model=self.model,
            max_tokens=self.budget,
            token_counter=lc.count,
        )
        if result.running_summary:
            self.running_summary = result.running_summary
        return [lc.to_dict(message) for message in result.messages]

    def originals_kept(self) -> int:
        return lc.originals_in(self.messages)
