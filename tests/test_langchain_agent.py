"""The LangChain agent middleware: ``langchain.agents.create_agent`` itself, its ``ToolNode``
running the tools, with a chat model that calls tools as a real one does (it reads what
it is handed and answers from it) and, for the docs' example, ``langchain-openai``'s
``ChatOpenAI`` against the loopback OpenAI server.

A multi-turn conversation with tool calls runs long enough to fold. At every model call
the model is handed the agent's instructions, then the recalled context: a summary
standing for exactly the oldest messages, then the newest ones verbatim, every tool call
with its results; the thread holds each message of the conversation once, in order.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from agentmemory import services
from agentmemory.exceptions import ContextDeclinedError, InvalidMessageError
from agentmemory.integrations.langchain import MESSAGE_KEY, langchain_message
from agentmemory.integrations.langchain_agents import ThreadMemoryMiddleware
from agentmemory.integrations.openai_shapes import prompt_cache_key
from agentmemory.models import MemoryEntry, Thread
from tests.openai_server import TEST_API_KEY, OpenAIServer, Reply

# The agent's graph runs tools (the memory tools read the database) on its own worker
# threads: the rows must be committed for them to see.
pytestmark = pytest.mark.django_db(transaction=True)

SUMMARY_LABEL = "[summary of earlier turns"
INSTRUCTIONS = "You are a shop assistant. Answer order questions briefly."
FILLER = ("The parcel for order {n} left the warehouse in Leeds, was scanned at the DHL hub, "
          "and is due on 2026-12-0{d}; the refund of $12.50 for the late label stays open.")
TURNS = 14
# Room for the last turn's memory_expand calls: one per nesting level (at most four),
# each result at most a quarter of the budget.
BUDGET = 1500
FIRST_QUESTION = "Which order did I ask you about first?"
#: A summary's handle, its turns: in its label, or in an expand result's nested summary.
HANDLE = re.compile(r"(?:\[summary of earlier turns |\(handle )(\d+-\d+)")


@tool
def lookup_order(order: str) -> str:
    """Look an order up: where it is and when it is due."""
    return FILLER.format(n=order, d=int(order.split("-")[1]) % 9 + 1)


@tool
def track_parcel(order: str) -> str:
    """Where the parcel of an order was last scanned."""
    return f"The parcel of {order} was last scanned at the DHL hub in Leeds at 06:40."


def question(n: int) -> str:
    return f"Where is order NW-{n}? It has not arrived and the tracking page says nothing."


class ToolCallingModel(BaseChatModel):
    """A chat model that acts on the messages it is handed, as a real one would: it looks
    up the order a question names (and tracks every third one as well), answers from the
    tool results, and asked what was said first, expands the summary it was handed with
    ``memory_expand``, nested summaries one level at a time. It records every call: the
    messages it was handed and the settings it was bound with."""

    seen: list[list[BaseMessage]] = []
    settings: list[dict[str, Any]] = []

    @property
    def _llm_type(self) -> str:
        return "tool-calling-test-model"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self.bind(tools=[t.name if isinstance(t, BaseTool) else t for t in tools],
                         **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: Any = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.seen.append(list(messages))
        self.settings.append(kwargs)
        return ChatResult(generations=[ChatGeneration(message=self.reply(messages))])

    @staticmethod
    def reply(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return ToolCallingModel.answer(messages)
        text = str(last.content)
        if text == FIRST_QUESTION:
            handle = HANDLE.search(" ".join(str(m.content) for m in messages
                                            if isinstance(m, SystemMessage)))
            if handle is None:
                return AIMessage(content="I was handed no summary to expand.")
            return expand(handle.group(1), "call_expand_0")
        order = re.search(r"NW-\d+", text)
        assert order is not None, text
        n = int(order.group().split("-")[1])
        calls = [{"id": f"call_{n}_lookup", "name": "lookup_order",
                  "args": {"order": order.group()}}]
        if n % 3 == 0:
            calls.append({"id": f"call_{n}_track", "name": "track_parcel",
                          "args": {"order": order.group()}})
        return AIMessage(content="", tool_calls=calls)

    @staticmethod
    def answer(messages: list[BaseMessage]) -> AIMessage:
        results: list[ToolMessage] = []
        for message in reversed(messages):
            if not isinstance(message, ToolMessage):
                break
            results.insert(0, message)
        if results[0].name != "memory_expand":
            return AIMessage(content="Found it. " + " ".join(str(r.content) for r in results))
        page = str(results[0].content)
        if question(0) in page:
            return AIMessage(content="You first asked me about order NW-0.")
        nested = HANDLE.search(page)
        assert nested is not None, page
        return expand(nested.group(1), f"call_expand_{len(messages)}")


def expand(handle: str, call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"id": call_id, "name": "memory_expand", "args": {
        "handle": handle, "page": None, "entry": None, "thread": None}}])


@pytest.fixture(autouse=True)
def _close_worker_connections() -> Iterator[None]:
    """The ToolNode's worker threads end with the run, each leaving the connection it
    opened to be closed when collected: collect them, so the test database can be
    dropped."""
    yield
    gc.collect()


@pytest.fixture
def model() -> ToolCallingModel:
    return ToolCallingModel(seen=[], settings=[])


def message_id(entry: MemoryEntry) -> str:
    return str(entry.metadata[MESSAGE_KEY]["data"]["id"])


def stored(thread: Thread) -> list[MemoryEntry]:
    return list(MemoryEntry.objects.filter(thread=thread).messages().order_by("position"))


def shape(message: BaseMessage) -> tuple[Any, ...]:
    """What a thread must keep of a message: its kind, text, tool calls and answered call."""
    calls = [(c["id"], c["name"], c["args"]) for c in getattr(message, "tool_calls", [])]
    return (message.type, message.content, calls, getattr(message, "tool_call_id", None))


def assert_paired(context: list[BaseMessage]) -> None:
    """Every tool call is followed by its results, and every result follows its call."""
    open_calls: list[str] = []
    for message in context:
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in open_calls, ("a result without its call", message)
            open_calls.remove(message.tool_call_id)
            continue
        assert not open_calls, ("a call without its results", open_calls)
        if isinstance(message, AIMessage):
            open_calls = [call["id"] for call in message.tool_calls]
    assert not open_calls, ("a call without its results", open_calls)


def covered_ids(thread: Thread, summaries: list[BaseMessage]) -> list[str]:
    """The ids of the messages the handed summaries stand for, through nested summaries."""
    ids: list[str] = []
    for summary in summaries:
        entry = MemoryEntry.objects.filter(thread=thread).summaries().get(content=summary.content)
        ids += [message_id(e) for e in services.expand(entry, recursive=True)
                if not e.is_summary]
    return ids


def handed_contexts(model: ToolCallingModel) -> Iterator[tuple[list[BaseMessage], ...]]:
    """Per model call: the summaries it was handed, and the verbatim messages after them."""
    for handed in model.seen:
        assert handed[0] == SystemMessage(content=INSTRUCTIONS), "the instructions lead"
        context = handed[1:]
        summaries = [m for m in context if isinstance(m, SystemMessage)]
        assert context[: len(summaries)] == summaries, "the summaries come first"
        assert all(str(s.content).startswith(SUMMARY_LABEL) for s in summaries)
        yield summaries, context[len(summaries):]


def test_a_tool_using_conversation_is_appended_and_the_model_is_handed_the_recall(
    model: ToolCallingModel, user: Any,
) -> None:
    thread = Thread.objects.create(owner=user)
    memory = ThreadMemoryMiddleware(thread, budget_tokens=BUDGET, mode="inline", memory_tools=True)
    agent = create_agent(model, tools=[lookup_order, track_parcel], system_prompt=INSTRUCTIONS,
                         middleware=[memory])
    conversation: list[BaseMessage] = []
    for text in [question(n) for n in range(TURNS)] + [FIRST_QUESTION]:
        result = agent.invoke({"messages": [{"role": "user", "content": text}]})
        assert result["messages"][0].content == text, "the state holds this run only"
        conversation += result["messages"]

    # The thread holds the conversation, each message once, in order; not the instructions.
    entries = stored(thread)
    assert [message_id(e) for e in entries] == [m.id for m in conversation]
    assert [shape(m) for m in memory_messages(thread)] == [shape(m) for m in conversation]
    assert not MemoryEntry.objects.filter(content=INSTRUCTIONS).exists()
    assert MemoryEntry.objects.filter(thread=thread).summaries().visible().exists()

    # Every call: the summaries stand for exactly the messages before the verbatim ones,
    # which are the newest of the conversation so far, every tool call with its results.
    ids = [m.id for m in conversation]
    folded_at, handed_summaries = [], set()
    for call, (summaries, verbatim) in enumerate(handed_contexts(model)):
        end = ids.index(verbatim[-1].id) + 1
        start = end - len(verbatim)
        assert verbatim == conversation[start:end]
        assert covered_ids(thread, summaries) == ids[:start]
        assert_paired(verbatim)
        if summaries:
            folded_at.append(call)
            handed_summaries.add(tuple(s.content for s in summaries))
    assert folded_at, "the conversation was long enough to fold"
    assert folded_at == list(range(folded_at[0], len(model.seen))), "and stays folded"
    assert len(handed_summaries) >= 2, "and to fold again"

    # The model was offered the memory tools beside the agent's, and what it asked for last
    # was folded: it expanded the summary and read the first question word for word.
    assert all(s["tools"] == ["memory_search", "memory_expand", "lookup_order", "track_parcel"]
               for s in model.settings)
    assert not any("prompt_cache_key" in s for s in model.settings)  # not without cache_key
    assert not any(question(0) in str(m.content) for m in model.seen[-1][1:]
                   if not isinstance(m, ToolMessage))
    assert conversation[-1].content == "You first asked me about order NW-0."
    expansions = [e for e in entries if e.tool_name == "memory_expand"]
    assert expansions and all(e.role == "tool" for e in expansions)
    assert question(0) in expansions[-1].content
    assert expansions[-1].content.startswith("[retrieved memory: the originals behind summary")


def memory_messages(thread: Thread) -> list[BaseMessage]:
    """The thread's messages as the recall would rebuild them, every one verbatim."""
    return [langchain_message(services.RecalledMessage.of(e), e.metadata) for e in stored(thread)]


