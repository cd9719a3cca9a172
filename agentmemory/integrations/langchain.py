"""A LangChain chat message history backed by a Thread
(``pip install "django-agentmemory[langchain]"``).

``ThreadChatMessageHistory`` is a ``langchain_core`` ``BaseChatMessageHistory``: use it
with ``RunnableWithMessageHistory`` like any other. ``messages`` is the thread's recalled
context: verbatim messages while they fit the budget, and a ``SystemMessage`` holding the
summary, first, in place of the oldest ones once they are folded. For an agent built
with ``langchain.agents.create_agent``, use `agentmemory.integrations.langchain_agents`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentmemory.extras import require

# Without the extra, importing this module raises MissingExtraError naming it.
require("The LangChain chat history (agentmemory.integrations.langchain)", "langchain_core")

from langchain_core.chat_history import BaseChatMessageHistory  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)

from agentmemory import services  # noqa: E402
from agentmemory.integrations.openai_shapes import prompt_cache_key  # noqa: E402
from agentmemory.models import EntryKind, MemoryEntry, Role, Thread  # noqa: E402
from agentmemory.services import RecalledMessage, RecallResult  # noqa: E402

#: The key of an entry's metadata that keeps the LangChain message it was stored from
#: (``messages_to_dict``), so that it comes back with its ids and metadata.
MESSAGE_KEY = "langchain_message"

_ROLES = {"human": Role.USER, "system": Role.SYSTEM, "ai": Role.ASSISTANT, "tool": Role.TOOL}


def _text(content: Any) -> str:
    """A message's text: its string content, or the text of its content blocks."""
    if isinstance(content, str):
        return content
    return "\n".join(
        block if isinstance(block, str) else str(block.get("text", ""))
        for block in content
        if isinstance(block, str) or (isinstance(block, dict) and block.get("type") == "text")
    )


def stored_message(message: BaseMessage) -> dict[str, Any]:
    """The message to append for a LangChain message (human, system, AI, tool); the
    original is kept in the entry's metadata under ``MESSAGE_KEY``. Another type (a
    function or chat message) raises ``InvalidMessageError`` from append."""
    [original] = messages_to_dict([message])
    stored: dict[str, Any] = {
        "role": _ROLES.get(message.type, message.type),
        "content": _text(message.content),
        "metadata": {MESSAGE_KEY: original},
    }
    if isinstance(message, AIMessage) and message.tool_calls:
        stored["tool_calls"] = [
            {"id": call["id"], "name": call["name"], "arguments": json.dumps(call["args"])}
            for call in message.tool_calls
        ]
    if isinstance(message, ToolMessage):
        stored["tool_call_id"] = message.tool_call_id
        stored["tool_name"] = message.name or ""
    return stored


def langchain_message(message: RecalledMessage, metadata: dict[str, Any]) -> BaseMessage:
    """The LangChain message an entry was stored from, while its text is the text recall
    gives the model; else the entry as a new LangChain message (a summary: SystemMessage)."""
    original = metadata.get(MESSAGE_KEY) if message.kind == EntryKind.MESSAGE else None
    if isinstance(original, dict):
        [again] = messages_from_dict([original])
        if _text(again.content) == message.content:
            return again
    if message.role == Role.USER:
        return HumanMessage(content=message.content)
    if message.role == Role.ASSISTANT:
        return AIMessage(content=message.content, tool_calls=[
            {"id": call["id"], "name": call["name"], "args": _args(call["arguments"]),
             "type": "tool_call"}
            for call in message.tool_calls
        ])
    if message.role == Role.TOOL:
        return ToolMessage(content=message.content,
                                     tool_call_id=message.tool_call_id,
                                     name=message.tool_name or None)
    return SystemMessage(content=message.content)


def recalled_messages(context: RecallResult) -> list[BaseMessage]:
    """A recalled context (`services.recall`) as LangChain messages, oldest first: each
    verbatim message as it was stored (`langchain_message`), a summary as a
    ``SystemMessage`` before the turns it precedes."""
    metadata = dict(
        MemoryEntry.objects.filter(pk__in=[m.id for m in context.messages])
        .values_list("pk", "metadata")
    )
    return [langchain_message(m, metadata.get(m.id) or {}) for m in context.messages]


def _args(arguments: Any) -> dict[str, Any]:
    """A tool call's arguments as LangChain's dict (stored as JSON text)."""
    if isinstance(arguments, dict):
        return arguments
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return {"arguments": arguments}
    return parsed if isinstance(parsed, dict) else {"arguments": parsed}


class ThreadChatMessageHistory(BaseChatMessageHistory):
    """LangChain's chat history over ``thread``, recalling within ``budget_tokens``.

    ``recall_options`` are passed to every `services.recall`. ``clear`` erases the
    conversation with `services.clear_thread` (the originals, the summaries and spans
    made from them, retained originals included); the thread itself stays, empty.
    """

    def __init__(self, thread: Thread, *, budget_tokens: int, **recall_options: Any) -> None:
        self.thread = thread
        self.budget_tokens = budget_tokens
        self.recall_options = recall_options

    @property
    def prompt_cache_key(self) -> str:
        """The thread's ``prompt_cache_key`` (`openai_shapes.prompt_cache_key`), the one
        ``chat_turn`` sends. A history does not call the model: bind it to the model for
        this thread, ``model.bind(prompt_cache_key=history.prompt_cache_key)``
        (``ChatOpenAI`` sends the keyword arguments it is bound or invoked with in the
        request)."""
        return prompt_cache_key(self.thread)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        return recalled_messages(
            services.recall(self.thread, self.budget_tokens, **self.recall_options))

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append the messages in one transaction; nothing is stored if one is invalid."""
        if messages:
            services.append(self.thread, [
                stored_message(message) for message in messages
            ])

    def clear(self) -> None:
        services.clear_thread(self.thread)
