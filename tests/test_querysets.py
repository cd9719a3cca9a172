"""The named rules on the querysets: each row state, each expiry, the ledger's totals.

Every test builds rows in each state and checks exactly which ones a rule returns.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import count
from typing import Any

import pytest
from django.db import models

from agentmemory.models import (
    CallOutcome,
    EntryKind,
    FoldedSpan,
    FoldPurpose,
    MemoryEntry,
    RecallReceipt,
    RetainPolicy,
    Role,
    SummarizerCall,
    SummaryCoverage,
    Thread,
    summary_key,
)
from agentmemory.querysets import SummarizerCallQuerySet
from tests.helpers import make_thread

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
_positions = count(1)


def message(thread: Thread, **fields: Any) -> MemoryEntry:
    position = next(_positions)
    return MemoryEntry.objects.create(
        thread=thread, role=Role.USER, content=f"m{position}", turn=position,
        position=position, **fields,
    )


def summary(
    thread: Thread, *, coverage: dict[str, Any] | None = None, **fields: Any
) -> MemoryEntry:
    position = next(_positions)
    row = MemoryEntry.objects.create(
        thread=thread, kind=EntryKind.SUMMARY, role=Role.SYSTEM, content=f"s{position}",
        turn=position, position=position, summary_key=summary_key(position, position),
        **fields,
    )
    SummaryCoverage.objects.create(
        summary=row, from_turn=position, to_turn=position, entry_count=1, span_tokens=1,
        model="m", **(coverage or {}),
    )
    return row


def span(thread: Thread, **fields: Any) -> FoldedSpan:
    n = next(_positions)
    return FoldedSpan.objects.create(
        thread=thread, fingerprint=f"f{n}", span_fingerprint=f"s{n}", content=f"[fold {n}]",
        message_count=2, model="m", retain=RetainPolicy.DISCARD, **fields,
    )


def receipt(thread: Thread, **fields: Any) -> RecallReceipt:
    return RecallReceipt.objects.create(thread=thread, turn=1, budget_tokens=10, tokens=1, **fields)


def pks(rows: models.QuerySet[Any]) -> set[int]:
    return set(rows.values_list("pk", flat=True))


# ---------------------------------------------------------------- entry states


@pytest.fixture
def states() -> dict[str, MemoryEntry]:
    thread = make_thread()
    return {
        "message": message(thread),
        "plain": summary(thread),
        "retired": summary(thread, retired_at=NOW),
        "held": summary(thread, held_at=NOW),
        "retired_and_held": summary(thread, retired_at=NOW, held_at=NOW),
        "flagged": summary(thread, coverage={"injection_flags": ["role-override"]}),
        "flagged_reviewed": summary(
            thread, coverage={"injection_flags": ["role-override"], "reviewed_at": NOW}
        ),
        "tampered": summary(thread, coverage={"tampered_at": NOW}),
        "lost_facts": summary(thread, coverage={"missing_facts": ["$12"]}),
    }


def named(states: dict[str, MemoryEntry], rows: models.QuerySet[MemoryEntry]) -> set[str]:
    found = pks(rows)
    return {name for name, row in states.items() if row.pk in found}


def test_live_is_neither_retired_nor_held(states: dict[str, MemoryEntry]) -> None:
    assert named(states, MemoryEntry.objects.live()) == {
        "message", "plain", "flagged", "flagged_reviewed", "tampered", "lost_facts"
    }


def test_unretired_keeps_held_summaries(states: dict[str, MemoryEntry]) -> None:
    assert named(states, MemoryEntry.objects.unretired()) == {
        "message", "plain", "held", "flagged", "flagged_reviewed", "tampered", "lost_facts"
    }


def test_retired(states: dict[str, MemoryEntry]) -> None:
    assert named(states, MemoryEntry.objects.retired()) == {"retired", "retired_and_held"}


def test_held(states: dict[str, MemoryEntry]) -> None:
    assert named(states, MemoryEntry.objects.held()) == {"held", "retired_and_held"}


def test_needs_review_is_flagged_and_not_reviewed(states: dict[str, MemoryEntry]) -> None:
    assert named(states, MemoryEntry.objects.needs_review()) == {"flagged"}


def test_tampered_summaries(states: dict[str, MemoryEntry]) -> None:
    assert named(states, MemoryEntry.objects.tampered()) == {"tampered"}


def test_lost_facts(states: dict[str, MemoryEntry]) -> None:
    assert named(states, MemoryEntry.objects.lost_facts()) == {"lost_facts"}


def test_the_summary_proxy_has_the_same_rules(states: dict[str, MemoryEntry]) -> None:
    from agentmemory.models import Summary

    assert named(states, Summary.objects.retired()) == {"retired", "retired_and_held"}
    assert named(states, Summary.objects.live()) == {
        "plain", "flagged", "flagged_reviewed", "tampered", "lost_facts"
    }


# ---------------------------------------------------------------- expiry


EXPIRIES = {
    "never": None,
    "past": NOW - timedelta(seconds=1),
    "at_now": NOW,
    "future": NOW + timedelta(seconds=1),
}


def entry_with(thread: Thread, expires_at: datetime | None) -> MemoryEntry:
    return message(thread, expires_at=expires_at)


def span_with(thread: Thread, expires_at: datetime | None) -> FoldedSpan:
    return span(thread, expires_at=expires_at)


def receipt_with(thread: Thread, expires_at: datetime | None) -> RecallReceipt:
    return receipt(thread, expires_at=expires_at)


@pytest.mark.parametrize("build", [entry_with, span_with, receipt_with])
def test_every_model_that_expires_has_the_same_expiry_rules(build: Any) -> None:
    thread = make_thread()
    rows = {name: build(thread, at) for name, at in EXPIRIES.items()}
    manager = type(rows["never"]).objects

    def which(selection: models.QuerySet[Any]) -> set[str]:
        found = pks(selection)
        return {name for name, row in rows.items() if row.pk in found}

    assert which(manager.expired(NOW)) == {"past", "at_now"}
    assert which(manager.unexpired(NOW)) == {"never", "future"}
    assert which(manager.never_expiring()) == {"never"}
    # Without an instant, now is the clock's now: all four lie around 2026-03-01.
    later = which(manager.expired())
    assert later == ({"past", "at_now", "future"} if NOW < datetime.now(UTC) else set())


def test_recall_reads_unexpired_rows_and_every_summary() -> None:
    thread = make_thread()
    rows = {
        "live_message": message(thread, expires_at=NOW + timedelta(hours=1)),
        "forever_message": message(thread),
        "expired_message": message(thread, expires_at=NOW - timedelta(hours=1)),
        "expired_summary": summary(thread, expires_at=NOW - timedelta(hours=1)),
        "live_summary": summary(thread, expires_at=NOW + timedelta(hours=1)),
    }
    found = pks(MemoryEntry.objects.unexpired_or_summaries(NOW))
    assert {name for name, row in rows.items() if row.pk in found} == {
        "live_message", "forever_message", "expired_summary", "live_summary"
    }


def test_tampered_and_untampered_spans() -> None:
    thread = make_thread()
    sound, edited = span(thread), span(thread, tampered_at=NOW)
    assert pks(FoldedSpan.objects.tampered()) == {edited.pk}
    assert pks(FoldedSpan.objects.untampered()) == {sound.pk}


# ---------------------------------------------------------------- ledger totals


@pytest.fixture
def calls() -> SummarizerCallQuerySet:
    thread = make_thread()

    def call(
        outcome: str, prompt: int | None, completion: int | None, estimate: int | None
    ) -> None:
        SummarizerCall.objects.create(
            thread=thread, purpose=FoldPurpose.RECALL_FOLD, backend="b", model="m",
            outcome=outcome, prompt_tokens=prompt, completion_tokens=completion,
            estimated_tokens=estimate,
        )

    call(CallOutcome.FOLDED, 10, 5, 1_000)  # reported usage: 15, whatever the estimate
    call(CallOutcome.DECLINED, None, 3, 1_000)  # part reported: 3
    call(CallOutcome.RESERVED, None, None, 100)  # in flight: the estimate
    call(CallOutcome.FOLDED, None, None, 7)  # settled, no usage reported: the estimate
    call(CallOutcome.FAILED, None, None, 50)  # failed, reported none: nothing
    call(CallOutcome.RESERVED, None, None, None)  # no estimate: nothing
    return SummarizerCall.objects.filter(thread=thread)


def test_spent_tokens_counts_what_backends_reported(
    calls: SummarizerCallQuerySet,
) -> None:
    assert calls.spent_tokens() == 18


def test_charged_tokens_counts_estimates_where_nothing_was_reported(
    calls: SummarizerCallQuerySet,
) -> None:
    assert calls.charged_tokens() == 15 + 3 + 100 + 7


def test_totals_count_calls_tokens_and_outcomes(calls: SummarizerCallQuerySet) -> None:
    totals = calls.totals()
    assert totals["calls"] == 6
    assert totals["prompt_tokens"] == 10
    assert totals["completion_tokens"] == 8
    assert totals["by_outcome"] == {
        **{outcome: 0 for outcome in CallOutcome.values},
        CallOutcome.FOLDED: 2, CallOutcome.DECLINED: 1, CallOutcome.RESERVED: 2,
        CallOutcome.FAILED: 1,
    }


def test_no_calls_total_zero() -> None:
    none = SummarizerCall.objects.none()
    assert none.spent_tokens() == 0
    assert none.charged_tokens() == 0
    assert SummarizerCall.objects.filter(pk=-1).totals()["prompt_tokens"] == 0
