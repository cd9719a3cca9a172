"""Erasure (law 7): deleting an original deletes every summary derived from it, and
the survivors are verbatim again; threads and users are erased whole, the usage
ledger survives anonymised."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db.models.signals import post_delete

from agentmemory import services
from agentmemory.models import (
    FoldedSpan,
    FoldLatch,
    MemoryEntry,
    SummarizerCall,
    SummaryCoverage,
    SummarySource,
    Thread,
)

T0 = datetime(2026, 2, 2, 8, 0, tzinfo=UTC)
KNOBS = {"preserve_recent": 2, "trigger_min_entries": 4, "load_count": 40}
#: Recall knobs under which nothing folds: what a verbatim recall returns.
VERBATIM = {"trigger_min_entries": 1000}
ANSWER = (
    "Invoice {n} was issued on the first of the month, paid by card on the fifth, and "
    "refunded in part after the customer returned two of the five items in the order; "
    "the remaining balance is zero and nothing further is owed by either side."
)


def turn(thread: Thread, n: int) -> list[MemoryEntry]:
    return services.append(
        thread,
        [
            {"role": "user", "content": f"What happened to invoice {n}? Please check."},
            {"role": "assistant", "content": ANSWER.format(n=n)},
        ],
        now=T0 + timedelta(minutes=n),
    )


def nested(thread: Thread) -> tuple[MemoryEntry, MemoryEntry]:
    """Turns 1-5 with summary ``inner`` over turns 1-2 and ``outer`` over inner + 3-4."""
    for n in (1, 2, 3):
        turn(thread, n)
    inner = services.fold(thread, **KNOBS).summary
    for n in (4, 5):
        turn(thread, n)
    outer = services.fold(thread, **KNOBS).summary
    assert inner is not None and outer is not None
    inner.refresh_from_db()
    assert inner.covered_by_id == outer.pk
    return inner, outer


def contents(thread: Thread) -> dict[int, str]:
    return dict(MemoryEntry.objects.filter(thread=thread).messages().values_list("pk", "content"))


def recalled(thread: Thread, **overrides: object) -> list[tuple[int, str, str]]:
    result = services.recall(thread, 100_000, **overrides)
    return [(m.id, m.kind, m.content) for m in result.messages]


def span(thread: Thread, n: int, *, message_count: int = 2, **fields: Any) -> FoldedSpan:
    """A window fold's span numbered ``n`` in ``thread`` (``fields`` set the rest)."""
    return FoldedSpan.objects.create(
        thread=thread,
        fingerprint=f"f{n}",
        span_fingerprint=f"s{n}",
        content=f"[summary {n}]",
        message_count=message_count,
        model="offline-extractive-1",
        retain="conversation",
        **fields,
    )


# ---------------------------------------------------------------- erase one entry


@pytest.mark.django_db
def test_erasing_an_original_deletes_every_summary_derived_from_it() -> None:
    thread = Thread.objects.create()
    inner, outer = nested(thread)
    before = contents(thread)
    victim = MemoryEntry.objects.filter(covered_by=inner, role="user").first()
    assert victim is not None

    services.erase_entry(victim)

    assert not MemoryEntry.objects.filter(pk__in=[victim.pk, inner.pk, outer.pk]).exists()
    assert not SummaryCoverage.objects.filter(summary_id__in=[inner.pk, outer.pk]).exists()
    survivors = MemoryEntry.objects.filter(thread=thread)
    assert not survivors.summaries().exists()
    assert not survivors.filter(covered_by__isnull=False).exists()
    del before[victim.pk]
    assert contents(thread) == before  # byte-identical, only the victim is gone


@pytest.mark.django_db
def test_survivors_are_verbatim_again_and_fold_again_later() -> None:
    thread = Thread.objects.create()
    inner, outer = nested(thread)
    victim = MemoryEntry.objects.filter(covered_by=inner, role="assistant").first()
    assert victim is not None
    services.erase_entry(victim)
    survivors = contents(thread)

    verbatim = recalled(thread, **VERBATIM)
    assert [(pk, content) for pk, _, content in verbatim] == list(survivors.items())
    assert {kind for _, kind, _ in verbatim} == {"message"}

    result = services.recall(thread, 100_000, **KNOBS)
    assert result.folded_summary_id is not None
    assert result.folded_summary_id not in (inner.pk, outer.pk)
    refolded = MemoryEntry.objects.get(pk=result.folded_summary_id)
    covered = set(MemoryEntry.objects.filter(covered_by=refolded).values_list("pk", flat=True))
    assert victim.pk not in covered and covered <= set(survivors)
    assert refolded.coverage.entry_count == len(covered)
    assert contents(thread) == survivors  # folding again changed no original


