"""Append: store messages in order, under the thread's row lock; `aappend` for async code."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from agentmemory.conf import memory_settings
from agentmemory.exceptions import MessageConflictError, ThreadGoneError
from agentmemory.messages import check_tool_call_ids, clean_message
from agentmemory.models import EntryKind, MemoryEntry, Role, Thread
from agentmemory.pipeline.blocks import entry_cost
from agentmemory.services.background import fold_if_due, fold_ruled_out
from agentmemory.sql import (
    advance_counters,
    append_in_one_statement,
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
    single = isinstance(messages, Mapping) or hasattr(messages, "model_dump")
    batch = [messages] if single else list(messages)
    cleaned = [clean_message(message, index) for index, message in enumerate(batch)]
    now = now or timezone.now()
    ttl = thread.effective_ttl()
    expires_at = now + ttl if ttl is not None else None
    default_tier = thread.effective_write_tier()
    entries = []
    for message in cleaned:
        entry = MemoryEntry(
            thread=thread,
            kind=EntryKind.MESSAGE,
            role=message["role"],
            content=message["content"],
            tool_calls=message.get("tool_calls") or [],
            tool_name=message.get("tool_name", ""),
            tool_call_id=message.get("tool_call_id", ""),
            tier=message.get("tier") or default_tier,
            created_at=now,
            expires_at=expires_at,
            metadata=message.get("metadata") or {},
        )
        entry.token_count = count_tokens(entry_line(entry))  # turn and position aside
        entries.append(entry)
    # Without explicit turns the counters' UPDATE moves the turn too: each user message
    # opens one, and a thread's first message opens one whatever its role.
    explicit = any(message.get("turn") is not None for message in cleaned)
    users = 0 if explicit else sum(message["role"] == Role.USER for message in cleaned)
    opens = int(not explicit and bool(cleaned) and cleaned[0]["role"] != Role.USER)
    tokens = sum(map(entry_cost, entries))
    tools = any(message["tool_calls"] or message["role"] == Role.TOOL for message in cleaned)
    if not (explicit or tools) and can_append_in_one_statement(len(entries)):
        # Nothing to check under the lock: the counters and the rows in one round trip.
        counters = append_in_one_statement(thread.pk, entries, users=users, opens=opens,
                                           tokens=tokens, now=now)
        if counters is None:
            raise _gone(thread)
        position, turn, unfolded_tokens, fold_waits = counters
    else:
        fold_waits = False
        with transaction.atomic():
            position, turn, unfolded_tokens = _append_under_the_lock(
                thread, cleaned, entries, explicit=explicit, tools=tools, users=users,
                opens=opens, tokens=tokens, now=now)
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
    return entries


def _gone(thread: Thread) -> ThreadGoneError:
    return ThreadGoneError(f"Thread {thread.pk} was erased; nothing was appended.")


def _append_under_the_lock(
    thread: Thread, cleaned: list[dict[str, Any]], entries: list[MemoryEntry], *,
    explicit: bool, tools: bool, users: int, opens: int, tokens: int, now: datetime,
) -> tuple[int, int, int | None]:
    """The counters, the checks that read the thread's entries (``tools``: the batch
    holds tool calls or results), and the rows, in the caller's transaction; returns the
    last position and turn, and the unfolded tokens."""
    # The row lock (the one lock order, `ThreadQuerySet.lock`), taken by the UPDATE of
    # the counters, serialises appends to one thread, so positions and turns are
    # assigned from the counters without reading the thread's entries.
    counters = advance_counters(thread.pk, rows=len(entries), turns=users, opens=opens,
                                tokens=tokens, now=now)
    if counters is None:
        raise _gone(thread)
    last_position, last_turn, unfolded_tokens = counters
    # Before this batch (a thread at turn 0 opening with another role than the user's
    # numbers its entries as one at turn 1 would).
    position, turn = last_position - len(entries), last_turn - users
    if tools:
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
    if explicit and turn != last_turn:
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
