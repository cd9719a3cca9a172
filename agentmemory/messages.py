"""Validation of incoming messages, shared by append and window compaction.

A message may come in any shape `agentmemory.shapes` reads (the OpenAI ones); it is
made flat there first. Every problem raises `InvalidMessageError` naming the field,
before anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentmemory.exceptions import InvalidMessageError, ToolCallIdError
from agentmemory.models import Role, Tier
from agentmemory.shapes import flat_message

ROLES = frozenset(Role.values)
TIERS = frozenset(Tier.values)


def clean_message(message: Any, index: int) -> dict[str, Any]:
    def fail(text: str, name: str) -> InvalidMessageError:
        return InvalidMessageError(f"message {index}: {text}", field=name, index=index)

    message = flat_message(message, index)
    if not isinstance(message, Mapping):
        raise fail("must be a mapping with 'role' and 'content'.", "non_field_errors")
    role = message.get("role")
    if role not in ROLES:
        raise fail(f"role must be one of {', '.join(Role.values)}, got {role!r}.", "role")
    content = message.get("content", "")
    if not isinstance(content, str):
        raise fail("content must be a string.", "content")
    tool_calls = clean_tool_calls(message.get("tool_calls") or [], role, fail)
    if not content.strip() and not tool_calls:
        raise fail("content must not be empty.", "content")
    cleaned: dict[str, Any] = {"role": role, "content": content, "tool_calls": tool_calls}
    tool_call_id = message.get("tool_call_id") or ""
    tool_name = message.get("tool_name") or ""
    if role == Role.TOOL and not tool_call_id:
        raise fail("a tool message needs the tool_call_id it answers.", "tool_call_id")
    if role != Role.TOOL and (tool_call_id or tool_name):
        raise fail("tool_call_id and tool_name belong to tool messages only.", "tool_call_id")
    for name, value in (("tool_call_id", tool_call_id), ("tool_name", tool_name)):
        if not isinstance(value, str) or len(value) > 200:
            raise fail(f"{name} must be a string of at most 200 characters.", name)
    cleaned["tool_call_id"], cleaned["tool_name"] = tool_call_id, tool_name
    turn = message.get("turn")
    if turn is not None and (not isinstance(turn, int) or isinstance(turn, bool) or turn < 1):
        raise fail("turn must be a positive integer.", "turn")
    cleaned["turn"] = turn
    tier = message.get("tier")
    if tier is not None and tier not in TIERS:
        raise fail(f"tier must be one of {', '.join(Tier.values)}, got {tier!r}.", "tier")
    cleaned["tier"] = tier
    metadata = message.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise fail("metadata must be an object.", "metadata")
    cleaned["metadata"] = dict(metadata)
    return cleaned


def clean_tool_calls(calls: Any, role: str, fail: Any) -> list[dict[str, Any]]:
    if not calls:
        return []
    if role != Role.ASSISTANT:
        raise fail("only assistant messages carry tool_calls.", "tool_calls")
    if not isinstance(calls, list):
        raise fail("tool_calls must be a list.", "tool_calls")
    cleaned = []
    for call in calls:
        if not isinstance(call, Mapping):
            raise fail("each tool call must be an object with id and name.", "tool_calls")
        call_id, name = call.get("id"), call.get("name")
        if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
            raise fail("each tool call needs a non-empty string id and name.", "tool_calls")
        cleaned.append({"id": call_id, "name": name, "arguments": call.get("arguments", "")})
    return cleaned


def check_tool_call_ids(
    cleaned: list[dict[str, Any]], called: set[str], answered: set[str]
) -> None:
    """Refuse what an OpenAI-style model would: a call id used twice, a result for a call
    that is not stored before it, and a second result for one call.

    ``called`` and ``answered`` are the ids the thread already holds; the batch is read
    in order, so a result may answer a call earlier in the same batch.
    """
    called, answered = set(called), set(answered)
    for index, message in enumerate(cleaned):
        for call in message["tool_calls"]:
            call_id = call["id"]
            if call_id in called:
                raise ToolCallIdError(
                    f"message {index}: tool call id {call_id!r} is already used in this "
                    "thread or batch; each call needs its own id.",
                    field="tool_calls", index=index, call_id=call_id,
                )
            called.add(call_id)
        if message["role"] == Role.TOOL:
            call_id = message["tool_call_id"]
            if call_id not in called:
                raise ToolCallIdError(
                    f"message {index}: tool_call_id {call_id!r} answers no tool call stored "
                    "in this thread or earlier in this batch.",
                    field="tool_call_id", index=index, call_id=call_id,
                )
            if call_id in answered:
                raise ToolCallIdError(
                    f"message {index}: tool call {call_id!r} already has its result.",
                    field="tool_call_id", index=index, call_id=call_id,
                )
            answered.add(call_id)
