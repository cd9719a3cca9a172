"""What the OpenAPI schema says beyond what drf-spectacular reads from the serializers.

One postprocessing hook, so the schema tells the truth a client (or Schemathesis) can
test: every error status an operation can answer, with its body; request bodies that
refuse unknown fields; the domain rules of a message; the bounds the settings impose.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

from agentmemory.conf import memory_settings
from agentmemory.search.query import MAX_QUERY_CHARS, MAX_TERMS, query_pattern

#: 400 and 409 answer field errors; the others a detail.
FIELD_ERRORS = {
    "type": "object",
    "description": "Field name -> the reasons it was refused; nested for nested fields and "
    "list items (`{\"entries\": [{}, {\"tool_call_id\": [\"...\"]}]}`). A body that is not "
    "JSON: `{\"detail\": \"...\"}`.",
    "minProperties": 1,
    "additionalProperties": {"anyOf": [{"type": "array"}, {"type": "object"},
                                       {"type": "string"}]},
}
DETAIL = {
    "type": "object",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
}
#: Any JSON a JSON column takes. Not spelled as a recursive schema (generators choke on
#: one): the two limits are stated in words.
JSON_LIMITS = "Any JSON; no NUL character in a string or a key, nested at most 64 levels."
JSON_OBJECT = {"type": "object", "additionalProperties": {}, "description": JSON_LIMITS}

ERRORS = {
    400: ("The request's shape is wrong: a field, a type or a bound (the schema's rules).",
          "FieldErrors"),
    401: ("No valid credentials (token authentication answers 401).", "ErrorDetail"),
    403: ("Not authenticated (session authentication answers 403), or not allowed.",
          "ErrorDetail"),
    404: ("No such thread of yours, no such row in it, a page past the last, or no such "
          "path.", "ErrorDetail"),
    409: ("Well-formed, but conflicts with what is stored, with the project's settings or "
          "with another field: see the operation's description.", "FieldErrors"),
    413: ("The body is over DATA_UPLOAD_MAX_MEMORY_SIZE.", "ErrorDetail"),
    429: ("Throttled by AGENTMEMORY['API_THROTTLE_RATES']; Retry-After says when to retry.",
          "ErrorDetail"),
}
#: What a 409 means, per operation.
CONFLICTS = {
    "threads_create": "You already have a thread with this client_key.",
    "threads_update": "You already have a thread with this client_key.",
    "threads_partial_update": "You already have a thread with this client_key.",
    "threads_entries_create": "A turn before the thread's current turn; a tool call id the "
    "thread or the batch already uses; a tool result for a call not stored before it; a "
    "second result for one call. The body names the field, the id and why.",
    "threads_recall_create": "Options that contradict each other or the project's settings: "
    "low_water not below high_water, tiers without the summary tier. Or an entry of the "
    "context was erased by another request during the recall (`{\"detail\": ...}`): recall "
    "again.",
}
THROTTLED = {"threads_entries_create", "threads_recall_create", "threads_fold_create"}

NO_NUL = "^[^\\u0000]*$"
# What Python's str.strip() removes (the server's blank test), spelled out: a regex's
# \s differs (it lacks U+001C-U+001F and U+0085, and has U+FEFF).
WHITESPACE = (
    "\\t\\n\\u000b\\u000c\\r\\u001c-\\u001f \\u0085\\u00a0\\u1680\\u2000-\\u200a"
    "\\u2028\\u2029\\u202f\\u205f\\u3000"
)
NOT_BLANK = f"^[^\\u0000]*[^{WHITESPACE}\\u0000][^\\u0000]*$"
BLANK = f"^[{WHITESPACE}]*$"


def postprocess(result: dict[str, Any], generator: Any, request: Any, public: bool
                ) -> dict[str, Any]:
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(FieldErrors=FIELD_ERRORS, ErrorDetail=DETAIL, SearchText=search_text())
    for name, schema in schemas.items():
        if name.endswith("Request"):
            _request_body(schema)
    _message(schemas["MessageRequest"])
    _openai_shapes(schemas)
    schemas["BatchRequest"] = {
        "type": "object",
        "description": "A batch to append: all of it, or nothing.",
        "additionalProperties": False,
        "properties": {"entries": {
            "type": "array", "items": {"oneOf": [ref("ChatMessageRequest"), ref("ResponseItem")]},
            "minItems": 1, "maxItems": memory_settings.API_MAX_BATCH,
        }},
        "required": ["entries"],
    }
    window = schemas["CompactRequestRequest"]["properties"]["messages"]
    window.update(minItems=1, maxItems=memory_settings.API_MAX_WINDOW)
    schemas["RecallRequestRequest"]["properties"]["tiers"]["minItems"] = 1
    for path, operations in result.get("paths", {}).items():
        for operation in operations.values():
            _operation(path, operation)
    return result


def search_text() -> dict[str, Any]:
    """The query text of the search endpoints: what the parser accepts, as a pattern."""
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_QUERY_CHARS,
        "pattern": query_pattern(),
        "description": f"Words and double-quoted phrases, at least one and at most "
        f"{MAX_TERMS}, in at most {MAX_QUERY_CHARS} characters; quotes come in pairs; no "
        "control character but tab, line feed and carriage return. A word is a run of "
        "letters and digits (any script); every other character separates words, so "
        "operators, brackets and wildcards are punctuation, never syntax. Every word and "
        "phrase must match, a phrase its words in order; case does not matter.",
    }


def _request_body(schema: dict[str, Any]) -> None:
    """Unknown fields are refused; strings never hold NUL; trimmed required strings are
    not blank; JSON fields say what a JSON column takes."""
    schema["additionalProperties"] = False
    for name, field in schema.get("properties", {}).items():
        if field.get("type") == "string" and "enum" not in field and "format" not in field:
            field["pattern"] = NOT_BLANK if field.get("minLength") else NO_NUL
        elif name == "metadata":
            description = field.get("description")
            field.clear()
            field.update(JSON_OBJECT)
            if description:
                field["description"] = f"{description} {JSON_LIMITS}"
        elif name == "arguments":
            field.update(description=JSON_LIMITS, anyOf=[
                {"type": kind} for kind in ("string", "number", "boolean", "array", "object")
            ])  # any JSON but null


def _message(schema: dict[str, Any]) -> None:
    """The rules append applies to a message, by role."""
    properties = schema["properties"]
    properties["content"]["maxLength"] = memory_settings.API_MAX_CONTENT_CHARS
    no_tool_fields = {"tool_name": {"pattern": BLANK}, "tool_call_id": {"pattern": BLANK}}
    text = {"content": {"pattern": NOT_BLANK}}
    schema["description"] += (
        " Content is not blank, except for an assistant message that carries tool calls; "
        "only assistant messages carry tool_calls; a tool message names the tool_call_id "
        "it answers, and only tool messages have tool_call_id and tool_name."
    )
    schema["anyOf"] = [
        {"properties": {"role": {"enum": ["user", "system"]}, **text,
                        "tool_calls": {"maxItems": 0}, **no_tool_fields},
         "required": ["content"]},
        {"properties": {"role": {"enum": ["assistant"]}, **text, **no_tool_fields},
         "required": ["content"]},
        {"properties": {"role": {"enum": ["assistant"]}, "tool_calls": {"minItems": 1},
                        **no_tool_fields},
         "required": ["tool_calls"]},
        {"properties": {"role": {"enum": ["tool"]}, **text, "tool_calls": {"maxItems": 0},
                        "tool_call_id": {"pattern": NOT_BLANK}},
         "required": ["content", "tool_call_id"]},
    ]


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _parts(kinds: list[str], text: dict[str, Any]) -> dict[str, Any]:
    """An array of text parts of ``kinds`` (a refusal part keeps its text under
    ``refusal``); other keys of a part are allowed and not kept."""
    variants = []
    for kind in kinds:
        key = "refusal" if kind == "refusal" else "text"
        variants.append({"type": "object", "properties": {
            "type": {"type": "string", "enum": [kind]}, key: {"type": "string", **text},
        }, "required": ["type", key]})
    return {"type": "array", "minItems": 1,
            "items": variants[0] if len(variants) == 1 else {"anyOf": variants}}


def _content(kinds: list[str], *, blank: bool) -> dict[str, Any]:
    """A string or a list of text parts, joined with a newline; with ``blank`` False the
    text is not blank (every part not blank)."""
    limit = memory_settings.API_MAX_CONTENT_CHARS
    text = {"pattern": NO_NUL if blank else NOT_BLANK, "maxLength": limit}
    parts = _parts(kinds, text)
    if blank:
        parts["minItems"] = 0  # no parts: empty text
    return {"anyOf": [{"type": "string", **text}, parts]}


ANY_JSON = {"description": JSON_LIMITS}


def _openai_shapes(schemas: dict[str, Any]) -> None:
    """The OpenAI shapes append also takes (agentmemory.shapes makes them flat): a Chat
    Completions message, or a Responses input item (``ResponseItem``, by ``type``)."""
    flat = schemas["MessageRequest"]["properties"]
    blank_tool = {"tool_name": {"pattern": BLANK}, "tool_call_id": {"pattern": BLANK}}
    call = schemas["ToolCallRequest"]["properties"]
    nested = {"type": "object", "additionalProperties": False, "properties": {
        "id": call["id"], "type": {"type": "string", "enum": ["function"]},
        "function": {"type": "object", "additionalProperties": False, "properties": {
            "name": call["name"], "arguments": call["arguments"]}, "required": ["name"]},
    }, "required": ["id", "function"]}
    text = _content(["text", "refusal"], blank=False)
    metadata = {**flat["metadata"], "nullable": True}  # null: none, as Python append reads it
    schemas["ChatMessageRequest"] = {
        "type": "object", "additionalProperties": False,
        "description": "A message to append: the flat form (MessageRequest) or a Chat "
        "Completions message as the openai client sends or returns it: content null or a "
        "list of text parts (joined with a newline), nested function tool calls, the role "
        "developer (stored as system); an assistant's refusal text stands for empty content. "
        "name, refusal, annotations, audio and function_call "
        "are kept in metadata['openai'] when they have a value.",
        "properties": {
            **flat,
            "role": {"type": "string",
                     "enum": ["user", "system", "developer", "assistant", "tool"]},
            "content": {**_content(["text", "refusal"], blank=True), "nullable": True},
            "tool_calls": {"type": "array", "nullable": True, "items": {
                "anyOf": [ref("ToolCallRequest"), nested]}},
            **{name: ANY_JSON for name in ("name", "refusal", "annotations", "audio",
                                           "function_call")},
            "metadata": metadata,
        },
        "required": ["role"],
        "anyOf": [
            {"properties": {"role": {"enum": ["user", "system", "developer"]},
                            "content": text, "tool_calls": {"maxItems": 0}, **blank_tool},
             "required": ["content"]},
            {"properties": {"role": {"enum": ["assistant"]}, "content": text, **blank_tool},
             "required": ["content"]},
            {"properties": {"role": {"enum": ["assistant"]},
                            "refusal": {"type": "string", "pattern": NOT_BLANK},
                            **blank_tool},
             "required": ["refusal"]},
            {"properties": {"role": {"enum": ["assistant"]},
                            "tool_calls": {"type": "array", "minItems": 1}, **blank_tool},
             "required": ["tool_calls"]},
            {"properties": {"role": {"enum": ["tool"]}, "content": text,
                            "tool_calls": {"maxItems": 0},
                            "tool_call_id": {"pattern": NOT_BLANK}},
             "required": ["content", "tool_call_id"]},
        ],
    }
    items = {
        "message": ({
            "role": {"type": "string", "enum": ["user", "system", "developer", "assistant"]},
            "content": _content(["input_text", "output_text", "refusal"], blank=False),
        }, ["role", "content"], ["id", "status", "phase"]),
        "function_call": ({
            "call_id": call["id"], "name": call["name"], "arguments": call["arguments"],
        }, ["call_id", "name"], ["id", "status", "async", "caller", "namespace"]),
        "function_call_output": ({
            "call_id": call["id"], "output": _content(["input_text"], blank=False),
        }, ["call_id", "output"], ["id", "status", "caller", "created_by", "name",
                                   "namespace"]),
        "reasoning": ({
            "summary": _parts(["summary_text"], {"pattern": NOT_BLANK}),
            "content": {**_parts(["reasoning_text"], {"pattern": NO_NUL}), "minItems": 0,
                        "nullable": True},
        }, ["summary"], ["id", "status", "encrypted_content"]),
    }
    variants = []
    for kind, (properties, required, provider) in items.items():
        name = "".join(word.title() for word in kind.split("_")) + "ItemRequest"
        schemas[name] = {
            "type": "object", "additionalProperties": False,
            "properties": {"type": {"type": "string", "enum": [kind]}, **properties,
                           **{field: ANY_JSON for field in provider}, "metadata": metadata},
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
        "metadata['openai'] when they have a value.",
        "oneOf": variants,
    }


def _operation(path: str, operation: dict[str, Any]) -> None:
    operation_id = operation.get("operationId", "")
    parameters = operation.get("parameters", [])
    for parameter in parameters:
        name, schema = parameter["name"], parameter.get("schema", {})
        if name == "page":
            schema.update(minimum=1, maximum=2**31 - 1)
        elif name == "page_size":
            schema.update(minimum=1, maximum=500)
        elif name == "turn" and parameter["in"] == "query":
            schema.update(minimum=0, maximum=2**31 - 1)
        elif parameter["in"] == "path":
            schema.update(minimum=1, maximum=2**63 - 1)
    has_body = "requestBody" in operation
    if operation_id == "threads_entries_create":
        operation["requestBody"]["content"]["application/json"]["schema"] = {"oneOf": [
            ref("ChatMessageRequest"), ref("ResponseItem"), ref("BatchRequest"),
        ]}
    codes = [401, 403]
    if has_body or any(p["in"] == "query" for p in parameters):
        codes.append(400)
    if "{" in path or any(p["name"] == "page" for p in parameters):
        codes.append(404)
    if operation_id in CONFLICTS:
        codes.append(409)
    if has_body:
        codes.append(413)
    if operation_id in THROTTLED:
        codes.append(429)
    responses = operation.setdefault("responses", {})
    for code in sorted(codes):
        description, component = ERRORS[code]
        if code == 409:
            description = CONFLICTS[operation_id]
        responses.setdefault(str(code), {
            "description": description,
            "content": {"application/json": {
                "schema": {"$ref": f"#/components/schemas/{component}"}}},
        })
