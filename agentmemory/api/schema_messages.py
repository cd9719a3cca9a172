"""The OpenAPI schema of a message to append, for the hook in `agentmemory.api.schema`.

The flat form's rules by role (``MessageRequest``), the OpenAI shapes append also takes
(``ChatMessageRequest``, ``ResponseItem`` and one ``...ItemRequest`` per item type) and
a batch of them (``BatchRequest``). Which fields, item types and text parts each OpenAI
shape has, and which fields are kept as provider fields, is read from
`agentmemory.shapes`, the code that makes them flat.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

from agentmemory import shapes
from agentmemory.conf import memory_settings

NO_NUL = "^[^\\u0000]*$"
# What Python's str.strip() removes (the server's blank test), spelled out: a regex's
# \s differs (it lacks U+001C-U+001F and U+0085, and has U+FEFF).
WHITESPACE = (
    "\\t\\n\\u000b\\u000c\\r\\u001c-\\u001f \\u0085\\u00a0\\u1680\\u2000-\\u200a"
    "\\u2028\\u2029\\u202f\\u205f\\u3000"
)
NOT_BLANK = f"^[^\\u0000]*[^{WHITESPACE}\\u0000][^\\u0000]*$"
BLANK = f"^[{WHITESPACE}]*$"

#: Any JSON a JSON column takes. Not spelled as a recursive schema (generators choke on
#: one): the two limits are stated in words.
JSON_LIMITS = "Any JSON; no NUL character in a string or a key, nested at most 64 levels."
JSON_OBJECT = {"type": "object", "additionalProperties": {}, "description": JSON_LIMITS}
ANY_JSON = {"description": JSON_LIMITS}

#: The roles of a flat message that carry neither tool calls nor a tool result.
SPEAKERS = ["user", "system"]
#: The same in the OpenAI shapes, which also say developer (stored as system).
OPENAI_SPEAKERS = [*SPEAKERS, "developer"]


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def by_role(text: dict[str, Any], *, speakers: list[str], calls: dict[str, Any],
            refusal: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The rules append applies by role, as ``anyOf`` variants: content (``text``) is not
    blank, except for an assistant message that carries tool calls (``calls``) or, in
    the shapes that have one, a refusal; only assistant messages carry tool_calls; a tool
    message names the tool_call_id it answers, and only tool messages have tool_call_id
    and tool_name."""
    no_tool_fields = {"tool_name": {"pattern": BLANK}, "tool_call_id": {"pattern": BLANK}}
    variants = [
        {"properties": {"role": {"enum": list(speakers)}, "content": text,
                        "tool_calls": {"maxItems": 0}, **no_tool_fields},
         "required": ["content"]},
        {"properties": {"role": {"enum": ["assistant"]}, "content": text, **no_tool_fields},
         "required": ["content"]},
    ]
    if refusal is not None:
        variants.append({"properties": {"role": {"enum": ["assistant"]}, "refusal": refusal,
                                        **no_tool_fields},
                         "required": ["refusal"]})
    variants += [
        {"properties": {"role": {"enum": ["assistant"]}, "tool_calls": calls,
                        **no_tool_fields},
         "required": ["tool_calls"]},
        {"properties": {"role": {"enum": ["tool"]}, "content": text,
                        "tool_calls": {"maxItems": 0}, "tool_call_id": {"pattern": NOT_BLANK}},
         "required": ["content", "tool_call_id"]},
    ]
    return variants


def message_rules(schema: dict[str, Any]) -> None:
    """The rules append applies to a flat message (``MessageRequest``), by role."""
    schema["properties"]["content"]["maxLength"] = memory_settings.API_MAX_CONTENT_CHARS
    schema["description"] += (
        " Content is not blank, except for an assistant message that carries tool calls; "
        "only assistant messages carry tool_calls; a tool message names the tool_call_id "
        "it answers, and only tool messages have tool_call_id and tool_name."
    )
    schema["anyOf"] = by_role({"pattern": NOT_BLANK}, speakers=SPEAKERS,
                              calls={"minItems": 1})


def batch_request() -> dict[str, Any]:
    """A batch of messages in any shape append takes, within AGENTMEMORY['API_MAX_BATCH']."""
    return {
        "type": "object",
        "description": "A batch to append: all of it, or nothing.",
        "additionalProperties": False,
        "properties": {"entries": {
            "type": "array", "items": {"oneOf": [ref("ChatMessageRequest"), ref("ResponseItem")]},
            "minItems": 1, "maxItems": memory_settings.API_MAX_BATCH,
        }},
        "required": ["entries"],
    }


def _parts(kinds: frozenset[str], text: dict[str, Any]) -> dict[str, Any]:
    """An array of text parts of ``kinds`` (each keeps its text under the key
    `shapes.part_key` reads); other keys of a part are allowed and not kept."""
    variants = []
    for kind in sorted(kinds):
        key = shapes.part_key(kind)
        variants.append({"type": "object", "properties": {
            "type": {"type": "string", "enum": [kind]}, key: {"type": "string", **text},
        }, "required": ["type", key]})
    return {"type": "array", "minItems": 1,
            "items": variants[0] if len(variants) == 1 else {"anyOf": variants}}


