"""The value a context load builds for each message row (`ContextMessage`) instead of a
model instance, and what the read-only stages take (`ContextEntry`: either).

A recall's context path (`load.load_context`, then budget, format, the receipt and
`RecalledMessage`) only reads a message's stored values: a plain object with slots,
without what a `MemoryEntry` instance needs built (its `ModelState`, the instance dict),
once per row of every recall (bench/floor.py measures the recall against reading its
rows). Summaries stay model instances: they are few, and their coverage and signature
are checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from agentmemory.models import MemoryEntry

#: What a context reads of a message (`plan`, `budget`, `format`, `RecalledMessage`):
#: a `ContextMessage`'s attributes.
MESSAGE_FIELDS = ("id", "thread_id", "kind", "role", "content", "tool_calls", "tool_name",
                  "tool_call_id", "turn", "position", "token_count")


class ContextMessage:
    """A stored message's values as a context load read them (`MESSAGE_FIELDS`): no
    model instance, so nothing it does not hold can be read from it, and it saves
    nothing. ``MemoryEntry.objects.get(pk=message.pk)`` is the row."""

    __slots__ = MESSAGE_FIELDS
    id: int
    thread_id: int
    kind: str
    role: str
    content: str
    tool_calls: Any
    tool_name: str
    tool_call_id: str
    turn: int
    position: int
    token_count: int

    #: A context load reads summaries as `MemoryEntry` instances.
    is_summary = False

    @property
    def pk(self) -> int:
        return self.id

    def __repr__(self) -> str:
        return f"<ContextMessage turn {self.turn} {self.role} #{self.id}>"


def context_messages(rows: Iterable[Sequence[Any]]) -> list[ContextMessage]:
    """A `ContextMessage` for each row of `MESSAGE_FIELDS` values, in that order."""
    new = ContextMessage.__new__
    built = []
    for row in rows:
        message = new(ContextMessage)
        (message.id, message.thread_id, message.kind, message.role, message.content,
         message.tool_calls, message.tool_name, message.tool_call_id, message.turn,
         message.position, message.token_count) = row
        built.append(message)
    return built

#: An entry as the context stages read it: a model instance, or a message's values.
ContextEntry = MemoryEntry | ContextMessage
#: One kind of entry through a stage: what goes in comes out (`blocks.blocks_of`).
Entry = TypeVar("Entry", bound=ContextEntry)
