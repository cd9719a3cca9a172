"""Messages as they come: Chat Completions messages and Responses input items, as the
official ``openai`` client produces and consumes them (dicts and its pydantic objects),
appended through Python and REST and recalled in the same shape.

Shapes are checked against the ``openai`` package's own types; nothing of ours is mocked.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionAssistantMessageParam,
    ChatCompletionMessage,
    ChatCompletionMessageParam,
    ChatCompletionMessageToolCallParam,
    ChatCompletionToolMessageParam,
    ChatCompletionUserMessageParam,
)
from openai.types.responses import (
    EasyInputMessageParam,
    ResponseFunctionToolCall,
    ResponseFunctionToolCallOutputItem,
    ResponseFunctionToolCallParam,
    ResponseInputItemParam,
    ResponseOutputMessage,
    ResponseOutputMessageParam,
    ResponseReasoningItem,
    ResponseReasoningItemParam,
)
from openai.types.responses.response_input_item_param import FunctionCallOutput
from pydantic import ConfigDict, TypeAdapter
from rest_framework.test import APIClient

from agentmemory import services
from agentmemory.exceptions import InvalidMessageError
from agentmemory.integrations.openai_shapes import reply_message
from agentmemory.models import MemoryEntry, Thread
from agentmemory.shapes import (
    CHAT_PROVIDER_FIELDS,
    FLAT_FIELDS,
    ITEM_FIELDS,
    ITEM_PROVIDER_FIELDS,
    PROVIDER_KEY,
)
from tests.helpers import api_client_of

pytestmark = pytest.mark.django_db

CHAT = TypeAdapter(list[ChatCompletionMessageParam], config=ConfigDict(extra="forbid"))
RESPONSES = TypeAdapter(list[ResponseInputItemParam], config=ConfigDict(extra="forbid"))
HYPOTHESIS = settings(max_examples=25, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def recalled(thread: Thread) -> Any:
    """The whole conversation, verbatim (no fold is asked)."""
    result = services.recall(thread, 10**6, mode="background", load_count=None)
    assert result.omitted == 0 and not result.summaries_used
    return result


# ---------------------------------------------------------------- conversations

words = st.from_regex(r"[A-Za-z][A-Za-z0-9 ,.?]{0,40}[A-Za-z0-9.?]", fullmatch=True)
arguments = st.dictionaries(st.sampled_from(["order", "city", "n"]),
                            st.one_of(st.integers(0, 999), words), max_size=2)


@st.composite
def conversations(draw: Any) -> list[dict[str, Any]]:
    """Turns of a tool-using conversation as abstract steps, with call ids unique in it."""
    steps: list[dict[str, Any]] = []
    for turn in range(draw(st.integers(1, 5))):
        steps.append({"kind": "user", "text": draw(words)})
        for round_ in range(draw(st.integers(0, 2))):
            calls = [
                {"id": f"call_{turn}_{round_}_{n}", "name": draw(st.sampled_from(
                    ["lookup_order", "weather"])), "arguments": json.dumps(draw(arguments))}
                for n in range(draw(st.integers(1, 3)))
            ]
            steps.append({"kind": "calls", "calls": calls,
                          "text": draw(st.one_of(st.none(), words))})
            steps.extend({"kind": "result", "id": call["id"], "text": draw(words)}
                         for call in calls)
        steps.append({"kind": "reply", "text": draw(words)})
    return steps


def as_chat(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as the client sends it to ``chat.completions.create``."""
    messages: list[dict[str, Any]] = []
    for step in steps:
        if step["kind"] == "user":
            messages.append(ChatCompletionUserMessageParam(role="user", content=step["text"]))
        elif step["kind"] == "calls":
            messages.append(ChatCompletionAssistantMessageParam(
                role="assistant", content=step["text"], tool_calls=[
                    ChatCompletionMessageToolCallParam(
                        id=c["id"], type="function",
                        function={"name": c["name"], "arguments": c["arguments"]})
                    for c in step["calls"]
                ]))
        elif step["kind"] == "result":
            messages.append(ChatCompletionToolMessageParam(
                role="tool", tool_call_id=step["id"], content=step["text"]))
        else:
            messages.append(ChatCompletionAssistantMessageParam(
                role="assistant", content=step["text"]))
    return messages  # type: ignore[return-value]


