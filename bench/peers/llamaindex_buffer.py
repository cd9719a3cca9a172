"""LlamaIndex: ``ChatSummaryMemoryBuffer``, the chat memory that summarizes what overflows.

The summarizer is LlamaIndex's own OpenAI LLM class aimed at the loopback server; the
tokenizer is the benchmark's o200k_base encoding (LlamaIndex counts message text only).
"""

from __future__ import annotations

from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory import ChatSummaryMemoryBuffer
from llama_index.llms.openai import OpenAI

from bench.peers import counting

COMPONENT = "`llama_index.core.memory.ChatSummaryMemoryBuffer`"
PACKAGES = ("llama-index-core", "llama-index-llms-openai")
ORIGINALS = "overwritten in the chat store by the summary"
STUB_KEY = "sk-agentmemory-bench-loopback"


def to_llamaindex(message: dict[str, Any], index: int) -> ChatMessage:
    extra: dict[str, Any] = {"bench_id": index}
    if message.get("tool_calls"):
        extra["tool_calls"] = message["tool_calls"]
    if message["role"] == "tool":
        extra["tool_call_id"] = message["tool_call_id"]
        extra["name"] = message.get("tool_name", "")
    return ChatMessage(role=MessageRole(message["role"]), content=message["content"],
                       additional_kwargs=extra)


def to_dict(message: ChatMessage) -> dict[str, Any]:
    role = message.role.value
    extra = message.additional_kwargs
    out: dict[str, Any] = {"role": role, "content": message.content or ""}
    if role == "assistant":
        out["tool_calls"] = extra.get("tool_calls") or []
    if role == "tool":
        out["tool_call_id"] = extra.get("tool_call_id", "")
        out["tool_name"] = extra.get("name", "")
    return out


class Memory:
    def __init__(self, *, base_url: str, budget: int) -> None:
        llm = OpenAI(model="gpt-4o-mini", api_base=base_url, api_key=STUB_KEY,
                     temperature=0, max_retries=0, timeout=10)
        self.buffer = ChatSummaryMemoryBuffer.from_defaults(
            llm=llm, token_limit=budget, tokenizer_fn=counting.encode,
        )
        self.settings = f"token_limit={budget}"
        self.added = 0

    def add(self, message: dict[str, Any]) -> None:
        self.buffer.put(to_llamaindex(message, self.added))
        self.added += 1

    def context(self) -> list[dict[str, Any]]:
        return [to_dict(message) for message in self.buffer.get()]

    def originals_kept(self) -> int:
        stored = self.buffer.get_all()
        return sum(1 for message in stored if "bench_id" in message.additional_kwargs)
