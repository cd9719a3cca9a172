"""The circuit of a summarizer backend and model (issue 25, part 4).

An outage is paid for per backend, not per thread per append: the real ``openai``
client against the loopback server, five threads, inline recalls and background folds
(Celery eager, its retries run at once). Back-offs are never waited out: a test moves
the circuit's ``open_until`` into the past, as the clock would.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib import admin
from django.utils import timezone

from agentmemory import services, signals
from agentmemory.admin import ThreadAdmin
from agentmemory.folding import circuit as circuits
from agentmemory.models import (
    CallOutcome,
    EntryKind,
    MemoryEntry,
    SummarizerCall,
    SummarizerCircuit,
    Thread,
)
from agentmemory.summarizers import get_summarizer
from tests.helpers import add_turns, capture
from tests.openai_server import Failure, OpenAIServer, Raw

pytestmark = pytest.mark.django_db

THREADS = 5
FAILURES = 3


def circuit_settings(settings_for_server: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**settings_for_server, "CIRCUIT_FAILURES": FAILURES, "CIRCUIT_BACKOFF": 30.0,
            "CIRCUIT_BACKOFF_MAX": 100.0, **extra}


def threads(count: int = THREADS) -> list[Thread]:
    made = [Thread.objects.create(title=f"outage {n}") for n in range(count)]
    for thread in made:
        add_turns(thread, 14)
    return made


def recall_all(made: list[Thread], rounds: int = 1) -> list[Any]:
    return [services.recall(t, 1500, mode="inline") for _ in range(rounds) for t in made]


def the_circuit() -> SummarizerCircuit:
    summarizer = get_summarizer()
    return SummarizerCircuit.objects.get(backend=summarizer.backend, model=summarizer.model)


def back_off_passed() -> None:
    SummarizerCircuit.objects.update(open_until=timezone.now() - timedelta(seconds=1))


def test_a_500_outage_costs_circuit_failures_calls_for_every_thread_together(
    settings: Any, openai_server: OpenAIServer, openai_summarizer_settings: dict[str, Any]
) -> None:
    settings.AGENTMEMORY = circuit_settings(openai_summarizer_settings)
    openai_server.script(*[Failure(500)] * 100)
    made = threads()

    with capture(signals.summarizer_circuit) as changes:
        before = timezone.now()
        results = recall_all(made, rounds=3)
        after = timezone.now()

    assert len(openai_server.chat_requests) == FAILURES
    assert all(r.summaries_used == [] for r in results)  # verbatim, as a failed fold leaves it
    assert [r.decline for r in results].count("summarizer-unavailable") == len(results) - FAILURES
    calls = SummarizerCall.objects.values_list("outcome", "error_class")
    assert list(calls) == [(CallOutcome.FAILED, "TransientSummarizerError")] * FAILURES
    circuit = the_circuit()
    assert circuit.failures == FAILURES and circuit.openings == 1
    assert "HTTP 500" in circuit.last_error
    assert before + timedelta(seconds=30) <= circuit.open_until <= after + timedelta(seconds=30)
    assert [(c["state"], c["failures"]) for c in changes] == [("open", FAILURES)]

    # The back-off passes: one call probes it, for all five threads; it fails, and the
    # circuit opens again for twice as long.
    back_off_passed()
    before = timezone.now()
    recall_all(made)
    after = timezone.now()
    assert len(openai_server.chat_requests) == FAILURES + 1
    circuit = the_circuit()
    assert circuit.openings == 2
    assert before + timedelta(seconds=60) <= circuit.open_until <= after + timedelta(seconds=60)

    # The provider is back: the next probe folds and closes it; every thread folds again.
    openai_server.reset()
    back_off_passed()
    with capture(signals.summarizer_circuit) as changes:
        results = recall_all(made)
    assert all(r.summaries_used for r in results)
    assert [c["state"] for c in changes] == ["closed"]
    circuit = the_circuit()
    assert (circuit.failures, circuit.openings, circuit.open_until) == (0, 0, None)


def test_an_open_circuit_honours_retry_after_and_caps_its_back_off(
    settings: Any, openai_server: OpenAIServer, openai_summarizer_settings: dict[str, Any]
) -> None:
    settings.AGENTMEMORY = circuit_settings(openai_summarizer_settings, CIRCUIT_FAILURES=1)
    openai_server.script(Failure(429, headers={"Retry-After": "300"}), *[Failure(500)] * 10)
    (thread,) = threads(1)

    def opened_for(seconds: float) -> bool:
        """Whether the next recall opens the circuit for ``seconds``, read from the clock
        before and after it (however long the recall took)."""
        before = timezone.now()
        recall_all([thread])
        after = timezone.now()
        until = the_circuit().open_until
        return (before + timedelta(seconds=seconds) <= until
                <= after + timedelta(seconds=seconds))

    assert opened_for(300), "Retry-After was not honoured"
    for seconds in (60, 100, 100, 100):  # the 2nd to 5th opening: doubling, then the cap
        back_off_passed()
        assert opened_for(seconds)
    assert len(openai_server.chat_requests) == 5


@pytest.mark.parametrize(("raw", "words"), [
    (Raw(b""), "was not JSON"),
    (Raw(b"<html>Bad gateway</html>", content_type="text/html"), "was not a chat completion"),
    (Raw(b"{}"), "held no choices"),
    (Raw(b'{"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": '
         b'[{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", '
         b'"content": ""}}]}'), "held no summary text"),
], ids=["empty-body", "html-page", "no-choices", "empty-text"])
def test_malformed_answers_count_as_failures_and_say_their_kind(
    raw: Raw, words: str, settings: Any, openai_server: OpenAIServer,
    openai_summarizer_settings: dict[str, Any],
) -> None:
    settings.AGENTMEMORY = circuit_settings(openai_summarizer_settings)
    openai_server.script(*[raw] * 50)
    made = threads(3)

    recall_all(made, rounds=3)

    assert len(openai_server.chat_requests) == FAILURES
    messages = SummarizerCall.objects.values_list("outcome", "error_message")
    assert len(messages) == FAILURES
    assert all(outcome == CallOutcome.FAILED and words in message
               for outcome, message in messages), list(messages)
    assert words in the_circuit().last_error
    assert the_circuit().open_until is not None


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager_celery")
def test_background_folds_during_an_outage_are_bounded_per_backend(
    settings: Any, openai_server: OpenAIServer, openai_summarizer_settings: dict[str, Any]
) -> None:
    background = circuit_settings(openai_summarizer_settings, RECALL_MODE="background",
                                  FOLD_BUDGET=1500, FOLD_RETRY_MAX=3, FOLD_RETRY_BACKOFF=0.01)
    settings.AGENTMEMORY = {**background, "RECALL_MODE": "inline"}
    made = [Thread.objects.create(title=f"outage {n}") for n in range(THREADS)]
    for thread in made:  # inline mode while filling: nothing is enqueued
        add_turns(thread, 14)
    settings.AGENTMEMORY = background
    openai_server.script(*[Failure(500)] * 200)

    for number in range(15, 21):  # every append to every thread makes a fold due
        for thread in made:
            add_turns(thread, 1, start=number)

    assert len(openai_server.chat_requests) == FAILURES
    assert not MemoryEntry.objects.filter(kind=EntryKind.SUMMARY).exists()
    # While it is open, appends send nothing: a due thread says why.
    assert services.fold_blocker(made[0]) == "summarizer-unavailable"
    # The sweep tries again once it has closed; the provider is back.
    openai_server.reset()
    back_off_passed()
    services.sweep()
    assert MemoryEntry.objects.filter(kind=EntryKind.SUMMARY).exists()
    assert the_circuit().open_until is None


def test_without_a_circuit_every_call_is_made(
    settings: Any, openai_server: OpenAIServer, openai_summarizer_settings: dict[str, Any]
) -> None:
    settings.AGENTMEMORY = circuit_settings(openai_summarizer_settings, CIRCUIT_FAILURES=None)
    openai_server.script(*[Failure(500)] * 100)
    made = threads(2)
    recall_all(made, rounds=3)
    assert len(openai_server.chat_requests) >= 6
    assert not SummarizerCircuit.objects.exists()
    assert circuits.admit(get_summarizer()) is not None


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("eager_celery")
def test_after_a_give_up_the_thread_cools_down_and_appends_respect_it(
    settings: Any, openai_server: OpenAIServer, openai_summarizer_settings: dict[str, Any]
) -> None:
    # A circuit too lenient to open here: the cool-down alone bounds this thread.
    background = circuit_settings(openai_summarizer_settings, CIRCUIT_FAILURES=50,
                                  RECALL_MODE="background", FOLD_BUDGET=1500,
                                  FOLD_RETRY_MAX=1, FOLD_RETRY_BACKOFF=0.01)
    settings.AGENTMEMORY = {**background, "RECALL_MODE": "inline"}
    thread = Thread.objects.create(title="gave up")
    add_turns(thread, 14)
    settings.AGENTMEMORY = background
    openai_server.script(*[Failure(500)] * 100)

    before = timezone.now()
    add_turns(thread, 1, start=15)  # due: a chain of FOLD_RETRY_MAX + 1 calls, given up
    assert len(openai_server.chat_requests) == 2
    cool = Thread.objects.get(pk=thread.pk).fold_queued_until
    assert cool is not None and cool >= before + timedelta(seconds=30)
    for number in range(16, 21):
        add_turns(thread, 1, start=number)
    assert len(openai_server.chat_requests) == 2, "an append started a chain while it cooled"

    status = ThreadAdmin(Thread, admin.site).fold_status(Thread.objects.get(pk=thread.pk))
    assert status == "gave up: the sweep retries it"
    # Past the cool-down an append still sends nothing: the retry is the sweep's.
    Thread.objects.filter(pk=thread.pk).update(fold_queued_until=timezone.now())
    add_turns(thread, 1, start=21)
    assert len(openai_server.chat_requests) == 2, "an append sent the retry, not the sweep"
    assert services.sweep() == [thread.pk]
    assert len(openai_server.chat_requests) == 4
    assert Thread.objects.get(pk=thread.pk).fold_cooling  # it gave up again: cools again


def test_a_lapsed_circuit_admits_one_probe_and_the_others_still_see_it_open(
    settings: Any, openai_summarizer_settings: dict[str, Any]
) -> None:
    """The probe is claimed by a conditional update on the back-off it read: whoever
    comes after the claim finds the circuit open again, until the probe reports."""
    settings.AGENTMEMORY = circuit_settings(openai_summarizer_settings)
    summarizer = get_summarizer()
    SummarizerCircuit.objects.create(
        backend=summarizer.backend, model=summarizer.model, failures=FAILURES, openings=1,
        open_until=timezone.now() - timedelta(seconds=1))

    probe = circuits.admit(summarizer)
    assert probe is not None and probe.probing
    assert circuits.admit(summarizer) is None, "a second caller probed too"
    assert circuits.is_open(summarizer)
    circuits.succeeded(summarizer, probe)
    assert circuits.admit(summarizer) == circuits.Circuit()
