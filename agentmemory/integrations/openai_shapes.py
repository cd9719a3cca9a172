"""The OpenAI message shapes, to and from what a thread stores.

A recalled context becomes Chat Completions messages (``chat_messages``) or Responses
API input items (``response_input``). A summary is a ``system`` message at its place in
the context: first, before the verbatim turns it precedes, its text beginning with the
authored ``[summary of earlier turns`` label. The recall header and footer belong to
the text form only and are not sent here.

``stored_item`` and ``messages_from_items`` go the other way, from Responses items (what
the Agents SDK keeps) to messages for ``services.append``. The plain tool loop is
`agentmemory.integrations.openai_loop`, importable from here: ``chat_turn`` runs one
turn with the official client you pass it, ``achat_turn`` the same turn with the async
client in an event loop, both under the thread's ``prompt_cache_key``. Nothing here
imports ``openai``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentmemory.exceptions import InvalidMessageError
from agentmemory.integrations.openai_loop import (
    PROMPT_CACHE_KEY,
    ToolLoopError,
    achat_turn,
    chat_turn,
    prompt_cache_key,
    reply_message,
)
from agentmemory.integrations.openai_messages import (
    SUMMARY_PLACES,
    chat_messages,
    input_items,
    response_input,
    summary_instructions,
)
from agentmemory.shapes import ITEM_FIELDS, as_mapping, flat_message

__all__ = [
    "PROMPT_CACHE_KEY",
    "ITEM_KEY",
    "STORED_ITEM_TYPES",
    "SUMMARY_PLACES",
    "ToolLoopError",
    "achat_turn",
    "chat_messages",
    "chat_turn",
    "input_items",
    "messages_from_items",
    "prompt_cache_key",
    "reply_message",
    "response_input",
    "stored_item",
    "summary_instructions",
]

#: The key of an entry's metadata that keeps the Responses item it was stored from, so
#: that the item comes back exactly as it went in while it is verbatim in the context.
ITEM_KEY = "openai_item"

#: The Responses item types ``stored_item`` stores (the Agents SDK session's rule); any
#: other type (reasoning, hosted tool calls) is left out there. ``services.append``
#: itself also takes a reasoning item with text (see `agentmemory.shapes`).
STORED_ITEM_TYPES = frozenset({"message", "function_call", "function_call_output"})


# ---------------------------------------------------------------- Responses items in


def stored_item(item: Any, index: int) -> dict[str, Any] | None:
    """The message to append for one Responses input item, or None for a type not stored.

    The item is read by `agentmemory.shapes.flat_message` and kept whole in the entry's
    metadata under ``ITEM_KEY``. A message item without a ``type``
    (``{"role": "user", "content": "..."}``) is a message. A mapping with neither raises
    ``InvalidMessageError``.
    """
    item = as_mapping(item)
    if not isinstance(item, Mapping):
        raise InvalidMessageError(f"item {index}: must be a mapping.", field="item",
                                  index=index)
    kind = item.get("type", "message" if "role" in item else None)
    if kind is None:
        raise InvalidMessageError(f"item {index}: needs a type or a role.", field="type",
                                  index=index)
    if not isinstance(kind, str) or kind not in STORED_ITEM_TYPES:
        return None
    # The whole item is kept, so only the fields stored in columns are read here: a
    # field the SDK adds to its items is not refused.
    mapped = {name: item[name] for name in ITEM_FIELDS[kind] & set(item)}
    message = flat_message({**mapped, "type": kind}, index)
    message["metadata"] = {ITEM_KEY: dict(item)}
    return message


def messages_from_items(items: Sequence[Any]) -> list[dict[str, Any]]:
    """The messages to append for Responses input items, in order (see ``stored_item``)."""
    return [m for index, item in enumerate(items) if (m := stored_item(item, index))]
