"""Retention (law 7): TTL and tier at write, aligned summary expiry, recall hides
expired rows at once, and purge deletes them in bounded, consistent batches."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from django.db.models import Count, F, Q

from agentmemory import services
from agentmemory.models import FoldedSpan, MemoryEntry, SummaryCoverage, SummarySource, Thread
from agentmemory.querysets import unexpired_q
from tests.test_erasure import span

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
#: Small knobs so a handful of turns fold; load_count stays above the thread length.
KNOBS = {"preserve_recent": 2, "trigger_min_entries": 4, "load_count": 40}
ANSWER = (
    "Order {n} left the warehouse on Monday and the carrier scanned it twice since; "
    "the tracking page shows it in the regional hub, and delivery is expected within "
    "two working days unless the address needs a signature, which this one does not."
)


def turn(thread: Thread, n: int, at: datetime) -> list[MemoryEntry]:
    """One user request and a long answer: long enough that a fold is smaller."""
    return services.append(
        thread,
        [
            {"role": "user", "content": f"Where is order {n}? It was due last week."},
            {"role": "assistant", "content": ANSWER.format(n=n)},
        ],
        now=at,
    )


def conversation(thread: Thread, turns: int, step: timedelta = timedelta(minutes=10)) -> None:
    """Turn n is written at T0 + (n - 1) * step."""
    for n in range(1, turns + 1):
        turn(thread, n, T0 + (n - 1) * step)


def expired_span(thread: Thread, expires_at: datetime | None, n: int) -> FoldedSpan:
    return span(thread, n, message_count=3, expires_at=expires_at)


def assert_consistent(now: datetime) -> None:
    """Nothing half-purged: every summary, standing or retired, still has every row it
    was written over; a standing one covers exactly those; nothing live is hidden by a
    summary that is gone or expired."""
    summaries = MemoryEntry.objects.summaries()
    assert not summaries.filter(coverage__isnull=True).exists()
    lost = summaries.annotate(sources_left=Count("sources")).exclude(
        sources_left=F("coverage__entry_count")
    )
    assert list(lost.values_list("pk", "sources_left", "coverage__entry_count")) == []
    standing = summaries.live().annotate(covered=Count("covered_entries"))
    mismatched = standing.exclude(covered=F("coverage__entry_count"))
    assert list(mismatched.values_list("pk", "covered", "coverage__entry_count")) == []
    retired = summaries.exclude(retired_at__isnull=True, held_at__isnull=True)
    assert not retired.filter(covered_entries__isnull=False).exists()
    live_hidden_by_dead = MemoryEntry.objects.filter(
        unexpired_q(now), covered_by__isnull=False, covered_by__expires_at__lte=now
    )
    assert list(live_hidden_by_dead.values_list("pk", flat=True)) == []
    orphans = SummaryCoverage.objects.exclude(summary__kind="summary")
    assert not orphans.exists()


# ---------------------------------------------------------------- written policy


@pytest.mark.django_db
def test_thread_ttl_sets_expiry_of_written_entries() -> None:
    thread = Thread.objects.create(ttl=timedelta(hours=2))
    entries = turn(thread, 1, T0)
    assert [entry.expires_at for entry in entries] == [T0 + timedelta(hours=2)] * 2
    stored = MemoryEntry.objects.filter(thread=thread).values_list("expires_at", flat=True)
    assert list(stored) == [T0 + timedelta(hours=2)] * 2


@pytest.mark.django_db
def test_no_ttl_anywhere_means_entries_never_expire() -> None:
    thread = Thread.objects.create()
    assert {entry.expires_at for entry in turn(thread, 1, T0)} == {None}


@pytest.mark.django_db
@pytest.mark.parametrize("default", [3600, 3600.0, timedelta(hours=1)], ids=["int", "float", "td"])
def test_default_ttl_setting_as_seconds_or_timedelta(settings, default) -> None:
    settings.AGENTMEMORY = {"DEFAULT_TTL": default}
    thread = Thread.objects.create()
    assert services.thread_ttl(thread) == HOUR
    assert {entry.expires_at for entry in turn(thread, 1, T0)} == {T0 + HOUR}


@pytest.mark.django_db
def test_thread_ttl_wins_over_default_ttl(settings) -> None:
    settings.AGENTMEMORY = {"DEFAULT_TTL": 60}
    thread = Thread.objects.create(ttl=timedelta(days=30))
    assert {entry.expires_at for entry in turn(thread, 1, T0)} == {T0 + timedelta(days=30)}


@pytest.mark.django_db
def test_written_tier_is_thread_tier_else_setting(settings) -> None:
    default_thread = Thread.objects.create()
    assert {e.tier for e in turn(default_thread, 1, T0)} == {"hot"}

    settings.AGENTMEMORY = {"WRITE_TIER": "warm"}
    assert {e.tier for e in turn(Thread.objects.create(), 1, T0)} == {"warm"}

    own = Thread.objects.create(write_tier="cold")
    assert {e.tier for e in turn(own, 1, T0)} == {"cold"}
    assert list(MemoryEntry.objects.filter(thread=own).values_list("tier", flat=True)) == [
        "cold",
        "cold",
    ]
    # A message that names its tier keeps it.
    explicit = services.append(own, {"role": "user", "content": "pin this", "tier": "hot"})
    assert explicit[0].tier == "hot"


# ---------------------------------------------------------------- aligned summary expiry


@pytest.mark.django_db
def test_summary_expires_with_the_earliest_entry_it_covers() -> None:
    thread = Thread.objects.create(ttl=HOUR)
    conversation(thread, 4)  # turns at T0, +10, +20, +30 minutes
    outcome = services.fold(thread, now=T0 + timedelta(minutes=30), **KNOBS)
    summary = outcome.summary
    assert summary is not None
    covered = list(MemoryEntry.objects.filter(covered_by=summary))
    assert sorted({entry.turn for entry in covered}) == [1, 2, 3]
    newest = T0 + timedelta(minutes=20)
    summary.refresh_from_db()
    assert summary.created_at == newest
    assert summary.expires_at == T0 + HOUR
    assert summary.expires_at == min(entry.expires_at for entry in covered)


@pytest.mark.django_db
def test_nested_summary_expires_with_the_earliest_entry_below_it() -> None:
    thread = Thread.objects.create(ttl=HOUR)
    conversation(thread, 3)
    inner = services.fold(thread, now=T0 + timedelta(minutes=20), **KNOBS).summary
    assert inner is not None
    for n in (4, 5):
        turn(thread, n, T0 + timedelta(minutes=10 * (n - 1)))
    outer = services.fold(thread, now=T0 + timedelta(minutes=40), **KNOBS).summary
    assert outer is not None
    inner.refresh_from_db()
    assert inner.covered_by_id == outer.pk
    outer.refresh_from_db()
    below = services.expand(outer, recursive=True)
    assert outer.expires_at == min(entry.expires_at for entry in below)
    assert outer.expires_at == T0 + HOUR
    assert inner.expires_at == T0 + HOUR


@pytest.mark.django_db
def test_summary_never_expires_when_ttl_is_none() -> None:
    thread = Thread.objects.create()
    conversation(thread, 4)
    summary = services.fold(thread, now=T0 + HOUR, **KNOBS).summary
    assert summary is not None
    summary.refresh_from_db()
    assert summary.expires_at is None


@pytest.mark.django_db
def test_summary_over_a_never_expiring_original_expires_with_those_that_do() -> None:
    """A span mixing expiring and never-expiring originals: the summary may outlive none
    of them, so it expires with the earliest that expires."""
    thread = Thread.objects.create()
    turn(thread, 1, T0)
    Thread.objects.filter(pk=thread.pk).update(ttl=HOUR)
    thread.refresh_from_db()
    for n in (2, 3, 4):
        turn(thread, n, T0 + timedelta(minutes=10 * (n - 1)))
    summary = services.fold(thread, now=T0 + timedelta(minutes=30), **KNOBS).summary
    assert summary is not None
    summary.refresh_from_db()
    assert summary.expires_at == T0 + timedelta(minutes=10) + HOUR


# ---------------------------------------------------------------- recall hides expired rows


@pytest.mark.django_db
def test_expired_rows_are_invisible_to_recall_before_any_purge() -> None:
    thread = Thread.objects.create(ttl=HOUR)
    conversation(thread, 3, step=timedelta(minutes=30))  # turns at T0, +30, +60 minutes
    stored = MemoryEntry.objects.count()

    def recalled_turns(at: datetime) -> list[int]:
        result = services.recall(thread, 100_000, now=at)
        return [message.turn for message in result.messages]

    assert recalled_turns(T0 + timedelta(minutes=59)) == [1, 1, 2, 2, 3, 3]
    # expires_at is the first instant a row is gone.
    assert recalled_turns(T0 + HOUR) == [2, 2, 3, 3]
    assert recalled_turns(T0 + timedelta(minutes=90)) == [3, 3]
    assert recalled_turns(T0 + timedelta(minutes=120)) == []
    assert MemoryEntry.objects.count() == stored  # nothing was purged to get there


@pytest.mark.django_db
def test_recall_shows_summary_while_it_lives_then_what_still_lives_verbatim() -> None:
    thread = Thread.objects.create(ttl=HOUR)
    conversation(thread, 4)
    summary = services.fold(thread, now=T0 + timedelta(minutes=30), **KNOBS).summary
    assert summary is not None
    # The summary of turns 1-3 lives until turn 1 expires, at +60 minutes.
    result = services.recall(thread, 100_000, now=T0 + timedelta(minutes=50))
    assert [m.kind for m in result.messages] == ["summary", "message", "message"]
    assert result.summaries_used == [summary.pk]
    result = services.recall(thread, 100_000, now=T0 + timedelta(minutes=65))
    assert [m.turn for m in result.messages] == [2, 2, 3, 3, 4, 4]
    assert result.summaries_used == [] and result.omitted == 0


# ---------------------------------------------------------------- purge


@pytest.mark.django_db
def test_purge_takes_a_summary_with_its_earliest_original_and_frees_the_rest() -> None:
    thread = Thread.objects.create(ttl=HOUR)
    keep = Thread.objects.create()  # no TTL: never purged
    conversation(keep, 2)
    conversation(thread, 4)
    summary = services.fold(thread, now=T0 + timedelta(minutes=30), **KNOBS).summary
    assert summary is not None
    originals = {e.pk: e.content for e in MemoryEntry.objects.filter(covered_by=summary)}

    # Nothing has expired yet: the summary still stands for turns 1-3.
    at = T0 + timedelta(minutes=59)
    result = services.purge_expired(now=at)
    assert (result.entries, result.spans) == (0, 0)
    survivors = MemoryEntry.objects.filter(covered_by=summary)
    assert {e.pk: e.content for e in survivors} == originals
    assert_consistent(at)

    # Turn 1 expires, and the summary with it; turns 2 and 3 are uncovered, not deleted.
    at = T0 + HOUR
    result = services.purge_expired(now=at)
    assert result.entries == 1 + 2
    assert not MemoryEntry.objects.filter(pk=summary.pk).exists()
    assert not SummaryCoverage.objects.filter(summary_id=summary.pk).exists()
    assert list(
        MemoryEntry.objects.filter(thread=thread).values_list("turn", "covered_by")
    ) == [(2, None), (2, None), (3, None), (3, None), (4, None), (4, None)]
    assert MemoryEntry.objects.filter(thread=keep).count() == 4
    assert_consistent(at)


@pytest.mark.django_db
def test_purge_takes_a_retired_summary_with_its_expired_originals() -> None:
    """Unfolded, a summary covers nothing and its oldest originals are purged when they
    expire; the retired summary (kept for history) goes with them, though it would live
    longer: it may never stand for rows that are gone."""
    thread = Thread.objects.create(ttl=HOUR)
    conversation(thread, 4)
    summary = services.fold(thread, now=T0 + timedelta(minutes=30), **KNOBS).summary
    assert summary is not None
    turn_one = set(MemoryEntry.objects.filter(thread=thread, turn=1).values_list("pk", flat=True))
    assert services.unfold(summary) == 1

    at = T0 + timedelta(minutes=65)  # turn 1 expired; turns 2-3 and the summary not yet
    result = services.purge_expired(now=at)
    assert result.entries == 3
    assert not MemoryEntry.objects.filter(pk=summary.pk).exists()
    assert not SummarySource.objects.filter(summary_id=summary.pk).exists()
    assert list(
        MemoryEntry.objects.filter(thread=thread).values_list("turn", flat=True)
    ) == [2, 2, 3, 3, 4, 4]
    assert not MemoryEntry.objects.filter(pk__in=turn_one).exists()
    recalled = services.recall(thread, 100_000, now=at, trigger_min_entries=1000)
    assert [m.turn for m in recalled.messages] == [2, 2, 3, 3, 4, 4]
    assert_consistent(at)


@pytest.mark.django_db
def test_purge_can_be_limited_to_threads() -> None:
    one, two = Thread.objects.create(ttl=HOUR), Thread.objects.create(ttl=HOUR)
    conversation(one, 2)
    conversation(two, 2)
    result = services.purge_expired(now=T0 + 2 * HOUR, thread_ids=[one.pk])
    assert result.entries == 4
    assert not MemoryEntry.objects.filter(thread=one).exists()
    assert MemoryEntry.objects.filter(thread=two).count() == 4


@pytest.mark.django_db
def test_purge_runs_in_bounded_batches() -> None:
    thread = Thread.objects.create(ttl=HOUR)
    conversation(thread, 5, step=timedelta(0))  # 10 entries, all expire at T0 + 1h
    later = Thread.objects.create(ttl=HOUR)
    turn(later, 1, T0 + HOUR)  # expires at T0 + 2h
    for n in range(4):
        expired_span(thread, T0 + timedelta(minutes=n), n)
    live_spans = [expired_span(thread, T0 + 3 * HOUR, 10), expired_span(thread, None, 11)]
    at = T0 + timedelta(minutes=90)

    first = services.purge_expired(now=at, batch_size=3, max_batches=1)
    assert first.batches == 1
    assert first.entries <= 3 and first.spans <= 3
    assert first.entries > 0
    assert_consistent(at)

    rest = services.purge_expired(now=at, batch_size=3)
    assert first.entries + rest.entries == 10
    assert first.spans + rest.spans == 4
    # Each batch takes at most 3 entries and 3 spans.
    assert math.ceil(7 / 3) <= rest.batches <= math.ceil(7 / 3) + math.ceil(4 / 3)
    assert not MemoryEntry.objects.filter(thread=thread).exists()
    assert MemoryEntry.objects.filter(thread=later).count() == 2
    assert set(FoldedSpan.objects.values_list("pk", flat=True)) == {s.pk for s in live_spans}
    assert services.purge_expired(now=at, batch_size=3).batches == 0


@pytest.mark.django_db
def test_every_purge_batch_leaves_summaries_and_originals_consistent() -> None:
    threads = []
    for _ in range(3):
        thread = Thread.objects.create(ttl=HOUR)
        conversation(thread, 4)
        assert services.fold(thread, now=T0 + timedelta(minutes=30), **KNOBS).summary
        threads.append(thread)
    total = MemoryEntry.objects.count()
    at = T0 + 3 * HOUR
    deleted, batches = 0, 0
    while True:
        result = services.purge_expired(now=at, batch_size=1, max_batches=1)
        if result.batches == 0:
            break
        deleted += result.entries
        batches += 1
        assert_consistent(at)
        assert batches <= total, "purge made no progress"
    assert deleted == total == 3 * (8 + 1)
    assert not MemoryEntry.objects.exists()
    assert not SummaryCoverage.objects.exists()


@pytest.mark.django_db
def test_purge_batch_is_bounded_in_rows_through_nested_summaries() -> None:
    """Inline folding nests: each fold covers the previous summary and new turns, so a
    long thread has one root summary over everything. A batch of 2 must stay 2 rows."""
    thread = Thread.objects.create(ttl=HOUR)
    for n in range(1, 13):
        turn(thread, n, T0 + timedelta(minutes=n))
        if n % 2 == 0 and n > 2:
            assert services.fold(thread, now=T0 + timedelta(minutes=n), **KNOBS).summary
    roots = MemoryEntry.objects.filter(thread=thread, covered_by__isnull=True)
    assert roots.summaries().count() == 1
    total = MemoryEntry.objects.filter(thread=thread).count()
    assert total > 20

    at = T0 + 3 * HOUR
    first = services.purge_expired(now=at, batch_size=2, max_batches=1)
    assert_consistent(at)
    assert first.entries <= 2, f"one batch of size 2 deleted {first.entries} rows"


@pytest.mark.django_db
def test_purge_deletes_only_expired_folded_spans() -> None:
    thread = Thread.objects.create()
    gone = [expired_span(thread, T0 - timedelta(seconds=n), n) for n in range(3)]
    exact = expired_span(thread, T0, 3)  # expires_at == now: expired
    kept = [expired_span(thread, T0 + timedelta(seconds=1), 4), expired_span(thread, None, 5)]
    result = services.purge_expired(now=T0)
    assert (result.entries, result.spans) == (0, 4)
    remaining = set(FoldedSpan.objects.values_list("pk", flat=True))
    assert remaining == {span.pk for span in kept}
    assert not remaining & {span.pk for span in [*gone, exact]}


@pytest.mark.django_db
def test_purge_never_deletes_live_rows() -> None:
    thread = Thread.objects.create(ttl=HOUR)
    conversation(thread, 4)
    services.fold(thread, now=T0 + timedelta(minutes=30), **KNOBS)
    before = set(MemoryEntry.objects.values_list("pk", flat=True))
    for minutes in (0, 30, 59):
        at = T0 + timedelta(minutes=minutes)
        assert services.purge_expired(now=at).entries == 0
    assert set(MemoryEntry.objects.values_list("pk", flat=True)) == before
    live = set(
        MemoryEntry.objects.filter(Q(expires_at__gt=T0 + HOUR)).values_list("pk", flat=True)
    )
    assert live
    # Turn 1 and the summary that stood for it; nothing that still lives.
    assert services.purge_expired(now=T0 + HOUR).entries == 3
    assert live <= set(MemoryEntry.objects.values_list("pk", flat=True))


# ---------------------------------------------------------------- the periodic task


@pytest.mark.django_db
def test_purge_task_runs_eagerly_and_returns_counts() -> None:
    from django.utils import timezone

    from agentmemory.tasks import purge_expired

    thread = Thread.objects.create(ttl=HOUR)
    past = timezone.now() - 3 * HOUR
    conversation_at = [past, past + timedelta(minutes=1)]
    for n, at in enumerate(conversation_at, start=1):
        turn(thread, n, at)
    expired_span(thread, past, 1)
    fresh = Thread.objects.create(ttl=HOUR)
    turn(fresh, 1, timezone.now())

    counts = purge_expired.apply().get()
    assert counts == {"entries": 4, "spans": 1, "batches": 1}
    assert not MemoryEntry.objects.filter(thread=thread).exists()
    assert MemoryEntry.objects.filter(thread=fresh).count() == 2
    # Called directly (as beat's worker would run the body), nothing is left to do.
    assert purge_expired() == {"entries": 0, "spans": 0, "batches": 0}
