"""The conversation's messages as LangChain messages and back, and the shared counter.

Used by the LangChain and langmem adapters (both speak ``langchain_core`` messages).
Every message carries an id (``m0``, ``m1``...) so an original can be recognised in
whatever the library keeps.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_openai import ChatOpenAI

from bench.peers import counting

STUB_KEY = "sk-agentmemory-bench-loopback"


def to_langchain(message: dict[str, Any], index: int) -> BaseMessage:
    ident = f"m{index}"
    if message["role"] == "user":
        return HumanMessage(content=message["content"], id=ident)
    if message["role"] == "tool":
        return ToolMessage(content=message["content"], tool_call_id=message["tool_call_id"],
                           name=message.get("tool_name"), id=ident)
    calls = [{"name": call["name"], "args": json.loads(call["arguments"]), "id": call["id"],
              "type": "tool_call"} for call in message.get("tool_calls") or []]
    return AIMessage(content=message["content"], tool_calls=calls, id=ident)


def to_dict(message: BaseMessage) -> dict[str, Any]:
    content = message.content if isinstance(message.content, str) else message.text
    if isinstance(message, HumanMessage):
        return {"role": "user", "content": content}
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": content}
    if isinstance(message, ToolMessage):
        return {"role": "tool", "content": content, "tool_call_id": message.tool_call_id,
                "tool_name": message.name or ""}
    calls = [{"id": call["id"], "name": call["name"], "arguments": json.dumps(call["args"])}
             for call in getattr(message, "tool_calls", None) or []]
    return {"role": "assistant", "content": content, "tool_calls": calls}


def count(messages: Iterable[Any]) -> int:
    """The benchmark's counter (o200k_base over each message as conversation.render shows it)."""
    return sum(counting.message_tokens(to_dict(message)) for message in messages)


def stub_model(base_url: str) -> ChatOpenAI:
    """LangChain's own OpenAI chat model, aimed at the loopback server."""
    return ChatOpenAI(model="gpt-4o-mini", base_url=base_url, api_key=STUB_KEY,
                      temperature=0, max_retries=0, timeout=10)


def originals_in(messages: Iterable[BaseMessage]) -> int:
    return sum(1 for message in messages if (message.id or "").startswith("m")
               and message.id[1:].isdigit())
