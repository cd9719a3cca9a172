"""The OpenAI message shapes, to and from what a thread stores.

A recalled context becomes Chat Completions messages (``chat_messages``) or Responses
API input items (``response_input``). A summary is a ``system`` message at its place in
the context: first, before the verbatim turns it precedes, its text beginning with the
authored ``[summary of earlier turns`` label. The recall header and footer belong to
the text form only and are not sent here.

``stored_item`` and ``messages_from_items`` go the other way, from Responses items (what
the Agents SDK keeps) to messages for ``services.append``; ``chat_turn`` runs one turn
of a plain tool loop with the official client you pass it, under the thread's
``prompt_cache_key``. Nothing here imports ``openai``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from django.utils.crypto import salted_hmac

from agentmemory import services
from agentmemory import tools as memory
from agentmemory.exceptions import AgentMemoryError, InvalidMessageError
from agentmemory.integrations.openai_messages import (
    SUMMARY_PLACES,
    chat_messages,
    input_items,
    response_input,
    summary_instructions,
)
from agentmemory.shapes import ITEM_FIELDS, as_mapping, flat_message

if TYPE_CHECKING:
    from agentmemory.models import Thread

__all__ = [
    "ITEM_KEY",
    "STORED_ITEM_TYPES",
    "SUMMARY_PLACES",
    "ToolLoopError",
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


class ToolLoopError(AgentMemoryError):
    """``chat_turn`` could not finish the turn: tools without ``call_tool``, or the model
    still calling tools after ``max_rounds`` requests."""


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


# ---------------------------------------------------------------- the provider's cache

#: The request parameter OpenAI routes its prompt cache by.
PROMPT_CACHE_KEY = "prompt_cache_key"


def prompt_cache_key(thread: Thread) -> str:
    """The thread's ``prompt_cache_key``: the same for every request of the thread, another
    for every other thread.

    A keyed hash of the thread's id (Django's ``salted_hmac``, so under ``SECRET_KEY``),
    not the id itself: it names no user data (no owner, title or client key), tells the
    provider neither the id nor how many threads there are, and two deployments billed
    to one provider account (staging and production, two projects) never share a key
    for their thread 1. It changes only with ``SECRET_KEY``, which costs each thread one
    cold cache.
    """
    digest = salted_hmac("agentmemory.prompt_cache_key", str(thread.pk), algorithm="sha256")
    return f"agentmemory-thread-{digest.hexdigest()[:32]}"


def _names_cache_key(options: Mapping[str, Any]) -> bool:
    """True when the caller chose the key themselves, as a parameter or in ``extra_body``."""
    extra_body = options.get("extra_body")
    return PROMPT_CACHE_KEY in options or (
        isinstance(extra_body, Mapping) and PROMPT_CACHE_KEY in extra_body
    )


# ---------------------------------------------------------------- a plain loop


def reply_message(message: Any) -> dict[str, Any]:
    """The message to append for a ``ChatCompletionMessage`` the client returned."""
    flat: dict[str, Any] = flat_message(message, 0)
    return flat


def chat_turn(
    client: Any,
    thread: Thread,
    user_message: str,
    *,
    model: str,
    budget_tokens: int,
    instructions: str = "",
    tools: Sequence[Mapping[str, Any]] = (),
    call_tool: Callable[[str, str], str] | None = None,
    memory_tools: bool = False,
    max_rounds: int = 8,
    **create_options: Any,
) -> Any:
    """One turn of a chat loop with an ``openai.OpenAI`` client; returns the final
    ``ChatCompletionMessage``.

    Appends the user message, recalls the context within ``budget_tokens``, calls
    ``client.chat.completions.create`` with ``instructions`` as a leading system message
    (not stored), and appends the reply. While the reply calls tools, each call is run
    as ``call_tool(name, arguments_json)``, its result appended, and the model asked
    again, at most ``max_rounds`` requests (then ``ToolLoopError``). With
    ``memory_tools=True`` the model is also offered `agentmemory.tools` (``memory_search``,
    ``memory_expand``), and its calls of them are run by `tools.run` on this thread
    (each result at most a quarter of ``budget_tokens``), not by ``call_tool``; their
    results are stored as tool messages like any other.

    Every request carries ``prompt_cache_key=prompt_cache_key(thread)``, so the provider
    routes a thread's turns to the cache that holds their common prefix; a
    ``prompt_cache_key`` of the caller's (``openai.omit`` to send none), as a keyword or
    in ``extra_body``, is sent instead.
    """
    if tools and call_tool is None:
        raise ToolLoopError("chat_turn was given tools without call_tool to run them.")
    offered = [*tools, *(memory.chat_tools() if memory_tools else [])]
    services.append(thread, {"role": "user", "content": user_message})
    options = dict(create_options)
    if not _names_cache_key(options):
        options[PROMPT_CACHE_KEY] = prompt_cache_key(thread)
    if offered:
        options["tools"] = offered
    lead = [{"role": "system", "content": instructions}] if instructions else []
    for _ in range(max_rounds):
        context = services.recall(thread, budget_tokens)
        completion = client.chat.completions.create(
            model=model, messages=lead + context.as_chat_messages(), **options
        )
        reply = completion.choices[0].message
        services.append(thread, reply_message(reply))
        if not reply.tool_calls:
            return reply
        services.append(thread, [
            {"role": "tool", "tool_call_id": call.id, "tool_name": call.function.name,
             "content": _run_tool(thread, call.function.name, call.function.arguments,
                                  call_tool, memory_tools=memory_tools,
                                  budget_tokens=budget_tokens)}
            for call in reply.tool_calls
        ])
    raise ToolLoopError(
        f"The model still called tools after {max_rounds} rounds (max_rounds={max_rounds})."
    )


def _run_tool(
    thread: Thread, name: str, arguments: str, call_tool: Callable[[str, str], str] | None,
    *, memory_tools: bool, budget_tokens: int,
) -> str:
    if memory_tools and name in memory.MEMORY_TOOL_NAMES_OFFERED:
        # A quarter of the budget: the turn's calls and results must stay in its context.
        return memory.run(thread, name, arguments, max_tokens=budget_tokens // 4)
    if call_tool is None:
        raise ToolLoopError(f"The model called the tool {name!r} and chat_turn has no "
                            "call_tool.")
    return call_tool(name, arguments)
