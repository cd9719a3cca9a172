"""``services.clear_thread``: what the adapters' clear does. Everything in the thread goes
by the erasure path (law 7), the thread row stays with its identity and policy."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model

from agentmemory import services
from agentmemory.models import (
    FoldedSpan,
    FoldLatch,
    MemoryEntry,
    RecallReceipt,
    SummarizerCall,
    SummaryCoverage,
    Thread,
)
from tests.test_erasure import span

pytestmark = pytest.mark.django_db

ANSWER = ("Invoice {n} was issued on the first of the month, paid by card on the fifth, and "
          "refunded in part after the customer returned two of the five items in the order.")


def fold_ten_turns(thread: Thread) -> None:
    """Ten turns, recalled at a budget small enough that the oldest are folded."""
    for n in range(10):
        services.append(thread, [
            {"role": "user", "content": f"What happened to invoice {n}? Please check."},
            {"role": "assistant", "content": ANSWER.format(n=n)},
        ])
    assert services.recall(thread, 600, mode="inline").summaries_used


def test_clear_thread_erases_everything_in_it_and_keeps_the_thread(settings: object) -> None:
    owner = get_user_model().objects.create_user("ada")
    thread = Thread.objects.create(owner=owner, client_key="support-9", title="Support",
                                   metadata={"team": "eu"}, ttl=timedelta(days=30),
                                   window_retain="discard")
    other = Thread.objects.create()
    fold_ten_turns(thread)
    fold_ten_turns(other)
    span(thread, 1)
    FoldLatch.objects.create(thread=thread, purpose="recall-fold", span_key="k",
                             reason="not-smaller", entry_count=3, model="offline-extractive-1")
    settings.AGENTMEMORY = {"RECEIPTS": True}  # type: ignore[attr-defined]
    services.recall(thread, 100_000)
    calls = list(SummarizerCall.objects.filter(thread=thread).values_list("pk", flat=True))
    other_rows = sorted(MemoryEntry.objects.filter(thread=other).values_list("pk", flat=True))
    assert calls and RecallReceipt.objects.filter(thread=thread).exists()

    services.clear_thread(thread)

    kept = Thread.objects.get(pk=thread.pk)
    assert (kept.owner, kept.client_key, kept.title, kept.metadata, kept.ttl,
            kept.window_retain) == (owner, "support-9", "Support", {"team": "eu"},
                                    timedelta(days=30), "discard")
    assert (kept.last_position, kept.last_turn) == (0, 0)
    for model in (MemoryEntry, FoldedSpan, FoldLatch, RecallReceipt):
        assert not model.objects.filter(thread=thread).exists(), model
    # The ledger keeps its rows, detached, as after erase_thread.
    assert set(SummarizerCall.objects.filter(pk__in=calls).values_list("thread_id", flat=True)) \
        == {None}
    assert sorted(MemoryEntry.objects.filter(thread=other).values_list("pk", flat=True)) \
        == other_rows
    assert SummaryCoverage.objects.filter(summary__thread=other).count() \
        == SummaryCoverage.objects.count() > 0
    [entry] = services.append(thread, {"role": "user", "content": "again"})
    assert (entry.turn, entry.position) == (1, 1)
