"""Cost: a per-owner daily summarizer token quota, and the savings ledger.

THE REQUIRED TEST: the quota stops folds at the limit, and the ledger totals match what
the loopback OpenAI-compatible server reported
(:func:`test_the_daily_quota_stops_folds_at_the_limit_and_the_ledger_matches_the_server`).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.utils import timezone
from rest_framework.test import APIClient

from agentmemory import services, signals
from agentmemory.checks import check_settings
from agentmemory.models import (
    CallOutcome,
    EntryKind,
    FoldPurpose,
    MemoryEntry,
    OwnerQuota,
    SummarizerCall,
    Thread,
)
from agentmemory.summarizers import testing
from agentmemory.trust import ledger
from agentmemory.trust.savings import savings, summary_savings
from agentmemory.window.compact import compact
from tests.helpers import (
    PLAIN,
    SLIDING_FOUR,
    add_user_messages,
    api_client_of,
    capture,
    make_thread,
    recording_settings,
    refund_queue,
)
from tests.openai_server import OpenAIServer

pytestmark = pytest.mark.django_db

BIG = 100_000
API = "/api/memory/"


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    cache.clear()
    yield


@pytest.fixture
def owner() -> Any:
    return get_user_model().objects.create_user("ada", password="pw-ada")


def get(client: APIClient, path: str) -> Any:
    response = client.get(path)
    assert response.status_code == 200, response.content
    return response.json()


def foldable_thread(owner: Any = None) -> tuple[Thread, list[MemoryEntry]]:
    """25 entries: a recall folds entries 6-20 with one call."""
    thread = make_thread(owner=owner)
    return thread, add_user_messages(thread, 25)


def spend(owner: Any, tokens: int, *, when: Any = None) -> SummarizerCall:
    """A ledger row of ``tokens`` for ``owner``, as an earlier call would have left."""
    return SummarizerCall.objects.create(
        owner=owner,
        purpose=FoldPurpose.RECALL_FOLD,
        backend="tests",
        model="earlier-model",
        prompt_tokens=tokens - tokens // 4,
        completion_tokens=tokens // 4,
        outcome=CallOutcome.FOLDED,
        created_at=when or timezone.now(),
    )


# ------------------------------------------------------------------ the quota (THE REQUIRED TEST)


def test_the_daily_quota_stops_folds_at_the_limit_and_the_ledger_matches_the_server(
    settings: Any,
    owner: Any,
    openai_server: OpenAIServer,
    openai_summarizer_settings: dict[str, Any],
) -> None:
    settings.AGENTMEMORY = {**openai_summarizer_settings, "RECEIPTS": True}
    usage = [(400, 100), (350, 150)]  # what the server reports for each call: 500 + 500
    for prompt_tokens, completion_tokens in usage:
        openai_server.reply(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    threads = [foldable_thread(owner) for _ in range(3)]

    first = services.recall(threads[0][0], BIG)
    # Each call reserves its estimate before it is made: the quota takes the second
    # call's estimate exactly (the threads are alike, so are their estimates), not a third.
    estimate = SummarizerCall.objects.get(owner=owner).estimated_tokens
    assert estimate is not None and estimate > 500
    settings.AGENTMEMORY = {
        **openai_summarizer_settings, "DAILY_TOKEN_QUOTA": 500 + estimate, "RECEIPTS": True
    }
    second = services.recall(threads[1][0], BIG)
    assert ledger.tokens_used_today(owner.pk) == 1_000  # 1,000 + an estimate > the quota
    with capture(signals.fold_declined) as declined:
        third = services.recall(threads[2][0], BIG)
        again = services.recall(threads[2][0], BIG)

    assert first.folded_summary_id is not None and second.folded_summary_id is not None
    for result in (third, again):
        assert result.decline == "quota-exceeded"
        assert result.folded_summary_id is None and result.summaries_used == []
        assert [m.id for m in result.messages] == [e.pk for e in threads[2][1][5:]]
    assert [(d["reason"], d["purpose"], d["latched"], d["prompt_tokens"]) for d in declined] == [
        ("quota-exceeded", FoldPurpose.RECALL_FOLD, False, None)
    ] * 2
    assert len(openai_server.chat_requests) == 2  # no call past the quota
    assert openai_server.pending == 0

    # The ledger holds exactly what the server reported, call by call and in total.
    calls = SummarizerCall.objects.filter(owner=owner).order_by("id")
    assert [(c.prompt_tokens, c.completion_tokens) for c in calls] == usage
    assert [c.estimated_tokens for c in calls] == [estimate] * 2
    assert [c.outcome for c in calls] == [CallOutcome.FOLDED] * 2
    assert [c.thread_id for c in calls] == [threads[0][0].pk, threads[1][0].pk]
    server_total = sum(p + c for p, c in usage)
    assert savings(owner=owner)["spent_tokens"] == server_total == 1_000
    for (thread, _), (prompt_tokens, completion_tokens) in zip(threads, [*usage, (0, 0)],
                                                                strict=True):
        assert savings(thread=thread)["spent_tokens"] == prompt_tokens + completion_tokens
    client = api_client_of(owner)
    assert get(client, f"{API}savings/")["spent_tokens"] == server_total
    for (thread, _), (prompt_tokens, completion_tokens) in zip(threads[:2], usage, strict=True):
        totals = get(client, f"{API}threads/{thread.pk}/usage/")["totals"]
        assert totals["calls"] == 1 and totals["by_outcome"]["folded"] == 1
        assert totals["prompt_tokens"] == prompt_tokens
        assert totals["completion_tokens"] == completion_tokens
    assert get(client, f"{API}threads/{threads[2][0].pk}/usage/")["totals"]["calls"] == 0


def test_a_refused_call_is_paid_for_and_counts_toward_the_quota(
    settings: Any,
    owner: Any,
    openai_server: OpenAIServer,
    openai_summarizer_settings: dict[str, Any],
) -> None:
    settings.AGENTMEMORY = {**openai_summarizer_settings, "DAILY_TOKEN_QUOTA": 900}
    openai_server.reply(" ".join(["word"] * 3000), prompt_tokens=700, completion_tokens=300)
    thread, _ = foldable_thread(owner)
    other, _ = foldable_thread(owner)

    refused = services.recall(thread, BIG)
    over = services.recall(other, BIG)

    assert refused.decline == "not-smaller"
    assert over.decline == "quota-exceeded"
    assert len(openai_server.chat_requests) == 1
    (call,) = SummarizerCall.objects.filter(owner=owner)
    assert call.outcome == CallOutcome.REFUSED_NOT_SMALLER
    assert savings(owner=owner)["spent_tokens"] == 1_000


def test_an_owner_override_lowers_the_quota(settings: Any, owner: Any) -> None:
    settings.AGENTMEMORY = recording_settings(PLAIN, DAILY_TOKEN_QUOTA=1_000_000)
    OwnerQuota.objects.create(owner=owner, daily_tokens=500)
    spend(owner, 500)
    thread, _ = foldable_thread(owner)

    assert ledger.daily_quota(owner.pk) == 500
    assert services.recall(thread, BIG).decline == "quota-exceeded"
    assert testing.calls == []


def test_an_owner_override_raises_the_quota(settings: Any, owner: Any) -> None:
    settings.AGENTMEMORY = recording_settings(PLAIN, DAILY_TOKEN_QUOTA=500)
    OwnerQuota.objects.create(owner=owner, daily_tokens=20_000)  # room for the estimate
    spend(owner, 500)
    thread, _ = foldable_thread(owner)

    assert services.recall(thread, BIG).folded_summary_id is not None
    assert len(testing.calls) == 1


def test_an_override_of_none_means_unlimited(settings: Any, owner: Any) -> None:
    settings.AGENTMEMORY = recording_settings(PLAIN, DAILY_TOKEN_QUOTA=1)
    OwnerQuota.objects.create(owner=owner, daily_tokens=None)
    spend(owner, 10_000_000)
    thread, _ = foldable_thread(owner)

    assert ledger.daily_quota(owner.pk) is None
    assert services.recall(thread, BIG).folded_summary_id is not None


def test_without_an_override_the_setting_applies_and_none_means_no_quota(
    settings: Any, owner: Any
) -> None:
    spend(owner, 2_000)
    settings.AGENTMEMORY = recording_settings(PLAIN, DAILY_TOKEN_QUOTA=2_000)
    thread, _ = foldable_thread(owner)
    assert services.recall(thread, BIG).decline == "quota-exceeded"

    settings.AGENTMEMORY = recording_settings(PLAIN)  # DAILY_TOKEN_QUOTA None
    assert services.recall(thread, BIG).folded_summary_id is not None


def test_only_todays_tokens_of_this_owner_count(settings: Any, owner: Any) -> None:
    # Room for one call's estimate over 999, not over 999 + 50,000.
    settings.AGENTMEMORY = recording_settings(PLAIN, DAILY_TOKEN_QUOTA=20_000)
    other = get_user_model().objects.create_user("bob")
    spend(owner, 999)
    spend(owner, 50_000, when=timezone.now() - timedelta(days=1, hours=1))
    spend(other, 50_000)
    spend(None, 50_000)
    thread, _ = foldable_thread(owner)

    assert ledger.tokens_used_today(owner.pk) == 999
    assert services.recall(thread, BIG).folded_summary_id is not None


def test_threads_without_an_owner_are_not_limited(settings: Any) -> None:
    settings.AGENTMEMORY = recording_settings(PLAIN, DAILY_TOKEN_QUOTA=1)
    spend(None, 10_000_000)
    thread, _ = foldable_thread()

    assert services.recall(thread, BIG).folded_summary_id is not None


def test_a_fold_outside_recall_obeys_the_quota(settings: Any, owner: Any) -> None:
    settings.AGENTMEMORY = recording_settings(PLAIN, DAILY_TOKEN_QUOTA=100)
    spend(owner, 100)
    thread, _ = foldable_thread(owner)

    outcome = services.fold(thread)
    background = services.fold_until_settled(thread.pk)

    assert outcome.decline == "quota-exceeded"
    assert [o.decline for o in background] == ["quota-exceeded"]
    assert testing.calls == []


def test_window_compaction_obeys_the_quota(settings: Any, owner: Any) -> None:
    settings.AGENTMEMORY = recording_settings(
        PLAIN,
        DAILY_TOKEN_QUOTA=10_000,
        WINDOW=SLIDING_FOUR,
    )
    window = refund_queue()
    thread = make_thread(owner=owner)
    assert compact(thread, window).span is not None  # under the quota: folds

    spend(owner, 10_000 - ledger.tokens_used_today(owner.pk))
    other = make_thread(owner=owner)
    with capture(signals.fold_declined) as declined:
        result = compact(other, window)

    assert result.refusal == "quota-exceeded" and result.span is None
    assert result.window == window
    assert [(d["reason"], d["purpose"]) for d in declined] == [
        ("quota-exceeded", FoldPurpose.WINDOW_FOLD)
    ]
    assert len(testing.calls) == 1
    assert not SummarizerCall.objects.filter(thread=other).exists()


# ------------------------------------------------------------------ savings


def test_savings_per_summary_thread_and_owner_in_python_and_the_api(
    settings: Any,
    owner: Any,
    openai_server: OpenAIServer,
    openai_summarizer_settings: dict[str, Any],
) -> None:
    settings.AGENTMEMORY = {**openai_summarizer_settings, "RECEIPTS": True}
    openai_server.reply(prompt_tokens=700, completion_tokens=40)
    openai_server.reply(prompt_tokens=600, completion_tokens=60)
    thread, entries = foldable_thread(owner)
    second_thread, _ = foldable_thread(owner)

    folded = services.recall(thread, BIG)  # loads the summary it wrote
    reloaded = services.recall(thread, BIG)  # loads it again instead of the originals
    # Too few entries for the newest turn: declined, so the summary is not in this one.
    newest = services.recall(thread, BIG, max_entries=1)
    services.recall(second_thread, BIG)

    summary = MemoryEntry.objects.get(pk=folded.folded_summary_id)
    assert reloaded.summaries_used == [summary.pk] and newest.summaries_used == []
    original = sum(e.token_count for e in entries[5:20])
    assert summary.coverage.original_tokens == original
    per_load = original - summary.token_count
    assert per_load > 0
    assert summary_savings(summary) == {
        "spent_tokens": 740, "saved_tokens": 2 * per_load, "summary_loads": 2
    }
    for_thread = savings(thread=thread)
    assert for_thread == {
        "spent_tokens": 740,
        "saved_tokens": 2 * per_load,
        "summary_loads": 2,
        "net_tokens": 2 * per_load - 740,
        "ratio": round(2 * per_load / 740, 3),
    }
    other = savings(thread=second_thread)
    assert other["spent_tokens"] == 660 and other["summary_loads"] == 1
    for_owner = savings(owner=owner)
    assert for_owner["spent_tokens"] == 740 + 660
    assert for_owner["saved_tokens"] == for_thread["saved_tokens"] + other["saved_tokens"]
    assert for_owner["summary_loads"] == 3
    assert for_owner["ratio"] == round(for_owner["saved_tokens"] / 1_400, 3)

    client = api_client_of(owner)
    assert get(client, f"{API}threads/{thread.pk}/savings/") == for_thread
    assert get(client, f"{API}threads/{second_thread.pk}/savings/") == other
    assert get(client, f"{API}savings/") == for_owner


def test_savings_of_a_thread_that_spent_nothing_has_no_ratio(owner: Any) -> None:
    thread, _ = foldable_thread(owner)
    assert savings(thread=thread) == {
        "spent_tokens": 0, "saved_tokens": 0, "summary_loads": 0, "net_tokens": 0,
        "ratio": None,
    }
    assert get(api_client_of(owner), f"{API}threads/{thread.pk}/savings/")["ratio"] is None


def test_owner_spending_survives_the_erasure_of_the_thread(
    settings: Any, owner: Any
) -> None:
    settings.AGENTMEMORY = recording_settings(PLAIN, RECEIPTS=True, DAILY_TOKEN_QUOTA=1_000)
    spend(owner, 600)
    thread, _ = foldable_thread(owner)
    call = SummarizerCall.objects.create(
        thread=thread, owner=owner, purpose=FoldPurpose.RECALL_FOLD, backend="tests",
        model="m", prompt_tokens=300, completion_tokens=100, outcome=CallOutcome.FOLDED,
    )

    services.erase_thread(thread)

    call.refresh_from_db()
    assert call.thread_id is None and call.owner_id == owner.pk
    assert savings(owner=owner)["spent_tokens"] == 1_000
    fresh, _ = foldable_thread(owner)
    assert services.recall(fresh, BIG).decline == "quota-exceeded"
    assert not MemoryEntry.objects.filter(thread=fresh, kind=EntryKind.SUMMARY).exists()


def test_a_quota_of_zero_blocks_every_fold_and_says_so(settings: Any, owner: Any) -> None:
    settings.AGENTMEMORY = recording_settings(PLAIN)
    quota = OwnerQuota.objects.create(owner=owner, daily_tokens=0)
    thread, _ = foldable_thread(owner)

    assert services.recall(thread, BIG).decline == "quota-exceeded"
    assert str(quota) == "ada: 0 tokens a day"
    quota.daily_tokens = None
    assert str(quota) == "ada: unlimited"


def test_regenerating_over_the_quota_keeps_the_current_summary(
    settings: Any, owner: Any
) -> None:
    settings.AGENTMEMORY = recording_settings(PLAIN, DAILY_TOKEN_QUOTA=10_000)
    thread, entries = foldable_thread(owner)
    summary = MemoryEntry.objects.get(pk=services.recall(thread, BIG).folded_summary_id)
    spend(owner, 10_000 - ledger.tokens_used_today(owner.pk))

    outcome = services.regenerate(summary)

    assert outcome.decline == "quota-exceeded"
    summary.refresh_from_db()
    assert summary.retired_at is None
    covered = MemoryEntry.objects.filter(covered_by=summary).order_by("position")
    assert list(covered.values_list("pk", flat=True)) == [e.pk for e in entries[5:20]]


@pytest.mark.parametrize("quota", [0, -5, 1.5, "1000", True])
def test_a_bad_daily_quota_fails_the_check(settings: Any, quota: Any) -> None:
    settings.AGENTMEMORY = {"DAILY_TOKEN_QUOTA": quota}
    errors = [e for e in check_settings() if e.id == "agentmemory.E013"]
    assert errors and "DAILY_TOKEN_QUOTA" in errors[0].msg


@pytest.mark.parametrize("quota", [None, 1, 250_000])
def test_a_good_daily_quota_passes_the_check(settings: Any, quota: Any) -> None:
    settings.AGENTMEMORY = {"DAILY_TOKEN_QUOTA": quota}
    assert not [e for e in check_settings() if e.id == "agentmemory.E013"]