def test_with_a_checkpointer_the_state_grows_and_each_message_is_appended_once(
    model: ToolCallingModel, user: Any,
) -> None:
    thread = Thread.objects.create(owner=user)
    agent = create_agent(model, tools=[lookup_order, track_parcel], system_prompt=INSTRUCTIONS,
                         middleware=[ThreadMemoryMiddleware(thread, budget_tokens=900)],
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "lc-checkpointed"}}
    for n in range(4):
        state = agent.invoke({"messages": [{"role": "user", "content": question(n)}]}, config)
    assert len(state["messages"]) == 4 * 4 + 2  # four a turn; two turns track the parcel too
    assert [message_id(e) for e in stored(thread)] == [m.id for m in state["messages"]]
    assert "agentmemory_stored" not in state  # private to the middleware


def test_the_async_agent_appends_and_recalls_as_the_sync_one(
    model: ToolCallingModel, user: Any,
) -> None:
    thread = Thread.objects.create(owner=user)
    agent = create_agent(model, tools=[lookup_order, track_parcel], system_prompt=INSTRUCTIONS,
                         middleware=[ThreadMemoryMiddleware(thread, budget_tokens=900)])

    async def converse() -> list[BaseMessage]:
        messages: list[BaseMessage] = []
        for n in range(TURNS):
            result = await agent.ainvoke({"messages": [HumanMessage(content=question(n))]})
            messages += result["messages"]
        return messages

    conversation = async_to_sync(converse)()
    assert [message_id(e) for e in stored(thread)] == [m.id for m in conversation]
    ids = [m.id for m in conversation]
    contexts = list(handed_contexts(model))
    assert contexts[-1][0], "folded"
    for summaries, verbatim in contexts:
        start = ids.index(verbatim[0].id)
        assert verbatim == conversation[start:start + len(verbatim)]
        assert covered_ids(thread, summaries) == ids[:start]


