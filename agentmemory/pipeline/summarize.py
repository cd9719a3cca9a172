"""Summarize: fold the oldest loaded entries into one summary, written back once.

The plan (which span, and whether to call at all) is a pure function of the loaded
entries. The fold makes at most one summarizer call and writes the result under the
deterministic key ``msg-summary-{from}-{to}``; a unique constraint, not luck, makes
two concurrent folds of one span leave one summary.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from agentmemory import __version__, ledger
from agentmemory.conf import memory_settings
from agentmemory.exceptions import AgentMemoryError, TransientSummarizerError
from agentmemory.facts import FactCheck, check_facts, missing_facts_note
from agentmemory.models import (
    CallOutcome,
    EntryKind,
    FoldLatch,
    FoldPurpose,
    MemoryEntry,
    Role,
    SummaryCoverage,
    SummarySource,
    Thread,
    summary_key,
)
from agentmemory.pipeline.config import RecallConfig
from agentmemory.quarantine import injection_flags, message_flags, strip_invisible
from agentmemory.signing import sign_summary
from agentmemory.summarizers.base import BaseSummarizer, SummaryResult
from agentmemory.tokens import count_tokens
from agentmemory.transcript import render_tool_call, summary_label

NOT_WORTH_A_CALL = "not-worth-a-call"
SUMMARIZER_FAILED = "summarizer-failed"
NOT_SMALLER = "not-smaller"
ALREADY_FOLDED = "already-folded"
LOST_FACTS = "lost-facts"
QUOTA_EXCEEDED = "quota-exceeded"
HELD_FOR_REVIEW = "held-for-review"


@dataclass(frozen=True)
class FoldPlan:
    """``before``: a partial turn at the far edge of the load, left alone; ``span``: folded;
    ``kept``: the verbatim tail."""

    before: list[MemoryEntry]
    span: list[MemoryEntry]
    kept: list[MemoryEntry]
    from_turn: int
    to_turn: int

    @property
    def key(self) -> str:
        return summary_key(self.from_turn, self.to_turn)

    @property
    def span_key(self) -> str:
        return span_key_of(entry.pk for entry in self.span)

    @property
    def span_tokens(self) -> int:
        return sum(entry.token_count for entry in self.span)

    @property
    def start_key(self) -> str:
        """Where the span starts: a refused span backs off every span starting here."""
        return str(self.span[0].pk)

    @property
    def level(self) -> int:
        """1 over messages only; one above the highest summary it folds (nesting depth)."""
        return 1 + max((e.coverage.level for e in self.span if e.is_summary), default=0)


@dataclass(frozen=True)
class FoldOutcome:
    """What the summarize stage did: a summary, or a decline with its reason."""

    summary: MemoryEntry | None
    decline: str | None = None
    latched: bool = False
    called: bool = False
    plan: FoldPlan | None = None

    @property
    def folded(self) -> bool:
        return self.summary is not None


def span_key_of(ids: Iterable[int]) -> str:
    """The latch key: the span's exact entry ids, in thread order. A grown span is a
    new key."""
    return hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()


def latch_summaries(summary_ids: Iterable[int], reason: str) -> None:
    """Latch the spans of these summaries, so the same spans are not folded again.

    Unfolding and a detected edit both promise originals recalled verbatim; without
    the latch, the very next recall would fold the same span again and pay for it.
    """
    sources = SummarySource.objects.filter(summary_id__in=list(summary_ids)).order_by(
        "summary_id", "entry__position", "entry_id"
    ).values_list("summary_id", "entry_id", "summary__thread_id", "summary__coverage__model")
    spans: dict[int, tuple[int, str, list[int]]] = {}
    for summary_id, entry_id, thread_id, model in sources:
        spans.setdefault(summary_id, (thread_id, model, []))[2].append(entry_id)
    for thread_id, model, ids in spans.values():
        FoldLatch.objects.get_or_create(
            thread_id=thread_id,
            purpose=FoldPurpose.RECALL_FOLD,
            span_key=span_key_of(ids),
            defaults={"reason": reason, "entry_count": len(ids), "model": model},
        )


def _first_turn(entry: MemoryEntry) -> int:
    return entry.coverage.from_turn if entry.is_summary else entry.turn


def plan_fold(loaded: list[MemoryEntry], config: RecallConfig) -> FoldPlan | None:
    """Which span to fold, or None when a fold is not worth a call (law 4a)."""
    if config.trigger_min_entries is not None and len(loaded) < config.trigger_min_entries:
        return None
    cut = len(loaded) - config.preserve_recent
    if cut <= 0:
        return None
    # Law 3: a turn cut in two keeps all of it verbatim.
    seam_turn = loaded[cut].turn
    while cut > 0 and loaded[cut - 1].turn == seam_turn:
        cut -= 1
    cut = _keep_tool_calls_with_results(loaded, cut)
    start = _first_whole_turn(loaded, cut)
    if cut - start < config.effective_min_fold:
        return None
    span = loaded[start:cut]
    return FoldPlan(
        before=loaded[:start],
        span=span,
        kept=loaded[cut:],
        from_turn=min(_first_turn(entry) for entry in span),
        to_turn=max(entry.turn for entry in span),
    )


def plan_span(span: list[MemoryEntry], config: RecallConfig) -> FoldPlan | None:
    """A plan over an exact span (regenerating a summary), checked like any other."""
    if len(span) < config.min_fold_entries:
        return None
    return FoldPlan(
        before=[],
        span=span,
        kept=[],
        from_turn=min(_first_turn(entry) for entry in span),
        to_turn=max(entry.turn for entry in span),
    )


def _first_whole_turn(loaded: list[MemoryEntry], cut: int) -> int:
    """Where the first whole turn starts: the load's far edge may cut its oldest turn (and
    a tool call from its results) in two, and half a turn is never folded. Only that
    turn is in doubt: a thread without user messages (explicit turns) still folds."""
    if cut == 0 or loaded[0].is_summary or loaded[0].role == Role.USER:
        return 0
    for index in range(1, cut):
        if loaded[index].turn != loaded[0].turn:
            return index
    return cut


def _keep_tool_calls_with_results(loaded: list[MemoryEntry], cut: int) -> int:
    """Move the seam back until no kept tool result answers a folded tool call."""
    while cut > 0:
        kept_call_ids = {
            entry.tool_call_id for entry in loaded[cut:] if entry.role == Role.TOOL
        }
        callers = [
            index
            for index in range(cut)
            if loaded[index].role == Role.ASSISTANT
            and any(call.get("id") in kept_call_ids for call in loaded[index].tool_calls or [])
        ]
        if not callers:
            return cut
        cut = min(callers)
    return cut


def fold_span(
    thread: Thread,
    plan: FoldPlan,
    config: RecallConfig,
    summarizer: BaseSummarizer,
    *,
    attempt: int = 1,
    raise_transient: bool = False,
    replacing: MemoryEntry | None = None,
) -> FoldOutcome:
    """At most one summarizer call for ``plan``, its ledger row, its signal, and write-back.

    With ``raise_transient`` (the background task), a transient failure is recorded
    and re-raised so the task can retry; in a recall it is a decline like any other.
    With ``replacing`` (regenerating), the span is asked again on purpose, and the
    summary it replaces is retired in the same transaction that writes the new one:
    until then it stays live, so a refused or failed call leaves it in place.
    """
    purpose = FoldPurpose.RECALL_FOLD
    span_key = plan.span_key
    latch = FoldLatch.objects.filter(thread=thread, purpose=purpose, span_key=span_key)
    for reason in latch.values_list("reason", flat=True):
        if replacing is None:
            return _decline(thread, summarizer, reason, latched=True)
    # No ordering: the default one would steer SQLite off the versions index.
    same_key = MemoryEntry.objects.filter(thread=thread, summary_key=plan.key).order_by()
    if replacing is not None:
        same_key = same_key.exclude(pk=replacing.pk)
    versions = list(same_key.values_list("retired_at", flat=True))
    if None in versions:
        # A live summary holds this key: the write-back could only hit the unique
        # constraint, so a call now would be paid for nothing.
        return _decline(thread, summarizer, ALREADY_FOLDED)
    if ledger.quota_exceeded(thread):
        return _decline(thread, summarizer, QUOTA_EXCEEDED)

    started = time.monotonic()
    try:
        result = summarizer.summarize(plan.span, instruction=config.instruction)
        if not isinstance(result, SummaryResult) or not result.text.strip():
            raise AgentMemoryError(f"{summarizer.backend} returned no summary text.")
    except Exception as exc:  # law 4(b): a broken summarizer never fails a turn
        _record_call(
            thread, summarizer, plan, started, CallOutcome.FAILED, error=exc, attempt=attempt
        )
        if raise_transient and isinstance(exc, TransientSummarizerError):
            raise
        return report_summarizer_failure(thread, summarizer, exc)

    text = strip_invisible(result.text)
    label = summary_label(
        from_turn=plan.from_turn,
        to_turn=plan.to_turn,
        entry_count=len(plan.span),
        model=summarizer.model,
    )
    content = f"{label}\n{text}"
    facts = check_facts(map(fact_text, plan.span), text)
    threshold, action = fact_gate()
    if threshold is not None and facts.score < threshold:
        if action == "decline":
            return _refuse(
                thread, summarizer, plan, started, result, attempt,
                CallOutcome.REFUSED_LOST_FACTS, LOST_FACTS,
            )
        content = f"{content}\n{missing_facts_note(facts.missing)}"
    tokens = count_tokens(content)
    if tokens >= plan.span_tokens:
        return _refuse(
            thread, summarizer, plan, started, result, attempt,
            CallOutcome.REFUSED_NOT_SMALLER, NOT_SMALLER,
        )

    flags = sorted(
        {flag for entry in plan.span for flag in message_flags(entry)}
        | {f"output:{flag}" for flag in injection_flags(result.text)}
    )
    draft = _Draft(
        content=content, tokens=tokens, result=result, facts=facts, flags=flags,
        version=len(versions) + 1 + (replacing is not None),
        prompt_hash=prompt_hash(config.instruction),
    )
    summary = _write_back(
        thread, plan, config, summarizer, draft, started, attempt, replacing=replacing
    )
    if summary is None:
        # Another worker folded this span first; its summary is the one that counts.
        return _decline(thread, summarizer, ALREADY_FOLDED, result, called=True)
    ledger.send_completed(
        thread, summarizer, purpose=purpose, result=result, entry_count=len(plan.span),
        summary=summary,
    )
    if summary.held_at is not None:
        # Held for review: stored and listed for staff, but recall stays verbatim.
        return FoldOutcome(summary=None, decline=HELD_FOR_REVIEW, called=True)
    return FoldOutcome(summary=summary, called=True, plan=plan)


def fact_text(entry: MemoryEntry) -> str:
    """What the fact gate reads of an entry: a message's words and tool arguments, or a
    nested summary's text without its label (the label's numbers are ours, not facts)."""
    if entry.is_summary:
        return entry.content.partition("\n")[2]
    arguments = " ".join(render_tool_call(call) for call in entry.tool_calls or [])
    return f"{entry.content} {arguments}"


def fact_gate() -> tuple[float | None, str]:
    gate = memory_settings.FACT_GATE or {}
    threshold = gate.get("THRESHOLD")
    return (float(threshold) if threshold is not None else None), gate.get("ACTION", "decline")


def prompt_hash(instruction: str) -> str:
    return hashlib.sha256(instruction.encode()).hexdigest()


def _refuse(
    thread: Thread,
    summarizer: BaseSummarizer,
    plan: FoldPlan,
    started: float,
    result: SummaryResult,
    attempt: int,
    outcome: str,
    reason: str,
) -> FoldOutcome:
    """A paid call whose summary is dropped; the span is latched, never asked again."""
    _record_call(thread, summarizer, plan, started, outcome, result, attempt=attempt)
    FoldLatch.objects.get_or_create(
        thread=thread,
        purpose=FoldPurpose.RECALL_FOLD,
        span_key=plan.span_key,
        defaults={"reason": reason, "entry_count": len(plan.span), "model": summarizer.model},
    )
    return _decline(thread, summarizer, reason, result, called=True)


@dataclass(frozen=True)
class _Draft:
    """A summary that passed every check, ready to be written."""

    content: str
    tokens: int
    result: SummaryResult
    facts: FactCheck
    flags: list[str]
    version: int
    prompt_hash: str


def _write_back(
    thread: Thread,
    plan: FoldPlan,
    config: RecallConfig,
    summarizer: BaseSummarizer,
    draft: _Draft,
    started: float,
    attempt: int,
    *,
    replacing: MemoryEntry | None = None,
) -> MemoryEntry | None:
    ids = [entry.pk for entry in plan.span]
    newest = plan.span[-1]
    # Law 7: a summary goes when the first thing it stands for goes (nested summaries
    # already carry their own earliest expiry), and never lives forever when one does not.
    expires_at: datetime | None = min(
        (entry.expires_at for entry in plan.span if entry.expires_at is not None), default=None
    )
    held = bool(draft.flags) and memory_settings.HOLD_FLAGGED
    result = draft.result
    try:
        with transaction.atomic():
            Thread.objects.select_for_update().filter(pk=thread.pk).first()
            if replacing is not None:
                # Retired first: the live summary key is unique.
                if not MemoryEntry.objects.filter(
                    pk=replacing.pk, retired_at__isnull=True, covered_by__isnull=True
                ).update(retired_at=timezone.now()):
                    raise _SpanChanged
                MemoryEntry.objects.filter(covered_by=replacing).update(covered_by=None)
            summary = MemoryEntry.objects.create(
                thread=thread,
                kind=EntryKind.SUMMARY,
                role=Role.SYSTEM,
                content=draft.content,
                turn=plan.to_turn,
                position=newest.position,
                tier=config.summary_tier,
                token_count=draft.tokens,
                created_at=max(entry.created_at for entry in plan.span),
                expires_at=expires_at,
                summary_key=plan.key,
                held_at=timezone.now() if held else None,
            )
            if not held:
                claimed = MemoryEntry.objects.filter(
                    pk__in=ids, covered_by__isnull=True
                ).update(covered_by=summary)
                if claimed != len(ids):
                    raise _SpanChanged
            SummarySource.objects.bulk_create(
                SummarySource(summary=summary, entry_id=pk) for pk in ids
            )
            coverage = SummaryCoverage(
                summary=summary,
                from_turn=plan.from_turn,
                to_turn=plan.to_turn,
                entry_count=len(ids),
                span_tokens=plan.span_tokens,
                original_tokens=sum(
                    e.coverage.original_tokens if e.is_summary else e.token_count
                    for e in plan.span
                ),
                model=summarizer.model,
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
                level=plan.level,
                version=draft.version,
                prompt_hash=draft.prompt_hash,
                temperature=summarizer.temperature,
                seed=summarizer.seed,
                library_version=__version__,
                fact_score=draft.facts.score,
                missing_facts=[fact.text for fact in draft.facts.missing],
                injection_flags=draft.flags,
            )
            coverage.signature = sign_summary(summary, coverage)
            coverage.save(force_insert=True)
            summary.coverage = coverage
            _record_call(
                thread, summarizer, plan, started, CallOutcome.FOLDED, result,
                summary=summary, attempt=attempt,
            )
    except (IntegrityError, _SpanChanged) as exc:
        _record_call(
            thread, summarizer, plan, started, CallOutcome.DECLINED, result,
            error=exc, attempt=attempt,
        )
        return None
    return summary


class _SpanChanged(Exception):
    """Some entry of the span was covered or erased while the summarizer ran."""


def _record_call(
    thread: Thread,
    summarizer: BaseSummarizer,
    plan: FoldPlan,
    started: float,
    outcome: str,
    result: SummaryResult | None = None,
    *,
    error: BaseException | None = None,
    summary: MemoryEntry | None = None,
    attempt: int = 1,
) -> None:
    ledger.record_call(
        thread,
        summarizer,
        purpose=FoldPurpose.RECALL_FOLD,
        span_key=plan.span_key,
        entry_count=len(plan.span),
        started=started,
        outcome=outcome,
        result=result,
        error=error,
        summary=summary,
        attempt=attempt,
    )


def _decline(
    thread: Thread,
    summarizer: BaseSummarizer,
    reason: str,
    result: SummaryResult | None = None,
    *,
    latched: bool = False,
    called: bool = False,
    error: str = "",
) -> FoldOutcome:
    ledger.send_declined(
        thread,
        summarizer,
        purpose=FoldPurpose.RECALL_FOLD,
        reason=reason,
        result=result,
        latched=latched,
        error=error,
    )
    return FoldOutcome(summary=None, decline=reason, latched=latched, called=called)


def report_summarizer_failure(
    thread: Thread, summarizer: BaseSummarizer, exc: BaseException
) -> FoldOutcome:
    """Law 4(b): one warning per process and strategy, and the decline signal."""
    ledger.warn_once(FoldPurpose.RECALL_FOLD, summarizer, exc)
    return _decline(thread, summarizer, SUMMARIZER_FAILED, called=True, error=type(exc).__name__)


def decline_not_worth_a_call(thread: Thread, summarizer: BaseSummarizer) -> FoldOutcome:
    return _decline(thread, summarizer, NOT_WORTH_A_CALL)
