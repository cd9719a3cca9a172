"""The OpenAI Agents SDK: ``SQLiteSession``, the session a ``Runner`` reads and writes.

Items are added in the Responses input shape the Runner stores (messages,
``function_call`` and ``function_call_output`` items). The session never summarizes:
the Runner sends ``get_items()`` (every item, unless ``SessionSettings.limit`` caps
them) with each turn. Its compacting wrapper, ``OpenAIResponsesCompactionSession``,
calls the Responses API's server-side ``responses.compact``, which the loopback stub
does not serve, so it is not run. The SDK is the project's ``agents`` extra, so this
adapter runs in the project's interpreter.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agents.memory import SQLiteSession

COMPONENT = "`agents.memory.SQLiteSession`"
PACKAGES = ("openai-agents",)


def to_items(message: dict[str, Any]) -> list[dict[str, Any]]:
    if message["role"] == "tool":
        return [{"type": "function_call_output", "call_id": message["tool_call_id"],
                 "output": message["content"]}]
    items: list[dict[str, Any]] = []
    if message["content"]:
        items.append({"role": message["role"], "content": message["content"]})
    items += [{"type": "function_call", "call_id": call["id"], "name": call["name"],
               "arguments": call["arguments"]} for call in message.get("tool_calls") or []]
    return items


def text_of(item: dict[str, Any]) -> str:
    if item.get("type") == "function_call_output":
        return str(item.get("output", ""))
    if item.get("type") == "function_call":
        return f"{item.get('name')}({item.get('arguments')})"
    content = item.get("content", "")
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


class Memory:
    def __init__(self, *, base_url: str, budget: int) -> None:
        del base_url, budget  # nothing is summarized, and nothing is bounded
        self.session = SQLiteSession("bench-recovery")
        self.settings = "in memory, no `SessionSettings.limit` (the default)"
        self.loop = asyncio.new_event_loop()

    def add(self, message: dict[str, Any]) -> None:
        self.loop.run_until_complete(self.session.add_items(to_items(message)))

    def items(self) -> list[dict[str, Any]]:
        return list(self.loop.run_until_complete(self.session.get_items()))

    def context(self) -> list[dict[str, Any]]:
        """What the Runner would send: every item, as role and content."""
        out = []
        for item in self.items():
            role = item.get("role") or ("tool" if item.get("type") == "function_call_output"
                                        else "assistant")
            out.append({"role": role, "content": text_of(item)})
        return out

    def held(self) -> list[str]:
        return [text_of(item) for item in self.items()]
