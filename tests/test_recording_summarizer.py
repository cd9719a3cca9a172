"""agentmemory.summarizers.testing: the recording summarizer shipped for users' tests."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from django.test import override_settings

from agentmemory import services
from agentmemory.checks import check_settings
from agentmemory.exceptions import AgentMemoryConfigurationError, SummarizerError
from agentmemory.models import CallOutcome, SummarizerCall
from agentmemory.summarizers import get_summarizer, load_summarizer, testing
from agentmemory.summarizers.base import SummaryResult, build_prompt
from agentmemory.summarizers.testing import DEFAULT_REPLY, RecordingSummarizer
from agentmemory.transcript import DEFAULT_INSTRUCTION
from agentmemory.window.seams import WindowMessage
from tests.conftest import SEED_COUNTS
from tests.helpers import RECORDING, add_turns, add_user_messages, make_thread, recording_settings

SPAN = [
    {"role": "user", "content": "Where is order 7?"},
    {"role": "assistant", "content": "Order 7 left the depot on Tuesday."},
]
BIG = 100_000
#: Recall knobs under which five turns of tests.helpers fold once.
FOLD = {"load_count": 20, "trigger_min_entries": 20, "high_water": None}


def summarizer(**options: Any) -> RecordingSummarizer:
    return RecordingSummarizer(model="test-model", options=options)


def summarize(target: RecordingSummarizer) -> SummaryResult:
    return target.summarize([WindowMessage.of(m) for m in SPAN], instruction=DEFAULT_INSTRUCTION)


def test_every_prompt_is_recorded_in_order_and_the_default_reply_answers(
    recorded: list[Any],
) -> None:
    target = summarizer()
    first, second = summarize(target), summarize(target)

    expected = build_prompt([WindowMessage.of(m) for m in SPAN], DEFAULT_INSTRUCTION)
    assert recorded == testing.calls == [expected, expected]
    assert first == second == SummaryResult(text=DEFAULT_REPLY)  # usage unknown: None


def test_reply_is_a_text_a_result_with_usage_or_a_function_of_the_prompt() -> None:
    assert summarize(summarizer(REPLY="Order 7 is late.")).text == "Order 7 is late."
    usage = SummaryResult(text="Order 7 is late.", prompt_tokens=120, completion_tokens=6)
    assert summarize(summarizer(REPLY=usage)) == usage

    seen: list[Any] = []
    answer = summarize(summarizer(REPLY=lambda prompt: seen.append(prompt) or "seen"))
    assert answer.text == "seen" and seen == [testing.calls[-1]]


def test_a_reply_function_that_returns_no_text_fails_the_call() -> None:
    with pytest.raises(SummarizerError, match="returned int, not str"):
        summarize(summarizer(REPLY=lambda prompt: 7))


@pytest.mark.parametrize("error", [TimeoutError("the provider is down"), TimeoutError])
def test_error_is_raised_after_the_prompt_is_recorded(error: Any) -> None:
    with pytest.raises(TimeoutError):
        summarize(summarizer(ERROR=error))
    assert len(testing.calls) == 1


def test_delay_sleeps_before_answering_or_raising(monkeypatch: pytest.MonkeyPatch) -> None:
    started = time.monotonic()
    summarize(summarizer(DELAY=0.2))
    assert time.monotonic() - started >= 0.2
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        summarize(summarizer(DELAY=0.2, ERROR=TimeoutError))
    assert time.monotonic() - started >= 0.2
    # Without DELAY it never sleeps (a count, not a clock: the machine may be busy).
    slept: list[float] = []
    monkeypatch.setattr(testing.time, "sleep", slept.append)
    summarize(summarizer())
    assert slept == []
    summarize(summarizer(DELAY=0.5))
    assert slept == [0.5]


def test_override_wins_for_its_block_nests_and_restores() -> None:
    target = summarizer(REPLY="from the settings", ERROR=TimeoutError)
    with testing.override(error=None):
        assert summarize(target).text == "from the settings"
        with testing.override(reply="from the test"):
            assert summarize(target).text == "from the test"
        assert summarize(target).text == "from the settings"
    with pytest.raises(TimeoutError):
        summarize(target)
    with testing.override(delay=0.2, error=None):
        started = time.monotonic()
        summarize(target)
        assert time.monotonic() - started >= 0.2


def test_reset_empties_the_same_list_and_drops_the_overrides() -> None:
    calls = testing.calls
    target = summarizer(REPLY="from the settings")
    with testing.override(reply="from the test"):
        summarize(target)
        testing.reset()
        assert calls == [] and testing.calls is calls
        assert summarize(target).text == "from the settings"


def test_calls_from_other_threads_are_recorded() -> None:
    target = summarizer()
    workers = [threading.Thread(target=summarize, args=(target,)) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(testing.calls) == 4


def test_another_process_records_in_its_own_list() -> None:
    """What a Celery worker in another process records, the test process never sees."""
    code = (
        "import django; django.setup()\n"
        "from agentmemory.summarizers import testing\n"
        "from agentmemory.summarizers.testing import RecordingSummarizer\n"
        "RecordingSummarizer(model='m').complete([{'role': 'user', 'content': 'x'}])\n"
        "print(len(testing.calls))\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings",
           "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, check=True, timeout=60)  # fmt: skip
    assert child.stdout.strip() == "1"
    assert testing.calls == []


@pytest.mark.parametrize(
    "options, key",
    [
        ({"REPLY": 7}, "REPLY"),
        ({"ERROR": "boom"}, "ERROR"),
        ({"DELAY": -1}, "DELAY"),
        ({"DELAY": True}, "DELAY"),
    ],
)
def test_a_bad_option_names_the_key(options: dict[str, Any], key: str) -> None:
    with pytest.raises(AgentMemoryConfigurationError, match=rf"\['OPTIONS'\]\['{key}'\]"):
        summarizer(**options)


def test_an_unknown_option_or_override_is_refused() -> None:
    with pytest.raises(AgentMemoryConfigurationError, match="unknown keys"):
        summarizer(FUNCTION="tests.helpers.count_lines")
    with pytest.raises(TypeError, match="reply, error and delay"), testing.override(replies="x"):
        pass
    with pytest.raises(AgentMemoryConfigurationError, match=r"override\(delay=\.\.\.\)"):
        with testing.override(delay="soon"):
            pass


def test_settings_name_it_by_path_and_the_checks_accept_it() -> None:
    config = recording_settings("Order 7 is late.")
    assert config["SUMMARIZER"]["BACKEND"] == RECORDING
    with override_settings(AGENTMEMORY=config):
        assert isinstance(get_summarizer(), RecordingSummarizer)
        assert check_settings() == []
    assert isinstance(load_summarizer(config["SUMMARIZER"]), RecordingSummarizer)


@pytest.mark.django_db
def test_a_fold_records_the_prompt_and_the_ledger_the_reply_s_usage() -> None:
    thread = make_thread()
    add_turns(thread, 5)
    usage = SummaryResult(text="The user chased orders.", prompt_tokens=321, completion_tokens=9)

    with override_settings(AGENTMEMORY=recording_settings(usage)):
        result = services.recall(thread, BIG, **FOLD)

    assert result.folded_summary_id is not None
    [prompt] = testing.calls
    assert prompt[0]["content"] == DEFAULT_INSTRUCTION
    assert "Please look up order 1" in prompt[1]["content"]
    call = SummarizerCall.objects.get(thread=thread)
    assert (call.backend, call.prompt_tokens, call.completion_tokens) == (RECORDING, 321, 9)


@pytest.mark.django_db
def test_without_usage_the_ledger_records_it_as_unknown() -> None:
    thread = make_thread()
    add_turns(thread, 5)

    with override_settings(AGENTMEMORY=recording_settings("The user chased orders.")):
        services.recall(thread, BIG, **FOLD)

    call = SummarizerCall.objects.get(thread=thread)
    assert (call.prompt_tokens, call.completion_tokens) == (None, None)


@pytest.mark.django_db(transaction=True)  # the append enqueues the fold on commit
def test_a_background_fold_run_eagerly_is_recorded_in_the_test_process(
    eager_celery: None,
) -> None:
    thread = make_thread()
    with override_settings(AGENTMEMORY=recording_settings(
        "The user chased orders.", RECALL_MODE="background", **SEED_COUNTS,
    )):
        add_user_messages(thread, 25)  # a fold is due: the eager task runs it here

    assert len(testing.calls) == 1
    assert SummarizerCall.objects.get(thread=thread).outcome == CallOutcome.FOLDED
