"""Append: store messages in order, under the thread's row lock; `aappend` for async code."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.db import router, transaction
from django.utils import timezone

from agentmemory.conf import memory_settings
from agentmemory.exceptions import MessageConflictError, ThreadGoneError
from agentmemory.messages import check_tool_call_ids, clean_message
from agentmemory.models import EntryKind, MemoryEntry, Role, Thread
from agentmemory.pipeline.blocks import entry_cost
from agentmemory.pipeline.instances import instance_of
from agentmemory.services.background import fold_if_due, fold_ruled_out
from agentmemory.sql import (
    BIGINT,
    OWNED_READS,
    OwnedAppend,
    advance_counters,
    append_in_one_statement,
    append_owned_in_one_statement,
    can_append_in_one_statement,
    insert_entries,
    set_turn,
)
from agentmemory.tokens import count_tokens
from agentmemory.transcript import entry_line


def append(
    thread: Thread,
    messages: Any,
    *,
    now: datetime | None = None,
) -> list[MemoryEntry]:
    """Store one message or several, in order, and return the stored entries.

    A message is a mapping with ``role`` and ``content``, and optionally
    ``tool_calls`` (assistant: ``[{"id", "name", "arguments"}]``), ``tool_name`` and
    ``tool_call_id`` (tool), ``turn``, ``tier`` and ``metadata``; or an OpenAI Chat
    Completions message or Responses input item, as a dict or the SDK's pydantic object,
    stored by the rules of `agentmemory.shapes`. When ``turn`` is
    omitted, each user message opens a new turn and the others join the current one.
    Any invalid message raises `InvalidMessageError` and nothing is stored; one that
    conflicts with the thread (a turn before its current turn, a tool call id already
    used, a tool result for a call not stored before it, a call answered twice) raises
    its subclass `MessageConflictError` (`ToolCallIdError` names the id).
    """
    return _append_cleaned(thread, _cleaned(messages), now or timezone.now())


def _append_cleaned(thread: Thread, cleaned: list[dict[str, Any]], now: datetime
                    ) -> list[MemoryEntry]:
    ttl = thread.effective_ttl()
    entries = _entries(cleaned, thread, thread.effective_write_tier(),
                       now + ttl if ttl is not None else None, now)
    numbering = _Numbering.of(cleaned, entries)
    if _plain(cleaned) and can_append_in_one_statement(len(entries)):
        # Nothing to check under the lock: the counters and the rows in one round trip.
        counters = append_in_one_statement(thread.pk, entries, users=numbering.users,
                                           opens=numbering.opens, tokens=numbering.tokens,
                                           now=now)
        if counters is None:
            raise _gone(thread)
        position, turn, unfolded_tokens, fold_waits = counters
    else:
        fold_waits = False
        with transaction.atomic():
            position, turn, unfolded_tokens = _append_under_the_lock(
                thread, cleaned, entries, numbering, now=now)
    _appended(thread, position, turn, unfolded_tokens, fold_waits)
    return entries


def append_owned(
    owner: Any, thread_id: int, messages: Any, *, now: datetime | None = None,
) -> list[MemoryEntry] | None:
    """`append` to the thread ``thread_id`` if ``owner`` (a user) owns it; None, with
    nothing written, when it does not or no such thread is left. The same messages,
    rows, counters and errors as `append` (messages are checked before the thread is).

    Where `append` would write in one statement (plain messages on PostgreSQL, outside a
    transaction), the owner's check and the reads of the thread it takes are part of that
    statement (`sql.append_owned_in_one_statement`): the REST API's append is one round
    trip. Otherwise the thread is read first (`Thread.objects.owned_by`), then appended to.
    """
    cleaned = _cleaned(messages)
    now = now or timezone.now()
    if (isinstance(owner.pk, int) and thread_id in BIGINT and _plain(cleaned)
            and can_append_in_one_statement(len(cleaned))):
        # The thread's tier and ttl are applied by the statement: the settings' are sent.
        default_ttl = Thread.default_ttl()
        entries = _entries(cleaned, thread_id, "",
                           now + default_ttl if default_ttl is not None else None, now)
        numbering = _Numbering.of(cleaned, entries)
        found = append_owned_in_one_statement(
            owner.pk, thread_id, entries, users=numbering.users, opens=numbering.opens,
            tokens=numbering.tokens, now=now, tier=str(memory_settings.WRITE_TIER))
        if found is None:
            return None
        thread = _thread_read(owner.pk, thread_id, found)
        for entry in entries:
            entry.thread = thread
        _appended(thread, found.last_position, found.last_turn, found.unfolded_tokens,
                  found.fold_waits)
        return entries
    owned = Thread.objects.owned_by(owner).filter(pk=thread_id).first()
    return None if owned is None else _append_cleaned(owned, cleaned, now)


def _cleaned(messages: Any) -> list[dict[str, Any]]:
    single = isinstance(messages, Mapping) or hasattr(messages, "model_dump")
    batch = [messages] if single else list(messages)
    return [clean_message(message, index) for index, message in enumerate(batch)]


def _entries(
    cleaned: list[dict[str, Any]], thread: Thread | int, tier: str,
    expires_at: datetime | None, now: datetime,
) -> list[MemoryEntry]:
    """The rows to write to ``thread`` (or the thread of that id), without their turns
    and positions; an entry without a tier of its own takes ``tier``."""
    entries = []
    for message in cleaned:
        entry = MemoryEntry(
            kind=EntryKind.MESSAGE,
            role=message["role"],
            content=message["content"],
            tool_calls=message.get("tool_calls") or [],
            tool_name=message.get("tool_name", ""),
            tool_call_id=message.get("tool_call_id", ""),
            tier=message.get("tier") or tier,
            created_at=now,
            expires_at=expires_at,
            metadata=message.get("metadata") or {},
        )
        if isinstance(thread, Thread):
            entry.thread = thread
        else:
            entry.thread_id = thread
        entry.token_count = count_tokens(entry_line(entry))  # turn and position aside
        entries.append(entry)
    return entries


@dataclass(frozen=True)
class _Numbering:
    """How the counters move for a batch: ``users`` turns opened by its user messages
    (none with explicit turns), ``opens`` one more when the thread is at turn 0 and the
    batch does not open with a user message, ``tokens`` what it takes of a room; whether
    it gives ``explicit`` turns or holds ``tools`` messages (checked under the lock)."""

    explicit: bool
    tools: bool
    users: int
    opens: int
    tokens: int

    @classmethod
    def of(cls, cleaned: list[dict[str, Any]], entries: list[MemoryEntry]) -> _Numbering:
        explicit = _explicit(cleaned)
        return cls(
            explicit=explicit,
            tools=_tools(cleaned),
            users=0 if explicit else sum(m["role"] == Role.USER for m in cleaned),
            opens=int(not explicit and bool(cleaned) and cleaned[0]["role"] != Role.USER),
            tokens=sum(map(entry_cost, entries)),
        )


def _explicit(cleaned: list[dict[str, Any]]) -> bool:
    return any(message.get("turn") is not None for message in cleaned)


def _tools(cleaned: list[dict[str, Any]]) -> bool:
    return any(m["tool_calls"] or m["role"] == Role.TOOL for m in cleaned)


def _plain(cleaned: list[dict[str, Any]]) -> bool:
    """No explicit turn and no tool message: nothing to check under the lock."""
    return not (_explicit(cleaned) or _tools(cleaned))


def _thread_read(owner_id: int, thread_id: int, found: OwnedAppend) -> Thread:
    """The thread as the owned append's statement read it; its other fields load when
    asked for."""
    alias = router.db_for_write(Thread)
    names = ["id", "owner_id", "last_position", "last_turn", "unfolded_tokens",
             *OWNED_READS]
    values = [thread_id, owner_id, found.last_position, found.last_turn,
              found.unfolded_tokens, *(found.read[name] for name in OWNED_READS)]
    thread: Thread = instance_of(Thread, alias, names, values)
    return thread


def _appended(
    thread: Thread, position: int, turn: int, unfolded_tokens: int | None, fold_waits: bool,
) -> None:
    """After an append: the fold decision, unless the counters rule it out, and the
    thread's counters as the append left them."""
    # A fold queued, leased or parked when the statement held the row lock: the decision
    # would only say so (its tally reads the same state after the commit). The fold on
    # its way re-checks when it is done, and a parked one waits for the sweep.
    if memory_settings.RECALL_MODE == "background" and not fold_waits and not fold_ruled_out(
        thread, rows=position, tokens=unfolded_tokens
    ):
        # After the commit, outside the row lock: deciding reads the thread's history,
        # and appends to the thread queue on that lock.
        transaction.on_commit(lambda: fold_if_due(thread))
    thread.last_position, thread.last_turn = position, turn
    thread.unfolded_tokens = unfolded_tokens