@pytest.mark.django_db
def test_erasing_an_original_deletes_retired_versions_built_on_it_too() -> None:
    """Unfolded summaries are kept for history; erasure does not leave them behind,
    nor the live summary folded again over the same originals."""
    thread = Thread.objects.create()
    inner, outer = nested(thread)
    assert services.unfold(inner) == 2  # inner, and outer built on it
    refolded = services.recall(thread, 100_000, **KNOBS).folded_summary_id
    assert refolded is not None
    victim = MemoryEntry.objects.filter(thread=thread, turn=1, role="user").get()
    before = contents(thread)

    services.erase_entry(victim)

    gone = [victim.pk, inner.pk, outer.pk, refolded]
    assert not MemoryEntry.objects.filter(pk__in=gone).exists()
    assert not SummarySource.objects.filter(summary_id__in=gone).exists()
    assert not SummarySource.objects.filter(entry_id=victim.pk).exists()
    assert not MemoryEntry.objects.filter(thread=thread).summaries().exists()
    del before[victim.pk]
    assert contents(thread) == before


@pytest.mark.django_db
def test_erasing_an_uncovered_original_leaves_summaries_alone() -> None:
    thread = Thread.objects.create()
    inner, outer = nested(thread)
    kept = MemoryEntry.objects.filter(thread=thread, turn=5, role="user").get()
    services.erase_entry(kept)
    assert MemoryEntry.objects.filter(pk__in=[inner.pk, outer.pk]).count() == 2
    assert recalled(thread, **VERBATIM)[0][0] == outer.pk


@pytest.mark.django_db
def test_erasure_is_one_transaction() -> None:
    """A failure after the first DELETE rolls everything back: no summary without
    its original, no original half-erased."""
    thread = Thread.objects.create()
    inner, outer = nested(thread)
    victim = MemoryEntry.objects.filter(covered_by=inner).first()
    assert victim is not None
    rows_before = set(MemoryEntry.objects.values_list("pk", "covered_by_id"))

    class Boom(Exception):
        pass

    def explode(sender: type, instance: MemoryEntry, **kwargs: object) -> None:
        raise Boom

    post_delete.connect(explode, sender=MemoryEntry)
    try:
        with pytest.raises(Boom):
            services.erase_entry(victim)
    finally:
        post_delete.disconnect(explode, sender=MemoryEntry)
    assert set(MemoryEntry.objects.values_list("pk", "covered_by_id")) == rows_before
    assert SummaryCoverage.objects.filter(summary_id__in=[inner.pk, outer.pk]).count() == 2


@pytest.mark.django_db
def test_erasing_the_top_summary_is_unfold() -> None:
    thread = Thread.objects.create()
    inner, outer = nested(thread)
    before = contents(thread)
    services.erase_entry(outer)
    assert not MemoryEntry.objects.filter(pk=outer.pk).exists()
    inner.refresh_from_db()
    assert inner.covered_by_id is None  # the inner summary stands on its own again
    assert contents(thread) == before
    assert recalled(thread, **VERBATIM)[0][:2] == (inner.pk, "summary")


@pytest.mark.django_db
def test_erasing_an_inner_summary_deletes_what_was_built_on_it() -> None:
    thread = Thread.objects.create()
    inner, outer = nested(thread)
    before = contents(thread)
    services.erase_entry(inner)
    assert not MemoryEntry.objects.filter(pk__in=[inner.pk, outer.pk]).exists()
    assert not MemoryEntry.objects.filter(thread=thread, covered_by__isnull=False).exists()
    assert contents(thread) == before
    assert [pk for pk, _, _ in recalled(thread, **VERBATIM)] == list(before)


@pytest.mark.django_db
def test_erase_entry_and_unfold_agree_on_a_summary() -> None:
    one, two = Thread.objects.create(), Thread.objects.create()
    _, outer_one = nested(one)
    _, outer_two = nested(two)
    services.erase_entry(outer_one)
    assert services.unfold(outer_two) == 1

    def shape(thread: Thread) -> list[tuple[str, int, bool]]:
        rows = MemoryEntry.objects.filter(thread=thread, retired_at__isnull=True)
        return [(e.kind, e.turn, e.covered_by_id is None) for e in rows.order_by("position", "id")]

    assert shape(one) == shape(two)


@pytest.mark.django_db
def test_erasing_an_original_deletes_the_window_span_that_retained_it(settings) -> None:
    """The agent recalls its context, runs with it as a live window, and the window is
    compacted with its originals retained. Erasing one of those originals must not
    leave its words in the span journal."""
    settings.AGENTMEMORY = {
        "WINDOW": {"CLASS": "agentmemory.window.seams.SlidingWindow",
                   "OPTIONS": {"MAX_MESSAGES": 4}},
    }
    thread = Thread.objects.create()
    for n in (1, 2, 3):
        turn(thread, n)
    recalled = services.recall(thread, 100_000, **VERBATIM)
    window = [{"role": "user", "content": "Which invoices are still open?"}]
    window += [{"role": m.role, "content": m.content} for m in recalled.messages]
    span = services.compact(thread, window, retain="conversation").span
    assert span is not None and span.messages
    victim = MemoryEntry.objects.get(thread=thread, turn=1, role="assistant")
    assert any(m["content"] == victim.content for m in span.messages)

    services.erase_entry(victim)

    holding = [
        s.pk for s in FoldedSpan.objects.filter(thread=thread)
        if any(m.get("content") == victim.content for m in s.messages or [])
    ]
    assert holding == [], "the erased original survives in a window span"


