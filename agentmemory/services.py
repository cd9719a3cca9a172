"""The Python API. Tasks, views, admin actions and commands are thin layers over this.

Every function takes model instances or ids and leaves the database consistent:
writes happen in one transaction, and a call that raises has written nothing.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError, connections, models, transaction
from django.db.models import F, Q
from django.utils import timezone

from agentmemory import signals
from agentmemory.broker import send_within
from agentmemory.conf import memory_settings
from agentmemory.exceptions import MessageConflictError, NotASummaryError, ThreadGoneError
from agentmemory.extras import require
from agentmemory.folding import DeclineReason, decline, latched
from agentmemory.ledger import quota_exceeded
from agentmemory.messages import check_tool_call_ids, clean_message
from agentmemory.models import (
    EntryKind,
    FoldedSpan,
    FoldPurpose,
    MemoryEntry,
    RecallReceipt,
    Role,
    SpanSource,
    SummaryCoverage,
    SummarySource,
    Thread,
)
from agentmemory.pipeline.budget import (
    DECAYED,
    OVER_BUDGET,
    context_room,
    pick_by_budget,
    picked_the_oldest_turn,
)
from agentmemory.pipeline.config import InvalidRecallOption, RecallConfig
from agentmemory.pipeline.decay import filter_by_decay
from agentmemory.pipeline.format import entry_line, format_context
from agentmemory.pipeline.load import Loaded, load_context, load_oldest, load_visible
from agentmemory.pipeline.plan import fold_pressure, next_fold
from agentmemory.pipeline.summarize import (
    FoldOutcome,
    decline_not_worth_a_call,
    fold_span,
    latch_summaries,
    plan_fold,
    plan_span,
    report_summarizer_failure,
)
from agentmemory.quarantine import strip_invisible
from agentmemory.receipts import record_receipt
from agentmemory.signing import (
    is_legacy,
    sign_span,
    sign_summary,
    sources_by_summary,
    span_is_intact,
    summary_is_intact,
)
from agentmemory.summarizers import BaseSummarizer, get_summarizer
from agentmemory.tokens import count_tokens
from agentmemory.window.compact import (  # noqa: F401  (part of the Python API)
    Compaction,
    compact,
    entry_digest,
    expand_span,
    folded_messages,
    folded_span_for,
    report_tampered_span,
)

logger = logging.getLogger("agentmemory")



# ---------------------------------------------------------------- threads


def thread_ttl(thread: Thread) -> timedelta | None:
    """The thread's TTL for written entries, or the project default."""
    if thread.ttl is not None:
        return thread.ttl
    default = memory_settings.DEFAULT_TTL
    if default is None or isinstance(default, timedelta):
        return default
    return timedelta(seconds=default)


def thread_write_tier(thread: Thread) -> str:
    return thread.write_tier or memory_settings.WRITE_TIER


# ---------------------------------------------------------------- append


def append(
    thread: Thread,
    messages: Any,
    *,
    now: datetime | None = None,
) -> list[MemoryEntry]:
    """Store one message or several, in order, and return the stored entries.

    A message is a mapping with ``role`` and ``content``, and optionally
    ``tool_calls`` (assistant: ``[{"id", "name", "arguments"}]``), ``tool_name`` and
    ``tool_call_id`` (tool), ``turn``, ``tier`` and ``metadata``; or an OpenAI Chat
    Completions message or Responses input item, as a dict or the SDK's pydantic object,
    stored by the rules of `agentmemory.shapes`. When ``turn`` is
    omitted, each user message opens a new turn and the others join the current one.
    Any invalid message raises `InvalidMessageError` and nothing is stored; one that
    conflicts with the thread (a turn before its current turn, a tool call id already
    used, a tool result for a call not stored before it, a call answered twice) raises
    its subclass `MessageConflictError` (`ToolCallIdError` names the id).
    """
    single = isinstance(messages, Mapping) or hasattr(messages, "model_dump")
    batch = [messages] if single else list(messages)
    cleaned = [clean_message(message, index) for index, message in enumerate(batch)]
    now = now or timezone.now()
    ttl = thread_ttl(thread)
    expires_at = now + ttl if ttl is not None else None
    default_tier = thread_write_tier(thread)
    with transaction.atomic():
        # The row lock (the one lock order, `ThreadQuerySet.lock`) serialises appends to
        # one thread, so positions and turns are assigned from the counters without
        # reading the thread's entries.
        locked = (
            Thread.objects.select_for_update().only("last_position", "last_turn")
            .filter(pk=thread.pk).first()
        )
        if locked is None:
            raise ThreadGoneError(f"Thread {thread.pk} was erased; nothing was appended.")
        position, turn = locked.last_position, locked.last_turn
        if any(message["tool_calls"] or message["role"] == Role.TOOL for message in cleaned):
            check_tool_call_ids(cleaned, *MemoryEntry.objects.filter(thread=thread).tool_call_ids())
        entries = []
        for index, message in enumerate(cleaned):
            position += 1
            if message.get("turn") is not None:
                if message["turn"] < turn:
                    raise MessageConflictError(
                        f"turn {message['turn']} is before the thread's current turn {turn}.",
                        field="turn",
                        index=index,
                    )
                turn = message["turn"]
            elif message["role"] == Role.USER or turn == 0:
                turn += 1
            entry = MemoryEntry(
                thread=thread,
                kind=EntryKind.MESSAGE,
                role=message["role"],
                content=message["content"],
                tool_calls=message.get("tool_calls") or [],
                tool_name=message.get("tool_name", ""),
                tool_call_id=message.get("tool_call_id", ""),
                turn=turn,
                position=position,
                tier=message.get("tier") or default_tier,
                created_at=now,
                expires_at=expires_at,
                metadata=message.get("metadata") or {},
            )
            entry.token_count = count_tokens(entry_line(entry))
            entries.append(entry)
        MemoryEntry.objects.bulk_create(entries)
        Thread.objects.filter(pk=thread.pk).update(
            last_position=position, last_turn=turn, updated_at=now
        )
        if memory_settings.RECALL_MODE == "background":
            # After the commit, outside the row lock: deciding reads the thread's history,
            # and appends to the thread queue on that lock.
            transaction.on_commit(lambda: fold_if_due(thread.pk))
    thread.last_position, thread.last_turn = position, turn
    return entries


