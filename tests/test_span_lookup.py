"""Lookups answer for the right span (law 8): two runs of the same shape whose summaries
read the same still get two different frames, and each frame finds its own fold, in
its own thread only, from Python and from the API alike."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings
from rest_framework.test import APIClient

from agentmemory import services
from agentmemory.models import FoldedSpan, Thread
from agentmemory.summarizers import testing
from agentmemory.trust.signing import sign_span
from agentmemory.window.frame import summary_fingerprint
from tests.helpers import RECORDING, SHORT_SUMMARY

API = "/api/memory/"
SETTINGS = {
    "SUMMARIZER": {
        "BACKEND": RECORDING,
        "MODEL": "lookup-test-model",
        # The same words whatever the span: the two runs' summaries cannot differ.
        "OPTIONS": {"REPLY": SHORT_SUMMARY},
    },
    "WINDOW": {"CLASS": "agentmemory.window.seams.SlidingWindow",
               "OPTIONS": {"MAX_MESSAGES": 4}},
}
REQUEST = {"role": "user", "content": "Refund the customer's last two orders."}


def run(arguments: str) -> list[dict[str, Any]]:
    """One run's window: the same shape every time; only the tool arguments differ."""
    messages: list[dict[str, Any]] = [REQUEST]
    for n in (1, 2, 3):
        call_id = f"call-{n}"
        messages += [
            {"role": "assistant", "content": "",
             "tool_calls": [{"id": call_id, "name": "refund", "arguments": arguments}]},
            {"role": "tool", "content": "done", "tool_call_id": call_id, "tool_name": "refund"},
            {"role": "assistant", "content": "Refunded."},
        ]
    return messages


A = json.dumps({"order": "A-1001", "amount": "12.00 EUR"})
B = json.dumps({"order": "B-2002", "amount": "980.00 EUR"})


def arguments_of(messages: list[dict[str, Any]] | None) -> set[str]:
    return {call["arguments"] for m in messages or [] for call in m.get("tool_calls", [])}


def frame(window: list[dict[str, Any]]) -> dict[str, Any]:
    return next(m for m in window if m["content"].startswith("[compacted conversation"))


@pytest.mark.django_db
def test_two_same_shaped_runs_get_different_frames_and_each_finds_its_own_span() -> None:
    thread = Thread.objects.create()
    with override_settings(AGENTMEMORY=SETTINGS):
        a = services.compact(thread, run(A))
        b = services.compact(thread, run(B))
    assert a.span is not None and b.span is not None and a.span.pk != b.span.pk
    assert len(testing.calls) == 2  # two folds, not a replay
    # Same count, iteration, model and summary text: only the fold's reference differs.
    assert a.span.content.split("\n", 1)[1] == b.span.content.split("\n", 1)[1]
    assert frame(a.window) != frame(b.window)

    found_a = services.folded_span_for(thread, frame(a.window))
    found_b = services.folded_span_for(thread, frame(b.window))
    assert found_a is not None and found_b is not None
    assert (found_a.pk, found_b.pk) == (a.span.pk, b.span.pk)
    assert arguments_of(found_a.messages) == {A}
    assert arguments_of(found_b.messages) == {B}


@pytest.mark.django_db
def test_the_api_lookup_answers_for_the_run_that_asks() -> None:
    user = get_user_model().objects.create_user("lookup-user")
    client = APIClient()
    client.force_authenticate(user)
    with override_settings(AGENTMEMORY=SETTINGS):
        thread_id = client.post(f"{API}threads/", {"title": "runs"}, format="json").json()["id"]
        compacted = {}
        for name, arguments in (("a", A), ("b", B)):
            response = client.post(
                f"{API}threads/{thread_id}/compact/", {"messages": run(arguments)}, format="json"
            )
            assert response.status_code == 200, response.content
            compacted[name] = response.json()
        for name, arguments in (("a", A), ("b", B)):
            response = client.post(
                f"{API}threads/{thread_id}/folds/lookup/",
                {"message": frame(compacted[name]["window"])},
                format="json",
            )
            assert response.status_code == 200, response.content
            span = response.json()["span"]
            assert span["id"] == compacted[name]["span"]["id"]
            assert arguments_of(span["messages"]) == {arguments}


@pytest.mark.django_db
def test_a_frame_finds_nothing_in_another_thread() -> None:
    mine, theirs = Thread.objects.create(), Thread.objects.create()
    with override_settings(AGENTMEMORY=SETTINGS):
        compacted = services.compact(theirs, run(A))
    assert compacted.span is not None
    assert services.folded_span_for(theirs, frame(compacted.window)) == compacted.span
    assert services.folded_span_for(mine, frame(compacted.window)) is None


@pytest.mark.django_db
def test_a_frame_shared_by_two_spans_answers_neither() -> None:
    """Two spans of a thread written with one frame (not by `compact`, whose frames carry
    their fold's reference): the lookup names neither rather than hand one run the
    other's originals."""
    thread = Thread.objects.create()
    content = "[compacted conversation: 2 earlier messages were folded]\nRefunded."
    for arguments in (A, B):
        span = FoldedSpan(
            thread=thread, fingerprint=summary_fingerprint(content),
            span_fingerprint=summary_fingerprint(arguments), content=content,
            message_count=2, model="old-model", retain="conversation",
            messages=[{"role": "user", "content": arguments}],
        )
        span.signature = sign_span(span)
        span.save()
    assert services.folded_span_for(thread, content) is None
    FoldedSpan.objects.filter(thread=thread).last().delete()  # type: ignore[union-attr]
    survivor = services.folded_span_for(thread, content)
    assert survivor is not None and survivor.messages == [{"role": "user", "content": A}]
