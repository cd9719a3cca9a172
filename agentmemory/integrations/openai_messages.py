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


_SUMMARY = "summary"  # EntryKind.SUMMARY, without importing the models here


def _arguments(call: Mapping[str, Any]) -> str:
    arguments = call.get("arguments", "")
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


#: Where a context's summaries go: ``message``, each a ``system`` message at its place
#: (first, before the verbatim turns); ``instructions``, appended to the instructions
#: (the system prompt) instead, for a provider or SDK that takes instructions in one
#: place and refuses a ``system`` message among the conversation's.
SUMMARY_PLACES = ("message", "instructions")


def _place(summaries: str) -> str:
    if summaries not in SUMMARY_PLACES:
        raise ValueError(f"summaries must be 'message' or 'instructions', got {summaries!r}.")
    return summaries


def summary_instructions(messages: Iterable[RecalledMessage], system: str = "") -> str:
    """``system`` (the agent's own instructions, if any), then each summary of the
    context as it is stored (its label first), a blank line apart: the instructions
    for ``summaries="instructions"``."""
    return "\n\n".join([*([system] if system else []),
                         *(m.content for m in messages if m.kind == _SUMMARY)])


def chat_messages(
    messages: Iterable[RecalledMessage], *, summaries: str = "message", system: str = ""
) -> list[dict[str, Any]]:
    """Chat Completions messages, in order; tool calls in OpenAI's nested form.

    ``system``, when given, is a leading ``system`` message; with
    ``summaries="instructions"`` the summaries are appended to it there
    (`summary_instructions`) rather than sent as messages of their own."""
    messages = list(messages)
    lead = system
    if _place(summaries) == "instructions":
        lead = summary_instructions(messages, system)
        messages = [m for m in messages if m.kind != _SUMMARY]
    shaped: list[dict[str, Any]] = [{"role": "system", "content": lead}] if lead else []
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


def response_input(
    messages: Iterable[RecalledMessage], *, summaries: str = "message"
) -> list[dict[str, Any]]:
    """Responses API input items, in order: ``message``, ``function_call``,
    ``function_call_output``. With ``summaries="instructions"`` the summaries are left
    out: pass `summary_instructions` as the request's ``instructions``."""
    if _place(summaries) == "instructions":
        messages = [m for m in messages if m.kind != _SUMMARY]
    return [item for message in messages for item in input_items(message)]
