"""The LangChain chat history: ``langchain_core``'s own ``RunnableWithMessageHistory`` over a
fake chat model, side by side with ``InMemoryChatMessageHistory`` on the same conversation.

While nothing is folded both histories hold the same messages (AI tool calls and tool
messages included); once the oldest turns are folded, ours gives a ``SystemMessage``
summary in their place and the newest messages as they are.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.base_user import AbstractBaseUser
from hypothesis import HealthCheck, given, settings
from langchain_core.chat_history import BaseChatMessageHistory, InMemoryChatMessageHistory
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables.history import RunnableWithMessageHistory

from agentmemory import services
from agentmemory.exceptions import InvalidMessageError
from agentmemory.integrations.langchain import ThreadChatMessageHistory
from agentmemory.integrations.openai_shapes import prompt_cache_key
from agentmemory.models import MemoryEntry, Thread
from tests.test_recall_contract import turns

# RunnableWithMessageHistory reads and writes the history from its own worker threads:
# the rows must be committed for them to see.
# Both are deprecated in langchain-core 1.x in favour of LangGraph persistence, and still
# what a chat history is used with.
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.filterwarnings("ignore::langchain_core._api.LangChainDeprecationWarning"),
]


@pytest.fixture(autouse=True)
def _close_worker_connections() -> Iterator[None]:
    """LangChain's worker threads end with each call, leaving the connection each opened
    to be closed when collected: collect them, so the test database can be dropped."""
    yield
    gc.collect()


SUMMARY_LABEL = "[summary of earlier turns"
FILLER = ("The parcel for order {n} left the warehouse in Leeds, was scanned at the DHL hub, "
          "and is due on 2026-12-0{d}; the refund of $12.50 for the late label stays open.")
TURNS = 10


class RecordingChatModel(FakeMessagesListChatModel):
    """langchain_core's fake chat model, keeping every list of messages it was given."""

    seen: list[list[BaseMessage]] = []

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def question(n: int) -> str:
    return f"Where is order NW-{n}? " + FILLER.format(n=f"NW-{n - 1}", d=(n + 3) % 9 + 1)


def replies() -> list[BaseMessage]:
    """Turn n: even turns call the lookup tool first; every turn then answers."""
    out: list[BaseMessage] = []
    for n in range(TURNS):
        if n % 2 == 0:
            out.append(AIMessage(content="", id=f"ai-call-{n}", tool_calls=[
                {"id": f"call_{n}", "name": "lookup_order", "args": {"order": f"NW-{n}"}}
            ]))
        out.append(AIMessage(content="Found it. " + FILLER.format(n=f"NW-{n}", d=n % 9 + 1),
                             id=f"ai-{n}"))
    return out


def inputs(n: int) -> list[list[BaseMessage]]:
    """What the user (and the tool runner) send in turn n, one list per invoke."""
    sent: list[list[BaseMessage]] = [[HumanMessage(content=question(n), id=f"h-{n}")]]
    if n % 2 == 0:
        sent.append([ToolMessage(content=FILLER.format(n=f"NW-{n}", d=2), id=f"t-{n}",
                                 tool_call_id=f"call_{n}", name="lookup_order")])
    return sent


def chain(model: RecordingChatModel, history: BaseChatMessageHistory) -> Any:
    return RunnableWithMessageHistory(model, lambda session_id: history)


# --8<-- [start:history]
def histories_of(user: AbstractBaseUser) -> Callable[[str], ThreadChatMessageHistory]:
    """The history of each of ``user``'s conversations, by session id."""
    def history_for(session_id: str) -> ThreadChatMessageHistory:
        thread, _ = Thread.objects.get_or_create(owner=user, client_key=session_id)
        return ThreadChatMessageHistory(thread, budget_tokens=900, mode="inline")
    return history_for
# --8<-- [end:history]


def covered_count(thread: Thread) -> int:
    return sum(
        1 for summary in MemoryEntry.objects.filter(thread=thread).summaries().visible()
        for entry in services.expand(summary, recursive=True) if entry.kind == "message"
    )