def as_items(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as Responses input items."""
    items: list[dict[str, Any]] = []
    for step in steps:
        if step["kind"] in ("user", "reply"):
            role = "user" if step["kind"] == "user" else "assistant"
            items.append(EasyInputMessageParam(type="message", role=role,  # type: ignore[arg-type]
                                               content=step["text"]))
        elif step["kind"] == "calls":
            if step["text"]:
                items.append(EasyInputMessageParam(type="message", role="assistant",
                                                   content=step["text"]))
            items.extend(ResponseFunctionToolCallParam(
                type="function_call", call_id=c["id"], name=c["name"],
                arguments=c["arguments"]) for c in step["calls"])
        else:
            items.append(FunctionCallOutput(type="function_call_output", call_id=step["id"],
                                            output=step["text"]))
    return items  # type: ignore[return-value]


# ---------------------------------------------------------------- round trips


@given(steps=conversations())
@HYPOTHESIS
def test_a_chat_completions_conversation_comes_back_as_it_went_in(
    steps: list[dict[str, Any]],
) -> None:
    messages = as_chat(steps)
    CHAT.validate_python(messages)
    thread = Thread.objects.create()
    services.append(thread, messages)
    assert recalled(thread).as_chat_messages() == messages


@given(steps=conversations())
@HYPOTHESIS
def test_responses_input_items_come_back_as_they_went_in(steps: list[dict[str, Any]]) -> None:
    items = as_items(steps)
    RESPONSES.validate_python(items)
    thread = Thread.objects.create()
    # An assistant text and the calls after it are separate items, so separate entries.
    services.append(thread, items)
    assert recalled(thread).as_response_input() == items


@given(steps=conversations())
@HYPOTHESIS
def test_chat_messages_over_rest_come_back_as_they_went_in(
    steps: list[dict[str, Any]], api: tuple[APIClient, Thread]
) -> None:
    client, _ = api
    thread = Thread.objects.create(owner=api[1].owner)
    path = f"/api/memory/threads/{thread.pk}/"
    messages = as_chat(steps)
    response = client.post(f"{path}entries/", {"entries": messages}, format="json")
    assert response.status_code == 201, response.json()
    recall = client.post(f"{path}recall/?format=chat",
                         {"budget_tokens": 10**6, "load_count": None}, format="json")
    assert recall.status_code == 200, recall.json()
    assert recall.json()["chat_messages"] == messages


@pytest.fixture
def api(fresh_cache: None, user: Any) -> tuple[APIClient, Thread]:
    """An API client of ``user``'s that answers a 500 instead of raising, and an empty
    thread of theirs."""
    return api_client_of(user, raise_request_exception=False), Thread.objects.create(owner=user)


# ---------------------------------------------------------------- the SDK's own objects

COMPLETION = {
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
    "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None, "message": {
        "role": "assistant", "content": None, "refusal": None, "annotations": [],
        "audio": None, "function_call": None,
        "tool_calls": [{"id": "call_7", "type": "function", "function": {
            "name": "lookup_order", "arguments": '{"order": "NW-48217"}'}}],
    }}],
}
NESTED_CALL = {"id": "call_7", "type": "function",
               "function": {"name": "lookup_order", "arguments": '{"order": "NW-48217"}'}}


@pytest.mark.parametrize("form", ["object", "model_dump", "reply_message"])
def test_the_assistant_message_a_completion_returns_is_stored(form: str) -> None:
    """Measured: the model_dump() of this message was refused (annotations, audio,
    function_call, refusal unknown; content None not a string)."""
    message = ChatCompletion.model_validate(COMPLETION).choices[0].message
    given = {"object": message, "model_dump": message.model_dump(),
             "reply_message": reply_message(message)}[form]
    thread = Thread.objects.create()
    services.append(thread, [{"role": "user", "content": "Where is NW-48217?"}, given,
                             {"role": "tool", "tool_call_id": "call_7", "content": "shipped"}])
    chat = recalled(thread).as_chat_messages()
    assert chat[1] == {"role": "assistant", "content": None, "tool_calls": [NESTED_CALL]}
    CHAT.validate_python(chat)


def test_provider_fields_with_a_value_are_kept_in_metadata_and_empty_ones_dropped() -> None:
    message = ChatCompletionMessage(role="assistant", content="No.", refusal="I can't.",
                                    annotations=[], audio=None)
    thread = Thread.objects.create()
    [entry] = services.append(thread, [
        {"role": "user", "content": "Tell me a secret.", "name": "ada"}, message,
    ])[1:]
    assert entry.metadata == {PROVIDER_KEY: {"refusal": "I can't."}}
    user = MemoryEntry.objects.get(thread=thread, role="user")
    assert user.metadata == {PROVIDER_KEY: {"name": "ada"}}


def test_the_responses_objects_the_sdk_returns_are_stored() -> None:
    output = [
        ResponseReasoningItem(id="rs_1", type="reasoning", summary=[
            {"type": "summary_text", "text": "The user wants the order status."}]),
        ResponseFunctionToolCall(id="fc_1", type="function_call", call_id="call_1",
                                 name="lookup_order", arguments='{"order": 1}',
                                 status="completed"),
        ResponseFunctionToolCallOutputItem(id="fco_1", type="function_call_output",
                                           call_id="call_1", output="shipped",
                                           status="completed"),
        ResponseOutputMessage(id="msg_1", type="message", role="assistant",
                              status="completed", content=[
                                  {"type": "output_text", "text": "It shipped.",
                                   "annotations": []},
                                  {"type": "output_text", "text": "Anything else?",
                                   "annotations": []}]),
    ]
    thread = Thread.objects.create()
    services.append(thread, {"role": "user", "content": "Where is order 1?"})
    entries = services.append(thread, output)
    assert [(e.role, e.content) for e in entries] == [
        ("assistant", "The user wants the order status."), ("assistant", ""),
        ("tool", "shipped"), ("assistant", "It shipped.\nAnything else?"),
    ]
    assert entries[1].tool_calls == [
        {"id": "call_1", "name": "lookup_order", "arguments": '{"order": 1}'}]
    assert entries[1].metadata == {PROVIDER_KEY: {"id": "fc_1", "status": "completed"}}
    assert entries[3].metadata[PROVIDER_KEY]["id"] == "msg_1"
    items = recalled(thread).as_response_input()
    RESPONSES.validate_python(items)
    assert items[2:] == [
        {"type": "function_call", "call_id": "call_1", "name": "lookup_order",
         "arguments": '{"order": 1}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "shipped"},
        {"type": "message", "role": "assistant", "content": "It shipped.\nAnything else?"},
    ]


def test_a_refusal_is_stored_as_what_the_model_said() -> None:
    message = ChatCompletion.model_validate({**COMPLETION, "choices": [{
        "index": 0, "finish_reason": "stop", "logprobs": None, "message": {
            "role": "assistant", "content": None, "refusal": "I can't help with that."}}],
    }).choices[0].message
    thread = Thread.objects.create()
    [_, entry] = services.append(thread, [{"role": "user", "content": "Help me."}, message])
    assert entry.content == "I can't help with that."
    assert entry.metadata == {PROVIDER_KEY: {"refusal": "I can't help with that."}}


def test_null_metadata_is_no_metadata_and_provider_fields_are_kept(
    api: tuple[APIClient, Thread]
) -> None:
    """Found by Schemathesis: a null metadata beside kept provider fields was replaced
    over REST, where a null metadata alone is refused by the flat form."""
    client, thread = api
    item = {"type": "reasoning", "id": "rs_1", "metadata": None,
            "summary": [{"type": "summary_text", "text": "Look the order up."}]}
    response = client.post(f"/api/memory/threads/{thread.pk}/entries/", item, format="json")
    assert response.status_code == 201, response.json()
    [python] = services.append(thread, item)
    assert response.json()[0]["metadata"] == python.metadata == {PROVIDER_KEY: {
        "id": "rs_1", "summary": [{"type": "summary_text", "text": "Look the order up."}]}}


def test_developer_messages_are_stored_as_system() -> None:
    thread = Thread.objects.create()
    services.append(thread, [
        {"role": "developer", "content": "Answer in French."},
        {"type": "message", "role": "developer", "content": [
            {"type": "input_text", "text": "Be brief."}]},
        {"role": "user", "content": [{"type": "text", "text": "Hello"},
                                     {"type": "text", "text": "there"}]},
    ])
    assert recalled(thread).as_chat_messages() == [
        {"role": "system", "content": "Answer in French."},
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello\nthere"},
    ]


@pytest.mark.parametrize(("message", "field"), [
    ({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
     "content"),
    ({"type": "message", "role": "user", "content": [
        {"type": "input_image", "image_url": "x", "detail": "auto"}]}, "content"),
    ({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
     "summary"),
    ({"type": "web_search_call", "id": "ws_1", "status": "completed"}, "type"),
    ({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "custom", "custom": {"name": "x", "input": "y"}}]}, "tool_calls"),
    ({"role": "user", "content": "hi", "contnet": "typo"}, "contnet"),
    ({"type": "function_call", "call_id": "c", "name": "n", "arguments": "{}",
      "colour": "blue"}, "colour"),
    # Found by Schemathesis: a type that is not a string was a 500 (unhashable).
    ({"type": "reasoning", "summary": [], "content": [{"type": {}, "text": "x"}]},
     "content"),
    ({"type": "reasoning", "summary": [{"type": "summary_text", "text": "0"}],
      "content": {}}, "content"),
    ({"type": "reasoning", "summary": [{"type": "summary_text", "text": "0"}],
      "content": "AAA"}, "content"),
    ({"type": "reasoning", "summary": None, "content": [
        {"type": "reasoning_text", "text": "x"}]}, "summary"),
    ({"type": {"kind": "message"}, "role": "user", "content": "hi"}, "type"),
])
def test_what_cannot_be_stored_is_refused_by_name_and_writes_nothing(
    message: dict[str, Any], field: str, api: tuple[APIClient, Thread]
) -> None:
    client, thread = api
    with pytest.raises(InvalidMessageError) as raised:
        services.append(thread, [{"role": "user", "content": "first"}, message])
    assert raised.value.field == field and raised.value.index == 1
    response = client.post(f"/api/memory/threads/{thread.pk}/entries/", message,
                           format="json")
    assert response.status_code == 400 and field in response.json(), response.json()
    assert not MemoryEntry.objects.filter(thread=thread).exists()


def test_the_nested_tool_call_form_is_accepted_over_rest(api: tuple[APIClient, Thread]) -> None:
    """Measured: this body got {"function": ["Unknown field."]}."""
    client, thread = api
    path = f"/api/memory/threads/{thread.pk}/entries/"
    assert client.post(path, {"role": "user", "content": "Where is NW-48217?"},
                       format="json").status_code == 201
    response = client.post(path, {"role": "assistant", "content": None,
                                  "tool_calls": [NESTED_CALL]}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()[0]["tool_calls"] == [
        {"id": "call_7", "name": "lookup_order", "arguments": '{"order": "NW-48217"}'}]
    dumped = ChatCompletion.model_validate(COMPLETION).choices[0].message.model_dump()
    dumped["tool_calls"][0]["id"] = "call_8"
    response = client.post(path, dumped, format="json")
    assert response.status_code == 201, response.json()


# ---------------------------------------------------------------- the rule stays complete


@pytest.mark.parametrize("model", [ChatCompletionMessage])
def test_every_field_of_the_sdks_chat_message_has_a_rule(model: Any) -> None:
    """A field a newer ``openai`` adds fails here until it is mapped or kept."""
    names = {field.alias or name for name, field in model.model_fields.items()}
    assert names <= FLAT_FIELDS | CHAT_PROVIDER_FIELDS


@pytest.mark.parametrize(("kind", "types"), [
    ("message", [ResponseOutputMessage, ResponseOutputMessageParam, EasyInputMessageParam]),
    ("function_call", [ResponseFunctionToolCall, ResponseFunctionToolCallParam]),
    ("function_call_output", [ResponseFunctionToolCallOutputItem, FunctionCallOutput]),
    ("reasoning", [ResponseReasoningItem, ResponseReasoningItemParam]),
])
def test_every_field_of_the_sdks_items_has_a_rule(kind: str, types: list[Any]) -> None:
    for model in types:
        fields = getattr(model, "model_fields", None)
        names = ({field.alias or name for name, field in fields.items()} if fields
                 else set(model.__annotations__))
        assert names <= ITEM_FIELDS[kind] | ITEM_PROVIDER_FIELDS[kind] | {"type"}, model


# ---------------------------------------------------------------- the schema tells the truth


def json_schema(node: Any) -> Any:
    """OpenAPI 3.0's ``nullable`` as JSON Schema, as Schemathesis reads it."""
    if isinstance(node, list):
        return [json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {key: json_schema(value) for key, value in node.items() if key != "nullable"}
    return {"anyOf": [converted, {"type": "null"}]} if node.get("nullable") else converted


_served: list[dict[str, Any]] = []


def served_schema(client: APIClient) -> dict[str, Any]:
    """The schema the API serves, fetched once (it depends on no row)."""
    if not _served:
        _served.append(json_schema(client.get(
            "/api/memory/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()))
    return _served[0]


TEXTS = st.sampled_from(["", " ", "Where is order 7?", None, [], [{"type": "text", "text": "hi"}],
                         [{"type": "text", "text": " "}], [{"type": "refusal", "refusal": "no"}],
                         [{"type": "input_text", "text": "hi"}],
                         [{"type": "image_url", "image_url": {"url": "x"}}], 7,
                         [{"type": {}, "text": "hi"}]])
CALL_FORMS = st.sampled_from([
    None, [], [{"id": "c1", "name": "lookup"}], [NESTED_CALL],
    [{"id": "c1", "function": {"name": "lookup"}}],
    [{"id": "c1", "type": "custom", "custom": {"name": "x", "input": "y"}}],
    [{"id": "c1", "type": "function", "function": {"name": "x", "arguments": "{}",
                                                  "strict": True}}],
])


@st.composite
def shapes(draw: Any) -> dict[str, Any]:
    """Chat messages and Responses items, valid or not."""
    if draw(st.booleans()):
        message: dict[str, Any] = {"role": draw(st.sampled_from(
            ["user", "system", "developer", "assistant", "tool", "function"]))}
        optional = [("content", TEXTS), ("tool_calls", CALL_FORMS),
                    ("tool_call_id", st.sampled_from(["", "call_1"])),
                    ("refusal", st.sampled_from([None, "no", " ", 3, "0"])),
                    ("annotations", st.just([])), ("contnet", st.just("typo")),
                    ("metadata", st.sampled_from([None, {"k": 1}]))]
    else:
        kind = draw(st.sampled_from(["message", "function_call", "function_call_output",
                                     "reasoning", "web_search_call", {}, None]))
        message = {"type": kind}
        summary = draw(st.sampled_from([None, {}, [
            {"type": draw(st.sampled_from(["summary_text", {}])),
             "text": draw(st.sampled_from(["", "why"]))}]]))
        optional = [("role", st.sampled_from(["user", "assistant", "developer", "tool"])),
                    ("content", TEXTS), ("call_id", st.sampled_from(["", "call_1"])),
                    ("name", st.sampled_from(["", "lookup"])),
                    ("arguments", st.sampled_from(["{}", None, {"a": 1}])),
                    ("output", TEXTS), ("summary", st.just(summary)),
                    ("content", st.sampled_from([None, {}, "AAA", [
                        {"type": "reasoning_text", "text": "x"}]])),
                    ("id", st.just("x_1")), ("status", st.just("completed")),
                    ("colour", st.just("blue")), ("metadata", st.sampled_from([None, {"k": 1}]))]
    for name, values in optional:
        if draw(st.integers(0, 3)):
            message[name] = draw(values)
    return message


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(message=shapes())
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_schema_states_what_append_takes_in_the_openai_shapes(
    message: dict[str, Any], api: tuple[APIClient, Thread]
) -> None:
    client, thread = api[0], Thread.objects.create(owner=api[1].owner)
    document = served_schema(client)
    body = document["paths"]["/api/memory/threads/{thread_id}/entries/"]["post"][
        "requestBody"]["content"]["application/json"]["schema"]
    resolver = jsonschema.RefResolver.from_schema(document)
    by_schema = jsonschema.Draft7Validator(body, resolver=resolver).is_valid(message)
    if message.get("tool_call_id") or message.get("type") == "function_call_output":
        # A result needs its call stored first (else 409, a conflict the schema can't see).
        services.append(thread, [{"role": "user", "content": "Where is it?"}, {
            "role": "assistant", "tool_calls": [{"id": "call_1", "name": "lookup"}]}])
    response = client.post(f"/api/memory/threads/{thread.pk}/entries/", message,
                           format="json")
    assert response.status_code in (201, 400), response.content
    assert by_schema == (response.status_code == 201), (message, response.json())


def test_the_agent_loop_page_example_appends_messages_as_they_come() -> None:
    thread = Thread.objects.create()
    reply = ChatCompletion.model_validate(COMPLETION).choices[0].message
    # --8<-- [start:as-they-come]
    services.append(thread, [
        {"role": "developer", "content": "Answer briefly."},
        {"role": "user", "content": [{"type": "text", "text": "Where is NW-48217?"}]},
        reply,  # the ChatCompletionMessage the client returned: content None, tool_calls
        {"type": "function_call_output", "call_id": "call_7", "output": "in transit"},
    ])
    messages = services.recall(thread, 4000).as_chat_messages()
    # --8<-- [end:as-they-come]
    assert messages == [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Where is NW-48217?"},
        {"role": "assistant", "content": None, "tool_calls": [NESTED_CALL]},
        {"role": "tool", "tool_call_id": "call_7", "content": "in transit"},
    ]