def test_a_rejected_message_stops_the_run_and_writes_nothing(
    model: ToolCallingModel, user: Any,
) -> None:
    thread = Thread.objects.create(owner=user)
    agent = create_agent(model, tools=[lookup_order],
                         middleware=[ThreadMemoryMiddleware(thread, budget_tokens=900)])
    with pytest.raises(InvalidMessageError):
        agent.invoke({"messages": [HumanMessage(content="Where is NW-1?"),
                                   {"role": "function", "name": "f", "content": "x"}]})
    assert stored(thread) == [] and model.seen == []


def test_a_turn_that_outgrows_the_budget_is_declined_out_loud(
    model: ToolCallingModel, user: Any,
) -> None:
    thread = Thread.objects.create(owner=user)
    agent = create_agent(model, tools=[lookup_order, track_parcel],
                         middleware=[ThreadMemoryMiddleware(thread, budget_tokens=360)])
    with pytest.raises(ContextDeclinedError) as raised:
        agent.invoke({"messages": [HumanMessage(content=question(3))]})
    # The question fitted the room (360 less the 256 reserved); with the two tools'
    # results the turn does not, and the model is not called with nothing.
    assert raised.value.reason == "newest-turn-too-large"
    assert "budget_tokens=360" in str(raised.value)
    assert len(model.seen) == 1
    assert [e.role for e in stored(thread)] == ["user", "assistant", "tool", "tool"]


