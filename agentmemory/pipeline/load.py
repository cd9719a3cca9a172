"""Load: the thread's visible entries, oldest first, in one indexed read.

Budget-driven (``load_count`` None): every visible entry up to a row cap that the room
could never exceed, so the context can account for all of them. Count-driven (the
seeds): the newest ``load_count``.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from agentmemory.models import MemoryEntry, Thread
from agentmemory.pipeline import rows as context_rows
from agentmemory.pipeline.blocks import Tally, entry_cost
from agentmemory.pipeline.config import RecallConfig
from agentmemory.pipeline.entries import ContextEntry
from agentmemory.querysets import MemoryEntryQuerySet
from agentmemory.sql import visible_tally

#: Each entry costs at least two tokens in a context (its text and the line break), so a
#: room of R tokens never holds more than R // 2 entries. The hard cap bounds a recall
#: with a huge budget on a thread that was never folded.
MAX_LOAD_ROWS = 20_000

#: A backfill's first page of oldest rows is its input limit divided by this (at least
#: 64 rows): 125 rows at the default 16,000 tokens, two input limits' worth of messages
#: of 256 tokens or more; smaller rows take a second page sized by their average, which
#: costs less than building the rows a larger first page would read and not use.
OLDEST_PAGE_DIVISOR = 128

#: A first page of `load_context` is the room divided by this, at least the minimum:
#: one query when messages average 128 tokens or more, a short thread in one query, and
#: a page of smaller rows (the seeded conversation averages 37, the API benchmark's
#: thread 21) followed by one sized by their average: the second query costs less than
#: building the rows a larger first page would read and not use.
CONTEXT_PAGE_DIVISOR = 128
CONTEXT_MIN_PAGE = 16


#: What a load's entries are: `MemoryEntry` instances, or (`load_context`) summaries as
#: instances and messages as `entries.ContextMessage` values.
LoadedEntry = TypeVar("LoadedEntry", bound=ContextEntry, covariant=True)


@dataclass(frozen=True)
class Loaded(Generic[LoadedEntry]):
    """``entries``: visible and unexpired, oldest first. ``complete``: nothing visible
    lies beyond them. ``expired_summaries``: a live summary passed its expiry and still
    hides what it stands for (the caller retires it and loads again)."""

    entries: list[LoadedEntry]
    complete: bool
    expired_summaries: bool = False
    #: `load_context` stopped at the room: the budget stage may need the full load.
    short: bool = False
    #: Each loaded summary's entry ids, sorted, when the load read them too.
    sources: dict[int, list[int]] | None = None
    #: The thread's ``erasures`` read with the load's first statement (`load_context`),
    #: for the receipt to compare (`trust.receipts.record_receipt`).
    erasures: int | None = None


def row_cap(config: RecallConfig, room: int) -> int:
    if config.load_count is not None:
        return config.load_count
    return max(1, min(room // 2 + 1, MAX_LOAD_ROWS))


def _visible_rows(
    thread_id: int, tiers: tuple[str, ...] | None, now: datetime
) -> MemoryEntryQuerySet:
    # Expired summaries are read too: until retired they hide originals that may still
    # be live (a summary expires with the earliest thing it stands for).
    rows = MemoryEntry.objects.filter(thread=thread_id).uncovered().live()
    rows = rows.unexpired_or_summaries(now)
    if tiers is not None:
        rows = rows.filter(tier__in=list(tiers))
    return rows


def _candidates(thread: Thread, config: RecallConfig, now: datetime) -> MemoryEntryQuerySet:
    # select_related joins each summary's coverage, so later stages read no more rows.
    return _visible_rows(thread.pk, config.tiers, now).select_related("coverage")


def _expired(entries: Iterable[MemoryEntry], now: datetime) -> bool:
    """Whether a summary among ``entries`` passed its expiry."""
    return any(row.is_summary and row.expires_at is not None and row.expires_at <= now
               for row in entries)


def load_visible(
    thread: Thread, config: RecallConfig, now: datetime, room: int
) -> Loaded[MemoryEntry]:
    """The newest visible entries (up to the row cap), oldest first."""
    cap = row_cap(config, room)
    rows = list(_candidates(thread, config, now).newest_first()[:cap])
    rows.reverse()
    return Loaded(rows, complete=len(rows) < cap,
                  expired_summaries=_expired(rows, now))


#: The most a recall's ``omitted`` counts: counting to the end would read every visible
#: row of a never-folded thread on every recall. Whatever the load read, the count is
#: the same, the number left out or this bound, and it reads no more rows than this
#: past the load.
OMITTED_COUNT_LIMIT = 500


def count_visible(thread: Thread, config: RecallConfig, now: datetime, *, limit: int) -> int:
    """How many entries of the thread recall may load (`MemoryEntryQuerySet.visible`),
    counted up to ``limit``: the database stops reading there
    (`context_rows.count_visible_rows`)."""
    return context_rows.count_visible_rows(thread.pk, config.tiers, now, limit=limit)


def count_unloaded(
    thread: Thread, loaded: Loaded[ContextEntry], config: RecallConfig, now: datetime, *, limit: int
) -> int:
    """How many visible entries an incomplete load left unread, up to ``limit``: those
    older than its oldest message, less the older summaries it read too (`load_context`
    reads every visible summary). The count skips the rows the load read, newest first,
    by their number (on the index the load read), and counts the next."""
    messages = [(e.position, e.id) for e in loaded.entries if not e.is_summary]
    if not messages:
        return 0
    oldest = min(messages)
    read_older = sum(1 for e in loaded.entries if (e.position, e.id) < oldest)
    counted = context_rows.count_visible_rows(
        thread.pk, config.tiers, now, limit=limit + read_older,
        offset=len(loaded.entries) - read_older)
    return max(0, counted - read_older)


def tally_visible(
    thread: Thread, config: RecallConfig, now: datetime, room: int,
    *, unless_on_its_way: bool = False,
) -> tuple[Tally, bool, bool] | None:
    """What `load_visible` would load, counted in one aggregate query instead of read:
    (the tally `plan.pressure` takes, whether the load would be complete, whether it
    would hold an expired summary); None when nothing is visible. Exact only when
    complete (the whole visible history is under the row cap); an incomplete load has
    fold pressure whatever it holds. With ``unless_on_its_way``, also None while a fold
    of the thread is queued, leased or parked (read in the same query)."""
    found = visible_tally(thread.pk, config.tiers, now, unless_on_its_way=unless_on_its_way)
    if found is None:
        return None
    rows, cost, summaries, summary_cost, expired = found
    tally = Tally(rows, cost, summaries, summary_cost)
    return tally, tally.rows < row_cap(config, room), bool(expired)


def load_context(
    thread: Thread, config: RecallConfig, now: datetime, room: int
) -> Loaded[ContextEntry]:
    """`load_visible` for a recall that folds nothing and decays nothing: only what the
    budget stage could pick, not the whole row cap.

    The budget stage takes the newest turn, then summaries (any age), then the newest
    turns back to the first that does not fit, so messages older than the newest
    ``room`` tokens are rarely picked. This reads every visible summary and pages of the
    newest messages until they hold more than ``room`` (`context_rows.read_context`: the
    first page and the summaries in one query): on a long thread a few hundred rows, not
    ``room // 2``. The recall checks the rare case (`Picked.took_oldest_turn`) and loads
    in full then. The entries are oldest first; ``complete`` is False when a visible
    message was left unread."""
    cap = row_cap(config, room)
    page = min(cap, max(CONTEXT_MIN_PAGE, room // CONTEXT_PAGE_DIVISOR + 1))
    read = context_rows.read_context(thread.pk, config.tiers, now, limit=page)
    messages = read.messages
    held = sum(map(entry_cost, messages))
    fetched = len(messages)
    while fetched == page and held <= room and len(messages) < cap:
        # The rows read so far say how many more the rest of the room takes: that many
        # and a quarter more, so a second page is nearly always the last.
        wanted = (room - held) * len(messages) // max(1, held) + 1
        page = min(cap - len(messages), max(page, wanted + wanted // 4))
        more = context_rows.more_messages(
            thread.pk, config.tiers, now, offset=len(messages), limit=page)
        messages.extend(more)
        held += sum(map(entry_cost, more))
        fetched = len(more)
    complete = fetched < page
    messages.reverse()  # newest first as read: now in order, and the summaries go in
    entries: list[ContextEntry] = list(messages)
    for summary in sorted(read.summaries, key=_order):
        entries.insert(bisect.bisect_left(entries, _order(summary), key=_order), summary)
    return Loaded(entries, complete=complete, short=not complete,
                  expired_summaries=_expired(read.summaries, now), sources=read.sources,
                  erasures=read.erasures)


def _order(entry: ContextEntry) -> tuple[int, int]:
    return entry.position, entry.id


def load_oldest(
    thread: Thread, config: RecallConfig, now: datetime, tokens: int
) -> Loaded[MemoryEntry]:
    """The oldest visible entries, where a backfill is folded forward from: pages of rows
    until they hold twice ``tokens`` (a fold's input limit), so the slice always reaches
    past the span a fold may read, or until none are left.

    Reading by tokens, not by the row cap of a room of ``tokens``, keeps each fold of a
    long backfill to a few hundred rows."""
    rows: list[MemoryEntry] = []
    held = 0
    page = max(64, tokens // OLDEST_PAGE_DIVISOR)
    while True:
        # An offset, not a keyset on (position, id): the OR a keyset needs steers SQLite
        # off the partial index, and re-reading the earlier pages costs less than that.
        # One row past the page says whether any are left (a full page may be the last).
        fetched = context_rows.read_oldest(thread.pk, config.tiers, now,
                                           offset=len(rows), limit=page + 1)
        more = len(fetched) > page
        fetched = fetched[:page]
        rows.extend(fetched)
        held += sum(map(entry_cost, fetched))
        if not more or held >= 2 * tokens or len(rows) >= MAX_LOAD_ROWS:
            return Loaded(rows, complete=not more,
                          expired_summaries=_expired(rows, now))
        # The rows read so far say how many more the rest takes: that many and a
        # quarter more, so a second page is nearly always the last.
        wanted = (2 * tokens - held) * len(rows) // max(1, held) + 1
        page = min(MAX_LOAD_ROWS - len(rows), max(page, wanted + wanted // 4))
