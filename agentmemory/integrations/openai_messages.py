"""A recalled context as OpenAI messages: Chat Completions messages (``chat_messages``)
or Responses API input items (``response_input``), plain dictionaries.

`agentmemory.integrations.openai_shapes` re-exports these; they live apart from it
because a `RecallResult` converts itself with them, and ``openai_shapes.chat_turn``
calls recall.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentmemory.pipeline.recall import RecalledMessage


def _arguments(call: Mapping[str, Any]) -> str:
    arguments = call.get("arguments", "")
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def chat_messages(messages: Iterable[RecalledMessage]) -> list[dict[str, Any]]:
    """Chat Completions messages, in order; tool calls in OpenAI's nested form."""
    shaped: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            shaped.append(
                {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
            )
        elif message.role == "assistant" and message.tool_calls:
            shaped.append({
                "role": "assistant",
                # The API's own replies carry null content beside tool calls.
                "content": message.content or None,
                "tool_calls": [
                    {
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": _arguments(call)},
                    }
                    for call in message.tool_calls
                ],
            })
        else:
            shaped.append({"role": message.role, "content": message.content})
    return shaped


def input_items(message: RecalledMessage) -> list[dict[str, Any]]:
    """One message as Responses input items: a message, then one item per tool call."""
    if message.role == "tool":
        return [{"type": "function_call_output", "call_id": message.tool_call_id,
                 "output": message.content}]
    items: list[dict[str, Any]] = []
    if message.content:
        items.append({"type": "message", "role": message.role, "content": message.content})
    items.extend(
        {"type": "function_call", "call_id": call["id"], "name": call["name"],
         "arguments": _arguments(call)}
        for call in message.tool_calls
    )
    return items


def response_input(messages: Iterable[RecalledMessage]) -> list[dict[str, Any]]:
    """Responses API input items, in order: ``message``, ``function_call``,
    ``function_call_output``."""
    return [item for message in messages for item in input_items(message)]
