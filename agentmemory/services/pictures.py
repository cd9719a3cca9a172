"""What the admin draws of one thread, read in a constant number of queries however long
the thread: every entry's place and state, the recorded recalls per turn, the window
folds' ranges and the summarizer calls. Nothing here decides what a picture shows
(`agentmemory.admin.overview` and `agentmemory.admin.thread_chart` do, as pure
functions of these rows)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Max, Min
from django.utils import timezone

from agentmemory.models import MemoryEntry, RecallReceipt, SpanSource, SummarizerCall, Thread
from agentmemory.querysets import is_expired, reported_tokens


@dataclass(frozen=True)
class PictureRow:
    """One entry (a message or a summary), as the pictures read it."""

    id: int
    position: int
    turn: int
    is_summary: bool
    covered_by: int | None
    tokens: int
    created_at: datetime
    expired: bool = False
    retired: bool = False
    held: bool = False
    #: Summaries: the first turn it stands for (its last is the turn of its position).
    from_turn: int | None = None


@dataclass(frozen=True)
class RecallsAt:
    """The recorded recalls (receipts) of one turn."""

    turn: int
    recalls: int
    largest: int  # tokens of the largest context given at that turn
    budget: int  # the largest budget asked for


@dataclass(frozen=True)
class WindowFold:
    """A live-window compaction, placed by the stored entries it folded (``first`` and
    ``last`` positions; None when none of its messages was an entry of the thread)."""

    id: int
    first: int | None
    last: int | None
    messages: int


@dataclass(frozen=True)
class CallRow:
    """One summarizer call of the ledger."""

    created_at: datetime
    outcome: str
    tokens: int  # prompt and completion tokens, as reported (none: 0)


@dataclass(frozen=True)
class ThreadPicture:
    thread_id: int
    last_position: int
    last_turn: int
    now: datetime
    rows: list[PictureRow]  # in thread order: position, messages before summaries, id
    recalls: list[RecallsAt]  # by turn
    window_folds: list[WindowFold]
    calls: list[CallRow]  # oldest first


def thread_picture(thread: Thread, now: datetime | None = None) -> ThreadPicture:
    """The rows the admin's pictures of ``thread`` are drawn from, in four queries."""
    now = now or timezone.now()
    rows = [
        PictureRow(
            id=pk, position=position, turn=turn, is_summary=kind == "summary",
            covered_by=covered_by, tokens=tokens, created_at=created_at, expired=expired,
            retired=retired_at is not None, held=held_at is not None, from_turn=from_turn,
        )
        for (pk, position, turn, kind, covered_by, tokens, created_at, expired, retired_at,
             held_at, from_turn) in (
            MemoryEntry.objects.filter(thread=thread).annotate(expired=is_expired(now))
            .order_by("position", "kind", "id")
            .values_list("id", "position", "turn", "kind", "covered_by", "token_count",
                         "created_at", "expired", "retired_at", "held_at",
                         "coverage__from_turn")
        )
    ]
    recalls = [
        RecallsAt(**row) for row in RecallReceipt.objects.filter(thread=thread)
        .values("turn").order_by("turn")
        .annotate(recalls=Count("id"), largest=Max("tokens"), budget=Max("budget_tokens"))
    ]
    window_folds = [
        WindowFold(id=row["span"], first=row["first"], last=row["last"],
                   messages=row["span__message_count"])
        for row in SpanSource.objects.filter(span__thread=thread)
        .values("span", "span__message_count").order_by("span")
        .annotate(first=Min("entry__position"), last=Max("entry__position"))
    ]
    calls = [
        CallRow(created_at=created_at, outcome=outcome, tokens=tokens)
        for created_at, outcome, tokens in SummarizerCall.objects.filter(thread=thread)
        .annotate(tokens=reported_tokens()).order_by("created_at", "id")
        .values_list("created_at", "outcome", "tokens")
    ]
    return ThreadPicture(
        thread_id=thread.pk, last_position=thread.last_position, last_turn=thread.last_turn,
        now=now, rows=rows, recalls=recalls, window_folds=window_folds, calls=calls,
    )
