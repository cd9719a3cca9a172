"""The REST API end to end, through DRF's APIClient on the real test database: a
thread's whole life, from creation to erasure, with every endpoint on the way."""

from __future__ import annotations

from typing import Any

import pytest
from django.db.models import Sum
from rest_framework.test import APIClient

from agentmemory.models import EntryKind, FoldedSpan, MemoryEntry, SummarizerCall, Thread
from tests.helpers import turn_messages

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache")]

API = "/api/memory/"
#: Recall knobs under which nothing folds (the summarize stage is left to the worker).
VERBATIM = {"mode": "background", "load_count": 1000}


def url(thread_id: int, tail: str = "") -> str:
    return f"{API}threads/{thread_id}/{tail}"


def post(client: APIClient, path: str, data: Any, status: int = 200) -> Any:
    response = client.post(path, data, format="json")
    assert response.status_code == status, response.content
    return response.json()


def get(client: APIClient, path: str, status: int = 200) -> Any:
    response = client.get(path)
    assert response.status_code == status, response.content
    return response.json()


def make_thread(client: APIClient, **fields: Any) -> int:
    body = post(client, f"{API}threads/", {"title": "Orders", **fields}, status=201)
    return int(body["id"])


def append_turns(client: APIClient, thread_id: int, numbers: range, *, batch: bool) -> None:
    messages = [message for n in numbers for message in turn_messages(n)]
    if batch:
        body = post(client, url(thread_id, "entries/"), {"entries": messages}, status=201)
        assert [entry["role"] for entry in body] == [m["role"] for m in messages]
        return
    for message in messages:
        body = post(client, url(thread_id, "entries/"), message, status=201)
        assert len(body) == 1 and body[0]["content"] == message["content"]


