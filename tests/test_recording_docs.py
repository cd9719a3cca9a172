"""The example of docs/settings.md, "Testing your agent code", as a test that runs it.

The block marked ``<!-- snippet: tests/test_recording_docs.py#recording -->`` must
equal the region below (see tests/test_agent_loop_docs.py for the convention).
"""

# --8<-- [start:recording]
import pytest

from agentmemory import services
from agentmemory.models import Thread
from agentmemory.summarizers import testing

REPLY = "The customer chased their late orders; the agent found them in transit."


@pytest.fixture(autouse=True)
def summarizer_calls():
    testing.reset()  # like mail.outbox: every test starts with an empty record
    yield testing.calls
    testing.reset()


def chat_about_orders(thread, numbers):
    for n in numbers:
        services.append(thread, [
            {"role": "user", "content": f"Where is order {n}? It has not arrived."},
            {"role": "assistant", "content": f"Order {n} is in transit; it arrives Friday."},
        ])


@pytest.mark.django_db
def test_a_long_conversation_is_summarized_once(settings, django_user_model):
    settings.AGENTMEMORY = {
        "SUMMARIZER": {
            "BACKEND": "agentmemory.summarizers.testing.RecordingSummarizer",
            "MODEL": "test-model",
            "OPTIONS": {"REPLY": REPLY},
        },
    }
    thread = Thread.objects.create(owner=django_user_model.objects.create_user("ann"))
    chat_about_orders(thread, range(1, 31))

    result = services.recall(thread, 600)

    [prompt] = testing.calls  # one call; the prompt is what the model was shown
    assert "Where is order 1?" in prompt[-1]["content"]
    assert REPLY in result.text

    with testing.override(error=TimeoutError("the provider is down")):
        chat_about_orders(thread, range(31, 61))
        later = services.recall(thread, 600)
    assert later.decline == "summarizer-failed"  # the turn goes on without a summary
    assert len(testing.calls) == 2
# --8<-- [end:recording]
