"""The schema tells the truth: what it documents is what the API answers.

Each error status is documented on the operations that can answer it, with a body
shape the real error bodies validate against; request bodies are closed; types are
strict (no "7" or 8.0 for an integer, no 0 for a string); and the message rules the
schema states by role agree with what append accepts, over random messages.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import jsonschema
import pytest
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from agentmemory.exceptions import InvalidMessageError
from agentmemory.messages import clean_message
from agentmemory.models import MemoryEntry, Thread

pytestmark = pytest.mark.django_db

API = "/api/memory/"


def openapi() -> dict[str, Any]:
    response = APIClient().get(f"{API}schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return json.loads(response.content)


@functools.cache
def served_schema() -> dict[str, Any]:
    """The schema as served, fetched once: the property test below reads it 300 times."""
    return openapi()


def validate(document: dict[str, Any], schema: dict[str, Any], body: Any) -> None:
    """Validate ``body`` against ``schema``, whose $refs point into ``document``."""
    resolver = jsonschema.RefResolver.from_schema(document)
    jsonschema.Draft7Validator(schema, resolver=resolver).validate(body)


def documented(document: dict[str, Any], path: str, method: str, status: int) -> dict[str, Any]:
    operation = document["paths"][path][method]
    assert str(status) in operation["responses"], (path, method, status)
    return operation["responses"][str(status)]["content"]["application/json"]["schema"]


def rows() -> int:
    return MemoryEntry.objects.count() + Thread.objects.count()


# ---------------------------------------------------------------- documented statuses


def test_every_operation_documents_the_errors_it_can_answer() -> None:
    document = openapi()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            codes = set(operation["responses"])
            parameters = operation.get("parameters", [])
            assert {"401", "403"} <= codes, (path, method)
            if "requestBody" in operation:
                assert {"400", "413"} <= codes, (path, method)
            if any(p["in"] == "query" for p in parameters):
                assert "400" in codes, (path, method)
            if "{" in path or any(p["name"] == "page" for p in parameters):
                assert "404" in codes, (path, method)
    for name, component in document["components"]["schemas"].items():
        if name.endswith("Request"):
            assert component["additionalProperties"] is False, name


def test_real_error_bodies_match_their_documented_shape(
    client: APIClient, thread: Thread, settings: Any
) -> None:
    document = openapi()
    entries = f"{API}threads/{{thread_id}}/entries/"
    recall = f"{API}threads/{{thread_id}}/recall/"
    url = f"{API}threads/{thread.pk}/entries/"
    before = rows()
    cases = [
        (client.post(url, {"role": "user", "content": 0}, format="json"), entries, "post", 400),
        (APIClient().post(url, {"role": "user", "content": "hi"}, format="json"), entries,
         "post", 403),
        (client.post(f"{API}threads/{thread.pk + 999}/entries/",
                     {"role": "user", "content": "hi"}, format="json"), entries, "post", 404),
        (client.post(url, {"role": "user", "content": "hi", "turn": 1}, format="json"),
         entries, "post", 409),
        (client.post(f"{API}threads/{thread.pk}/recall/",
                     {"budget_tokens": 500, "low_water": 0.9, "high_water": 0.5},
                     format="json"), recall, "post", 409),
    ]
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=100):
        cases.append((client.post(url, {"role": "user", "content": "x" * 200}, format="json"),
                      entries, "post", 413))
    settings.AGENTMEMORY = {"API_THROTTLE_RATES": {"append": "1/min", "recall": None}}
    client.post(url, {"role": "user", "content": "once"}, format="json")
    before += 1
    cases.append((client.post(url, {"role": "user", "content": "twice"}, format="json"),
                  entries, "post", 429))
    for response, path, method, status in cases:
        assert response.status_code == status, (status, response.content)
        validate(document, documented(document, path, method, status), response.json())
    assert rows() == before  # no refused request wrote anything


def test_a_bad_token_is_refused_as_documented(thread: Thread) -> None:
    """401 when token authentication comes first in the project's settings, 403 when
    session authentication does (as in these tests): both are documented."""
    response = APIClient().get(f"{API}threads/", HTTP_AUTHORIZATION="Token not-a-token")
    assert response.status_code in (401, 403)
    document = openapi()
    schema = documented(document, f"{API}threads/", "get", response.status_code)
    validate(document, schema, response.json())


def test_an_unknown_path_under_the_api_is_a_json_404(client: APIClient, thread: Thread) -> None:
    for path in (f"threads/{thread.pk}", "threads/null,null/", f"threads/{thread.pk}/nope/",
                 "threads/-1/entries/"):
        response = client.get(API + path)
        assert response.status_code == 404, path
        assert response.json() == {"detail": "No such path in this API."}
    assert APIClient().get(f"{API}threads/x/").status_code in (401, 403)


# ---------------------------------------------------------------- strict types


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("entries/", {"role": "user", "content": "hi", "turn": "7"}, "turn"),
        ("entries/", {"role": "user", "content": "hi", "turn": 8.0}, "turn"),
        ("entries/", {"role": "user", "content": "hi", "turn": True}, "turn"),
        ("entries/", {"role": "user", "content": 0}, "content"),
        ("entries/", {"role": 1, "content": "hi"}, "role"),
        ("recall/", {"budget_tokens": "500"}, "budget_tokens"),
        ("recall/", {"budget_tokens": 500.0}, "budget_tokens"),
        ("recall/", {"budget_tokens": 500, "high_water": "0.5"}, "high_water"),
        ("recall/", {"budget_tokens": 500, "header": 0}, "header"),
        ("", {"title": 0}, "title"),
        ("", {"ttl_seconds": "60"}, "ttl_seconds"),
        ("", {"fold_budget": 500.0}, "fold_budget"),
    ],
)
def test_values_are_never_coerced(
    client: APIClient, thread: Thread, path: str, body: dict[str, Any], field: str
) -> None:
    before = rows()
    url = f"{API}threads/{thread.pk}/{path}"
    response = client.patch(url, body, format="json") if not path else client.post(
        url, body, format="json")
    assert response.status_code == 400, response.content
    assert list(response.json()) == [field]
    assert rows() == before


def test_a_lookup_message_follows_the_append_rules(client: APIClient, thread: Thread) -> None:
    url = f"{API}threads/{thread.pk}/folds/lookup/"
    response = client.post(url, {"message": {"role": "tool", "content": "x"}}, format="json")
    assert response.status_code == 400
    assert list(response.json()["message"]) == ["tool_call_id"]


# ---------------------------------------------------------------- the message rules


ROLE = st.sampled_from(["user", "assistant", "system", "tool"])
# Python's whitespace, which a regex's \s does not match exactly (U+001F, U+0085 are
# whitespace to str.strip(); U+FEFF is not): the schema's rule must agree with strip().
TEXT = st.sampled_from(["", " ", "\n\t", "Where is order 7?", " x ", "\x1f", "\u3000 ",
                        "\x85", "\ufeff"])
CALLS = st.lists(st.fixed_dictionaries({"id": st.sampled_from(["c1", "c2"]),
                                        "name": st.just("lookup")}), max_size=2)


@st.composite
def messages(draw: st.DrawFn) -> dict[str, Any]:
    message: dict[str, Any] = {"role": draw(ROLE)}
    for name, values in (("content", TEXT), ("tool_calls", CALLS), ("tool_call_id", TEXT),
                         ("tool_name", TEXT)):
        if draw(st.booleans()):
            message[name] = draw(values)
    return message


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(message=messages())
def test_the_schema_states_the_message_rules_append_applies(message: dict[str, Any]) -> None:
    document = served_schema()
    component = document["components"]["schemas"]["MessageRequest"]
    try:
        validate(document, component, message)
        by_schema = True
    except jsonschema.ValidationError:
        by_schema = False
    trimmed = {k: v.strip() if k in ("tool_call_id", "tool_name") else v
               for k, v in message.items()}  # the serializer trims these, as DRF does
    try:
        clean_message(trimmed, 0)
        by_append = True
    except InvalidMessageError:
        by_append = False
    assert by_schema == by_append, message
