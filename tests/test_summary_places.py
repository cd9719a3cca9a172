"""Where a context's summaries go in the OpenAI shapes (issue 26, part 6).

By default each summary is a ``system`` message at its place, before the verbatim turns
it precedes; ``summaries="instructions"`` puts them into the instructions instead (one
leading system message after the agent's own, or the Responses ``instructions``), for a
provider or SDK that refuses a ``system`` message among the conversation's. The same
context either way: the same verbatim messages, the same summary text.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest

from agentmemory import services
from agentmemory.integrations.openai_shapes import summary_instructions
from agentmemory.pipeline.recall import RecallResult
from tests.helpers import add_turns, make_thread, recording_settings
from tests.openai_server import TEST_API_KEY, OpenAIServer

pytestmark = pytest.mark.django_db

SYSTEM = "You are the support agent of a parcel shop."


@pytest.fixture
def folded_recall(settings: Any) -> RecallResult:
    """The inline recall of a 14-turn thread, which folded: its messages hold a summary."""
    settings.AGENTMEMORY = recording_settings("The user chased late orders 1-11.")
    thread = make_thread()
    add_turns(thread, 14)
    result = services.recall(thread, 1500, mode="inline")
    assert result.summaries_used, "the fold this test is about did not happen"
    return result


def summaries_of(result: RecallResult) -> list[str]:
    return [m.content for m in result.messages if m.kind == "summary"]


def test_by_default_each_summary_is_a_system_message_before_the_turns(
    folded_recall: RecallResult,
) -> None:
    shaped = folded_recall.as_chat_messages()
    assert [m["content"] for m in shaped if m["role"] == "system"] == summaries_of(folded_recall)
    assert shaped[0]["role"] == "system"
    assert folded_recall.as_chat_messages(system=SYSTEM)[0] == {"role": "system", "content": SYSTEM}
    assert folded_recall.as_chat_messages(system=SYSTEM)[1:] == shaped


def test_as_instructions_the_summaries_follow_the_agents_own(folded_recall: RecallResult) -> None:
    default = folded_recall.as_chat_messages()
    shaped = folded_recall.as_chat_messages(summaries="instructions", system=SYSTEM)

    assert shaped[0] == {"role": "system",
                         "content": "\n\n".join([SYSTEM, *summaries_of(folded_recall)])}
    assert [m for m in shaped[1:] if m["role"] == "system"] == []
    assert shaped[1:] == [m for m in default if m["role"] != "system"]
    assert folded_recall.instructions(SYSTEM) == shaped[0]["content"]
    assert summary_instructions(folded_recall.messages) == "\n\n".join(summaries_of(folded_recall))

    items = folded_recall.as_response_input(summaries="instructions")
    assert [i for i in items if i.get("role") == "system"] == []
    assert items == [i for i in folded_recall.as_response_input() if i.get("role") != "system"]


def test_without_summaries_instructions_are_the_agents_own(settings: Any) -> None:
    settings.AGENTMEMORY = recording_settings()
    thread = make_thread()
    add_turns(thread, 2)
    result = services.recall(thread, 100_000)
    assert result.summaries_used == []
    assert result.instructions(SYSTEM) == SYSTEM
    assert result.as_chat_messages(summaries="instructions") == result.as_chat_messages()


@pytest.mark.parametrize("place", ["system", "", None])
def test_an_unknown_place_is_refused_by_name(folded_recall: RecallResult, place: Any) -> None:
    with pytest.raises(ValueError, match="summaries must be 'message' or 'instructions'"):
        folded_recall.as_chat_messages(summaries=place)
    with pytest.raises(ValueError, match="got"):
        folded_recall.as_response_input(summaries=place)


def test_the_official_client_sends_one_system_message_first(
    folded_recall: RecallResult, openai_server: OpenAIServer
) -> None:
    client = openai.OpenAI(api_key=TEST_API_KEY, base_url=openai_server.base_url, max_retries=0)
    openai_server.reply("On its way.")
    client.chat.completions.create(
        model="gpt-test", messages=folded_recall.as_chat_messages(summaries="instructions",
                                                           system=SYSTEM))
    (request,) = openai_server.chat_requests
    roles = [m["role"] for m in request.messages]
    assert roles[0] == "system" and "system" not in roles[1:]
    assert request.messages[0]["content"].startswith(SYSTEM + "\n\n[summary of earlier turns")