def _gone(thread: Thread) -> ThreadGoneError:
    return ThreadGoneError(f"Thread {thread.pk} was erased; nothing was appended.")


def _append_under_the_lock(
    thread: Thread, cleaned: list[dict[str, Any]], entries: list[MemoryEntry],
    numbering: _Numbering, *, now: datetime,
) -> tuple[int, int, int | None]:
    """The counters, the checks that read the thread's entries (``tools``: the batch
    holds tool calls or results), and the rows, in the caller's transaction; returns the
    last position and turn, and the unfolded tokens."""
    # The row lock (the one lock order, `ThreadQuerySet.lock`), taken by the UPDATE of
    # the counters, serialises appends to one thread, so positions and turns are
    # assigned from the counters without reading the thread's entries.
    counters = advance_counters(thread.pk, rows=len(entries), turns=numbering.users,
                                opens=numbering.opens, tokens=numbering.tokens, now=now)
    if counters is None:
        raise _gone(thread)
    last_position, last_turn, unfolded_tokens = counters
    # Before this batch (a thread at turn 0 opening with another role than the user's
    # numbers its entries as one at turn 1 would).
    position, turn = last_position - len(entries), last_turn - numbering.users
    if numbering.tools:
        check_tool_call_ids(cleaned, *MemoryEntry.objects.filter(thread=thread).tool_call_ids())
    for index, (message, entry) in enumerate(zip(cleaned, entries, strict=True)):
        position += 1
        if message.get("turn") is not None:
            if message["turn"] < turn:
                raise MessageConflictError(
                    f"turn {message['turn']} is before the thread's current turn {turn}.",
                    field="turn",
                    index=index,
                )
            turn = message["turn"]
        elif message["role"] == Role.USER or turn == 0:
            turn += 1
        entry.turn, entry.position = turn, position
    insert_entries(entries)
    if numbering.explicit and turn != last_turn:
        set_turn(thread.pk, turn)
    return position, turn, unfolded_tokens


async def aappend(
    thread: Thread,
    messages: Any,
    *,
    now: datetime | None = None,
) -> list[MemoryEntry]:
    """`append` for async code (an event loop: ASGI views, the Agents SDK, LangGraph).

    The ORM is synchronous and refuses to run inside an event loop
    (``SynchronousOnlyOperation``); this runs `append` itself, as Django's own async
    ORM methods run theirs, on the thread Django's sync code shares
    (``sync_to_async(thread_sensitive=True)``). Same arguments, result and errors.
    """
    return await sync_to_async(append, thread_sensitive=True)(thread, messages, now=now)
