"""OpenAI message shapes in, the stored flat form out: the one place that reads them.

`flat_message` turns what the official ``openai`` client produces or consumes into the
flat message `services.append` stores (``role``, ``content``, ``tool_calls`` as
``[{"id", "name", "arguments"}]``, ``tool_call_id``...):

- Chat Completions messages (user, system, developer, assistant, tool): ``content`` may
  be ``None`` (stored as ``""``) or a list of text parts; tool calls may be nested
  (``{"id", "type": "function", "function": {"name", "arguments"}}``); ``developer`` is
  stored as ``system``; an assistant message whose content is empty and whose
  ``refusal`` has text stores that text as its content.
- Responses API input items: ``message`` (or a ``{"role", "content"}`` item without a
  type), ``function_call`` (an assistant message with one tool call),
  ``function_call_output`` (a tool message) and ``reasoning`` when its summary or content
  carries text (an assistant message holding that text); a reasoning item without text,
  and any other item type, is refused.
- The SDK's pydantic objects (``ChatCompletionMessage``, ``ResponseFunctionToolCall``...)
  are read through ``model_dump``.

Content parts: the text parts a field takes (``text`` and ``refusal`` in a Chat
message; ``input_text``, ``output_text`` and ``refusal`` in a message item;
``input_text`` in a function call output; ``summary_text`` and ``reasoning_text`` in a
reasoning item) are joined with a newline, and their other keys (``annotations``,
``logprobs``) are not kept; any other part (an image, a file, audio) is refused, since
a thread stores text.

Provider fields: a field an official OpenAI type declares that has no column here
(``name``, ``refusal``, ``annotations``, ``audio``, ``function_call``, an item's ``id``
and ``status``, a reasoning item's ``encrypted_content``...) is kept in the entry's
metadata under ``PROVIDER_KEY`` when it has a value, and dropped when it is ``None`` or
empty. A field no OpenAI type declares is refused by name, so a typo is not stored.
Nothing here imports ``openai``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentmemory.exceptions import InvalidMessageError

#: The metadata key under which the provider fields of a message are kept.
PROVIDER_KEY = "openai"

#: The stored flat form's own fields.
FLAT_FIELDS = frozenset(
    {"role", "content", "tool_calls", "tool_name", "tool_call_id", "turn", "tier", "metadata"}
)
#: Chat Completions message fields with no column here (kept under ``PROVIDER_KEY``).
CHAT_PROVIDER_FIELDS = frozenset({"name", "refusal", "annotations", "audio", "function_call"})
#: Responses item fields with no column here, per item type (``type`` itself is implied).
ITEM_PROVIDER_FIELDS = {
    "message": frozenset({"id", "status", "phase"}),
    "function_call": frozenset({"id", "status", "async", "caller", "namespace"}),
    "function_call_output": frozenset(
        {"id", "status", "caller", "created_by", "name", "namespace"}
    ),
    "reasoning": frozenset({"id", "status", "summary", "content", "encrypted_content"}),
}
#: The fields each Responses item type maps to the flat form.
ITEM_FIELDS = {
    "message": frozenset({"role", "content"}),
    "function_call": frozenset({"call_id", "name", "arguments"}),
    "function_call_output": frozenset({"call_id", "output"}),
    "reasoning": frozenset(),
}
#: The text part types each content field takes, as the OpenAI types declare them.
CHAT_PARTS = frozenset({"text", "refusal"})
MESSAGE_PARTS = frozenset({"input_text", "output_text", "refusal"})
OUTPUT_PARTS = frozenset({"input_text"})
SUMMARY_PARTS = frozenset({"summary_text"})
REASONING_PARTS = frozenset({"reasoning_text"})


def _fail(index: int, text: str, field: str) -> InvalidMessageError:
    return InvalidMessageError(f"message {index}: {text}", field=field, index=index)


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def as_mapping(message: Any) -> Any:
    """A pydantic object (the SDK's types) as a JSON-ready dict under the API's field
    names, without its None fields; anything else unchanged."""
    dump = getattr(message, "model_dump", None)
    return dump(mode="json", exclude_none=True, by_alias=True) if callable(dump) else message


def part_text(content: Any, index: int, field: str, kinds: frozenset[str]) -> str:
    """The text of a content value: a string, ``None`` (``""``) or a list of text parts of
    the ``kinds`` this field takes, joined with a newline (their other keys, such as
    ``annotations``, are not kept)."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise _fail(index, f"{field} must be a string, null or a list of text parts.", field)
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        text = part.get(part_key(kind)) if isinstance(part, Mapping) else None
        if not isinstance(kind, str) or kind not in kinds or not isinstance(text, str):
            raise _fail(index, f"{field} parts must be text parts with a string text "
                        f"(a thread stores text), got a {kind!r} part.", field)
        texts.append(text)
    return "\n".join(texts)


def part_key(kind: Any) -> str:
    # A refusal part keeps its text under "refusal", every other text part under "text".
    return "refusal" if kind == "refusal" else "text"


def flat_message(message: Any, index: int) -> Any:
    """The flat message for one message in any accepted shape (see the module docstring).

    A value that is not a mapping (or pydantic object) comes back unchanged, for
    `messages.clean_message` to refuse. A shape that cannot be stored raises
    `InvalidMessageError` naming the field.
    """
    message = as_mapping(message)
    if not isinstance(message, Mapping):
        return message
    if "type" in message:
        return _from_item(message, index)
    return _from_chat(message, index)


def _with_provider(
    flat: dict[str, Any], message: Mapping[str, Any], fields: frozenset[str]
) -> dict[str, Any]:
    kept = {name: message[name] for name in sorted(fields & set(message))
            if not _empty(message[name])}
    if flat.get("metadata", "") is None:
        del flat["metadata"]  # null metadata is no metadata, as append reads it
    metadata = flat.get("metadata", {})
    if kept and isinstance(metadata, Mapping):  # else append refuses the metadata given
        flat["metadata"] = {**metadata, PROVIDER_KEY: kept}
    return flat


def _from_chat(message: Mapping[str, Any], index: int) -> dict[str, Any]:
    unknown = sorted(set(message) - FLAT_FIELDS - CHAT_PROVIDER_FIELDS)
    if unknown:
        raise _fail(index, f"unknown fields {unknown}.", unknown[0])
    flat = {name: message[name] for name in FLAT_FIELDS & set(message)}
    if flat.get("role") == "developer":
        flat["role"] = "system"  # the newer name for system instructions
    if "content" in flat:
        flat["content"] = part_text(flat["content"], index, "content", CHAT_PARTS)
    refusal = message.get("refusal")
    if flat.get("role") == "assistant" and not (flat.get("content") or "").strip() \
            and isinstance(refusal, str) and refusal.strip():
        flat["content"] = refusal  # a refusal is what the model said in place of content
    if isinstance(flat.get("tool_calls"), list):
        flat["tool_calls"] = [_tool_call(call, index) for call in flat["tool_calls"]]
    elif flat.get("tool_calls") is None:
        flat.pop("tool_calls", None)
    return _with_provider(flat, message, CHAT_PROVIDER_FIELDS)


def _tool_call(call: Any, index: int) -> Any:
    """A nested Chat Completions function call as a flat ``{"id", "name", "arguments"}``."""
    if not isinstance(call, Mapping) or "function" not in call:
        return call
    function = call["function"]
    if call.get("type", "function") != "function" or not isinstance(function, Mapping):
        raise _fail(index, "only function tool calls are stored "
                    "({'id', 'type': 'function', 'function': {'name', 'arguments'}}).",
                    "tool_calls")
    extra = sorted((set(call) - {"id", "type", "function"})
                   | (set(function) - {"name", "arguments"}))
    if extra:
        raise _fail(index, f"unknown tool call fields {extra}.", "tool_calls")
    return {"id": call.get("id"), "name": function.get("name"),
            "arguments": function.get("arguments", "")}


def _from_item(item: Mapping[str, Any], index: int) -> dict[str, Any]:
    kind = item["type"]
    if not isinstance(kind, str) or kind not in ITEM_FIELDS:
        raise _fail(index, f"Responses items of type {kind!r} are not stored; the types "
                    f"stored are {', '.join(ITEM_FIELDS)}.", "type")
    allowed = ITEM_FIELDS[kind] | ITEM_PROVIDER_FIELDS[kind] | {"type", "metadata"}
    unknown = sorted(set(item) - allowed)
    if unknown:
        raise _fail(index, f"unknown fields {unknown} for a {kind!r} item.", unknown[0])
    flat: dict[str, Any]
    if kind == "message":
        flat = {"role": item.get("role"),
                "content": part_text(item.get("content"), index, "content", MESSAGE_PARTS)}
        if flat["role"] == "developer":
            flat["role"] = "system"
    elif kind == "function_call":
        flat = {"role": "assistant", "content": "", "tool_calls": [
            {"id": item.get("call_id"), "name": item.get("name"),
             "arguments": item.get("arguments", "")}
        ]}
    elif kind == "function_call_output":
        flat = {"role": "tool", "tool_call_id": item.get("call_id"),
                "content": part_text(item.get("output"), index, "output", OUTPUT_PARTS)}
    else:
        if not isinstance(item.get("summary"), list):
            raise _fail(index, "a reasoning item's summary must be a list of summary_text "
                        "parts.", "summary")
        if not isinstance(item.get("content", []), list | None):
            raise _fail(index, "a reasoning item's content must be a list of "
                        "reasoning_text parts or null.", "content")
        text = "\n".join(filter(None, (
            part_text(item["summary"], index, "summary", SUMMARY_PARTS),
            part_text(item.get("content"), index, "content", REASONING_PARTS),
        )))
        if not text.strip():
            raise _fail(index, "a reasoning item without summary or content text carries "
                        "nothing the next turn can read; leave it out.", "summary")
        flat = {"role": "assistant", "content": text}
    if "metadata" in item:
        flat["metadata"] = item["metadata"]
    return _with_provider(flat, item, ITEM_PROVIDER_FIELDS[kind])
