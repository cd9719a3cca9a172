"""The Agents SDK session: the SDK's own ``Runner`` with a scripted ``Model`` (no network),
side by side with the SDK's ``SQLiteSession`` on the same conversation.

While nothing is folded the two sessions hand the model the same items; once the oldest
turns are folded, ours hands over a summary in their place and the newest items as they
are. The model's input is what ``get_items`` returned plus the new user message.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    SQLiteSession,
    function_tool,
)
from agents.items import ModelResponse
from agents.memory import Session
from agents.models.interface import Model
from agents.usage import Usage
from asgiref.sync import async_to_sync, sync_to_async
from hypothesis import HealthCheck, given, settings
from openai import AsyncOpenAI
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage
from openai.types.responses.response_output_text import ResponseOutputText

from agentmemory import services
from agentmemory.integrations.openai_agents import ThreadSession
from agentmemory.integrations.openai_shapes import prompt_cache_key
from agentmemory.models import MemoryEntry, Thread
from tests.openai_server import DEFAULT_REPLY, TEST_API_KEY, TEST_MODEL, OpenAIServer
from tests.test_openai_shapes import RESPONSES
from tests.test_recall_contract import turns

pytestmark = pytest.mark.django_db

SUMMARY_LABEL = "[summary of earlier turns"
FILLER = ("The parcel for order {n} left the warehouse in Leeds, was scanned at the DHL hub, "
          "and is due on 2026-12-0{d}; the refund of $12.50 for the late label stays open.")

class ScriptedModel(Model):
    """The SDK's Model interface answering from a script; it records every input it got."""

    def __init__(self, script: list[Any]) -> None:
        self.script = list(script)
        self.inputs: list[list[Any]] = []

    async def get_response(self, system_instructions: Any, input: Any, model_settings: Any,
                           tools: Any, output_schema: Any, handoffs: Any, tracing: Any,
                           **kwargs: Any) -> ModelResponse:
        self.inputs.append(copy.deepcopy(input))
        return ModelResponse(output=[self.script.pop(0)], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the tests run the SDK without streaming")


def say(n: int, text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=f"msg_{n}", type="message", role="assistant", status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def call(n: int) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id=f"fc_{n}", call_id=f"call_{n}", type="function_call", name="lookup_order",
        arguments=json.dumps({"order": f"NW-{n}"}), status="completed",
    )


@function_tool
def lookup_order(order: str) -> str:
    """Look an order up."""
    return FILLER.format(n=order, d=len(order) % 9 + 1)


TURNS = 10


def script() -> list[Any]:
    """Turn n: even turns look the order up first, then every turn answers."""
    steps: list[Any] = []
    for n in range(TURNS):
        if n % 2 == 0:
            steps.append(call(n))
        steps.append(say(n, "Here is what I found. " + FILLER.format(n=f"NW-{n}", d=n % 9 + 1)))
    return steps


def question(n: int) -> str:
    return f"Where is order NW-{n}? " + FILLER.format(n=f"NW-{n - 1}", d=(n + 3) % 9 + 1)


async def run_turn(session: Any, model: ScriptedModel, n: int) -> Any:
    # --8<-- [start:run]
    agent = Agent(name="shop", instructions="Answer order questions.", model=model,
                  tools=[lookup_order])
    result = await Runner.run(agent, question(n), session=session,
                              run_config=RunConfig(tracing_disabled=True))
    # --8<-- [end:run]
    return result.final_output


def covered_count(thread: Thread) -> int:
    """How many stored originals the thread's visible summaries stand for."""
    summaries = MemoryEntry.objects.filter(thread=thread).summaries().visible()
    return sum(
        1 for summary in summaries for entry in services.expand(summary, recursive=True)
        if entry.kind == "message"
    )


def test_a_runner_conversation_matches_sqlite_session_until_folded_then_leads_with_a_summary(
    user: Any,
) -> None:
    theirs = SQLiteSession("reference")
    our_model, their_model = ScriptedModel(script()), ScriptedModel(script())
    folded_turns = []

    async def conversation() -> None:
        # In the coroutine that runs the agent, as the docs show it: the thread comes
        # from the ORM's async API (a sync `create` here raises SynchronousOnlyOperation).
        # --8<-- [start:session]
        thread = await Thread.objects.acreate(owner=user)
        session = ThreadSession(thread, budget_tokens=900, mode="inline")
        # --8<-- [end:session]
        ours = session
        assert isinstance(ours, Session)
        for n in range(TURNS):
            before = await ours.get_items()
            calls_before = len(our_model.inputs)
            assert await run_turn(ours, our_model, n) == await run_turn(theirs, their_model, n)
            # The model's first input of the turn: the session's items, then the question.
            first_input = our_model.inputs[calls_before]
            assert first_input == [*before, {"content": question(n), "role": "user"}]
            RESPONSES.validate_python(first_input)
            mine, reference = await ours.get_items(), await theirs.get_items()
            summaries = [i for i in mine if i.get("role") == "system"]
            if not summaries:
                assert mine == reference
                continue
            folded_turns.append(n)
            assert mine[: len(summaries)] == summaries, "the summary leads"
            assert all(s["content"].startswith(SUMMARY_LABEL) for s in summaries)
            kept = mine[len(summaries):]
            assert kept == reference[len(reference) - len(kept):]
            # Gapless: the summaries stand for exactly the items no longer given verbatim.
            assert await sync_to_async(covered_count)(thread) == len(reference) - len(kept)
            assert await ours.get_items(limit=3) == mine[-3:]

    async_to_sync(conversation)()
    assert folded_turns, "the conversation was long enough to fold"
    assert folded_turns == list(range(folded_turns[0], TURNS)), "once folded, it stays folded"


def test_pop_item_and_clear_session_behave_as_the_sdk_documents() -> None:
    thread = Thread.objects.create(title="kept", client_key="session-7")
    ours = ThreadSession(thread, budget_tokens=100_000, mode="background")
    theirs = SQLiteSession("reference")

    async def run() -> None:
        our_model, their_model = ScriptedModel(script()), ScriptedModel(script())
        for n in range(3):
            await run_turn(ours, our_model, n)
            await run_turn(theirs, their_model, n)
        assert await ours.get_items() == await theirs.get_items()
        for _ in range(2):
            assert await ours.pop_item() == await theirs.pop_item()
        assert await ours.get_items() == await theirs.get_items()
        await ours.clear_session()
        await theirs.clear_session()
        assert await ours.get_items() == await theirs.get_items() == []
        assert await ours.pop_item() is None
        await ours.add_items([{"role": "user", "content": "A fresh start."}])

    async_to_sync(run)()
    thread.refresh_from_db()
    assert (thread.title, thread.client_key) == ("kept", "session-7")
    assert list(MemoryEntry.objects.filter(thread=thread).values_list("content", "turn")) == [
        ("A fresh start.", 1)
    ]


def test_clear_session_erases_summaries_and_their_originals() -> None:
    thread = Thread.objects.create()
    ours = ThreadSession(thread, budget_tokens=900, mode="inline")
    model = ScriptedModel(script())

    async def run() -> list[Any]:
        for n in range(TURNS):
            await run_turn(ours, model, n)
        items = await ours.get_items()
        await ours.clear_session()
        return items

    items = async_to_sync(run)()
    assert items[0]["role"] == "system"
    assert not MemoryEntry.objects.filter(thread=thread).exists()
    assert Thread.objects.filter(pk=thread.pk).exists()


def test_items_of_a_type_not_stored_are_left_out_and_a_bad_item_writes_nothing() -> None:
    from agentmemory.exceptions import InvalidMessageError

    thread = Thread.objects.create()
    ours = ThreadSession(thread, budget_tokens=100_000, mode="background")
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    user = {"role": "user", "content": "hello"}

    async def run() -> list[Any]:
        await ours.add_items([user, reasoning])
        with pytest.raises(InvalidMessageError):
            await ours.add_items([user, {"content": "no role, no type"}])
        return await ours.get_items()

    assert async_to_sync(run)() == [user]


def test_a_sqlite_session_imported_as_a_backfill_folds_forward(user: Any) -> None:
    old = SQLiteSession("legacy-42")
    model = ScriptedModel(script())

    async def run() -> tuple[list[Any], list[Any]]:
        for n in range(TURNS):
            await run_turn(old, model, n)
        # --8<-- [start:backfill]
        thread = await Thread.objects.acreate(owner=user, client_key="legacy-42")
        session = ThreadSession(thread, budget_tokens=900, mode="inline")
        await session.add_items(await old.get_items())
        # --8<-- [end:backfill]
        return await old.get_items(), await session.get_items()

    reference, mine = async_to_sync(run)()
    thread = Thread.objects.get(client_key="legacy-42")
    assert MemoryEntry.objects.filter(thread=thread).messages().count() == len(reference)
    summaries = [i for i in mine if i.get("role") == "system"]
    assert summaries and mine[: len(summaries)] == summaries
    kept = mine[len(summaries):]
    assert kept == reference[len(reference) - len(kept):]
    assert covered_count(thread) == len(reference) - len(kept)


def responses_items(conversation: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """A conversation as the SDK keeps it: user input, output messages, calls, outputs."""
    items: list[dict[str, Any]] = []
    for n, turn in enumerate(conversation):
        for k, message in enumerate(turn):
            if message["role"] == "user":
                items.append({"content": message["content"], "role": "user"})
            elif message["role"] == "tool":
                items.append({"call_id": message["tool_call_id"], "output": message["content"],
                              "type": "function_call_output"})
            elif message.get("tool_calls"):
                items.extend(call(0).model_copy(update={
                    "id": f"fc_{c['id']}", "call_id": c["id"], "arguments": c["arguments"],
                }).model_dump(exclude_unset=True) for c in message["tool_calls"])
            else:
                items.append(say(0, message["content"]).model_copy(
                    update={"id": f"msg_{n}_{k}"}).model_dump(exclude_unset=True))
    return items


@given(conversation=turns())
@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_any_conversation_comes_back_item_for_item_while_it_fits(
    conversation: list[list[dict[str, Any]]],
) -> None:
    items = responses_items(conversation)
    session = ThreadSession(Thread.objects.create(), budget_tokens=10**6, mode="background",
                            load_count=None)

    async def run() -> list[Any]:
        await session.add_items(items)
        return await session.get_items()

    assert async_to_sync(run)() == items


def test_an_item_with_invisible_characters_is_given_back_without_them() -> None:
    session = ThreadSession(Thread.objects.create(), budget_tokens=4000, mode="background")
    item = {"role": "user", "content": "Where is\u200b my order?"}

    async def run() -> list[Any]:
        await session.add_items([item])
        return await session.get_items()

    assert async_to_sync(run)() == [
        {"type": "message", "role": "user", "content": "Where is my order?"}
    ]
    stored = MemoryEntry.objects.get(thread=session.thread)
    assert stored.content == "Where is\u200b my order?"


# ---------------------------------------------------------------- the provider's cache


def test_the_sessions_prompt_cache_key_reaches_the_provider_through_model_settings(
    openai_server: OpenAIServer,
) -> None:
    """The SDK's chat completions model on the real client, against the loopback server:
    the key passed as model settings is in every request of the thread, and another
    thread's is another. Without it, the SDK sends no key to a server that is not
    OpenAI's own."""
    client = AsyncOpenAI(api_key=TEST_API_KEY, base_url=openai_server.base_url, max_retries=0)
    model = OpenAIChatCompletionsModel(model=TEST_MODEL, openai_client=client)

    async def turn(session: ThreadSession, text: str, *, keyed: bool = True) -> None:
        # --8<-- [start:cache-key]
        agent = Agent(name="shop", instructions="Answer order questions.", model=model,
                      model_settings=ModelSettings(
                          extra_args={"prompt_cache_key": session.prompt_cache_key}))
        # --8<-- [end:cache-key]
        if not keyed:
            agent = agent.clone(model_settings=ModelSettings())
        await Runner.run(agent, text, session=session, run_config=RunConfig(tracing_disabled=True))

    first = ThreadSession(Thread.objects.create(), budget_tokens=4000, mode="inline")
    second = ThreadSession(Thread.objects.create(), budget_tokens=4000, mode="inline")

    async def run() -> None:
        await turn(first, "Where is NW-1?")
        await turn(first, "And NW-2?")
        await turn(second, "Hello.")
        await turn(second, "Hello again.", keyed=False)

    async_to_sync(run)()
    keys = [request.body.get("prompt_cache_key") for request in openai_server.chat_requests]
    assert keys == [first.prompt_cache_key] * 2 + [second.prompt_cache_key, None]
    assert first.prompt_cache_key != second.prompt_cache_key
    assert first.prompt_cache_key == prompt_cache_key(first.thread)  # chat_turn's key
    # The second turn's request holds the first turn: the session is in use.
    assert [m["content"] for m in openai_server.chat_requests[1].messages][1:3] == [
        "Where is NW-1?", DEFAULT_REPLY]
