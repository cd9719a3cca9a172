"""Recall receipts: what exactly the model saw at turn N, rebuilt later from ids.

THE REQUIRED TEST: a receipt replays the exact recalled text and entry ids after later
folds and unfolds (:func:`test_a_receipt_replays_the_exact_context_after_later_folds_and_unfolds`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection, models
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from agentmemory import services
from agentmemory.checks import check_settings
from agentmemory.conf import DEFAULTS
from agentmemory.models import MemoryEntry, RecallReceipt, Thread
from agentmemory.trust.replay import receipts_at_turn, replay
from tests.helpers import (
    PLAIN,
    add_turns,
    add_user_messages,
    api_client_of,
    make_thread,
    numbered,
    recording_settings,
)

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
BIG = 100_000
#: Recall knobs under which nothing folds.
NO_FOLD = {"trigger_min_entries": 10_000}
API = "/api/memory/"


@pytest.fixture(autouse=True)
def _receipts_on(settings: Any) -> Iterator[None]:
    settings.AGENTMEMORY = recording_settings(PLAIN, RECEIPTS=True)
    cache.clear()
    yield


def receipt_of(result: services.RecallResult) -> RecallReceipt:
    assert result.receipt_id is not None, "the recall recorded no receipt"
    return RecallReceipt.objects.get(pk=result.receipt_id)


def item_ids(receipt: RecallReceipt) -> list[int]:
    return receipt.entry_ids()


def ids(result: services.RecallResult) -> list[int]:
    return [message.id for message in result.messages]


def api_client(username: str) -> tuple[Any, APIClient]:
    user = get_user_model().objects.create_user(username, password=f"pw-{username}")
    return user, api_client_of(user)


def get(client: APIClient, path: str, status: int = 200) -> Any:
    response = client.get(path)
    assert response.status_code == status, response.content
    return response.json()


# ------------------------------------------------------------------ what a receipt holds


def test_every_recall_records_ids_in_order_tokens_budget_settings_and_decline() -> None:
    thread = make_thread()
    entries = add_user_messages(thread, 10, now=NOW)

    result = services.recall(thread, BIG, now=NOW, max_entries=8, footer="-- end --")

    receipt = receipt_of(result)
    items = receipt.items
    assert [item.entry_id for item in items] == ids(result) == [e.pk for e in entries[2:]]
    assert [item.order for item in items] == list(range(8))
    assert [item.tokens for item in items] == [e.token_count for e in entries[2:]]
    assert {item.kind for item in items} == {"message"}
    assert receipt.thread_id == thread.pk
    assert receipt.turn == 10
    assert receipt.budget_tokens == BIG
    assert receipt.tokens == result.tokens > 0
    assert receipt.decline == "not-worth-a-call" == result.decline
    assert receipt.budget_decline == ""
    assert receipt.folded_summary_id is None
    assert receipt.created_at == NOW
    # The settings in force, overrides included; the instruction's text is not copied.
    config = receipt.config
    assert config["max_entries"] == 8 and config["footer"] == "-- end --"
    assert config["load_count"] == DEFAULTS["LOAD_COUNT"]
    assert config["preserve_recent"] == DEFAULTS["PRESERVE_RECENT"]
    assert config["trigger_min_entries"] == DEFAULTS["TRIGGER_MIN_ENTRIES"]
    assert config["header"] == DEFAULTS["FORMAT_HEADER"]
    assert config["mode"] == "inline"
    assert "instruction" not in config
    assert replay(receipt).text == result.text and result.text.endswith("\n-- end --")


def test_a_recall_that_folds_records_the_summary_it_put_in_the_context() -> None:
    thread = make_thread()
    entries = add_user_messages(thread, 25, now=NOW)

    result = services.recall(thread, BIG, now=NOW)

    assert result.folded_summary_id is not None
    receipt = receipt_of(result)
    summary = MemoryEntry.objects.get(pk=result.folded_summary_id)
    items = receipt.items
    assert [item.entry_id for item in items] == [summary.pk, *(e.pk for e in entries[20:])]
    assert [item.kind for item in items] == ["summary"] + ["message"] * 5
    assert items[0].tokens == summary.token_count
    assert receipt.folded_summary_id == summary.pk
    assert receipt.decline == ""


def test_a_budget_decline_is_recorded_with_an_empty_context() -> None:
    thread = make_thread()
    add_user_messages(thread, 3, now=NOW)

    result = services.recall(thread, 300, now=NOW)  # 300 - 256 reserve < 100 minimum

    receipt = receipt_of(result)
    assert result.budget_decline == receipt.budget_decline == "below-minimum-tokens"
    assert receipt.items == [] and receipt.oldest_position is receipt.newest_position is None
    assert receipt.tokens == 0 and receipt.budget_tokens == 300


def test_without_the_setting_no_receipt_is_written(settings: Any) -> None:
    settings.AGENTMEMORY = recording_settings(PLAIN)
    thread = make_thread()
    add_user_messages(thread, 25, now=NOW)

    result = services.recall(thread, BIG, now=NOW)

    assert result.receipt_id is None
    assert not RecallReceipt.objects.exists()


def test_a_receipt_is_small_ids_and_counts_never_copies() -> None:
    marker = "Zanzibar-quokka"
    thread = make_thread()
    services.append(
        thread,
        [{"role": "user", "content": f"{marker} " + "lorem ipsum dolor " * 1200}
         for _ in range(4)],
        now=NOW,
    )

    result = services.recall(thread, 1_000_000, now=NOW)

    assert len(result.messages) == 4 and marker in result.text
    receipt = receipt_of(result)
    stored = json.dumps(
        list(RecallReceipt.objects.filter(pk=receipt.pk).values()), default=str,
    )
    assert marker not in stored and "lorem" not in stored
    assert len(stored) < 2_000 < len(result.text) // 10
    # No column can hold text: the schema itself keeps receipts small.
    assert not [
        field.name for field in RecallReceipt._meta.concrete_fields
        if isinstance(field, models.TextField)
    ]


# ------------------------------------------------------------------ replay (THE REQUIRED TEST)


def test_a_receipt_replays_the_exact_context_after_later_folds_and_unfolds() -> None:
    thread = make_thread()
    add_user_messages(thread, 10, now=NOW)
    recalls = [services.recall(thread, BIG, now=NOW)]  # verbatim: too few to fold
    add_user_messages(thread, 15, start=11, now=NOW)
    recalls.append(services.recall(thread, BIG, now=NOW))  # folds turns 6-20
    recalls.append(services.recall(thread, BIG, now=NOW, max_entries=7))  # loads the summary
    add_user_messages(thread, 15, start=26, now=NOW)
    recalls.append(services.recall(thread, BIG, now=NOW))  # folds turns 21-35
    first_summary = MemoryEntry.objects.get(pk=recalls[1].folded_summary_id)
    second_summary = MemoryEntry.objects.get(pk=recalls[3].folded_summary_id)
    assert recalls[2].summaries_used == [first_summary.pk]
    assert recalls[3].summaries_used == [second_summary.pk]
    seen = [(r.text, ids(r), [m.content for m in r.messages]) for r in recalls]

    # Later: both summaries are unfolded (retired, not deleted) and recall is verbatim.
    assert services.unfold(first_summary) == 1
    assert services.unfold(second_summary) == 1
    verbatim = services.recall(thread, BIG, now=NOW, **NO_FOLD)
    assert verbatim.summaries_used == []
    assert verbatim.text not in {text for text, _, _ in seen}
    for summary in (first_summary, second_summary):
        summary.refresh_from_db()
        assert summary.retired_at is not None
        assert not MemoryEntry.objects.filter(covered_by=summary).exists()

    for result, (text, entry_ids, contents) in zip(recalls, seen, strict=True):
        replayed = replay(receipt_of(result))
        assert replayed.text == text
        assert [entry.pk for entry in replayed.entries] == entry_ids
        assert [entry.content for entry in replayed.entries] == contents
    # The newest receipt replays too, and each receipt rebuilds its own context.
    assert replay(receipt_of(verbatim)).text == verbatim.text
    assert len({replay(receipt_of(r)).text for r in [*recalls, verbatim]}) == 5


def test_a_regenerated_summary_does_not_change_what_an_old_receipt_replays(
    settings: Any,
) -> None:
    settings.AGENTMEMORY = recording_settings(numbered, RECEIPTS=True)
    thread = make_thread()
    add_user_messages(thread, 25, now=NOW)
    before = services.recall(thread, BIG, now=NOW)
    old = MemoryEntry.objects.get(pk=before.folded_summary_id)

    outcome = services.regenerate(old)
    after = services.recall(thread, BIG, now=NOW)

    assert outcome.summary is not None and outcome.summary.content != old.content
    assert after.summaries_used == [outcome.summary.pk]
    assert replay(receipt_of(before)).text == before.text != after.text
    assert old.content in replay(receipt_of(before)).text


# ------------------------------------------------------------------ what the model saw at turn N


def test_what_the_model_saw_at_turn_n_in_python_and_through_the_api() -> None:
    user, client = api_client("ada")
    thread = make_thread(owner=user)
    add_user_messages(thread, 10, now=NOW)
    first = services.recall(thread, BIG, now=NOW)
    second = services.recall(thread, BIG, now=NOW + timedelta(seconds=1), max_entries=2)
    add_user_messages(thread, 3, start=11, now=NOW)
    response = client.post(
        f"{API}threads/{thread.pk}/recall/", {"budget_tokens": BIG}, format="json"
    )
    assert response.status_code == 200, response.content
    third = response.json()
    assert third["receipt_id"] is not None

    assert [r.pk for r in receipts_at_turn(thread, 10)] == [first.receipt_id, second.receipt_id]
    assert [r.pk for r in receipts_at_turn(thread, 13)] == [third["receipt_id"]]
    assert not receipts_at_turn(thread, 11).exists()

    base = f"{API}threads/{thread.pk}/recalls/"
    at_ten = get(client, f"{base}?turn=10")
    assert at_ten["count"] == 2
    assert [r["id"] for r in at_ten["results"]] == [second.receipt_id, first.receipt_id]
    listed = {r["id"]: r for r in at_ten["results"]}
    assert [i["entry_id"] for i in listed[first.receipt_id]["items"]] == ids(first)
    assert [i["order"] for i in listed[second.receipt_id]["items"]] == [0, 1]
    assert listed[first.receipt_id]["turn"] == 10
    assert listed[first.receipt_id]["budget_tokens"] == BIG
    assert get(client, f"{base}?turn=13")["count"] == 1
    assert get(client, base)["count"] == 3
    assert "turn" in get(client, f"{base}?turn=ten", status=400)

    for result_id, text, entry_ids in (
        (first.receipt_id, first.text, ids(first)),
        (second.receipt_id, second.text, ids(second)),
        (third["receipt_id"], third["text"], [m["id"] for m in third["messages"]]),
    ):
        detail = get(client, f"{base}{result_id}/")
        assert detail["text"] == text
        assert [m["id"] for m in detail["messages"]] == entry_ids
        assert detail["receipt"]["id"] == result_id


# ------------------------------------------------------------------ retention and erasure


def test_receipts_expire_with_the_thread_ttl_and_purge_deletes_them() -> None:
    thread = make_thread(ttl=timedelta(hours=1))
    add_user_messages(thread, 6, now=NOW)
    later = NOW + timedelta(minutes=30)
    with_items = receipt_of(services.recall(thread, BIG, now=later))
    itemless = receipt_of(services.recall(thread, 300, now=later))  # budget declined
    forever = make_thread()
    add_user_messages(forever, 6, now=NOW)
    kept = receipt_of(services.recall(forever, BIG, now=later))

    assert with_items.expires_at == itemless.expires_at == later + timedelta(hours=1)
    assert kept.expires_at is None

    services.purge_expired(now=NOW + timedelta(minutes=59))
    assert RecallReceipt.objects.count() == 3
    # The entries expire first; a receipt naming them goes with them, never left
    # pointing at rows that are gone.
    services.purge_expired(now=NOW + timedelta(minutes=61))
    assert not MemoryEntry.objects.filter(thread=thread).exists()
    assert set(RecallReceipt.objects.values_list("pk", flat=True)) == {itemless.pk, kept.pk}
    services.purge_expired(now=later + timedelta(hours=1))
    assert list(RecallReceipt.objects.values_list("pk", flat=True)) == [kept.pk]
    assert item_ids(kept) == list(
        MemoryEntry.objects.filter(thread=forever).order_by("position").values_list(
            "pk", flat=True
        )
    )


def test_erasing_an_entry_deletes_every_receipt_that_showed_it_or_its_summary() -> None:
    thread = make_thread()
    entries = add_user_messages(thread, 25, now=NOW)
    erased = entries[10]
    verbatim = receipt_of(services.recall(thread, BIG, now=NOW, **NO_FOLD))
    folded = services.recall(thread, BIG, now=NOW)
    summary_receipt = receipt_of(folded)
    # One entry: the newest turn alone (with two, the summary would come first).
    newest_only = receipt_of(services.recall(thread, BIG, now=NOW, max_entries=1))
    assert erased.pk in item_ids(verbatim)
    assert erased.pk not in item_ids(summary_receipt)
    assert folded.folded_summary_id in item_ids(summary_receipt)
    assert item_ids(newest_only) == [entries[24].pk]

    services.erase_entry(erased)

    assert list(RecallReceipt.objects.values_list("pk", flat=True)) == [newest_only.pk]
    assert item_ids(newest_only) == [entries[24].pk]
    assert not MemoryEntry.objects.filter(pk=folded.folded_summary_id).exists()
    assert not RecallReceipt.objects.filter(pk__in=[verbatim.pk, summary_receipt.pk])


# ------------------------------------------------------------------ isolation


def test_another_user_gets_404_on_receipts_and_savings_that_are_not_theirs() -> None:
    ada, ada_client = api_client("ada")
    _, bob_client = api_client("bob")
    thread = make_thread(owner=ada)
    add_user_messages(thread, 25, now=NOW)
    receipt_id = services.recall(thread, BIG, now=NOW).receipt_id
    bobs = bob_client.post(f"{API}threads/", {"title": "mine"}, format="json").json()["id"]

    for path in (
        f"{API}threads/{thread.pk}/recalls/",
        f"{API}threads/{thread.pk}/recalls/?turn=25",
        f"{API}threads/{thread.pk}/recalls/{receipt_id}/",
        f"{API}threads/{thread.pk}/savings/",
        f"{API}threads/{bobs}/recalls/{receipt_id}/",
    ):
        assert bob_client.get(path).status_code == 404, path
    assert get(bob_client, f"{API}threads/{bobs}/recalls/")["count"] == 0
    assert get(bob_client, f"{API}savings/")["spent_tokens"] == 0
    assert get(bob_client, f"{API}savings/")["summary_loads"] == 0
    # The owner sees them.
    assert get(ada_client, f"{API}threads/{thread.pk}/recalls/{receipt_id}/")["text"]
    assert get(ada_client, f"{API}savings/")["summary_loads"] == 1


# ------------------------------------------------------------------ cost


def build(entries: int) -> Thread:
    thread = make_thread()
    add_turns(thread, entries // 4, now=NOW)
    if entries % 4:
        services.append(
            thread,
            [{"role": "user", "content": f"Extra note {n}."} for n in range(entries % 4)],
            now=NOW,
        )
    assert MemoryEntry.objects.filter(thread=thread).count() == entries
    return thread


def queries_of(action: Callable[[], object]) -> int:
    with CaptureQueriesContext(connection) as captured:
        action()
    return len(captured.captured_queries)


def test_a_recall_with_receipts_costs_the_same_queries_on_50_and_5000_entries() -> None:
    folding, verbatim = [], []
    for size in (50, 5_000):
        thread = build(size)
        folding.append(queries_of(lambda thread=thread: services.recall(thread, BIG, now=NOW)))
        verbatim.append(
            queries_of(lambda thread=thread: services.recall(thread, BIG, now=NOW, **NO_FOLD))
        )

    assert RecallReceipt.objects.count() == 4
    assert all(receipt.shown for receipt in RecallReceipt.objects.all())
    assert folding[0] == folding[1], folding
    assert verbatim[0] == verbatim[1], verbatim


def test_the_receipt_turn_is_the_thread_s_latest_even_from_a_stale_instance() -> None:
    thread = make_thread()
    add_user_messages(thread, 10, now=NOW)
    stale = Thread.objects.get(pk=thread.pk)
    add_user_messages(thread, 3, start=11, now=NOW)  # appended through another instance

    result = services.recall(stale, BIG, now=NOW)

    assert max(m.turn for m in result.messages) == 13
    assert receipt_of(result).turn == 13
    assert [r.pk for r in receipts_at_turn(thread, 13)] == [result.receipt_id]


@pytest.mark.parametrize("turn", ["ten", "-1", "1.5", "", "²", "99999999999999999999"])
def test_a_bad_turn_filter_answers_400_with_the_field(turn: str) -> None:
    user, client = api_client("ada")
    thread = make_thread(owner=user)
    add_user_messages(thread, 3, now=NOW)
    services.recall(thread, BIG, now=NOW)

    body = get(client, f"{API}threads/{thread.pk}/recalls/?turn={turn}", status=400)

    assert list(body) == ["turn"]


@pytest.mark.parametrize("key", ["RECEIPTS", "HOLD_FLAGGED"])
@pytest.mark.parametrize("value", ["yes", 1, None])
def test_a_non_boolean_switch_fails_the_check(settings: Any, key: str, value: Any) -> None:
    settings.AGENTMEMORY = {key: value}
    errors = [e for e in check_settings() if e.id == "agentmemory.E013"]
    assert errors and key in errors[0].msg


@pytest.mark.parametrize("mode", ["inline", "background"])
def test_a_receipt_is_one_query_with_no_query_per_summary_it_shows(
    settings: Any, mode: str,
) -> None:
    """What a receipt's summaries saved is counted from the rows the recall loaded: a
    query per summary shown (its coverage read again) would make it two."""
    thread = build(400)
    services.recall(thread, BIG, now=NOW)  # an inline recall folds the thread
    shown = services.recall(thread, BIG, now=NOW, mode=mode, **NO_FOLD).summaries_used
    assert shown, "the context shows no summary"
    with_receipt = queries_of(
        lambda: services.recall(thread, BIG, now=NOW, mode=mode, **NO_FOLD))
    settings.AGENTMEMORY = recording_settings(PLAIN)
    without = queries_of(lambda: services.recall(thread, BIG, now=NOW, mode=mode, **NO_FOLD))
    assert with_receipt == without + 1, (with_receipt, without)
    receipt = RecallReceipt.objects.latest("id")
    assert receipt.summary_loads == len(shown) and receipt.saved_tokens > 0
