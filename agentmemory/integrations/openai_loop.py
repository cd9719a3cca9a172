"""A plain tool loop with the official ``openai`` client, and the key it sends.

``chat_turn`` runs one turn with an ``openai.OpenAI`` client and ``achat_turn`` the same
turn with an ``openai.AsyncOpenAI`` client in an event loop: append the user message,
recall, ask the model, append its reply, run its tool calls and ask again. Every request
carries the thread's ``prompt_cache_key``. Nothing here imports ``openai``; every name is
also importable from `agentmemory.integrations.openai_shapes`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from asgiref.sync import sync_to_async
from django.utils.crypto import salted_hmac

from agentmemory import services
from agentmemory import tools as memory
from agentmemory.exceptions import AgentMemoryError
from agentmemory.shapes import flat_message

if TYPE_CHECKING:
    from agentmemory.models import Thread

__all__ = [
    "PROMPT_CACHE_KEY",
    "ToolLoopError",
    "achat_turn",
    "chat_turn",
    "prompt_cache_key",
    "reply_message",
]


class ToolLoopError(AgentMemoryError):
    """``chat_turn`` or ``achat_turn`` could not finish the turn: tools without
    ``call_tool``, or the model still calling tools after ``max_rounds`` requests."""


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
    lead, options = _request(thread, instructions, tools, call_tool, memory_tools,
                             create_options)
    services.append(thread, {"role": "user", "content": user_message})
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
            _tool_result(call, _run_tool(thread, call.function.name, call.function.arguments,
                                         call_tool, memory_tools=memory_tools,
                                         budget_tokens=budget_tokens))
            for call in reply.tool_calls
        ])
    raise _still_calling(max_rounds)


async def achat_turn(
    client: Any,
    thread: Thread,
    user_message: str,
    *,
    model: str,
    budget_tokens: int,
    instructions: str = "",
    tools: Sequence[Mapping[str, Any]] = (),
    call_tool: Callable[[str, str], str | Awaitable[str]] | None = None,
    memory_tools: bool = False,
    max_rounds: int = 8,
    **create_options: Any,
) -> Any:
    """`chat_turn` for an ``openai.AsyncOpenAI`` client, in an event loop; the same turn,
    arguments and result.

    The thread is read and written through `services.aappend` and `services.arecall`,
    and the memory tools through `tools.run` on the thread Django's sync code shares,
    so no ORM call runs in the event loop. ``call_tool`` may be a coroutine function
    (awaited) or a plain function (called in the loop: a slow one blocks it).
    """
    lead, options = _request(thread, instructions, tools, call_tool, memory_tools,
                             create_options)
    await services.aappend(thread, {"role": "user", "content": user_message})
    for _ in range(max_rounds):
        context = await services.arecall(thread, budget_tokens)
        completion = await client.chat.completions.create(
            model=model, messages=lead + context.as_chat_messages(), **options
        )
        reply = completion.choices[0].message
        await services.aappend(thread, reply_message(reply))
        if not reply.tool_calls:
            return reply
        await services.aappend(thread, [
            _tool_result(call, await _arun_tool(thread, call.function.name,
                                                call.function.arguments, call_tool,
                                                memory_tools=memory_tools,
                                                budget_tokens=budget_tokens))
            for call in reply.tool_calls
        ])
    raise _still_calling(max_rounds)


def _request(
    thread: Thread, instructions: str, tools: Sequence[Mapping[str, Any]],
    call_tool: Callable[..., Any] | None, memory_tools: bool, create_options: Mapping[str, Any],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The turn's leading messages and the options of every ``create``; raises before
    anything is written when tools have nothing to run them."""
    if tools and call_tool is None:
        raise ToolLoopError("The turn was given tools without call_tool to run them.")
    offered = [*tools, *(memory.chat_tools() if memory_tools else [])]
    options = dict(create_options)
    if not _names_cache_key(options):
        options[PROMPT_CACHE_KEY] = prompt_cache_key(thread)
    if offered:
        options["tools"] = offered
    lead = [{"role": "system", "content": instructions}] if instructions else []
    return lead, options


def _tool_result(call: Any, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call.id, "tool_name": call.function.name,
            "content": content}


def _still_calling(max_rounds: int) -> ToolLoopError:
    return ToolLoopError(
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
        raise ToolLoopError(f"The model called the tool {name!r} and the turn has no "
                            "call_tool.")
    return call_tool(name, arguments)


async def _arun_tool(
    thread: Thread, name: str, arguments: str,
    call_tool: Callable[[str, str], str | Awaitable[str]] | None,
    *, memory_tools: bool, budget_tokens: int,
) -> str:
    if call_tool is None or (memory_tools and name in memory.MEMORY_TOOL_NAMES_OFFERED):
        # The memory tools read the database: `_run_tool` runs them (or refuses the call)
        # off the event loop.
        return await sync_to_async(_run_tool, thread_sensitive=True)(
            thread, name, arguments, None, memory_tools=memory_tools,
            budget_tokens=budget_tokens,
        )
    result = call_tool(name, arguments)
    return await result if inspect.isawaitable(result) else result