def _content(kinds: frozenset[str], *, blank: bool) -> dict[str, Any]:
    """A string or a list of text parts, joined with a newline; with ``blank`` False the
    text is not blank (every part not blank)."""
    limit = memory_settings.API_MAX_CONTENT_CHARS
    text = {"pattern": NO_NUL if blank else NOT_BLANK, "maxLength": limit}
    parts = _parts(kinds, text)
    if blank:
        parts["minItems"] = 0  # no parts: empty text
    return {"anyOf": [{"type": "string", **text}, parts]}


def _provider(fields: frozenset[str] | set[str]) -> dict[str, Any]:
    """The provider fields of a shape: any JSON, kept in metadata['openai']."""
    return {name: ANY_JSON for name in sorted(fields)}


def openai_shapes(schemas: dict[str, Any]) -> None:
    """The OpenAI shapes append also takes (agentmemory.shapes makes them flat): a Chat
    Completions message, or a Responses input item (``ResponseItem``, by ``type``)."""
    flat = schemas["MessageRequest"]["properties"]
    call = schemas["ToolCallRequest"]["properties"]
    nested = {"type": "object", "additionalProperties": False, "properties": {
        "id": call["id"], "type": {"type": "string", "enum": ["function"]},
        "function": {"type": "object", "additionalProperties": False, "properties": {
            "name": call["name"], "arguments": call["arguments"]}, "required": ["name"]},
    }, "required": ["id", "function"]}
    metadata = {**flat["metadata"], "nullable": True}  # null: none, as Python append reads it
    kept = sorted(shapes.CHAT_PROVIDER_FIELDS)
    schemas["ChatMessageRequest"] = {
        "type": "object", "additionalProperties": False,
        "description": "A message to append: the flat form (MessageRequest) or a Chat "
        "Completions message as the openai client sends or returns it: content null or a "
        "list of text parts (joined with a newline), nested function tool calls, the role "
        "developer (stored as system); an assistant's refusal text stands for empty content. "
        f"{', '.join(kept[:-1])} and {kept[-1]} are kept in "
        f"metadata['{shapes.PROVIDER_KEY}'] when they have a value.",
        "properties": {
            **flat,
            "role": {"type": "string", "enum": [*OPENAI_SPEAKERS, "assistant", "tool"]},
            "content": {**_content(shapes.CHAT_PARTS, blank=True), "nullable": True},
            "tool_calls": {"type": "array", "nullable": True, "items": {
                "anyOf": [ref("ToolCallRequest"), nested]}},
            **_provider(shapes.CHAT_PROVIDER_FIELDS),
            "metadata": metadata,
        },
        "required": ["role"],
        "anyOf": by_role(_content(shapes.CHAT_PARTS, blank=False), speakers=OPENAI_SPEAKERS,
                         calls={"type": "array", "minItems": 1},
                         refusal={"type": "string", "pattern": NOT_BLANK}),
    }
    # Per item type: the properties it maps to the flat form (and reasoning's text
    # parts), and which of them are required; its other fields are provider fields.
    items: dict[str, tuple[dict[str, Any], list[str]]] = {
        "message": ({
            "role": {"type": "string", "enum": [*OPENAI_SPEAKERS, "assistant"]},
            "content": _content(shapes.MESSAGE_PARTS, blank=False),
        }, ["role", "content"]),
        "function_call": ({
            "call_id": call["id"], "name": call["name"], "arguments": call["arguments"],
        }, ["call_id", "name"]),
        "function_call_output": ({
            "call_id": call["id"], "output": _content(shapes.OUTPUT_PARTS, blank=False),
        }, ["call_id", "output"]),
        "reasoning": ({
            "summary": _parts(shapes.SUMMARY_PARTS, {"pattern": NOT_BLANK}),
            "content": {**_parts(shapes.REASONING_PARTS, {"pattern": NO_NUL}), "minItems": 0,
                        "nullable": True},
        }, ["summary"]),
    }
    variants = []
    for kind in shapes.ITEM_FIELDS:
        properties, required = items[kind]
        name = "".join(word.title() for word in kind.split("_")) + "ItemRequest"
        schemas[name] = {
            "type": "object", "additionalProperties": False,
            "properties": {"type": {"type": "string", "enum": [kind]}, **properties,
                           **_provider(shapes.ITEM_PROVIDER_FIELDS[kind] - set(properties)),
                           "metadata": metadata},
            "required": ["type", *required],
        }
        variants.append(ref(name))
    for name in ["ChatMessageRequest", *(v["$ref"].rsplit("/", 1)[1] for v in variants)]:
        schemas[name] = deepcopy(schemas[name])  # no shared objects (YAML anchors)
    schemas["ResponseItem"] = {
        "description": "A Responses API input item to append (a dict as the openai "
        "client takes it): message, function_call (an assistant message with one tool "
        "call), function_call_output (a tool message) or reasoning with summary text (an "
        "assistant message). Its id, status and other provider fields are kept in "
        f"metadata['{shapes.PROVIDER_KEY}'] when they have a value.",
        "oneOf": variants,
    }