def test_a_runnable_conversation_matches_in_memory_history_until_folded(user: Any) -> None:
    model = RecordingChatModel(responses=replies(), seen=[])
    # --8<-- [start:runnable]
    chat = RunnableWithMessageHistory(model, histories_of(user))
    config = {"configurable": {"session_id": "lc-1"}}
    # --8<-- [end:runnable]
    ours = histories_of(user)("lc-1")
    assert ours.thread.owner == user
    thread = ours.thread
    theirs = InMemoryChatMessageHistory()
    their_model = RecordingChatModel(responses=replies(), seen=[])
    folded_turns = []
    recalled: list[BaseMessage] = []
    for n in range(TURNS):
        for sent in inputs(n):
            before = ours.messages
            answer = chat.invoke(sent, config)
            assert answer == chain(their_model, theirs).invoke(sent, config)
            # The model is given the history, then what was sent.
            assert model.seen[-1] == [*before, *sent]
        mine, reference = ours.messages, theirs.messages
        recalled += mine
        summaries = [m for m in mine if isinstance(m, SystemMessage)]
        if not summaries:
            assert mine == reference
            continue
        folded_turns.append(n)
        assert mine[: len(summaries)] == summaries, "the summary leads"
        assert all(str(s.content).startswith(SUMMARY_LABEL) for s in summaries)
        kept = mine[len(summaries):]
        assert kept == reference[len(reference) - len(kept):]
        assert covered_count(thread) == len(reference) - len(kept)
    assert folded_turns, "the conversation was long enough to fold"
    assert folded_turns == list(range(folded_turns[0], TURNS))
    # Tool calls and tool messages come back as LangChain's own types.
    tools = [m for m in recalled if isinstance(m, ToolMessage)]
    assert tools and all(m.tool_call_id.startswith("call_") for m in tools)
    assert any(isinstance(m, AIMessage) and m.tool_calls for m in recalled)


