"""Erasure and retention: erase an entry, a thread, a user's threads; purge what expired.

Everything derived from an erased row goes with it, found by recorded derivation
(`derived_rows`), never by searching text (law 7).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from agentmemory.conf import memory_settings
from agentmemory.exceptions import ThreadGoneError
from agentmemory.models import FoldedSpan, MemoryEntry, RecallReceipt, SpanSource, Thread
from agentmemory.paging import pages
from agentmemory.querysets import (
    FoldedSpanQuerySet,
    MemoryEntryQuerySet,
    RecallReceiptQuerySet,
)
from agentmemory.search.index import forget_deleted
from agentmemory.trust.receipts import delete_receipts_showing
from agentmemory.window.frame import entry_digest
from agentmemory.writes.retire import derived_summary_ids


def erase_entry(entry: MemoryEntry) -> None:
    """Delete an entry and everything derived from it (`derived_rows`), with the
    receipts that showed any of it, in one transaction (law 7)."""
    with transaction.atomic():
        if not Thread.objects.lock(entry.thread_id):
            return
        ids, span_ids = derived_rows([entry.pk])
        delete_receipts_showing(_placed(ids))
        FoldedSpan.objects.filter(pk__in=span_ids).delete()
        MemoryEntry.objects.filter(pk__in=ids).delete()
        forget_deleted()


def _placed(ids: Iterable[int]) -> list[tuple[int, int, int]]:
    """Each entry's id, thread and position, as `receipts_showing` asks."""
    return list(MemoryEntry.objects.filter(pk__in=list(ids)).values_list(
        "pk", "thread_id", "position"))


def derived_rows(entry_ids: Iterable[int]) -> tuple[list[int], list[int]]:
    """The entries and window spans that go with ``entry_ids``, found by recorded
    derivation, never by searching text:

    - the entries themselves and every summary built on them, through nesting
      (`SummarySource`);
    - every window span that folded one of those (a `SpanSource` linked to it, or,
      for a message that was no entry when it was folded, with its digest), every span
      that swallowed such a span's frame, however deep (``nested_spans``);
    - every entry of those threads that is one of those spans' frames (an agent that
      stored its compacted window), and in turn what is derived from it.
    """
    entries: set[int] = set()
    spans: set[int] = set()
    frontier = set(entry_ids)
    while frontier:
        frontier |= set(derived_summary_ids(frontier))
        entries |= frontier
        rows = list(
            MemoryEntry.objects.filter(pk__in=frontier).only(
                "pk", "thread_id", "role", "content", "tool_calls", "tool_call_id"
            )
        )
        threads = {row.thread_id for row in rows}
        found = set(
            SpanSource.objects.filter(
                Q(entry_id__in=frontier)
                | Q(
                    entry__isnull=True,
                    span__thread_id__in=threads,
                    digest__in={entry_digest(row) for row in rows},
                )
            ).values_list("span_id", flat=True)
        )
        found -= spans
        new_spans: set[int] = set()
        while found:
            new_spans |= found
            found = set(
                FoldedSpan.objects.filter(nested_spans__in=found).values_list("pk", flat=True)
            ) - new_spans - spans
        spans |= new_spans
        frames = FoldedSpan.objects.filter(pk__in=new_spans).values_list("content", flat=True)
        frontier = set(
            MemoryEntry.objects.filter(thread_id__in=threads, content__in=frames)
            .exclude(pk__in=entries)
            .values_list("pk", flat=True)
        )
    return sorted(entries), sorted(spans)


def erase_thread(thread: Thread) -> int:
    """Delete a thread with everything in it: entries, summaries, spans, latches. Its
    summarizer calls stay in the ledger, linked to no thread. Returns how many entries
    (messages and summaries) went with it: 0 when it was erased meanwhile."""
    with transaction.atomic():
        erased = _delete_thread(thread)
        if erased is not None:
            forget_deleted()
    return erased or 0


def _delete_thread(thread: Thread) -> int | None:
    """The entries deleted with the thread; None when it was gone already."""
    if not Thread.objects.lock(thread.pk):
        return None  # erased meanwhile by another request
    # Clear coverage links first so deletion is not one SET NULL per summary.
    MemoryEntry.objects.filter(thread=thread).update(covered_by=None)
    return thread.delete()[1].get(MemoryEntry._meta.label, 0)


def clear_thread(thread: Thread) -> None:
    """Erase everything in the thread, as `erase_thread` does, and keep the thread itself:
    its id, owner, key, title, metadata and policy. The next append opens turn 1."""
    with transaction.atomic():
        kept = Thread.objects.select_for_update().filter(pk=thread.pk).first()
        if kept is None:
            raise ThreadGoneError(f"Thread {thread.pk} was erased.")
        # Deleting the row erases what it holds by the one erasure path (the cascade);
        # inserting it again under the same id keeps the callers' references valid.
        erase_thread(Thread.objects.get(pk=thread.pk))
        kept.last_position = kept.last_turn = kept.unfolded_tokens = 0
        kept.fold_lease_until, kept.fold_lease_owner = None, ""
        kept.save(force_insert=True)
    thread.last_position = thread.last_turn = thread.unfolded_tokens = 0