def test_the_whole_life_of_a_thread(client: APIClient, user: Any, eager_celery: None) -> None:
    thread_id = make_thread(client, client_key="orders-1", metadata={"channel": "chat"})
    thread = get(client, url(thread_id))
    assert thread["client_key"] == "orders-1" and thread["last_turn"] == 0

    # 40 turns of four messages (a user ask, a tool call, its result, the answer):
    # 30 turns in batches of ten, the last ten one message per request.
    for start in (1, 11, 21):
        append_turns(client, thread_id, range(start, start + 10), batch=True)
    append_turns(client, thread_id, range(31, 41), batch=False)
    assert MemoryEntry.objects.filter(thread_id=thread_id).count() == 160
    assert get(client, url(thread_id))["last_turn"] == 40
    stored = get(client, url(thread_id, "entries/?page_size=500"))
    assert stored["count"] == 160
    tool_call = stored["results"][1]
    assert tool_call["role"] == "assistant"
    assert tool_call["tool_calls"][0]["name"] == "lookup_order"
    assert stored["results"][2]["tool_call_id"] == tool_call["tool_calls"][0]["id"]
    single = get(client, url(thread_id, f"entries/{stored['results'][-1]['id']}/"))
    assert single["turn"] == 40 and single["kind"] == "message"

    # A recall that folds (inline, the default): messages with ids and kinds.
    recall = post(client, url(thread_id, "recall/"), {"budget_tokens": 4000})
    assert recall["decline"] is None
    first_summary = recall["folded_summary_id"]
    assert first_summary is not None
    assert recall["summaries_used"] == [first_summary]
    kinds = [message["kind"] for message in recall["messages"]]
    assert kinds[0] == "summary" and set(kinds[1:]) == {"message"}
    assert all(isinstance(message["id"], int) for message in recall["messages"])
    assert recall["messages"][0]["content"].startswith("[summary of earlier turns")
    assert recall["text"].startswith("Relevant context from prior conversation")
    assert recall["messages"][-1]["content"] in recall["text"]
    assert 0 < recall["tokens"] <= 4000 - 256
    # Too few entries loaded to be worth a call: declined out loud, not silently.
    declined = post(client, url(thread_id, "recall/"), {"budget_tokens": 4000,
                                                         "trigger_min_entries": 1000})
    assert declined["decline"] == "not-worth-a-call"
    assert declined["summaries_used"] == [first_summary]
    # A budget below minimum_tokens injects nothing, and says why.
    starved = post(client, url(thread_id, "recall/"), {"budget_tokens": 300,
                                                        "mode": "background"})
    assert starved["messages"] == [] and starved["text"] == ""
    assert starved["budget_decline"]

    # Fold inline: 200 with the result; the new summary swallows the first one.
    inline = post(client, url(thread_id, "fold/"), {"mode": "inline"})
    assert inline["mode"] == "inline" and inline["folded"] is True
    nested_summary = inline["summary_id"]
    assert MemoryEntry.objects.get(pk=first_summary).covered_by_id == nested_summary
    # Fold in the background: 202 with the task id; the eager task has folded on.
    folded_before = MemoryEntry.objects.filter(kind=EntryKind.SUMMARY).count()
    background = post(client, url(thread_id, "fold/"), {"mode": "background"}, status=202)
    assert background["mode"] == "background" and background["task_id"]
    assert MemoryEntry.objects.get(pk=nested_summary).covered_by_id is not None
    assert MemoryEntry.objects.filter(kind=EntryKind.SUMMARY).count() > folded_before

    # Summaries: the list, one with its coverage, its originals (one level, and all the
    # way down through the nested summary).
    summaries = get(client, url(thread_id, "summaries/?page_size=500"))
    stored_summaries = MemoryEntry.objects.filter(thread_id=thread_id, kind=EntryKind.SUMMARY)
    assert summaries["count"] == stored_summaries.count() >= 3
    assert {row["kind"] for row in summaries["results"]} == {"summary"}
    detail = get(client, url(thread_id, f"summaries/{nested_summary}/"))
    coverage = detail["coverage"]
    assert coverage["model"] == "offline-extractive-1"
    assert coverage["entry_count"] == MemoryEntry.objects.filter(
        covered_by_id=nested_summary
    ).count()
    assert coverage["from_turn"] <= coverage["to_turn"]
    flat = get(client, url(thread_id, f"summaries/{nested_summary}/originals/"))
    assert flat["recursive"] is False and flat["summary"]["id"] == nested_summary
    assert first_summary in [row["id"] for row in flat["originals"]]
    deep = get(client, url(thread_id, f"summaries/{nested_summary}/originals/?recursive=1"))
    assert deep["recursive"] is True
    assert {row["kind"] for row in deep["originals"]} == {"message"}
    first_originals = set(
        MemoryEntry.objects.filter(covered_by_id=first_summary).values_list("pk", flat=True)
    )
    assert first_originals < {row["id"] for row in deep["originals"]}
    positions = [row["position"] for row in deep["originals"]]
    assert positions == sorted(positions)

    # Unfold: deleting the innermost summary takes every summary built on it; once no
    # summary is left in use the next recall is verbatim, every original byte-identical.
    before = list(MemoryEntry.objects.filter(kind=EntryKind.MESSAGE).values("id", "content"))
    chain, above = [first_summary], nested_summary
    while above is not None:
        chain.append(above)
        above = MemoryEntry.objects.get(pk=above).covered_by_id
    response = client.delete(url(thread_id, f"summaries/{first_summary}/"))
    assert response.status_code == 204
    assert not MemoryEntry.objects.filter(covered_by__in=chain).exists()
    for _ in range(len(summaries["results"])):
        used = post(client, url(thread_id, "recall/"), {"budget_tokens": 100_000, **VERBATIM})
        assert not set(used["summaries_used"]) & set(chain)
        if not used["summaries_used"]:
            break
        for summary_id in used["summaries_used"]:
            assert client.delete(url(thread_id, f"summaries/{summary_id}/")).status_code == 204
    assert not MemoryEntry.objects.filter(thread_id=thread_id, covered_by__isnull=False).exists()
    verbatim = post(client, url(thread_id, "recall/"), {"budget_tokens": 100_000, **VERBATIM})
    assert verbatim["summaries_used"] == [] and verbatim["decline"] is None
    assert {message["kind"] for message in verbatim["messages"]} == {"message"}
    assert len(verbatim["messages"]) == 160
    assert list(MemoryEntry.objects.filter(kind=EntryKind.MESSAGE).values("id", "content")) == (
        before
    )

    # Compact a live window: the pinned request, then 60 messages; a sliding window of 40
    # folds the oldest into one framed summary message and journals the span.
    window = [{"role": "user", "content": "Find every late order and chase the carrier."}]
    window += [message for n in range(1, 16) for message in turn_messages(n)][1:61]
    compacted = post(client, url(thread_id, "compact/"), {"messages": window, "iteration": 2})
    span = compacted["span"]
    assert compacted["refusal"] is None and compacted["reused"] is False
    assert span["message_count"] > 0 and span["iteration"] == 2
    assert span["retain"] == "conversation" and len(span["messages"]) == span["message_count"]
    assert len(compacted["window"]) < len(window)
    assert compacted["window"][0] == window[0]
    summary_message = compacted["window"][1]
    assert summary_message["content"] == span["content"]
    replay = post(client, url(thread_id, "compact/"), {"messages": window, "iteration": 2})
    assert replay["reused"] is True and replay["span"]["id"] == span["id"]

    # Look the span up by the summary message; a forged one finds nothing.
    found = post(client, url(thread_id, "folds/lookup/"), {"message": summary_message})
    assert found["span"]["id"] == span["id"]
    forged = {"role": "user", "content": summary_message["content"].replace("folded", "Folded")}
    forged["content"] += " " if forged["content"] == summary_message["content"] else ""
    assert post(client, url(thread_id, "folds/lookup/"), {"message": forged})["span"] is None
    folds = get(client, url(thread_id, "folds/"))
    assert folds["count"] == 1 and folds["results"][0]["id"] == span["id"]

    # Usage: every ledger row of the thread, with totals that match the table.
    usage = get(client, url(thread_id, "usage/?page_size=500"))
    calls = SummarizerCall.objects.filter(thread_id=thread_id)
    assert usage["count"] == calls.count() == len(usage["results"])
    assert {row["id"] for row in usage["results"]} == set(calls.values_list("pk", flat=True))
    totals = usage["totals"]
    assert totals["calls"] == calls.count()
    sums = calls.aggregate(p=Sum("prompt_tokens", default=0), c=Sum("completion_tokens",
                                                                     default=0))
    assert totals["prompt_tokens"] == sums["p"] and totals["completion_tokens"] == sums["c"]
    assert totals["by_outcome"]["folded"] == calls.filter(outcome="folded").count()
    assert totals["by_outcome"]["folded"] == len(summaries["results"]) + 1  # + the window
    assert sum(totals["by_outcome"].values()) == totals["calls"]
    assert {row["purpose"] for row in usage["results"]} == {"recall-fold", "window-fold"}

    # Erase one original: the summary derived from it goes, the rest are verbatim again.
    # (The unfolded span is latched; the conversation goes on, so a new span folds.)
    append_turns(client, thread_id, range(41, 45), batch=True)
    refold = post(client, url(thread_id, "fold/"), {"mode": "inline"})
    assert refold["folded"] is True
    victim = MemoryEntry.objects.filter(covered_by_id=refold["summary_id"]).first()
    assert victim is not None
    survivors = list(
        MemoryEntry.objects.filter(covered_by_id=refold["summary_id"])
        .exclude(pk=victim.pk)
        .values_list("pk", flat=True)
    )
    assert client.delete(url(thread_id, f"entries/{victim.pk}/")).status_code == 204
    get(client, url(thread_id, f"entries/{victim.pk}/"), status=404)
    get(client, url(thread_id, f"summaries/{refold['summary_id']}/"), status=404)
    assert not MemoryEntry.objects.filter(pk__in=survivors, covered_by__isnull=False).exists()
    # 160 + 16 messages appended, one erased; retired summaries stay as history.
    assert MemoryEntry.objects.filter(thread_id=thread_id, kind="message").count() == 175

    # Erase the thread: 204, then it is gone for good, with everything in it.
    assert client.delete(url(thread_id)).status_code == 204
    get(client, url(thread_id), status=404)
    get(client, url(thread_id, "entries/"), status=404)
    assert not Thread.objects.filter(pk=thread_id).exists()
    assert not MemoryEntry.objects.filter(thread_id=thread_id).exists()
    assert not FoldedSpan.objects.filter(thread_id=thread_id).exists()


