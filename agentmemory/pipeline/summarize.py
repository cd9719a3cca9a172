"""Summarize: fold the oldest loaded entries into one summary, written back once.

The plan (which span, and whether to call at all) is a pure function of the loaded
entries. The fold makes at most one summarizer call and writes the result under the
deterministic key ``msg-summary-{from}-{to}``; a unique constraint, not luck, makes
two concurrent folds of one span leave one summary.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from agentmemory.folding import (
    Declined,
    DeclineReason,
    Span,
    SpanTokens,
    attempt_fold,
    decline,
    report_failure,
)
from agentmemory.folding.latches import span_key_of
from agentmemory.models import (
    FoldPurpose,
    MemoryEntry,
    Role,
    Thread,
    summary_key,
)
from agentmemory.pipeline.config import RecallConfig
from agentmemory.pipeline.turns import turn_starts
from agentmemory.summarizers.base import BaseSummarizer
from agentmemory.transcript import MessageLike, summary_label
from agentmemory.writes.summaries import store_summary


@dataclass(frozen=True)
class FoldPlan:
    """``before``: a partial turn at the far edge of the load, left alone; ``span``: folded;
    ``kept``: the verbatim tail."""

    before: list[MemoryEntry]
    span: list[MemoryEntry]
    kept: list[MemoryEntry]
    from_turn: int
    to_turn: int
    #: Summaries of the span at MAX_SUMMARY_LEVEL: the new summary takes over what they
    #: cover and retires them, so nesting never grows past that level.
    absorbed: tuple[int, ...] = ()

    @classmethod
    def over(cls, span: list[MemoryEntry], absorbed: tuple[int, ...] = ()) -> FoldPlan:
        """A plan that folds exactly ``span``."""
        return cls(
            before=[],
            span=span,
            kept=[],
            from_turn=min(_first_turn(entry) for entry in span),
            to_turn=max(entry.turn for entry in span),
            absorbed=absorbed,
        )

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
    def message_count(self) -> int:
        """Original messages the summary stands for, through nested summaries."""
        return sum(
            (e.coverage.message_count or e.coverage.entry_count) if e.is_summary else 1
            for e in self.span
        )

    @property
    def level(self) -> int:
        """1 over messages only; one above the highest summary it covers (nesting depth)."""
        return 1 + max(
            (e.coverage.level - (e.pk in self.absorbed) for e in self.span if e.is_summary),
            default=0,
        )


@dataclass(frozen=True)
class FoldOutcome:
    """What the summarize stage did: a summary, or a decline with its reason."""

    summary: MemoryEntry | None
    decline: str | None = None
    plan: FoldPlan | None = None

    @property
    def folded(self) -> bool:
        return self.summary is not None


def _first_turn(entry: MemoryEntry) -> int:
    return entry.coverage.from_turn if entry.is_summary else entry.turn


def plan_fold(loaded: list[MemoryEntry], config: RecallConfig) -> FoldPlan | None:
    """Which span to fold, or None when a fold is not worth a call (law 4a)."""
    if config.trigger_min_entries is not None and len(loaded) < config.trigger_min_entries:
        return None
    cut = len(loaded) - config.preserve_recent
    if cut <= 0:
        return None
    starts = turn_starts(loaded)
    # Law 3: a turn cut in two keeps all of it verbatim, and so does a tool call with its
    # results; moving back for a call may land inside an older turn, so repeat until both
    # hold at once.
    while True:
        aligned = cut
        while aligned > 0 and not starts[aligned]:
            aligned -= 1
        aligned = _keep_tool_calls_with_results(loaded, aligned)
        if aligned == cut:
            break
        cut = aligned
    start = _first_whole_turn(loaded, starts, cut)
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
    return FoldPlan.over(span)


def _first_whole_turn(loaded: list[MemoryEntry], starts: list[bool], cut: int) -> int:
    """Where the first whole turn starts: the load's far edge may cut its oldest turn (and
    a tool call from its results) in two, and half a turn is never folded. Only that
    turn is in doubt: a thread without user messages (explicit turns) still folds. The
    turns skipped stay verbatim, so the span starts past the results of their calls."""
    if cut == 0 or loaded[0].is_summary or loaded[0].role == Role.USER:
        return 0
    start = next((index for index in range(1, cut) if starts[index]), cut)
    while True:
        skipped = {str(c.get("id", "")) for e in loaded[:start] for c in e.tool_calls or []}
        answered = [
            i for i in range(start, cut)
            if loaded[i].role == Role.TOOL and loaded[i].tool_call_id in skipped
        ]
        if not answered:
            return start
        start = next((i for i in range(max(answered) + 1, cut) if starts[i]), cut)


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
    """At most one summarizer call for ``plan`` (through the fold engine), and write-back.

    With ``raise_transient`` (the background task), a transient failure is recorded
    and re-raised so the task can retry; in a recall it is a decline like any other.
    With ``replacing`` (regenerating), the span is asked again on purpose, and the
    summary it replaces is retired in the same transaction that writes the new one:
    until then it stays live, so a refused or failed call leaves it in place.
    """
    # No ordering: the default one would steer SQLite off the versions index.
    same_key = MemoryEntry.objects.filter(thread=thread, summary_key=plan.key).order_by()
    if replacing is not None:
        same_key = same_key.exclude(pk=replacing.pk)
    versions: list[datetime | None] = []

    def not_folded_yet() -> str | None:
        versions.extend(same_key.values_list("retired_at", flat=True))
        # A live summary holds this key: the write-back could only hit the unique
        # constraint, so a call now would be paid for nothing.
        return DeclineReason.ALREADY_FOLDED if None in versions else None

    draft = attempt_fold(
        thread, _span_of(plan, config), summarizer, attempt=attempt,
        raise_transient=raise_transient, ignore_latches=replacing is not None,
        precondition=not_folded_yet,
    )
    if isinstance(draft, Declined):
        return FoldOutcome(summary=None, decline=draft.reason)
    version = len(versions) + 1 + (replacing is not None)
    summary = store_summary(plan, config, draft, version, replacing=replacing)
    if summary is None:
        # Another worker folded this span first; its summary is the one that counts.
        return FoldOutcome(summary=None, decline=draft.decline(DeclineReason.ALREADY_FOLDED).reason)
    draft.send_completed(summary)
    if summary.held_at is not None:
        # Held for review: stored and listed for staff, but recall stays verbatim.
        return FoldOutcome(summary=None, decline=DeclineReason.HELD_FOR_REVIEW)
    return FoldOutcome(summary=summary, plan=plan)


def _span_of(plan: FoldPlan, config: RecallConfig) -> Span:
    def label(model: str) -> str:
        del model  # provenance is on the coverage row; the label names no model
        return summary_label(
            from_turn=plan.from_turn, to_turn=plan.to_turn, message_count=plan.message_count,
        )

    return Span(
        purpose=FoldPurpose.RECALL_FOLD,
        items=plan.span,
        key=plan.span_key,
        start_key=plan.start_key,
        tokens=SpanTokens([plan.span_tokens]),
        instruction=config.instruction,
        label=label,
        is_summary=_is_summary,
    )


def _is_summary(entry: MessageLike) -> bool:
    return isinstance(entry, MemoryEntry) and entry.is_summary


def report_summarizer_failure(
    thread: Thread, summarizer: BaseSummarizer, exc: BaseException
) -> FoldOutcome:
    """Law 4(b): one warning per process and strategy, and the decline signal."""
    declined = report_failure(thread, summarizer, FoldPurpose.RECALL_FOLD, exc)
    return FoldOutcome(summary=None, decline=declined.reason)


def decline_not_worth_a_call(thread: Thread, summarizer: BaseSummarizer) -> FoldOutcome:
    declined = decline(thread, summarizer, FoldPurpose.RECALL_FOLD, DeclineReason.NOT_WORTH_A_CALL)
    return FoldOutcome(summary=None, decline=declined.reason)
