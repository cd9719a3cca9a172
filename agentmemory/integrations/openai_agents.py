"""An OpenAI Agents SDK session backed by a Thread (``pip install "django-agentmemory[agents]"``).

``ThreadSession`` implements the SDK's ``agents.memory.Session`` protocol. The SDK's
own sessions hand back every item; this one hands back the thread's recalled context:
verbatim items while they fit the budget, and a summary (a ``system`` message item, first)
in place of the oldest ones once they are folded. Items of a type a thread does not store
(see `openai_shapes.STORED_ITEM_TYPES`) are left out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentmemory.extras import require

# Without the extra, importing this module raises MissingExtraError naming it.
require("The Agents SDK session (agentmemory.integrations.openai_agents)", "agents")

from agents.memory.session_settings import (  # noqa: E402
    SessionSettings,
    resolve_session_limit,
)
from asgiref.sync import sync_to_async  # noqa: E402

from agentmemory import services  # noqa: E402
from agentmemory.integrations.openai_shapes import (  # noqa: E402
    ITEM_KEY,
    input_items,
    messages_from_items,
    prompt_cache_key,
    stored_item,
)
from agentmemory.models import EntryKind, MemoryEntry, Thread  # noqa: E402

if TYPE_CHECKING:
    from agentmemory.services import RecalledMessage


class ThreadSession:
    """The Agents SDK's ``Session`` over ``thread``, recalling within ``budget_tokens``.

    ``recall_options`` are passed to every `services.recall` (``mode="inline"``,
    ``preserve_recent=4``...). The Django ORM is synchronous: each method runs it through
    ``sync_to_async``, so the session works inside the SDK's event loop.
    """

    def __init__(
        self,
        thread: Thread,
        *,
        budget_tokens: int,
        session_settings: SessionSettings | None = None,
        **recall_options: Any,
    ) -> None:
        self.thread = thread
        self.session_id = str(thread.pk)
        self.session_settings = session_settings or SessionSettings()
        self.budget_tokens = budget_tokens
        self.recall_options = recall_options

    @property
    def prompt_cache_key(self) -> str:
        """The thread's ``prompt_cache_key`` (`openai_shapes.prompt_cache_key`), the one
        ``chat_turn`` sends. A session cannot set the model's parameters: pass it as
        ``ModelSettings(extra_args={"prompt_cache_key": session.prompt_cache_key})``.
        Without it the SDK derives a key of its own from ``session_id``, and only for
        OpenAI's own endpoint."""
        return prompt_cache_key(self.thread)

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The recalled context as Responses input items, oldest first; with ``limit``
        (or ``session_settings.limit``), its newest ``limit`` items."""
        limit = resolve_session_limit(limit, self.session_settings)
        items = await sync_to_async(self._context_items)()
        return items[-limit:] if limit is not None and limit > 0 else items

    async def add_items(self, items: list[Any]) -> None:
        """Append the items to the thread (one entry each), in one transaction."""
        messages = messages_from_items(items)
        if messages:
            await sync_to_async(services.append)(self.thread, messages)

    async def pop_item(self) -> Any | None:
        """Erase the thread's newest message (`services.erase_entry`) and return it as an
        item; None when the thread has none."""
        return await sync_to_async(self._pop)()

    async def clear_session(self) -> None:
        """Erase the whole conversation with `services.clear_thread`: the originals, the
        summaries and window spans made from them (retained originals included), the
        receipts and latches. The thread and its policy stay, empty."""
        await sync_to_async(services.clear_thread)(self.thread)

    def _context_items(self) -> list[Any]:
        context = services.recall(self.thread, self.budget_tokens, **self.recall_options)
        metadata = dict(
            MemoryEntry.objects.filter(pk__in=[m.id for m in context.messages])
            .values_list("pk", "metadata")
        )
        items: list[Any] = []
        for message in context.messages:
            items.extend(_items_of(message, metadata.get(message.id) or {}))
        return items

    def _pop(self) -> Any | None:
        entry = (
            MemoryEntry.objects.filter(thread=self.thread, kind=EntryKind.MESSAGE)
            .live().newest_first().first()
        )
        if entry is None:
            return None
        popped = _items_of(services.RecalledMessage.of(entry), entry.metadata)
        services.erase_entry(entry)
        return popped[-1] if popped else None


def _items_of(message: RecalledMessage, metadata: dict[str, Any]) -> list[Any]:
    """The item an entry was stored from, as it came; else the entry in the Responses shape.

    The stored item is given back only while its text is the text recall gives the model
    (the quarantine strips invisible characters from what a model is shown).
    """
    item = metadata.get(ITEM_KEY) if message.kind == EntryKind.MESSAGE else None
    if isinstance(item, dict):
        again = stored_item(item, 0)
        if again is not None and again["content"] == message.content:
            return [item]
    return input_items(message)