def test_threads_are_created_listed_updated_and_keys_stay_unique(client: APIClient) -> None:
    first = make_thread(client, client_key="k1", ttl_seconds=3600, write_tier="warm")
    second = make_thread(client, client_key="k2")
    listed = get(client, f"{API}threads/")
    assert [row["id"] for row in listed["results"]] == [second, first]
    assert listed["results"][1]["ttl_seconds"] == 3600
    clash = client.post(f"{API}threads/", {"client_key": "k1"}, format="json")
    assert clash.status_code == 409 and "client_key" in clash.json()
    patched = client.patch(url(first), {"title": "Renamed", "ttl_seconds": None}, format="json")
    assert patched.status_code == 200, patched.content
    assert patched.json()["title"] == "Renamed" and patched.json()["ttl_seconds"] is None
    put = client.put(url(second), {"title": "Put", "client_key": "k2"}, format="json")
    assert put.status_code == 200 and put.json()["title"] == "Put"
    assert Thread.objects.get(pk=first).ttl is None


def test_lists_paginate_with_page_size(client: APIClient) -> None:
    thread_id = make_thread(client)
    append_turns(client, thread_id, range(1, 6), batch=True)  # 20 entries
    page = get(client, url(thread_id, "entries/?page_size=8"))
    assert page["count"] == 20 and len(page["results"]) == 8
    assert page["next"] and page["previous"] is None
    last = get(client, url(thread_id, "entries/?page_size=8&page=3"))
    assert len(last["results"]) == 4 and last["next"] is None
    every = [row["id"] for p in (1, 2, 3)
             for row in get(client, url(thread_id, f"entries/?page_size=8&page={p}"))["results"]]
    assert every == sorted(every) and len(set(every)) == 20
    get(client, url(thread_id, "entries/?page_size=8&page=4"), status=404)
    for _ in range(3):
        make_thread(client)
    threads = get(client, f"{API}threads/?page_size=2")
    assert threads["count"] == 4 and len(threads["results"]) == 2


