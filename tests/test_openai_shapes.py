"""Contexts ready to send: a recall in the Chat Completions and Responses shapes, the
REST ``?format=``, and ``chat_turn`` with the real ``openai`` client on the loopback server.

The shapes are validated against the ``openai`` package's own request types (its
TypedDicts, through pydantic, extra keys forbidden), so a shape the SDK would not accept
fails here.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai import OpenAI, omit
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputItemParam
from pydantic import ConfigDict, TypeAdapter
from rest_framework.test import APIClient

from agentmemory import services
from agentmemory.integrations.openai_shapes import ToolLoopError, chat_turn, prompt_cache_key
from agentmemory.models import MemoryEntry, RecallReceipt, Thread
from tests.openai_server import TEST_API_KEY, TEST_MODEL, OpenAIServer, Reply
from tests.test_recall_contract import turns

pytestmark = pytest.mark.django_db

SUMMARY_LABEL = "[summary of earlier turns"


def forbid_extra(annotation: Any) -> TypeAdapter[Any]:
    """A validator of ``annotation`` (the SDK's request TypedDicts) that refuses unknown keys."""
    return TypeAdapter(annotation, config=ConfigDict(extra="forbid"))


CHAT = forbid_extra(list[ChatCompletionMessageParam])
RESPONSES = forbid_extra(list[ResponseInputItemParam])


def check_chat(messages: list[dict[str, Any]]) -> None:
    """Accepted by the SDK's types, and every tool result right after its call."""
    CHAT.validate_python(messages)
    open_calls: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, "a tool result without its call"
            open_calls.discard(message["tool_call_id"])
        else:
            assert not open_calls, "a tool call without its result"
            open_calls = {call["id"] for call in message.get("tool_calls") or []}
    assert not open_calls


def check_responses(items: list[dict[str, Any]]) -> None:
    RESPONSES.validate_python(items)
    calls = [item["call_id"] for item in items if item["type"] == "function_call"]
    outputs = [item["call_id"] for item in items if item["type"] == "function_call_output"]
    assert sorted(calls) == sorted(outputs)
    for item in items:
        if item["type"] == "function_call_output":
            before = items[: items.index(item)]
            assert any(b.get("call_id") == item["call_id"] for b in before)


def stored(message: dict[str, Any]) -> dict[str, Any]:
    """What a conversation message looks like in the Chat shape."""
    if message["role"] == "tool":
        return {"role": "tool", "tool_call_id": message["tool_call_id"],
                "content": message["content"]}
    if message.get("tool_calls"):
        return {"role": "assistant", "content": message["content"] or None, "tool_calls": [
            {"id": c["id"], "type": "function",
             "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in message["tool_calls"]
        ]}
    return {"role": message["role"], "content": message["content"]}


@given(conversation=turns())
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_a_verbatim_context_is_the_conversation_in_both_shapes(
    conversation: list[list[dict[str, Any]]],
) -> None:
    thread = Thread.objects.create()
    messages = [message for turn in conversation for message in turn]
    services.append(thread, messages)
    result = services.recall(thread, 10**6, mode="background", load_count=None)
    assert result.omitted == 0 and not result.summaries_used
    chat = result.as_chat_messages()
    check_chat(chat)
    assert chat == [stored(message) for message in messages]
    items = result.as_response_input()
    check_responses(items)
    # The same conversation, one item per message and per tool call.
    assert len(items) == sum(
        (1 if m["content"] or m["role"] == "tool" else 0) + len(m.get("tool_calls", []))
        for m in messages
    )


@given(conversation=turns(), budget=st.sampled_from([400, 600, 1000]))
@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_a_folded_context_leads_with_the_summary_as_a_system_message(
    conversation: list[list[dict[str, Any]]], budget: int
) -> None:
    thread = Thread.objects.create()
    for turn in conversation:
        services.append(thread, turn)
        result = services.recall(thread, budget)
        if result.budget_decline:
            continue
        chat, items = result.as_chat_messages(), result.as_response_input()
        check_chat(chat)
        check_responses(items)
        kinds = [m.kind for m in result.messages]
        leading = len(kinds) - len(list(itertools.dropwhile(lambda k: k == "summary", kinds)))
        assert "summary" not in kinds[leading:], "summaries lead the context"
        for summary, message, item in zip(result.messages[:leading], chat, items, strict=False):
            assert message == {"role": "system", "content": summary.content}
            assert item == {"type": "message", "role": "system", "content": summary.content}
            assert summary.content.startswith(SUMMARY_LABEL)


# ---------------------------------------------------------------- chat_turn


def lookup_order(name: str, arguments: str) -> str:
    assert name == "lookup_order"
    return f"order {json.loads(arguments)['order']} shipped on 2026-12-03 by DHL"


TOOLS = [{"type": "function", "function": {
    "name": "lookup_order", "description": "Look an order up.",
    "parameters": {"type": "object", "properties": {"order": {"type": "string"}},
                   "required": ["order"]},
}}]


@pytest.fixture
def openai_client(openai_server: OpenAIServer) -> OpenAI:
    """The official ``openai`` client, pointed at the loopback server."""
    return OpenAI(api_key=TEST_API_KEY, base_url=openai_server.base_url, max_retries=0)


def test_chat_turn_runs_a_tool_loop_with_the_official_client(
    openai_server: OpenAIServer, openai_client: OpenAI
) -> None:
    openai_server.script(
        Reply(tool_calls=({"id": "call_1", "name": "lookup_order",
                           "arguments": '{"order": "NW-48217"}'},)),
        Reply("Your order NW-48217 shipped on 2026-12-03."),
        Reply("You are welcome."),
    )
    thread = Thread.objects.create()
    client = openai_client  # the name the snippet in docs/agent-loop.md reads
    # --8<-- [start:chat-turn]
    for text in ["Where is my order NW-48217?", "Thanks!"]:
        reply = chat_turn(client, thread, text, model="gpt-4o-mini", budget_tokens=4000,
                          instructions="You are a shop assistant.",
                          tools=TOOLS, call_tool=lookup_order)
        print(reply.content)
    # --8<-- [end:chat-turn]
    assert reply.content == "You are welcome."
    check_the_two_turns(openai_server, thread)


def test_chat_turn_sends_one_prompt_cache_key_per_thread(
    openai_server: OpenAIServer, openai_client: OpenAI
) -> None:
    """Every request of a thread, tool rounds included, carries the thread's key; another
    thread has another; the key names neither the thread's id nor anything of its owner."""
    openai_server.script(
        Reply(tool_calls=({"id": "call_1", "name": "lookup_order",
                           "arguments": '{"order": "NW-48217"}'},)),
        Reply("Shipped."), Reply("You are welcome."), Reply("Hello."),
    )
    first = Thread.objects.create(title="Ada Lovelace's orders", client_key="ada@example.com")
    second = Thread.objects.create()
    for text in ["Where is my order NW-48217?", "Thanks!"]:
        chat_turn(openai_client, first, text, model=TEST_MODEL, budget_tokens=4000,
                  tools=TOOLS, call_tool=lookup_order)
    chat_turn(openai_client, second, "Hi", model=TEST_MODEL, budget_tokens=4000)

    keys = [request.body.get("prompt_cache_key") for request in openai_server.chat_requests]
    assert keys == [prompt_cache_key(first)] * 3 + [prompt_cache_key(second)]
    assert keys[0] != keys[3]
    assert keys[0] == prompt_cache_key(Thread.objects.get(pk=first.pk))  # stable
    # A fixed prefix and a digest, no more: not the id, title or client key.
    prefix, _, digest = keys[0].rpartition("-")
    assert (prefix, len(digest), set(digest) <= set("0123456789abcdef")) == (
        "agentmemory-thread", 32, True)
    # Under another SECRET_KEY (another deployment on the same account): another key.
    with override_settings(SECRET_KEY="another-deployment-" + "x" * 40):
        assert prompt_cache_key(first) != keys[0]


@pytest.mark.parametrize(
    ("given", "sent"),
    [
        pytest.param({"prompt_cache_key": "my-key"}, "my-key", id="keyword"),
        pytest.param({"extra_body": {"prompt_cache_key": "my-key"}}, "my-key", id="extra_body"),
        pytest.param({"prompt_cache_key": omit}, None, id="omit"),
    ],
)
def test_chat_turn_sends_the_callers_own_prompt_cache_key_instead(
    openai_server: OpenAIServer, openai_client: OpenAI, given: dict[str, Any], sent: str | None
) -> None:
    thread = Thread.objects.create()
    chat_turn(openai_client, thread, "Hi", model=TEST_MODEL, budget_tokens=4000, **given)
    (request,) = openai_server.chat_requests
    assert request.body.get("prompt_cache_key") == sent
    assert ("prompt_cache_key" in request.body) is (sent is not None)


def test_chat_turn_stops_a_model_that_never_stops_calling_tools(
    openai_server: OpenAIServer, openai_client: OpenAI
) -> None:
    call = {"id": "call_x", "name": "lookup_order", "arguments": '{"order": "A"}'}
    openai_server.script(*[Reply(tool_calls=({**call, "id": f"call_{n}"},)) for n in range(3)])
    thread = Thread.objects.create()
    with pytest.raises(ToolLoopError, match="after 3 rounds"):
        chat_turn(openai_client, thread, "loop", model=TEST_MODEL, budget_tokens=4000,
                  tools=TOOLS, call_tool=lookup_order, max_rounds=3)
    assert len(openai_server.chat_requests) == 3


def test_chat_turn_with_tools_and_nothing_to_run_them_writes_nothing(openai_client: OpenAI) -> None:
    thread = Thread.objects.create()
    with pytest.raises(ToolLoopError, match="call_tool"):
        chat_turn(openai_client, thread, "hi", model=TEST_MODEL, budget_tokens=4000, tools=TOOLS)
    assert not MemoryEntry.objects.filter(thread=thread).exists()


# ---------------------------------------------------------------- REST ?format=


@pytest.fixture
def api(fresh_cache: None, client: APIClient, user: Any) -> tuple[APIClient, Thread]:
    """The API client of ``user`` and a thread of theirs with one turn: a tool call, its
    result and the answer."""
    thread = Thread.objects.create(owner=user)
    services.append(thread, [
        {"role": "user", "content": "Where is NW-48217?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "name": "lookup_order", "arguments": '{"order": "NW-48217"}'}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "shipped"},
        {"role": "assistant", "content": "It shipped."},
    ])
    return client, thread


@pytest.mark.parametrize(("shape", "field", "method"), [
    ("chat", "chat_messages", "as_chat_messages"),
    ("responses", "response_input", "as_response_input"),
])
def test_rest_recall_returns_the_context_in_the_asked_shape(
    api: tuple[APIClient, Thread], shape: str, field: str, method: str
) -> None:
    client, thread = api
    path = f"/api/memory/threads/{thread.pk}/recall/"
    response = client.post(f"{path}?format={shape}", {"budget_tokens": 4000}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    expected = getattr(services.recall(thread, 4000), method)()
    assert body[field] == expected
    (check_chat if shape == "chat" else check_responses)(body[field])
    other = {"chat_messages", "response_input"} - {field}
    assert not other & set(body)
    plain = client.post(path, {"budget_tokens": 4000}, format="json").json()
    assert not {"chat_messages", "response_input"} & set(plain)


def test_rest_recall_refuses_an_unknown_format_and_writes_nothing(
    api: tuple[APIClient, Thread], settings: Any
) -> None:
    client, thread = api
    settings.AGENTMEMORY = {"RECEIPTS": True}
    response = client.post(f"/api/memory/threads/{thread.pk}/recall/?format=xml",
                           {"budget_tokens": 4000}, format="json")
    assert response.status_code == 400
    assert "format" in response.json()
    assert not RecallReceipt.objects.exists()


def test_another_users_thread_is_a_404_whatever_the_format(
    api: tuple[APIClient, Thread],
) -> None:
    client, _ = api
    stranger = Thread.objects.create(owner=get_user_model().objects.create_user("eve"))
    for shape in ("chat", "xml"):
        response = client.post(f"/api/memory/threads/{stranger.pk}/recall/?format={shape}",
                               {"budget_tokens": 4000}, format="json")
        assert response.status_code == 404


def check_the_two_turns(openai_server: OpenAIServer, thread: Thread) -> list[dict[str, Any]]:
    """What `chat_turn` (and `achat_turn`) sent and stored for the documented two turns:
    a tool round, then a plain answer; returns the request bodies."""
    bodies = [request.body for request in openai_server.chat_requests]
    assert len(bodies) == 3
    for body in bodies:
        check_chat(body["messages"])
        assert body["messages"][0] == {"role": "system", "content": "You are a shop assistant."}
        assert body["tools"] == TOOLS
        assert body["prompt_cache_key"] == prompt_cache_key(thread)
    # The second request carries the call and its result; the third the whole first turn.
    assert bodies[1]["messages"][1:] == [
        {"role": "user", "content": "Where is my order NW-48217?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "lookup_order", "arguments": '{"order": "NW-48217"}'}}]},
        {"role": "tool", "tool_call_id": "call_1",
         "content": "order NW-48217 shipped on 2026-12-03 by DHL"},
    ]
    assert bodies[2]["messages"][1:] == [
        *bodies[1]["messages"][1:],
        {"role": "assistant", "content": "Your order NW-48217 shipped on 2026-12-03."},
        {"role": "user", "content": "Thanks!"},
    ]
    rows = list(MemoryEntry.objects.filter(thread=thread).order_by("position")
                .values_list("role", "turn"))
    assert rows == [("user", 1), ("assistant", 1), ("tool", 1), ("assistant", 1),
                    ("user", 2), ("assistant", 2)]
    return bodies