def erase_user(user_id: int) -> int:
    """Erase every thread the user owns; returns how many threads were erased."""
    with transaction.atomic():
        threads = list(Thread.objects.filter(owner_id=user_id).order_by("pk"))
        for thread in threads:
            _delete_thread(thread)
        forget_deleted()
    return len(threads)


@dataclass(frozen=True)
class Erased:
    """One thread `erase_threads` erased (or, in a dry run, would erase), with the
    number of its entries, messages and summaries."""

    thread_id: int
    entries: int


def erase_threads(
    threads: QuerySet[Thread], *, dry_run: bool = False, batch_size: int = 500
) -> Iterator[Erased]:
    """`erase_thread` for each of ``threads`` in id order, each its own transaction,
    read ``batch_size`` at a time (`agentmemory.paging.pages`); a thread erased meanwhile
    counts 0 entries. With ``dry_run`` nothing is deleted: each page's entries are
    counted in one query."""
    for page in pages(threads, batch_size):
        if dry_run:
            counts = dict(
                MemoryEntry.objects.filter(thread__in=page).order_by().values("thread")
                .annotate(entries=Count("pk")).values_list("thread", "entries")
            )
            for thread in page:
                yield Erased(thread.pk, counts.get(thread.pk, 0))
        else:
            for thread in page:
                yield Erased(thread.pk, erase_thread(thread))


@dataclass(frozen=True)
class Expired:
    """What is expired now: entries (messages and summaries, covered or not), window
    spans and recall receipts."""

    entries: int
    spans: int
    receipts: int


def count_expired(
    *, now: datetime | None = None, thread_ids: Iterable[int] | None = None
) -> Expired:
    """How many rows `purge_expired` finds expired at ``now``: three counts, no row read.
    A purge also deletes what is derived from an expired entry (`derived_rows`), which
    may not have expired itself."""
    entries, spans, receipts = _expired(now or timezone.now(), thread_ids)
    return Expired(entries=entries.count(), spans=spans.count(), receipts=receipts.count())



def _expired(
    now: datetime, thread_ids: Iterable[int] | None
) -> tuple[MemoryEntryQuerySet, FoldedSpanQuerySet, RecallReceiptQuerySet]:
    """The expired entries, spans and receipts, of ``thread_ids`` when given."""
    entries = MemoryEntry.objects.expired(now)
    spans = FoldedSpan.objects.expired(now)
    receipts = RecallReceipt.objects.expired(now)
    if thread_ids is None:
        return entries, spans, receipts
    ids = list(thread_ids)
    return (entries.filter(thread_id__in=ids), spans.filter(thread_id__in=ids),
            receipts.filter(thread_id__in=ids))


@dataclass(frozen=True)
class PurgeResult:
    entries: int
    spans: int
    batches: int


def purge_expired(
    *,
    now: datetime | None = None,
    batch_size: int | None = None,
    max_batches: int | None = None,
    thread_ids: Iterable[int] | None = None,
) -> PurgeResult:
    """Delete expired rows in bounded batches, each batch one transaction.

    Only entries nothing covers are deleted: a summary expires with the earliest thing
    it stands for, so it goes first, what it covered is unlinked (and recalled verbatim
    while it lives), and an expired original never waits under a live summary.
    """
    now = now or timezone.now()
    batch_size = batch_size or memory_settings.PURGE_BATCH_SIZE
    expired_entries, expired_spans, expired_receipts = _expired(now, thread_ids)
    expired_entries = expired_entries.uncovered()
    entries = spans = batches = 0
    while max_batches is None or batches < max_batches:
        with transaction.atomic():
            roots = list(
                expired_entries.order_by("expires_at", "id").values_list("pk", flat=True)[
                    :batch_size
                ]
            )
            span_ids = list(expired_spans.values_list("pk", flat=True)[:batch_size])
            receipt_ids = list(expired_receipts.values_list("pk", flat=True)[:batch_size])
            if not roots and not span_ids and not receipt_ids:
                break
            # The one lock order: the threads first (in id order), then their rows.
            Thread.objects.lock_many(
                [
                    *MemoryEntry.objects.filter(pk__in=roots).values_list("thread_id", flat=True),
                    *FoldedSpan.objects.filter(pk__in=span_ids).values_list("thread_id", flat=True),
                    *RecallReceipt.objects.filter(pk__in=receipt_ids).values_list(
                        "thread_id", flat=True
                    ),
                ]
            )
            # Top-down: only the roots go in this batch; what they covered is unlinked. An
            # expired original among it is a root of a later batch, a live one is
            # verbatim again. A batch stays bounded however deep the nesting.
            MemoryEntry.objects.filter(covered_by__in=roots).update(covered_by=None)
            # Retired or held summaries built on a purged entry cover nothing, but they
            # would stand for originals that are gone: they go with them, and so does
            # every window span derived from one of them.
            doomed, derived_spans = derived_rows(roots)
            RecallReceipt.objects.filter(pk__in=receipt_ids).delete()
            delete_receipts_showing(_placed(doomed))
            spans += FoldedSpan.objects.filter(pk__in={*span_ids, *derived_spans}).delete()[0]
            entries += MemoryEntry.objects.filter(pk__in=doomed).delete()[1].get(
                MemoryEntry._meta.label, 0
            )
        batches += 1
    if entries:
        forget_deleted()
    return PurgeResult(entries=entries, spans=spans, batches=batches)