def test_include_covered_lists_the_folded_originals(client: APIClient) -> None:
    thread_id = make_thread(client)
    append_turns(client, thread_id, range(1, 11), batch=True)
    assert post(client, url(thread_id, "fold/"), {})["folded"] is True
    visible = get(client, url(thread_id, "entries/?page_size=500"))
    everything = get(client, url(thread_id, "entries/?page_size=500&include_covered=1"))
    covered = MemoryEntry.objects.filter(thread_id=thread_id, covered_by__isnull=False).count()
    assert covered > 0
    assert everything["count"] == visible["count"] + covered == 41


def test_the_fourth_append_in_a_minute_is_throttled(
    client: APIClient, settings: Any
) -> None:
    settings.AGENTMEMORY = {"API_THROTTLE_RATES": {"append": "3/min"}}
    thread_id = make_thread(client)
    message = {"role": "user", "content": "hello"}
    for _ in range(3):
        post(client, url(thread_id, "entries/"), message, status=201)
    response = client.post(url(thread_id, "entries/"), message, format="json")
    assert response.status_code == 429
    assert "Retry-After" in response.headers
    assert MemoryEntry.objects.filter(thread_id=thread_id).count() == 3
    # Only appends are rated: reading and recalling still answer.
    get(client, url(thread_id, "entries/"))
    post(client, url(thread_id, "recall/"), {"budget_tokens": 1000})