def fold_if_due(thread_id: int) -> None:
    """Request a background fold of the thread if one is due and none is on its way.

    The cheap question first: a thread whose fold is queued, leased or parked needs no
    decision (under a burst of appends, most of them)."""
    now = timezone.now()
    thread = (
        Thread.objects.without_fold_on_its_way(now)
        .filter(pk=thread_id, fold_parked_until__isnull=True).first()
    )
    if thread is not None and fold_due(thread, now=now):
        request_fold(thread_id)


# ---------------------------------------------------------------- recall


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
        return cls(
            id=entry.pk,
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


@dataclass(frozen=True)
class RecallResult:
    """The context one recall produced, and why it looks the way it does.

    ``omitted`` counts the visible entries of the thread the context left out (0 when
    every earlier original is verbatim in it or stood for by a summary in it), and
    ``omitted_reason`` says why: ``over-budget``, ``max-entries``, ``decayed``,
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

    def as_chat_messages(self) -> list[dict[str, Any]]:
        """The context as Chat Completions messages; a summary is a leading ``system``
        message (see `agentmemory.integrations.openai_shapes`)."""
        from agentmemory.integrations.openai_shapes import chat_messages

        return chat_messages(self.messages)

    def as_response_input(self) -> list[dict[str, Any]]:
        """The context as Responses API input items; a summary is a leading ``system``
        message item (see `agentmemory.integrations.openai_shapes`)."""
        from agentmemory.integrations.openai_shapes import response_input

        return response_input(self.messages)


#: An inline recall found another fold of the thread running and waited it out in vain.
FOLD_IN_PROGRESS = DeclineReason.FOLD_IN_PROGRESS


def recall(
    thread: Thread, budget_tokens: int, *, now: datetime | None = None, **overrides: Any
) -> RecallResult:
    """Load, summarize, [decay], pick by budget and format the thread's context.

    ``overrides`` replace settings for this call (``preserve_recent=3``,
    ``mode="inline"``...). A recall that needs no fold is one read however long the
    thread is; an inline fold takes the thread's fold lease, so concurrent recalls of
    one thread pay for one summary.
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
        if plan_fold(entries, config) is None:
            outcome = _fold_loaded(thread, entries, config)  # a decline, never a call
        else:
            [outcome] = _under_lease(thread, lambda: [_fold_loaded(thread, entries, config)])
        outcomes.append(outcome)
        if outcome.summary is not None and outcome.plan is not None:
            # The span is a contiguous stretch of what was loaded; the summary takes its place.
            entries = [*outcome.plan.before, outcome.summary, *outcome.plan.kept]
    elif (
        config.mode == "inline"
        # Nothing will be injected below the minimum: no fold is paid for it either.
        and budget_tokens - config.reserve_tokens >= config.minimum_tokens
        and fold_pressure(entries, room, config, complete=loaded.complete)
    ):
        # Until settled, however long the history: a second recall with nothing appended
        # must find nothing left to fold (the contract's idempotence).
        outcomes = _under_lease(
            thread, lambda: settle(thread, config, room, get_summarizer(), now=now,
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
    if loaded.short and picked_the_oldest_turn(entries, picked.entries):
        # The budget stage went through a short load (`load_context`) without reaching
        # its limit, so an older turn might still have fit: pick from the full load.
        loaded = load_intact(thread, config, now, room)
        entries = loaded.entries
        picked = pick_by_budget(entries, budget_tokens, config)
    omitted, omitted_reason = picked.omitted + decayed, picked.omitted_reason
    if decayed and omitted_reason is None:
        omitted_reason = DECAYED
    if config.budget_driven and not loaded.complete:
        # History beyond the row cap (a backfill not folded yet) is left out too.
        visible = MemoryEntry.objects.filter(thread=thread).visible(now, config.tiers).count()
        if visible > len(loaded.entries):
            omitted += visible - len(loaded.entries)
            omitted_reason = omitted_reason or OVER_BUDGET
    text = format_context(picked.entries, config)
    tokens = count_tokens(text) if text else 0
    folded = [outcome.summary for outcome in outcomes if outcome.summary is not None]
    decline = next((o.decline for o in reversed(outcomes) if o.decline), None)
    receipt_id = None
    if memory_settings.RECEIPTS:
        ttl = thread_ttl(thread)
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
        summaries_used=[entry.pk for entry in picked.entries if entry.is_summary],
        decline=decline,
        folded_summary_id=folded[-1].pk if folded else None,
        loaded_count=loaded_count,
        budget_decline=picked.decline,
        receipt_id=receipt_id,
        omitted=omitted,
        omitted_reason=omitted_reason,
    )


def load_intact(
    thread: Thread, config: RecallConfig, now: datetime, room: int, *, context_only: bool = False
) -> Loaded:
    """The load stage, with every loaded summary checked against its signature and its
    expiry. ``context_only``: the recall folds nothing, so only what the budget stage
    could pick is read (`load_context`).

    An edited summary is neither recalled nor folded into a new one (which would sign
    its text anew), and an expired one stands for something that is gone: either is
    retired and the load repeated, so what it hid comes back verbatim in this very call.
    """
    load = load_context if context_only else load_visible
    loaded = load(thread, config, now, room)
    summaries = [entry for entry in loaded.entries if entry.is_summary]
    # One read for the coverage rows every current signature covers.
    sources = sources_by_summary(s for s in summaries if not is_legacy(s.coverage.signature))
    tampered = [s for s in summaries if not summary_is_intact(s, sources.get(s.pk))]
    if tampered:
        report_tampered(tampered)
    if loaded.expired_summaries:
        retire_expired(thread, now)
    if tampered or loaded.expired_summaries:
        loaded = load(thread, config, now, room)
    return loaded


def retire_expired(thread: Thread, now: datetime) -> int:
    """Retire the thread's live summaries past their expiry (law 7): what they stood
    for and still lives is recalled verbatim, and folded again when the room needs it."""
    ids = list(
        MemoryEntry.objects.filter(thread=thread, kind=EntryKind.SUMMARY, expires_at__lte=now)
        .filter(retired_at__isnull=True)
        .values_list("pk", flat=True)
    )
    return retire(ids, now=now) if ids else 0


def _fold_loaded(thread: Thread, loaded: list[MemoryEntry], config: RecallConfig) -> FoldOutcome:
    """The seeds' count-driven fold: one span of what was loaded, at most one call."""
    summarizer = get_summarizer()
    plan = plan_fold(loaded, config)
    if plan is None:
        if len(loaded) <= config.preserve_recent:
            return FoldOutcome(summary=None)  # nothing could be folded: nothing to say
        return decline_not_worth_a_call(thread, summarizer)
    return fold_span(thread, plan, config, summarizer)


def settle(
    thread: Thread,
    config: RecallConfig,
    room: int,
    summarizer: BaseSummarizer,
    *,
    now: datetime | None = None,
    attempt: int = 1,
    raise_transient: bool = False,
    max_folds: int | None = -1,
) -> list[FoldOutcome]:
    """Fold until the thread's context fits ``room``: at most ``max_folds`` folds
    (FOLDS_PER_TASK by default, None for no bound), each planned afresh from the thread
    (oldest first), stopping at the first decline."""
    if max_folds == -1:
        max_folds = memory_settings.FOLDS_PER_TASK
    outcomes: list[FoldOutcome] = []
    while max_folds is None or len(outcomes) < max_folds:
        at = now or timezone.now()
        loaded = load_intact(thread, config, at, room)
        entries, complete = loaded.entries, loaded.complete
        if not complete:
            # More history than the room could hold: fold it forward from its oldest end.
            oldest = load_oldest(thread, config, at, config.input_limit)
            entries, complete = oldest.entries, oldest.complete
        plan = next_fold(entries, room, config, complete=complete)
        if plan is None:
            if not outcomes and fold_pressure(entries, room, config, complete=complete):
                outcomes.append(decline_not_worth_a_call(thread, summarizer))
            break
        outcome = fold_span(
            thread, plan, config, summarizer, attempt=attempt, raise_transient=raise_transient
        )
        outcomes.append(outcome)
        if not outcome.folded:
            break
    return outcomes


def thread_fold_budget(thread: Thread) -> int:
    """The recall budget background folds keep the thread within."""
    return int(thread.fold_budget or memory_settings.FOLD_BUDGET)


# ---------------------------------------------------------------- fold, expand, unfold


def fold(
    thread: Thread,
    *,
    now: datetime | None = None,
    budget_tokens: int | None = None,
    **overrides: Any,
) -> FoldOutcome:
    """The summarize stage on its own: fold what recall would fold now.

    Budget-driven, it folds until the context fits ``budget_tokens`` (default: the
    thread's fold budget) and returns the last summary written, or the decline.
    """
    config = RecallConfig.build(**overrides)
    now = now or timezone.now()
    if not config.budget_driven:
        loaded = load_intact(thread, config, now, 0)
        return _fold_loaded(thread, loaded.entries, config)
    room = context_room(budget_tokens or thread_fold_budget(thread), config)
    outcomes = settle(thread, config, room, get_summarizer(), now=now)
    folded = [outcome for outcome in outcomes if outcome.folded]
    if folded:
        return folded[-1]
    return outcomes[-1] if outcomes else FoldOutcome(summary=None)


def fold_due(thread: Thread, *, now: datetime | None = None) -> bool:
    """Would a background fold fold now? The load, the latch check, and the quota."""
    config = RecallConfig.build()
    now = now or timezone.now()
    room = context_room(thread_fold_budget(thread), config)
    loaded = load_visible(thread, config, now, room)
    if loaded.expired_summaries:
        return True
    entries, complete = loaded.entries, loaded.complete
    if config.budget_driven:
        if not complete:
            oldest = load_oldest(thread, config, now, config.input_limit)
            entries, complete = oldest.entries, oldest.complete
        plan = next_fold(entries, room, config, complete=complete)
    else:
        plan = plan_fold(entries, config)
    return (
        plan is not None
        and latched(
            thread, FoldPurpose.RECALL_FOLD, span_key=plan.span_key, start_key=plan.start_key,
            span_tokens=plan.span_tokens,
        ) is None
        and not quota_exceeded(thread)
    )


def take_fold_lease(thread_id: int, owner: str) -> bool:
    """One fold of a thread at a time, inline or background: a conditional update, so two
    workers (or two recalls) that fold at once never pay twice for one summary.

    The lease lasts FOLD_LEASE seconds and its holder's heartbeat renews it. Taking a
    lease that was never released (it ran out, or this very owner holds it: a redelivered
    task keeps its id) means the process that held it died: that is counted, and the
    FOLD_MAX_DEATHS-th death parks the thread's fold instead (see `park_fold`). A parked
    thread lends its lease to no one until its back-off is over.
    """
    now = timezone.now()
    lease = {
        "fold_lease_until": now + timedelta(seconds=float(memory_settings.FOLD_LEASE)),
        "fold_lease_owner": owner,
        "fold_queued_until": None,  # the queued task (or an inline fold) now runs
    }
    unparked = Thread.objects.filter(pk=thread_id).filter(
        Q(fold_parked_until__isnull=True) | Q(fold_parked_until__lte=now)
    )
    if unparked.filter(fold_lease_owner="").update(**lease):
        return True
    died = Q(fold_lease_owner=owner) | Q(fold_lease_until__lt=now) | Q(fold_lease_until=None)
    if not unparked.filter(died).update(**lease, fold_deaths=F("fold_deaths") + 1):
        return False
    deaths = Thread.objects.filter(pk=thread_id).values_list("fold_deaths", flat=True).first()
    if deaths is not None and deaths >= memory_settings.FOLD_MAX_DEATHS:
        park_fold(thread_id, deaths)
        return False
    logger.warning(
        "agentmemory: a fold of thread %s died holding its lease (%s of %s deaths before "
        "it is parked); folding it again.", thread_id, deaths, memory_settings.FOLD_MAX_DEATHS,
    )
    return True


def release_fold_lease(thread_id: int, owner: str, *, retrying: bool = False) -> None:
    """The holder finished (folded, declined or failed): its attempt did not die.

    ``retrying``: the holder's task is about to retry, so the release marks the thread's
    fold queued in the same update, leaving no moment for a second chain to start.
    """
    queued = {}
    if retrying:
        seconds = float(memory_settings.FOLD_LEASE)
        queued["fold_queued_until"] = timezone.now() + timedelta(seconds=seconds)
    Thread.objects.filter(pk=thread_id, fold_lease_owner=owner).update(
        fold_lease_until=None, fold_lease_owner="", fold_deaths=0, fold_parked_until=None,
        **queued,
    )


@contextmanager
def held_lease(thread_id: int, owner: str, *, retried: bool = False) -> Iterator[None]:
    """Renew the lease every third of FOLD_LEASE while the block runs, then release it.

    The heartbeat runs on its own thread and database connection, so a long summarizer
    call keeps the lease while a killed worker's lease runs out within FOLD_LEASE.
    ``retried``: an error out of the block is retried by the caller's task (see
    `release_fold_lease`).
    """
    stop = threading.Event()
    seconds = float(memory_settings.FOLD_LEASE)

    def beat() -> None:
        try:
            while not stop.wait(seconds / 3):
                try:
                    Thread.objects.filter(pk=thread_id, fold_lease_owner=owner).update(
                        fold_lease_until=timezone.now() + timedelta(seconds=seconds)
                    )
                except DatabaseError as exc:  # the next beat tries again
                    logger.info("agentmemory: a fold lease heartbeat failed: %s", exc)
        finally:
            connections.close_all()

    heart = threading.Thread(target=beat, name=f"agentmemory-lease-{thread_id}", daemon=True)
    heart.start()
    failed = False
    try:
        yield
    except BaseException:
        failed = True
        raise
    finally:
        stop.set()
        heart.join()
        release_fold_lease(thread_id, owner, retrying=retried and failed)


def park_fold(thread_id: int, deaths: int) -> None:
    """Stop folding a thread whose folds keep dying: warn, signal, and wait for the sweep
    after FOLD_PARK_BACKOFF seconds, or for `unpark_fold`."""
    until = timezone.now() + timedelta(seconds=float(memory_settings.FOLD_PARK_BACKOFF))
    Thread.objects.filter(pk=thread_id).update(
        fold_parked_until=until, fold_lease_until=None, fold_lease_owner="",
        fold_queued_until=None,
    )
    logger.warning(
        "agentmemory: the fold of thread %s died %s times (FOLD_MAX_DEATHS) and is parked "
        "until %s: the sweep tries it again then, or unpark it in the admin. Its "
        "summarizer calls are in the ledger as 'reserved'.", thread_id, deaths, until,
    )
    thread = Thread.objects.filter(pk=thread_id).first()
    if thread is not None:
        signals.fold_parked.send(sender=Thread, thread=thread, deaths=deaths, until=until)


def unpark_fold(thread: Thread) -> FoldRequest:
    """A person's retry of a parked fold: forget its deaths and enqueue it now."""
    Thread.objects.filter(pk=thread.pk).update(fold_parked_until=None, fold_deaths=0)
    thread.fold_parked_until, thread.fold_deaths = None, 0
    return request_fold(thread.pk)


def _under_lease(thread: Thread, fold: Callable[[], list[FoldOutcome]]) -> list[FoldOutcome]:
    """Run an inline fold under the thread's lease, waiting up to INLINE_FOLD_WAIT for a
    fold that holds it: concurrent recalls of one thread pay for one summary."""
    summarizer = get_summarizer()
    owner = uuid.uuid4().hex
    deadline = time.monotonic() + float(memory_settings.INLINE_FOLD_WAIT)
    while not take_fold_lease(thread.pk, owner):
        if time.monotonic() >= deadline or fold_state(thread.pk).state == FoldState.PARKED:
            decline(thread, summarizer, FoldPurpose.RECALL_FOLD, FOLD_IN_PROGRESS)
            return [FoldOutcome(summary=None, decline=FOLD_IN_PROGRESS)]
        time.sleep(0.05)
    with held_lease(thread.pk, owner):
        return fold()


def fold_until_settled(
    thread_id: int, *, attempt: int = 1, lease_owner: str | None = None
) -> list[FoldOutcome]:
    """The background fold: fold while a fold is due, at most FOLDS_PER_TASK times.

    Transient summarizer errors propagate (recorded in the ledger first) so the
    Celery task can retry; every other outcome is a result.
    """
    thread = Thread.objects.filter(pk=thread_id).first()
    if thread is None:
        return []  # erased while the task waited: nothing to do
    config = RecallConfig.build(mode="inline")
    summarizer = get_summarizer()
    # A redelivered or retried task keeps its id, so it takes back the lease a killed
    # worker left behind instead of waiting for it to run out.
    owner = lease_owner or uuid.uuid4().hex
    if not take_fold_lease(thread_id, owner):
        return []  # the fold holding the lease re-checks when it is done; or parked
    outcomes: list[FoldOutcome] = []
    with held_lease(thread_id, owner, retried=True):
        if config.budget_driven:
            room = context_room(thread_fold_budget(thread), config)
            outcomes = settle(
                thread, config, room, summarizer, attempt=attempt, raise_transient=True
            )
        else:
            for _ in range(memory_settings.FOLDS_PER_TASK):
                loaded = load_intact(thread, config, timezone.now(), 0)
                plan = plan_fold(loaded.entries, config)
                if plan is None:
                    break
                outcome = fold_span(
                    thread, plan, config, summarizer, attempt=attempt, raise_transient=True
                )
                outcomes.append(outcome)
                if not outcome.folded:
                    break
    if outcomes and outcomes[-1].folded and fold_due(thread):
        enqueue_fold(thread_id)  # appends that arrived meanwhile were turned away
    return outcomes


def fold_retry_pending(thread_id: int, countdown: float) -> None:
    """The task retries in ``countdown`` seconds: until then it stands for the thread's
    queued fold, so appends start no second retry chain."""
    until = timezone.now() + timedelta(seconds=countdown + float(memory_settings.FOLD_LEASE))
    Thread.objects.filter(pk=thread_id).update(fold_queued_until=until)


def give_up_fold(thread_id: int, exc: BaseException) -> None:
    """The background fold ran out of retries: warn once, send the decline signal."""
    Thread.objects.filter(pk=thread_id).update(fold_queued_until=None)
    thread = Thread.objects.filter(pk=thread_id).first()
    if thread is not None:
        report_summarizer_failure(thread, get_summarizer(), exc)


class FoldState(models.TextChoices):
    """Where a thread's background fold stands after it was asked for."""

    QUEUED = "queued", "a fold task was sent"
    ALREADY_QUEUED = "already-queued", "a fold task is queued or waiting to retry"
    FOLDING = "folding", "a fold holds the thread's lease"
    PARKED = "parked", "the fold died FOLD_MAX_DEATHS times and is parked"
    BROKER_DOWN = "broker-down", "nothing could be queued: the broker did not answer"


@dataclass(frozen=True)
class FoldRequest:
    state: FoldState
    task_id: str | None = None
    parked_until: datetime | None = None


def request_fold(thread_id: int, *, by_sweep: bool = False) -> FoldRequest:
    """Send ``fold_thread`` for a thread unless one is already on its way.

    One chain per thread: the send claims ``Thread.fold_queued_until`` by a conditional
    update (FOLD_LEASE seconds, renewed by a retrying task), so while a fold is queued,
    retrying or holding the lease, more requests answer with that state and send
    nothing. A parked thread is sent only by the sweep, once its back-off is over.
    The database is the record of pending work: when the broker is down or does not
    answer within BROKER_TIMEOUT this logs a warning, stops sending from this process
    for BROKER_BACKOFF_SECONDS (the sweep excepted) and answers BROKER_DOWN; the sweep
    enqueues the fold once the broker is back. Without Celery installed it raises
    MissingExtraError (the ``celery`` extra).
    """
    global _broker_down_until
    fold_thread = require("Background folding", "agentmemory.tasks").fold_thread
    if time.monotonic() < _broker_down_until and not by_sweep:
        # The broker failed moments ago: do not make this request wait too.
        return FoldRequest(FoldState.BROKER_DOWN)
    now = timezone.now()
    parked = Q(fold_parked_until__isnull=True)
    if by_sweep:
        parked |= Q(fold_parked_until__lte=now)
    claimed = (
        Thread.objects.without_fold_on_its_way(now)
        .filter(parked, pk=thread_id)
        .update(fold_queued_until=now + timedelta(seconds=float(memory_settings.FOLD_LEASE)))
    )
    if not claimed:
        return fold_state(thread_id)
    try:
        task_id = send_within(
            fold_thread, (thread_id,), fold_task_options(get_summarizer()),
            float(memory_settings.BROKER_TIMEOUT),
        )
    except Exception as exc:
        Thread.objects.filter(pk=thread_id).update(fold_queued_until=None)
        _broker_down_until = time.monotonic() + BROKER_BACKOFF_SECONDS
        logger.warning(
            "agentmemory: could not enqueue the fold of thread %s (%s: %s); no fold is "
            "enqueued from this process for %s s, and the periodic sweep enqueues the "
            "missed ones when the broker is reachable.",
            thread_id,
            type(exc).__name__,
            exc,
            BROKER_BACKOFF_SECONDS,
        )
        return FoldRequest(FoldState.BROKER_DOWN)
    _broker_down_until = 0.0
    return FoldRequest(FoldState.QUEUED, task_id=task_id)


def fold_state(thread_id: int) -> FoldRequest:
    """Why no fold task was sent for a thread just now (see `request_fold`)."""
    now = timezone.now()
    thread = Thread.objects.filter(pk=thread_id).only(
        "fold_parked_until", "fold_lease_owner", "fold_lease_until"
    ).first()
    if thread is None or thread.fold_parked_until is not None:
        until = thread.fold_parked_until if thread else None
        return FoldRequest(FoldState.PARKED, parked_until=until)
    if thread.fold_lease_owner and (thread.fold_lease_until or now) >= now:
        return FoldRequest(FoldState.FOLDING)
    return FoldRequest(FoldState.ALREADY_QUEUED)


def enqueue_fold(thread_id: int, *, after_outage: bool = False) -> str | None:
    """`request_fold` for callers that need only the id of the task it sent, or None."""
    return request_fold(thread_id, by_sweep=after_outage).task_id


# A broker outage costs one request its BROKER_TIMEOUT, not every request.
BROKER_BACKOFF_SECONDS = 30.0
_broker_down_until = 0.0


def fold_task_options(summarizer: BaseSummarizer) -> dict[str, Any]:
    """Queue and time limits for ``fold_thread``, above the summarizer's own timeout."""
    timeout = float(summarizer.timeout)
    options: dict[str, Any] = {
        "soft_time_limit": timeout + 30,
        "time_limit": timeout + 60,
        "retry": False,
    }
    if memory_settings.FOLD_QUEUE:
        options["queue"] = memory_settings.FOLD_QUEUE
    return options


def sweep(*, now: datetime | None = None) -> list[int]:
    """Enqueue folds that are due but were never done (a lost task, a broker outage, a
    parked fold whose back-off is over).

    Looks at threads written within ``SWEEP_WINDOW`` seconds, newest first, at most
    ``SWEEP_LIMIT`` of them; returns the ids it enqueued.
    """
    now = now or timezone.now()
    since = now - timedelta(seconds=memory_settings.SWEEP_WINDOW)
    candidates = Thread.objects.filter(updated_at__gte=since).order_by("-updated_at")[
        : memory_settings.SWEEP_LIMIT
    ]
    enqueued = []
    for thread in candidates:
        # The sweep is how an outage is recovered from: it always tries the broker.
        if fold_due(thread, now=now) and enqueue_fold(thread.pk, after_outage=True):
            enqueued.append(thread.pk)
    return enqueued


def _require_summary(summary: MemoryEntry) -> None:
    if summary.kind != EntryKind.SUMMARY:
        raise NotASummaryError(f"Entry {summary.pk} is a {summary.kind}, not a summary.")


def expand(summary: MemoryEntry, *, recursive: bool = False) -> list[MemoryEntry]:
    """The exact entries a summary stands for, in thread order (retired ones too).

    With ``recursive=True`` nested summaries are replaced by their own originals,
    down to messages: one query per level of nesting.
    """
    _require_summary(summary)
    entries = list(
        MemoryEntry.objects.filter(summarized_in__summary=summary)
        .select_related("coverage")
        .order_by("position", "id")
    )
    while recursive and any(entry.is_summary for entry in entries):
        nested = [entry.pk for entry in entries if entry.is_summary]
        children = MemoryEntry.objects.filter(summarized_in__summary__in=nested).select_related(
            "coverage"
        )
        entries = sorted(
            [entry for entry in entries if not entry.is_summary] + list(children),
            key=lambda entry: (entry.position, entry.pk),
        )
    return entries


def derived_summaries(entries: Iterable[MemoryEntry]) -> list[int]:
    """Ids of every summary built on ``entries``, live or retired, up through nesting."""
    return derived_summary_ids(entry.pk for entry in entries)


def derived_summary_ids(entry_ids: Iterable[int]) -> list[int]:
    found: list[int] = []
    frontier = set(entry_ids)
    while frontier:
        frontier = set(
            SummarySource.objects.filter(entry_id__in=frontier).values_list(
                "summary_id", flat=True
            )
        ) - set(found)
        found.extend(frontier)
    return found


def report_tampered(summaries: Iterable[MemoryEntry]) -> None:
    """Summaries whose row no longer matches its signature: mark, retire, announce."""
    summaries = list(summaries)
    now = timezone.now()
    with transaction.atomic():
        Thread.objects.lock_many(summary.thread_id for summary in summaries)
        SummaryCoverage.objects.filter(summary__in=summaries).update(tampered_at=now)
        # A summary folded from an edited one may carry its text: like unfold, retire it
        # too, so the originals come back verbatim once rather than beside it; and latch
        # the spans, so they are not folded again straight away.
        ids = [*(summary.pk for summary in summaries), *derived_summaries(summaries)]
        latch_summaries(ids, TAMPERED)
        retire(ids, now=now)
    for summary in summaries:
        logger.warning(
            "agentmemory: summary %s of thread %s does not match its signature; it is "
            "retired and its originals are recalled verbatim.",
            summary.pk,
            summary.thread_id,
        )
        signals.summary_tampered.send(
            sender=MemoryEntry, thread=summary.thread, summary=summary, span=None
        )


def verify(*, resign: bool = False) -> dict[str, list[int]]:
    """Check every live summary and every span against its signature.

    Tampered ones are reported like a recall would; intact ones still under a version 1
    signature are re-signed under the current scheme (``resigned_*``). With ``resign``
    nothing is reported: every row is signed anew (after a key rotation you have
    checked). Expired summaries are left to the purge: what they stood for may already
    be gone, and recall no longer shows them.
    """
    now = timezone.now()
    bad_summaries: list[MemoryEntry] = []
    upgraded_summaries: list[int] = []
    for summary in (
        MemoryEntry.objects.filter(kind=EntryKind.SUMMARY, retired_at__isnull=True)
        .exclude(expires_at__lte=now)
        .select_related("coverage", "thread")
        .iterator(chunk_size=500)
    ):
        if not resign and not summary_is_intact(summary):
            bad_summaries.append(summary)
        elif resign or is_legacy(summary.coverage.signature):
            SummaryCoverage.objects.filter(pk=summary.pk).update(
                signature=sign_summary(summary, summary.coverage)
            )
            upgraded_summaries.append(summary.pk)
    bad_spans: list[FoldedSpan] = []
    upgraded_spans: list[int] = []
    for span in FoldedSpan.objects.filter(tampered_at__isnull=True).select_related(
        "thread"
    ).iterator(chunk_size=500):
        if not resign and not span_is_intact(span):
            bad_spans.append(span)
        elif resign or is_legacy(span.signature):
            FoldedSpan.objects.filter(pk=span.pk).update(signature=sign_span(span))
            upgraded_spans.append(span.pk)
    if bad_summaries:
        report_tampered(bad_summaries)
    for span in bad_spans:
        report_tampered_span(span)
    return {
        "summaries": [summary.pk for summary in bad_summaries],
        "spans": [span.pk for span in bad_spans],
        "resigned_summaries": upgraded_summaries,
        "resigned_spans": upgraded_spans,
    }


def retire(summary_ids: Iterable[int], *, now: datetime | None = None) -> int:
    """Retire summaries: never recalled again, covering nothing, still readable."""
    ids = list(summary_ids)
    with transaction.atomic():
        Thread.objects.lock_many(
            MemoryEntry.objects.filter(pk__in=ids).values_list("thread_id", flat=True)
        )
        count = MemoryEntry.objects.filter(pk__in=ids, retired_at__isnull=True).update(
            retired_at=now or timezone.now()
        )
        MemoryEntry.objects.filter(covered_by__in=ids).update(covered_by=None)
    return count


def unfold(summary: MemoryEntry) -> int:
    """Unfold a summary (and any summary built on it): its originals become verbatim.

    The summary is retired, not deleted, so a recall receipt that showed it can still
    be replayed and its history read. Returns how many summaries were retired.
    """
    _require_summary(summary)
    with transaction.atomic():
        if not Thread.objects.lock(summary.thread_id):
            raise ThreadGoneError(f"Thread {summary.thread_id} was erased.")
        ids = [summary.pk, *derived_summaries([summary])]
        # The same spans are latched: the next recall is verbatim, not a paid refold.
        latch_summaries(ids, UNFOLDED)
        return retire(ids)


def regenerate(summary: MemoryEntry, **overrides: Any) -> FoldOutcome:
    """Fold a live summary's span again with a new call.

    The old version stays live until the new one is written, then stays readable
    (retired). A summary folded into another, or one built on an edited summary,
    is not regenerated.
    """
    _require_summary(summary)
    summarizer = get_summarizer()
    if summary.retired_at is not None or summary.covered_by_id is not None:
        return FoldOutcome(summary=None, decline=NOT_REGENERABLE)
    span = expand(summary)
    tampered = [entry for entry in span if entry.is_summary and not summary_is_intact(entry)]
    if tampered:
        report_tampered(tampered)  # never sent to a model, never signed anew
        return FoldOutcome(summary=None, decline=TAMPERED)
    config = RecallConfig.build(**overrides)
    plan = plan_span(span, config)
    if plan is None:
        return decline_not_worth_a_call(summary.thread, summarizer)
    return fold_span(summary.thread, plan, config, summarizer, replacing=summary)


UNFOLDED = DeclineReason.UNFOLDED
TAMPERED = DeclineReason.TAMPERED
NOT_REGENERABLE = DeclineReason.NOT_REGENERABLE


def review(summary: MemoryEntry, user: Any, *, approve: bool) -> bool:
    """Staff review of a flagged summary. Approving a held one lets it cover its span
    (True when it now does); rejecting retires it. The review and the hold are signed,
    so the row is re-signed with them: an edited summary is never approved (that would
    sign its edits), it is reported as tampered instead."""
    _require_summary(summary)
    if not summary_is_intact(summary):
        report_tampered([summary])
        return False
    with transaction.atomic():
        if not Thread.objects.lock(summary.thread_id):
            raise ThreadGoneError(f"Thread {summary.thread_id} was erased.")
        covers = _review(summary, user, approve=approve)
        resign_summary(summary.pk)
    return covers


def _review(summary: MemoryEntry, user: Any, *, approve: bool) -> bool:
    SummaryCoverage.objects.filter(summary=summary).update(
        reviewed_at=timezone.now(), reviewed_by=user
    )
    if not approve:
        retire([summary.pk])
        return False
    if summary.held_at is None:
        return summary.covered_by_id is None and summary.retired_at is None
    ids = list(summary.sources.values_list("entry_id", flat=True))
    try:
        with transaction.atomic():
            claimed = MemoryEntry.objects.filter(
                pk__in=ids, covered_by__isnull=True, retired_at__isnull=True
            ).update(covered_by=summary)
            if claimed != len(ids):
                raise _SpanTaken
    except _SpanTaken:
        # The span was folded or erased while the summary waited: it can cover
        # nothing now, so it leaves recall for good.
        retire([summary.pk])
        return False
    MemoryEntry.objects.filter(pk=summary.pk).update(held_at=None)
    return True


def resign_summary(summary_id: int) -> None:
    """Sign a summary anew, as it now stands (after a write of agentmemory's own)."""
    summary = MemoryEntry.objects.select_related("coverage").get(pk=summary_id)
    SummaryCoverage.objects.filter(pk=summary_id).update(
        signature=sign_summary(summary, summary.coverage)
    )


class _SpanTaken(Exception):
    pass


# ---------------------------------------------------------------- erasure


def erase_entry(entry: MemoryEntry) -> None:
    """Delete an entry and everything derived from it (`derived_rows`), with the
    receipts that showed any of it, in one transaction (law 7)."""
    with transaction.atomic():
        if not Thread.objects.lock(entry.thread_id):
            return
        ids, span_ids = derived_rows([entry.pk])
        RecallReceipt.objects.filter(items__entry_id__in=ids).delete()
        FoldedSpan.objects.filter(pk__in=span_ids).delete()
        MemoryEntry.objects.filter(pk__in=ids).delete()


def derived_rows(entry_ids: Iterable[int]) -> tuple[list[int], list[int]]:
    """The entries and window spans that go with ``entry_ids``, found by recorded
    derivation, never by searching text:

    - the entries themselves and every summary built on them, through nesting
      (`SummarySource`);
    - every window span that folded one of those (a `SpanSource` linked to it, or,
      for a message that was no entry when it was folded, with its digest), every span
      that swallowed such a span's frame, however deep (``nested_spans``), and every
      span of the same threads whose derivation is unknown (made before it was
      recorded, without its messages);
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
        found |= set(
            FoldedSpan.objects.filter(thread_id__in=threads, derivation_unknown=True)
            .values_list("pk", flat=True)
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


def erase_thread(thread: Thread) -> None:
    """Delete a thread with everything in it: entries, summaries, spans, latches."""
    with transaction.atomic():
        if not Thread.objects.lock(thread.pk):
            return  # erased meanwhile by another request
        # Clear coverage links first so deletion is not one SET NULL per summary.
        MemoryEntry.objects.filter(thread=thread).update(covered_by=None)
        thread.delete()


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
        kept.last_position = kept.last_turn = 0
        kept.fold_lease_until, kept.fold_lease_owner = None, ""
        kept.save(force_insert=True)
    thread.last_position = thread.last_turn = 0


def erase_user(user_id: int) -> int:
    """Erase every thread the user owns; returns how many threads were erased."""
    with transaction.atomic():
        threads = list(Thread.objects.filter(owner_id=user_id).order_by("pk"))
        for thread in threads:
            erase_thread(thread)
    return len(threads)


# ---------------------------------------------------------------- retention


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
    expired_entries = MemoryEntry.objects.expired(now).uncovered()
    expired_spans = FoldedSpan.objects.filter(expires_at__lte=now)
    expired_receipts = RecallReceipt.objects.filter(expires_at__lte=now)
    if thread_ids is not None:
        thread_ids = list(thread_ids)
        expired_entries = expired_entries.filter(thread_id__in=thread_ids)
        expired_spans = expired_spans.filter(thread_id__in=thread_ids)
        expired_receipts = expired_receipts.filter(thread_id__in=thread_ids)
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
            RecallReceipt.objects.filter(
                Q(pk__in=receipt_ids) | Q(items__entry_id__in=doomed)
            ).delete()
            spans += FoldedSpan.objects.filter(pk__in={*span_ids, *derived_spans}).delete()[0]
            entries += MemoryEntry.objects.filter(pk__in=doomed).delete()[1].get(
                MemoryEntry._meta.label, 0
            )
        batches += 1
    return PurgeResult(entries=entries, spans=spans, batches=batches)