# ---------------------------------------------------------------- erase a thread


@pytest.mark.django_db
def test_erase_thread_deletes_everything_but_keeps_the_ledger_anonymised() -> None:
    thread, other = Thread.objects.create(), Thread.objects.create()
    nested(thread)
    nested(other)
    span(thread, 1)
    span(other, 2)
    FoldLatch.objects.create(
        thread=thread, purpose="recall-fold", span_key="k", reason="not-smaller",
        entry_count=3, model="offline-extractive-1",
    )
    calls = list(SummarizerCall.objects.filter(thread=thread).values_list("pk", flat=True))
    assert len(calls) == 2
    other_rows = set(MemoryEntry.objects.filter(thread=other).values_list("pk", flat=True))
    thread_pk = thread.pk

    services.erase_thread(thread)

    assert not Thread.objects.filter(pk=thread_pk).exists()
    assert not MemoryEntry.objects.filter(thread_id=thread_pk).exists()
    assert not FoldedSpan.objects.filter(thread_id=thread_pk).exists()
    assert not FoldLatch.objects.filter(thread_id=thread_pk).exists()
    assert SummaryCoverage.objects.count() == 2  # the other thread's two summaries
    ledger = SummarizerCall.objects.filter(pk__in=calls)
    assert set(ledger.values_list("thread_id", "summary_id")) == {(None, None)}
    assert ledger.count() == 2
    assert set(MemoryEntry.objects.filter(thread=other).values_list("pk", flat=True)) == (
        other_rows
    )
    assert FoldedSpan.objects.filter(thread=other).count() == 1


@pytest.mark.django_db
def test_erase_user_erases_only_that_users_threads() -> None:
    users = get_user_model().objects
    alice, bob = users.create_user("alice"), users.create_user("bob")
    hers = [Thread.objects.create(owner=alice, client_key=k) for k in ("a", "b")]
    his = Thread.objects.create(owner=bob, client_key="a")
    system = Thread.objects.create(client_key="a")
    for thread in [*hers, his, system]:
        turn(thread, 1)
    nested(hers[0])

    assert services.erase_user(alice.pk) == 2

    assert not Thread.objects.filter(owner=alice).exists()
    assert not MemoryEntry.objects.filter(thread_id__in=[t.pk for t in hers]).exists()
    assert users.filter(pk=alice.pk).exists()  # the account is not ours to delete
    assert MemoryEntry.objects.filter(thread=his).count() == 2
    assert MemoryEntry.objects.filter(thread=system).count() == 2
    assert services.erase_user(alice.pk) == 0


# ---------------------------------------------------------------- the command


@pytest.mark.django_db
def test_erase_command_by_user() -> None:
    users = get_user_model().objects
    carol, dave = users.create_user("carol"), users.create_user("dave")
    for key in ("x", "y", "z"):
        turn(Thread.objects.create(owner=carol, client_key=key), 1)
    turn(Thread.objects.create(owner=dave), 1)
    out = StringIO()
    call_command("agentmemory_erase", "--user", str(carol.pk), stdout=out)
    erased = f"Erased 3 threads (6 entries) of user carol (id {carol.pk})."
    assert out.getvalue().splitlines()[-1] == erased
    assert not Thread.objects.filter(owner=carol).exists()
    assert Thread.objects.filter(owner=dave).count() == 1


@pytest.mark.django_db
def test_erase_command_by_thread() -> None:
    thread, other = Thread.objects.create(), Thread.objects.create()
    nested(thread)
    turn(other, 1)
    entries = MemoryEntry.objects.filter(thread=thread).count()
    out = StringIO()
    call_command("agentmemory_erase", "--thread", str(thread.pk), stdout=out)
    assert out.getvalue().splitlines()[-1] == f"Erased thread {thread.pk} ({entries} entries)."
    assert not Thread.objects.filter(pk=thread.pk).exists()
    assert not MemoryEntry.objects.filter(thread_id=thread.pk).exists()
    assert MemoryEntry.objects.filter(thread=other).count() == 2


@pytest.mark.django_db
def test_erase_command_names_an_unknown_thread() -> None:
    missing = (Thread.objects.order_by("-pk").values_list("pk", flat=True).first() or 0) + 1000
    with pytest.raises(CommandError, match=f"No agentmemory thread with id {missing}"):
        call_command("agentmemory_erase", "--thread", str(missing))


@pytest.mark.django_db
def test_erase_command_needs_exactly_one_target() -> None:
    with pytest.raises(CommandError, match="--user"):
        call_command("agentmemory_erase")
    with pytest.raises(CommandError, match="not allowed with"):
        call_command("agentmemory_erase", "--user", "1", "--thread", "1")
