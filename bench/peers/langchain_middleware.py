"""LangChain 1.x: ``SummarizationMiddleware``, the agent middleware that summarizes history.

Its ``before_model`` hook runs before each model call; the state update it returns is
applied with LangGraph's ``add_messages`` reducer, exactly as ``create_agent`` does.
"""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import SummarizationMiddleware
from langgraph.graph.message import add_messages

from bench.peers import lc

COMPONENT = "`langchain.agents.middleware.SummarizationMiddleware`"
PACKAGES = ("langchain", "langchain-core", "langchain-openai", "langgraph")
ORIGINALS = "replaced in the agent state (`RemoveMessage(REMOVE_ALL_MESSAGES)`)"


class Memory:
    def __init__(self, *, base_url: str, budget: int, keep_tokens: int | None = None) -> None:
        """Keeps the newest 5 messages, or with ``keep_tokens`` the newest that many tokens."""
        keep = ("messages", 5) if keep_tokens is None else ("tokens", keep_tokens)
        self.middleware = SummarizationMiddleware(
            model=lc.stub_model(base_url),
            trigger=("tokens", budget),
            keep=keep,
            token_counter=lc.count,
        )
        self.settings = f"trigger=(\"tokens\", {budget}), keep=(\"{keep[0]}\", {keep[1]})"
        self.messages: list[Any] = []
        self.added = 0

    def add(self, message: dict[str, Any]) -> None:
        self.messages = add_messages(self.messages, [lc.to_langchain(message, self.added)])
        self.added += 1

    def context(self) -> list[dict[str, Any]]:
        update = self.middleware.before_model({"messages": self.messages}, None)
        if update:
            self.messages = add_messages(self.messages, update["messages"])
        return [lc.to_dict(message) for message in self.messages]

    def originals_kept(self) -> int:
        return lc.originals_in(self.messages)
