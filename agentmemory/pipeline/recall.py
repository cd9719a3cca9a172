"""The whole recall: load (intact), summarize under the fold lease, [decay], pick by
budget, format, and the receipt. `agentmemory.services.recall` is this `recall`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone

from agentmemory.conf import memory_settings
from agentmemory.folding import ContextReason, DeclineReason, decline
from agentmemory.folding.lease import FoldState, fold_state, held_lease, take_fold_lease
from agentmemory.integrations.openai_messages import (
    chat_messages,
    response_input,
    summary_instructions,
)
from agentmemory.models import FoldPurpose, MemoryEntry, Thread
from agentmemory.pipeline.budget import (
    DECAYED,
    OVER_BUDGET,
    context_room,
    pick_by_budget,
)
from agentmemory.pipeline.config import InvalidRecallOption, RecallConfig
from agentmemory.pipeline.decay import filter_by_decay
from agentmemory.pipeline.format import formatted
from agentmemory.pipeline.intact import load_intact, load_oldest_intact
from agentmemory.pipeline.load import OMITTED_COUNT_LIMIT, count_unloaded
from agentmemory.pipeline.policy import declined_as_not_worth_a_call, due_now, fold_view, plan_next
from agentmemory.pipeline.summarize import FoldOutcome, decline_not_worth_a_call, fold_span
from agentmemory.summarizers import BaseSummarizer, get_summarizer
from agentmemory.trust.quarantine import strip_invisible
from agentmemory.trust.receipts import record_receipt


@dataclass(frozen=True)
class RecalledMessage:
    id: int
    kind: str
    role: str
    content: str
    turn: int
    tokens: int
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    tool_name: str = ""
    tool_call_id: str = ""

    @classmethod
    def of(cls, entry: MemoryEntry) -> RecalledMessage:
        # Filled as the generated __init__ would, without its per-field
        # object.__setattr__ (a frozen dataclass's): one of these per recalled entry.
        message = object.__new__(cls)
        message.__dict__.update(
            id=entry.id,
            kind=entry.kind,
            role=entry.role,
            # What the model is given never carries characters a reviewer cannot see;
            # the stored original keeps them, byte for byte.
            content=strip_invisible(entry.content),
            turn=entry.turn,
            tokens=entry.token_count,
            tool_calls=list(entry.tool_calls or []),
            tool_name=entry.tool_name,
            tool_call_id=entry.tool_call_id,
        )
        return message


@dataclass(frozen=True)
class RecallResult:
    """The context one recall produced, and why it looks the way it does.

    ``omitted`` counts the visible entries of the thread the context left out, up to
    `OMITTED_COUNT_LIMIT` (0 when every earlier original is verbatim in it or stood for
    by a summary in it; a longer backlog is not read to its end), and
    ``omitted_reason`` says why: ``over-budget``, ``fold-pending`` (background mode: a
    fold for this room is on its way), ``max-entries``, ``decayed``,
    ``unpaired-tool-message``, ``newest-turn-too-large`` or ``below-minimum-tokens``.
    """

    messages: list[RecalledMessage]
    text: str
    tokens: int
    summaries_used: list[int]
    decline: str | None
    folded_summary_id: int | None
    loaded_count: int
    budget_decline: str | None = None
    receipt_id: int | None = None
    omitted: int = 0
    omitted_reason: str | None = None

    def as_chat_messages(
        self, *, summaries: str = "message", system: str = ""
    ) -> list[dict[str, Any]]:
        """The context as Chat Completions messages; a summary is a leading ``system``
        message, or with ``summaries="instructions"`` part of one leading ``system``
        message after ``system`` (see `agentmemory.integrations.openai_messages`)."""
        return chat_messages(self.messages, summaries=summaries, system=system)

    def as_response_input(self, *, summaries: str = "message") -> list[dict[str, Any]]:
        """The context as Responses API input items; a summary is a leading ``system``
        message item, or left out with ``summaries="instructions"`` (then pass
        `instructions` as the request's ``instructions``)."""
        return response_input(self.messages, summaries=summaries)

    def instructions(self, system: str = "") -> str:
        """``system``, then the context's summaries, for ``summaries="instructions"``."""
        return summary_instructions(self.messages, system)


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
    loaded = load_intact(thread, config, now, room, context_only=config.mode == "background")
    outcomes: list[FoldOutcome] = []
    entries = loaded.entries
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
    loaded_count = len(entries)
    decayed = 0
    if config.decay is not None:
        kept = filter_by_decay(entries, now, config.decay)
        decayed, entries = len(entries) - len(kept), kept
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
            omitted=omitted, omitted_reason=omitted_reason,
        ).pk
    return RecallResult(
        messages=[RecalledMessage.of(entry) for entry in picked.entries],
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
