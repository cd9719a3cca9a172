"""The whole recall: load (intact), summarize under the fold lease, [decay], pick by
budget, format, and the receipt. `agentmemory.services.recall` is this `recall`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from django.utils import timezone

from agentmemory.conf import memory_settings
from agentmemory.folding import ContextReason, DeclineReason, decline
from agentmemory.folding.lease import FoldState, fold_state, held_lease, take_fold_lease
from agentmemory.models import FoldPurpose, MemoryEntry, Thread
from agentmemory.pipeline.budget import (
    DECAYED,
    OVER_BUDGET,
    context_room,
    pick_by_budget,
)
from agentmemory.pipeline.config import InvalidRecallOption, RecallConfig
from agentmemory.pipeline.decay import filter_by_decay
from agentmemory.pipeline.entries import ContextEntry
from agentmemory.pipeline.format import formatted
from agentmemory.pipeline.intact import load_context_intact, load_intact, load_oldest_intact
from agentmemory.pipeline.load import OMITTED_COUNT_LIMIT, Loaded, count_unloaded
from agentmemory.pipeline.policy import declined_as_not_worth_a_call, due_now, fold_view, plan_next
from agentmemory.pipeline.result import RecalledMessage, RecallResult
from agentmemory.pipeline.summarize import FoldOutcome, decline_not_worth_a_call, fold_span
from agentmemory.summarizers import BaseSummarizer, get_summarizer
from agentmemory.trust.receipts import record_receipt

#: A background recall left history out, and a fold for its room is on its way.
FOLD_PENDING = ContextReason.FOLD_PENDING

#: What a background recall asks of background folding (`services.background.fold_for_room`):
#: given the thread, the budget and whether history was left out, ``fold-pending`` (a
#: fold is on its way), the reason the fold would be declined, or None.
RoomFollower = Callable[..., "str | None"]


def recall_context(
    thread: Thread,
    budget_tokens: int,
    *,
    now: datetime | None = None,
    follow_room: RoomFollower | None = None,
    **overrides: Any,
) -> RecallResult:
    """Load, summarize, [decay], pick by budget and format the thread's context.

    ``overrides`` replace settings for this call (``preserve_recent=3``,
    ``mode="inline"``...). A recall that needs no fold makes the same few reads however long
    the thread is (and, with RECEIPTS, the receipt's writes); an inline fold takes the
    thread's fold lease, so concurrent recalls of one thread pay for one summary. In
    background mode ``follow_room`` (the services pass `fold_for_room`) records the
    budget as the thread's fold room and requests a fold when history was left out.
    """
    config = RecallConfig.build(**overrides)
    if not isinstance(budget_tokens, int) or isinstance(budget_tokens, bool) or budget_tokens < 0:
        raise InvalidRecallOption(
            f"budget_tokens must be a non-negative integer, got {budget_tokens!r}.",
            field="budget_tokens",
        )
    now = now or timezone.now()
    room = context_room(budget_tokens, config)
    loaded: Loaded[ContextEntry]
    entries: Sequence[ContextEntry]
    outcomes: list[FoldOutcome] = []
    decayed = 0
    if config.mode == "background" and config.load_count is None and config.decay is None:
        # Nothing is folded or decayed: only what the budget stage could pick is read.
        loaded = load_context_intact(thread, config, now, room)
        entries = loaded.entries
        loaded_count = len(entries)
    else:
        loaded, full, outcomes = _load_folded(thread, config, now, room, budget_tokens)
        loaded_count = len(full)
        if config.decay is not None:
            kept = filter_by_decay(full, now, config.decay)
            decayed, full = len(full) - len(kept), kept
        entries = full
    picked = pick_by_budget(entries, budget_tokens, config)
    if loaded.short and picked.took_oldest_turn:
        # The budget stage went through a short load (`load_context`) without reaching
        # its limit, so an older turn might still have fit: pick from the full load.
        loaded = load_intact(thread, config, now, room)
        entries = loaded.entries
        picked = pick_by_budget(entries, budget_tokens, config)
    omitted, omitted_reason = picked.omitted + decayed, picked.omitted_reason
    if decayed and omitted_reason is None:
        omitted_reason = DECAYED
    if config.budget_driven and not loaded.complete and omitted < OMITTED_COUNT_LIMIT:
        # History beyond the load (a backlog not folded yet) is left out too.
        unloaded = count_unloaded(thread, loaded, config, now,
                                  limit=OMITTED_COUNT_LIMIT - omitted)
        if unloaded:
            omitted += unloaded
            omitted_reason = omitted_reason or OVER_BUDGET
    omitted = min(omitted, OMITTED_COUNT_LIMIT)
    background_decline = None
    if (
        config.mode == "background" and config.budget_driven and follow_room is not None
        and picked.decline is None
    ):
        answer = follow_room(thread, budget_tokens, left_out=omitted_reason == OVER_BUDGET)
        if answer == FOLD_PENDING:
            omitted_reason = FOLD_PENDING
        else:
            background_decline = answer  # why the fold that would close the gap is not made
    text, tokens = formatted(picked.entries, config)
    folded = [outcome.summary for outcome in outcomes if outcome.summary is not None]
    decline = next((o.decline for o in reversed(outcomes) if o.decline), background_decline)
    receipt_id = None
    if memory_settings.RECEIPTS:
        ttl = thread.effective_ttl()
        receipt_id = record_receipt(
            thread, picked.entries, config=config, budget_tokens=budget_tokens, tokens=tokens,
            decline=decline, budget_decline=picked.decline,
            folded_summary=folded[-1] if folded else None, now=now,
            expires_at=now + ttl if ttl is not None else None,
            omitted=omitted, omitted_reason=omitted_reason, seen_erasures=loaded.erasures,
        ).id
    return RecallResult(
        messages=RecalledMessage.each_of(picked.entries),
        text=text,
        tokens=tokens,
        summaries_used=[entry.id for entry in picked.entries if entry.is_summary],
        decline=decline,
        folded_summary_id=folded[-1].pk if folded else None,
        loaded_count=loaded_count,
        budget_decline=picked.decline,
        receipt_id=receipt_id,
        omitted=omitted,
        omitted_reason=omitted_reason,
    )


def _load_folded(
    thread: Thread, config: RecallConfig, now: datetime, room: int, budget_tokens: int
) -> tuple[Loaded[MemoryEntry], list[MemoryEntry], list[FoldOutcome]]:
    """The full load and, inline, the folds it calls for: the load as it now stands, its
    entries (a fold's summary in place of its span) and the fold outcomes."""
    loaded = load_intact(thread, config, now, room)
    entries = loaded.entries
    outcomes: list[FoldOutcome] = []
    if config.mode == "inline" and not config.budget_driven:
        if plan_next(entries, room, config, complete=True) is None:
            outcome = fold_loaded(thread, entries, config)  # a decline, never a call
        else:
            [outcome] = _under_lease(thread, lambda: [fold_loaded(thread, entries, config)])
        outcomes.append(outcome)
        if outcome.summary is not None and outcome.plan is not None:
            # The span is a contiguous stretch of what was loaded; the summary takes its place.
            entries = [*outcome.plan.before, outcome.summary, *outcome.plan.kept]
    elif (
        config.mode == "inline"
        # Nothing will be injected below the minimum: no fold is paid for it either.
        and budget_tokens - config.reserve_tokens >= config.minimum_tokens
        and due_now(entries, room, config, complete=loaded.complete)
    ):
        # Until settled, however long the history: a second recall with nothing appended
        # must find nothing left to fold (the contract's idempotence).
        outcomes = _under_lease(
            thread, lambda: fold_while_due(thread, config, room, get_summarizer(), now=now,
                                           max_folds=None)
        )
        loaded = load_intact(thread, config, now, room)
        entries = loaded.entries
    return loaded, entries, outcomes


def fold_loaded(thread: Thread, loaded: list[MemoryEntry], config: RecallConfig) -> FoldOutcome:
    """The seeds' count-driven fold: one span of what was loaded, at most one call."""
    summarizer = get_summarizer()
    plan = plan_next(loaded, 0, config, complete=True)
    if plan is None:
        if not declined_as_not_worth_a_call(loaded, 0, config, complete=True):
            return FoldOutcome(summary=None)  # nothing could be folded: nothing to say
        return decline_not_worth_a_call(thread, summarizer)
    return fold_span(thread, plan, config, summarizer)


def fold_while_due(
    thread: Thread,
    config: RecallConfig,
    room: int,
    summarizer: BaseSummarizer,
    *,
    now: datetime | None = None,
    attempt: int = 1,
    raise_transient: bool = False,
    max_folds: int | None,
) -> list[FoldOutcome]:
    """Fold until no fold is due for ``room`` (`policy.plan_next`): at most ``max_folds``
    folds (None: no bound; the services pass FOLDS_PER_TASK), each planned afresh from
    the thread, stopping at the first decline."""
    outcomes: list[FoldOutcome] = []
    while max_folds is None or len(outcomes) < max_folds:
        _, entries, complete = fold_view(
            thread, config, now or timezone.now(), room, load=load_intact,
            oldest=load_oldest_intact,
        )
        plan = plan_next(entries, room, config, complete=complete)
        if plan is None:
            if not outcomes and declined_as_not_worth_a_call(
                entries, room, config, complete=complete
            ):
                outcomes.append(decline_not_worth_a_call(thread, summarizer))
            break
        outcome = fold_span(
            thread, plan, config, summarizer, attempt=attempt, raise_transient=raise_transient
        )
        outcomes.append(outcome)
        if not outcome.folded:
            break
    return outcomes


def _under_lease(thread: Thread, fold: Callable[[], list[FoldOutcome]]) -> list[FoldOutcome]:
    """Run an inline fold under the thread's lease, waiting up to INLINE_FOLD_WAIT for a
    fold that holds it: concurrent recalls of one thread pay for one summary."""
    summarizer = get_summarizer()
    owner = uuid.uuid4().hex
    deadline = time.monotonic() + float(memory_settings.INLINE_FOLD_WAIT)
    while not take_fold_lease(thread.pk, owner):
        if time.monotonic() >= deadline or fold_state(thread.pk).state == FoldState.PARKED:
            decline(thread, summarizer, FoldPurpose.RECALL_FOLD, DeclineReason.FOLD_IN_PROGRESS)
            return [FoldOutcome(summary=None, decline=DeclineReason.FOLD_IN_PROGRESS)]
        time.sleep(0.05)
    with held_lease(thread.pk, owner):
        return fold()