def test_a_message_recalled_without_its_original_is_rebuilt_in_langchain_shape() -> None:
    thread = Thread.objects.create()
    services.append(thread, [
        {"role": "user", "content": "Where is NW-1?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "name": "lookup_order", "arguments": '{"order": "NW-1"}'}]},
        {"role": "tool", "tool_call_id": "call_1", "tool_name": "lookup_order",
         "content": "shipped"},
        {"role": "assistant", "content": "It shipped."},
    ])
    history = ThreadChatMessageHistory(thread, budget_tokens=100_000, mode="background")
    assert history.messages == [
        HumanMessage(content="Where is NW-1?"),
        AIMessage(content="", tool_calls=[
            {"id": "call_1", "name": "lookup_order", "args": {"order": "NW-1"},
             "type": "tool_call"}]),
        ToolMessage(content="shipped", tool_call_id="call_1", name="lookup_order"),
        AIMessage(content="It shipped."),
    ]


def test_clear_erases_the_conversation_and_keeps_the_thread() -> None:
    thread = Thread.objects.create(title="kept")
    history = ThreadChatMessageHistory(thread, budget_tokens=900, mode="inline")
    model = RecordingChatModel(responses=replies(), seen=[])
    for n in range(TURNS):
        for sent in inputs(n):
            chain(model, history).invoke(sent, {"configurable": {"session_id": "x"}})
    assert isinstance(history.messages[0], SystemMessage)
    history.clear()
    assert history.messages == []
    assert not MemoryEntry.objects.filter(thread=thread).exists()
    history.add_messages([HumanMessage(content="again")])
    assert [(m.content, m.turn) for m in MemoryEntry.objects.filter(thread=thread)] == [
        ("again", 1)
    ]


def test_a_message_it_cannot_store_raises_and_writes_nothing() -> None:
    from langchain_core.messages import FunctionMessage

    thread = Thread.objects.create()
    history = ThreadChatMessageHistory(thread, budget_tokens=4000)
    with pytest.raises(InvalidMessageError) as raised:
        history.add_messages([HumanMessage(content="hi"),
                              FunctionMessage(content="x", name="f")])
    assert raised.value.field == "role"
    assert not MemoryEntry.objects.filter(thread=thread).exists()


def test_an_existing_history_imported_as_a_backfill_folds_forward(user: Any) -> None:
    history_for = histories_of(user)
    old = InMemoryChatMessageHistory()
    model = RecordingChatModel(responses=replies(), seen=[])
    for n in range(TURNS):
        for sent in inputs(n):
            chain(model, old).invoke(sent, {"configurable": {"session_id": "old"}})
    # --8<-- [start:backfill]
    history = history_for("imported-7")
    history.add_messages(old.messages)
    # --8<-- [end:backfill]
    mine, reference = history.messages, old.messages
    assert MemoryEntry.objects.filter(thread=history.thread).messages().count() == len(reference)
    summaries = [m for m in mine if isinstance(m, SystemMessage)]
    assert summaries and mine[: len(summaries)] == summaries
    kept = mine[len(summaries):]
    assert kept == reference[len(reference) - len(kept):]
    assert covered_count(history.thread) == len(reference) - len(kept)


def langchain_messages(conversation: list[list[dict[str, Any]]]) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for turn in conversation:
        for message in turn:
            if message["role"] == "user":
                out.append(HumanMessage(content=message["content"]))
            elif message["role"] == "tool":
                out.append(ToolMessage(content=message["content"], name=message["tool_name"],
                                       tool_call_id=message["tool_call_id"]))
            else:
                out.append(AIMessage(content=message["content"], tool_calls=[
                    {"id": c["id"], "name": c["name"], "args": json.loads(c["arguments"])}
                    for c in message.get("tool_calls", [])
                ]))
    return out


@given(conversation=turns())
@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
def test_any_conversation_comes_back_message_for_message_while_it_fits(
    conversation: list[list[dict[str, Any]]],
) -> None:
    messages = langchain_messages(conversation)
    history = ThreadChatMessageHistory(Thread.objects.create(), budget_tokens=10**6,
                                       mode="background", load_count=None)
    history.add_messages(messages)
    assert history.messages == messages


# ---------------------------------------------------------------- the provider's cache


class KeywordRecordingChatModel(FakeMessagesListChatModel):
    """langchain_core's fake chat model, keeping the keyword arguments of every call: what
    ``ChatOpenAI`` would send in the request body beside the messages."""

    keywords: list[dict[str, Any]] = []

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.keywords.append(dict(kwargs))
        return super()._generate(messages, *args, **kwargs)


def keyed_chat(model: Any, history: ThreadChatMessageHistory) -> Any:
    # --8<-- [start:cache-key]
    chat = RunnableWithMessageHistory(
        model.bind(prompt_cache_key=history.prompt_cache_key), lambda session_id: history)
    # --8<-- [end:cache-key]
    return chat


def test_the_historys_prompt_cache_key_is_the_threads_and_reaches_the_model_when_bound() -> None:
    first = ThreadChatMessageHistory(Thread.objects.create(), budget_tokens=900)
    second = ThreadChatMessageHistory(Thread.objects.create(), budget_tokens=900)
    model = KeywordRecordingChatModel(
        responses=[AIMessage(content=f"Answer {n}.") for n in range(3)], keywords=[])
    for history, text in [(first, "Where is NW-1?"), (first, "And NW-2?"), (second, "Hi")]:
        chat = keyed_chat(model, history)
        chat.invoke([HumanMessage(content=text)], {"configurable": {"session_id": "any"}})
    keys = [keywords.get("prompt_cache_key") for keywords in model.keywords]
    assert keys == [first.prompt_cache_key] * 2 + [second.prompt_cache_key]
    assert first.prompt_cache_key != second.prompt_cache_key
    assert first.prompt_cache_key == prompt_cache_key(first.thread)  # chat_turn's key
    assert [m.content for m in first.messages] == [
        "Where is NW-1?", "Answer 0.", "And NW-2?", "Answer 1."]
