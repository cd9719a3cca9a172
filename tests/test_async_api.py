"""The async API (issue 27): `services.aappend`, `arecall`, `asearch` and `achat_turn`,
under a running event loop, where the ORM itself refuses to run
(``SynchronousOnlyOperation``).

Most tests run their coroutine with ``async_to_sync``, as an ASGI server runs an async
view: the twins' sync work comes back to the test's thread and its database transaction.
One runs it with ``asyncio.run``, as a FastAPI app or a script does, where that work runs
on asgiref's one shared thread with a connection of its own. ``achat_turn`` is driven by
the real ``openai.AsyncOpenAI`` client over HTTP against the loopback server.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth import get_user_model
from django.core.exceptions import SynchronousOnlyOperation
from django.db import connections
from django.test import override_settings
from openai import AsyncOpenAI

from agentmemory import services, tools
from agentmemory.exceptions import InvalidMessageError
from agentmemory.integrations.openai_shapes import (
    ToolLoopError,
    achat_turn,
    chat_turn,
    reply_message,
)
from agentmemory.models import EntryKind, MemoryEntry, Role, Thread
from agentmemory.services import InvalidSearchQuery
from tests.helpers import add_turns, recording_settings
from tests.openai_server import TEST_API_KEY, TEST_MODEL, OpenAIServer, Reply
from tests.test_memory_tools import DROPS_EVERYTHING, FACT, folded_thread, searching_model
from tests.test_openai_shapes import TOOLS, check_the_two_turns

TWINS = [
    (services.aappend, services.append),
    (services.arecall, services.recall),
    (services.asearch, services.search),
]

HEADER = "Earlier, recalled in an event loop:"


def async_client(server: OpenAIServer) -> AsyncOpenAI:
    """The official async client, pointed at the loopback server."""
    return AsyncOpenAI(api_key=TEST_API_KEY, base_url=server.base_url, max_retries=0)


async def lookup_order(name: str, arguments: str) -> str:
    """An async tool: awaited by ``achat_turn``."""
    await asyncio.sleep(0)
    assert name == "lookup_order"
    return f"order {json.loads(arguments)['order']} shipped on 2026-12-03 by DHL"


def test_each_twin_is_a_coroutine_function_with_its_services_signature() -> None:
    for twin, service in [*TWINS, (achat_turn, chat_turn)]:
        assert inspect.iscoroutinefunction(twin), twin.__name__
        ours, theirs = inspect.signature(twin), inspect.signature(service)
        assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == [
            (p.name, p.kind, p.default) for p in theirs.parameters.values()
        ], twin.__name__
        assert ours.return_annotation == theirs.return_annotation, twin.__name__


@pytest.mark.django_db
def test_the_twins_store_recall_and_search_in_an_event_loop_where_the_orm_refuses() -> None:
    user = get_user_model().objects.create_user("ada")
    thread = Thread.objects.create(owner=user)
    add_turns(thread, 30)
    said = {"role": "user", "content": "My blue kettle refund is under order ZX-48213."}

    async def run() -> tuple[Any, ...]:
        # The loop is real: the sync services refuse to touch the database here.
        with pytest.raises(SynchronousOnlyOperation):
            services.append(thread, said)
        with pytest.raises(SynchronousOnlyOperation):
            services.recall(thread, 600)
        with pytest.raises(SynchronousOnlyOperation):
            services.search(user, "kettle")
        stored = await services.aappend(thread, said)
        # An inline recall folds in the call, the summarizer off the loop as well.
        context = await services.arecall(thread, 600, mode="inline", header=HEADER)
        hits = await services.asearch(user, "kettle refund")
        with pytest.raises(InvalidMessageError):
            await services.aappend(thread, {"role": "nobody", "content": "x"})
        with pytest.raises(InvalidSearchQuery):
            await services.asearch(user, "kettle", limit=0)
        return stored, context, hits

    stored, context, hits = async_to_sync(run)()
    [entry] = stored
    assert (entry.content, entry.turn) == (said["content"], 31)
    assert MemoryEntry.objects.filter(thread=thread, content=said["content"]).count() == 1
    assert context.folded_summary_id in context.summaries_used  # it folded, in the loop
    assert context.messages[-1].content == said["content"]
    assert context.text.startswith(HEADER)  # the overrides reached `recall`
    again = services.recall(thread, 600, mode="inline", header=HEADER)  # no second fold
    assert (again.messages, again.text, again.folded_summary_id) == (
        context.messages, context.text, None)
    assert [hit.entry_id for hit in hits] == [entry.pk]
    assert hits == services.search(user, "kettle refund")


@pytest.mark.django_db
def test_the_documented_async_loop_runs_with_the_async_client(
    openai_server: OpenAIServer,
) -> None:
    openai_server.script(Reply("Order NW-48217 shipped on 2026-12-03."))
    user = get_user_model().objects.create_user("ada")
    client = async_client(openai_server)

    async def run() -> Any:
        # --8<-- [start:async-services]
        thread = await Thread.objects.acreate(owner=user, title="Order help")
        await services.aappend(thread, {"role": "user", "content": "Where is NW-48217?"})
        context = await services.arecall(thread, 4000)
        completion = await client.chat.completions.create(
            model="gpt-4o-mini",
            messages=context.as_chat_messages(system="You are a shop assistant."))
        await services.aappend(thread, reply_message(completion.choices[0].message))
        hits = await services.asearch(user, "NW-48217")
        # --8<-- [end:async-services]
        return thread, hits

    thread, hits = async_to_sync(run)()
    [request] = openai_server.chat_requests
    assert request.messages == [
        {"role": "system", "content": "You are a shop assistant."},
        {"role": "user", "content": "Where is NW-48217?"},
    ]
    stored = list(MemoryEntry.objects.filter(thread=thread).order_by("position")
                  .values_list("role", "content"))
    assert stored == [("user", "Where is NW-48217?"),
                      ("assistant", "Order NW-48217 shipped on 2026-12-03.")]
    assert sorted(hit.entry_id for hit in hits) == sorted(
        MemoryEntry.objects.filter(thread=thread).values_list("pk", flat=True))


@pytest.mark.django_db
def test_achat_turn_runs_a_tool_loop_with_the_async_client(openai_server: OpenAIServer) -> None:
    openai_server.script(
        Reply(tool_calls=({"id": "call_1", "name": "lookup_order",
                           "arguments": '{"order": "NW-48217"}'},)),
        Reply("Your order NW-48217 shipped on 2026-12-03."),
        Reply("You are welcome."),
    )
    user = get_user_model().objects.create_user("ada")
    client = async_client(openai_server)
    replies: list[str] = []

    # --8<-- [start:achat-turn]
    async def answer(user, text):
        thread, _ = await Thread.objects.aget_or_create(owner=user, client_key="support")
        reply = await achat_turn(client, thread, text, model="gpt-4o-mini",
                                 budget_tokens=4000, instructions="You are a shop assistant.",
                                 tools=TOOLS, call_tool=lookup_order)
        return reply.content
    # --8<-- [end:achat-turn]

    async def run() -> None:
        for text in ["Where is my order NW-48217?", "Thanks!"]:
            replies.append(await answer(user, text))

    async_to_sync(run)()
    assert replies == ["Your order NW-48217 shipped on 2026-12-03.", "You are welcome."]
    thread = Thread.objects.get(owner=user, client_key="support")
    check_the_two_turns(openai_server, thread)


@pytest.mark.django_db
def test_achat_turn_runs_the_memory_tools_off_the_loop(openai_server: OpenAIServer) -> None:
    thread = folded_thread()
    openai_server.script(*searching_model())
    client = async_client(openai_server)

    async def run() -> Any:
        return await achat_turn(client, thread, "Which order was my kettle refund under?",
                                model=TEST_MODEL, budget_tokens=2000, memory_tools=True)

    with override_settings(AGENTMEMORY=recording_settings(DROPS_EVERYTHING)):
        reply = async_to_sync(run)()
    assert reply.content == f"Your refund is under order {FACT}."
    bodies = [request.body for request in openai_server.chat_requests]
    assert len(bodies) == 3 and all(body["tools"] == tools.chat_tools() for body in bodies)
    assert FACT not in json.dumps(bodies[0]["messages"])  # only the tools found it
    assert MemoryEntry.objects.filter(thread=thread, role=Role.TOOL,
                                      tool_name__in=tools.MEMORY_TOOL_NAMES_OFFERED).count() == 2


@pytest.mark.django_db
def test_achat_turn_stops_a_model_that_never_stops_and_refuses_tools_nothing_runs(
    openai_server: OpenAIServer,
) -> None:
    call = {"id": "call_x", "name": "lookup_order", "arguments": '{"order": "A"}'}
    openai_server.script(*[Reply(tool_calls=({**call, "id": f"call_{n}"},)) for n in range(3)])
    looping, idle = Thread.objects.create(), Thread.objects.create()
    client = async_client(openai_server)

    def plain_lookup(name: str, arguments: str) -> str:  # a plain function is called too
        return "not found"

    async def run() -> None:
        with pytest.raises(ToolLoopError, match="after 3 rounds"):
            await achat_turn(client, looping, "loop", model=TEST_MODEL, budget_tokens=4000,
                             tools=TOOLS, call_tool=plain_lookup, max_rounds=3)
        with pytest.raises(ToolLoopError, match="call_tool"):
            await achat_turn(client, idle, "hi", model=TEST_MODEL, budget_tokens=4000,
                             tools=TOOLS)

    async_to_sync(run)()
    assert len(openai_server.chat_requests) == 3
    assert list(MemoryEntry.objects.filter(thread=looping, role=Role.TOOL)
                .values_list("content", flat=True)) == ["not found"] * 3
    assert not MemoryEntry.objects.filter(thread=idle).exists()


@pytest.mark.django_db(transaction=True)
def test_a_plain_asyncio_program_uses_the_twins_on_their_own_connection(
    openai_server: OpenAIServer,
) -> None:
    """``asyncio.run``, as a FastAPI app or a script runs: no Django thread to come back
    to, so the sync work runs on asgiref's shared thread, with its own connection (closed
    here, as the docs tell such a program to)."""
    openai_server.script(Reply("It shipped."))
    client = async_client(openai_server)

    async def main() -> tuple[int, Any, list[Any]]:
        thread = await Thread.objects.acreate(title="script")
        try:
            reply = await achat_turn(client, thread, "Where is NW-1?", model=TEST_MODEL,
                                     budget_tokens=4000)
            hits = await services.asearch(thread, "shipped")
            return thread.pk, reply, hits
        finally:
            await sync_to_async(connections.close_all)()

    thread_id, reply, hits = asyncio.run(main())
    assert reply.content == "It shipped."
    stored = list(MemoryEntry.objects.filter(thread_id=thread_id, kind=EntryKind.MESSAGE)
                  .order_by("position").values_list("role", "content"))
    assert stored == [("user", "Where is NW-1?"), ("assistant", "It shipped.")]
    assert [hit.role for hit in hits] == ["assistant"]
