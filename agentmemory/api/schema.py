"""What the OpenAPI schema says beyond what drf-spectacular reads from the serializers.

One postprocessing hook, so the schema tells the truth a client (or Schemathesis) can
test: every error status an operation can answer, with its body; request bodies that
refuse unknown fields; the domain rules of a message and the OpenAI shapes append
takes (`agentmemory.api.schema_messages`); the bounds the settings and the views impose.
"""

from __future__ import annotations

from typing import Any

from agentmemory.api.schema_messages import (
    JSON_LIMITS,
    JSON_OBJECT,
    NO_NUL,
    NOT_BLANK,
    batch_request,
    message_rules,
    openai_shapes,
    ref,
)
from agentmemory.api.serializers.base import MAX_INT
from agentmemory.api.views.base import Pagination
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


def postprocess(result: dict[str, Any], generator: Any, request: Any, public: bool
                ) -> dict[str, Any]:
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(FieldErrors=FIELD_ERRORS, ErrorDetail=DETAIL, SearchText=search_text())
    for name, schema in schemas.items():
        if name.endswith("Request"):
            _request_body(schema)
    message_rules(schemas["MessageRequest"])
    openai_shapes(schemas)
    schemas["BatchRequest"] = batch_request()
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


def _operation(path: str, operation: dict[str, Any]) -> None:
    operation_id = operation.get("operationId", "")
    parameters = operation.get("parameters", [])
    for parameter in parameters:
        name, schema = parameter["name"], parameter.get("schema", {})
        # The bounds Pagination and the receipt list's turn filter apply.
        if name == "page":
            schema.update(minimum=1, maximum=MAX_INT)
        elif name == "page_size":
            schema.update(minimum=1, maximum=Pagination.max_page_size)
        elif name == "turn" and parameter["in"] == "query":
            schema.update(minimum=0, maximum=MAX_INT)
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