# ---------------------------------------------------------------- the docs' example


def test_the_docs_agent_runs_with_chatopenai_and_sends_the_recalled_context(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch, user: Any,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", TEST_API_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    openai_server.script(
        Reply(tool_calls=({"id": "call_1", "name": "lookup_order",
                           "arguments": '{"order": "NW-48217"}'},)),
        Reply("Your order NW-48217 is due on 2026-12-03."),
        Reply("You are welcome."),
    )
    # --8<-- [start:agent]
    thread = Thread.objects.create(owner=user, client_key="support-42")
    memory = ThreadMemoryMiddleware(thread, budget_tokens=4000, memory_tools=True,
                                    cache_key=True)
    agent = create_agent(ChatOpenAI(model="gpt-4o-mini"), tools=[lookup_order],
                         system_prompt="You are a shop assistant.", middleware=[memory])
    for text in ["Where is my order NW-48217?", "Thanks!"]:
        result = agent.invoke({"messages": [{"role": "user", "content": text}]})
        print(result["messages"][-1].content)
    # --8<-- [end:agent]
    assert result["messages"][-1].content == "You are welcome."
    bodies = [request.body for request in openai_server.chat_requests]
    assert len(bodies) == 3
    for body in bodies:
        assert body["prompt_cache_key"] == prompt_cache_key(thread)
        assert body["messages"][0] == {"role": "system", "content": "You are a shop assistant."}
        assert [t["function"]["name"] for t in body["tools"]] == [
            "memory_search", "memory_expand", "lookup_order"]
    # The third request carries the first turn from the thread, its tool round included.
    assert [(m["role"], m.get("content")) for m in bodies[2]["messages"][1:]] == [
        ("user", "Where is my order NW-48217?"),
        ("assistant", None),
        ("tool", lookup_order.invoke({"order": "NW-48217"})),
        ("assistant", "Your order NW-48217 is due on 2026-12-03."),
        ("user", "Thanks!"),
    ]
    assert bodies[2]["messages"][2]["tool_calls"][0]["id"] == "call_1"
    assert [(e.role, e.turn) for e in stored(thread)] == [
        ("user", 1), ("assistant", 1), ("tool", 1), ("assistant", 1), ("user", 2),
        ("assistant", 2)]
