"""The one fold policy: for a thread and a room, what to fold next.

Recall (inline), the append's fold decision (`services.background.fold_due`), the
background worker's loop and ``services.fold`` all ask these two functions, so that the
rule is written once: budget-driven (`plan.next_fold`: by tokens against the room,
backfill first) or count-driven (`summarize.plan_fold`: the seeds' trigger and floor).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime

from agentmemory.models import MemoryEntry, Thread
from agentmemory.pipeline.config import RecallConfig
from agentmemory.pipeline.load import Loaded, count_visible, load_oldest, row_cap
from agentmemory.pipeline.plan import fold_pressure, next_fold
from agentmemory.pipeline.summarize import FoldPlan, plan_fold

Load = Callable[[Thread, RecallConfig, datetime, int], Loaded]


def fold_view(
    thread: Thread, config: RecallConfig, now: datetime, room: int, *, load: Load,
    oldest: Load = load_oldest,
) -> tuple[Loaded, list[MemoryEntry], bool]:
    """What the next fold is planned over: ``load``'s entries, or, budget-driven, when the
    history is longer than the row cap, its oldest slice (``oldest``, reading by the
    input limit: a backfill folds forward from its oldest end, never backwards one
    recall at a time). Returns the load itself too (whether either read an expired
    summary), the entries and whether they reach the newest entry. A fold passes the
    checking loaders (`intact.load_intact`, `intact.load_oldest_intact`)."""
    if config.budget_driven and _longer_than_the_row_cap(thread, config, now, room):
        # The newest rows would only say what the count says: fold from the oldest slice.
        sliced = oldest(thread, config, now, config.input_limit)
        return sliced, sliced.entries, sliced.complete
    loaded = load(thread, config, now, room)
    if config.budget_driven and not loaded.complete:
        sliced = oldest(thread, config, now, config.input_limit)
        if sliced.expired_summaries and not loaded.expired_summaries:
            loaded = dataclasses.replace(loaded, expired_summaries=True)
        return loaded, sliced.entries, sliced.complete
    return loaded, loaded.entries, loaded.complete


def _longer_than_the_row_cap(
    thread: Thread, config: RecallConfig, now: datetime, room: int
) -> bool:
    """Whether the visible history certainly holds more rows than a load of ``room``
    reads, asked only of a thread whose counter says it may: every visible entry is a
    message or stands for at least one, so there are no more than positions given out
    (a stale counter only says "may not", and the load then decides)."""
    cap = row_cap(config, room)
    if thread.last_position < cap:
        return False
    return count_visible(thread, config, now, limit=cap) >= cap


def plan_next(
    entries: list[MemoryEntry], room: int, config: RecallConfig, *, complete: bool
) -> FoldPlan | None:
    """The next fold over ``entries`` for ``room``, or None when none is due or possible."""
    if config.budget_driven:
        return next_fold(entries, room, config, complete=complete)
    return plan_fold(entries, config)


def declined_as_not_worth_a_call(
    entries: list[MemoryEntry], room: int, config: RecallConfig, *, complete: bool
) -> bool:
    """With no plan: was a fold due all the same (so the decline is said out loud)? Not
    when a run only waits to grow to `plan.MIN_CHUNK_SHARE` of the room: that fold is
    not declined, just not due yet."""
    if config.budget_driven:
        return fold_pressure(entries, room, config, complete=complete) and next_fold(
            entries, room, config, complete=complete, patient=False
        ) is None
    return len(entries) > config.preserve_recent


def due_now(
    entries: list[MemoryEntry], room: int, config: RecallConfig, *, complete: bool
) -> bool:
    """Whether an inline recall over ``entries`` should take the fold lease: a fold is due
    (`plan.fold_pressure`), unless the only fold over a complete load is a run still
    growing to `plan.MIN_CHUNK_SHARE` of the room (not due yet: no lease, nothing read
    again for it)."""
    if not fold_pressure(entries, room, config, complete=complete):
        return False
    return not (
        complete and config.budget_driven
        and next_fold(entries, room, config, complete=True) is None
        and next_fold(entries, room, config, complete=True, patient=False) is not None
    )
