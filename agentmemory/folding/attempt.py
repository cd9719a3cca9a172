"""The fold attempt: every summarizer call agentmemory makes goes through `attempt_fold`.

A recall fold, a background fold, a regenerated summary and a live-window compaction
ask the same question and judge the answer the same way: latched? its estimate reserved
against the quota (the ledger row, written before the call)? then one call (never
retried here), its ledger row settled when it fails or is refused, invisible
characters stripped, the authored label, the fact gate, smaller than the span?, the
injection flags. What passes comes back as a `Draft` for the caller to store; the
caller then settles the ledger row and sends the signal through the draft, so every
kind of fold is recorded and announced alike.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError

from agentmemory import __version__
from agentmemory.conf import DEFAULTS, memory_settings
from agentmemory.exceptions import SummarizerError, TransientSummarizerError
from agentmemory.folding import circuit as circuits
from agentmemory.folding.latches import latch_reason, latch_refusal
from agentmemory.folding.reasons import DeclineReason
from agentmemory.folding.span import Span
from agentmemory.models import CallOutcome, MemoryEntry, SummarizerCall, Thread
from agentmemory.summarizers.base import BaseSummarizer, SummaryResult
from agentmemory.transcript import forged_lines, summary_content
from agentmemory.trust import ledger
from agentmemory.trust.facts import LOST_FACTS_FLAG, check_facts, missing_facts_note
from agentmemory.trust.quarantine import injection_flags, message_flags, strip_invisible


@dataclass(frozen=True)
class Declined:
    """No fold: the reason was sent with ``fold_declined``."""

    reason: str


@dataclass(frozen=True)
class Call:
    """One summarizer call: its reserved ledger row, settled by ``record``."""

    thread: Thread
    summarizer: BaseSummarizer
    span: Span
    started: float
    attempt: int
    row: SummarizerCall

    def record(
        self,
        outcome: str,
        result: SummaryResult | None = None,
        *,
        error: BaseException | None = None,
        summary: MemoryEntry | None = None,
    ) -> None:
        ledger.settle(
            self.row, started=self.started, outcome=outcome, result=result, error=error,
            summary=summary,
        )


@dataclass(frozen=True)
class Draft(Call):
    """A summary that passed every check. ``content``: the label, the model's text, and
    the missing facts when the gate appends them. ``fact_score`` is None (and
    ``missing_facts`` empty) when no gate is set: nothing was measured."""

    result: SummaryResult
    content: str
    tokens: int
    fact_score: float | None
    missing_facts: list[str]
    flags: list[str]

    @property
    def prompt_hash(self) -> str:
        return prompt_hash(self.span.instruction)

    def provenance(self) -> dict[str, Any]:
        """What a stored fold records of how it was made, by the field names a summary's
        coverage and a window span share: the call, the checks and this library."""
        return {
            "model": self.summarizer.model,
            "prompt_hash": self.prompt_hash,
            "temperature": self.summarizer.temperature,
            "seed": self.summarizer.seed,
            "library_version": __version__,
            "prompt_tokens": self.result.prompt_tokens,
            "completion_tokens": self.result.completion_tokens,
            "fact_score": self.fact_score,
            "missing_facts": self.missing_facts,
            "injection_flags": self.flags,
        }

    def record_folded(self, summary: MemoryEntry | None = None) -> None:
        """The ledger row of the stored fold: write it in the storing transaction."""
        self.record(CallOutcome.FOLDED, self.result, summary=summary)

    def record_lost(self, error: BaseException) -> None:
        """Another fold stored this span first: the call is charged, the draft dropped."""
        self.record(CallOutcome.DECLINED, self.result, error=error)

    def record_unstored(self, error: BaseException) -> None:
        """The call was paid for but its summary could not be stored (a database error,
        the thread erased): charged with the usage its backend reported, the error
        said. When the database cannot take even that, the row stays reserved until the
        sweep settles it (`ledger.settle_abandoned`)."""
        with suppress(DatabaseError):
            self.record(CallOutcome.FAILED, self.result, error=error)

    def send_completed(self, summary: object) -> None:
        ledger.send_completed(
            self.thread,
            self.summarizer,
            purpose=self.span.purpose,
            result=self.result,
            entry_count=len(self.span.items),
            summary=summary,
        )

    def decline(self, reason: str) -> Declined:
        return decline(self.thread, self.summarizer, self.span.purpose, reason, self.result)


def attempt_fold(
    thread: Thread,
    span: Span,
    summarizer: BaseSummarizer,
    *,
    attempt: int = 1,
    raise_transient: bool = False,
    ignore_latches: bool = False,
    precondition: Callable[[], str | None] | None = None,
) -> Draft | Declined:
    """At most one summarizer call for ``span``; a `Draft` to store, or a decline.

    ``precondition`` is the caller's own check, made after the latch (which answers a
    latched span in one query) and before the quota: a reason declines without a call.
    With ``raise_transient`` (the background task), a transient failure is recorded and
    re-raised so the task can retry. ``ignore_latches``: the span is asked again on
    purpose (regenerating a summary).
    """
    purpose = span.purpose
    if not ignore_latches:
        reason = latch_reason(
            thread, purpose, span_key=span.key, start_key=span.start_key, tokens=span.tokens
        )
        if reason is not None:
            return decline(thread, summarizer, purpose, reason, latched=True)
    if precondition is not None and (reason := precondition()) is not None:
        return decline(thread, summarizer, purpose, reason)
    circuit = circuits.admit(summarizer)
    if circuit is None:  # failing for every thread: no call until its back-off has passed
        return decline(thread, summarizer, purpose, DeclineReason.SUMMARIZER_UNAVAILABLE)
    row = ledger.reserve(
        thread, summarizer, purpose=purpose, span_key=span.key, entry_count=len(span.items),
        estimated_tokens=summarizer.estimate_tokens(span.items, instruction=span.instruction),
        attempt=attempt,
    )
    if row is None:
        return decline(thread, summarizer, purpose, DeclineReason.QUOTA_EXCEEDED)

    call = Call(thread, summarizer, span, time.monotonic(), attempt, row)
    try:
        result = summarizer.summarize(span.items, instruction=span.instruction)
        if not isinstance(result, SummaryResult) or not result.text.strip():
            raise SummarizerError(f"{summarizer.model}: the answer held no summary text.")
    except Exception as exc:  # law 4(b): a broken summarizer never fails a turn or a run
        call.record(CallOutcome.FAILED, error=exc)
        circuits.failed(summarizer, circuit, exc)
        if raise_transient and isinstance(exc, TransientSummarizerError):
            raise
        return report_failure(thread, summarizer, purpose, exc)
    circuits.succeeded(summarizer, circuit)

    text = strip_invisible(result.text)
    content = summary_content(span.label(summarizer.model), text)
    fact_score: float | None = None
    missing: list[str] = []
    lost: set[str] = set()
    threshold, action = fact_gate()
    if threshold is not None:
        facts = check_facts(span.fact_texts(), text)
        fact_score, missing = facts.score, [fact.text for fact in facts.missing]
        if facts.score < threshold:
            if action == "decline":
                return _refuse(call, result, CallOutcome.REFUSED_LOST_FACTS,
                               DeclineReason.LOST_FACTS)
            if action == "append":
                content = f"{content}\n{missing_facts_note(missing)}"
            else:  # "flag": stored as written, listed for review (held with HOLD_FLAGGED)
                lost.add(LOST_FACTS_FLAG)
    tokens = span.cost(content)
    if not span.tokens.exceeds(tokens):
        return _refuse(call, result, CallOutcome.REFUSED_NOT_SMALLER, DeclineReason.NOT_SMALLER)

    flags = sorted(
        {flag for item in span.items for flag in message_flags(item)}
        | {f"output:{flag}" for flag in [*injection_flags(result.text), *forged_lines(text)]}
        | lost
    )
    return Draft(
        thread=thread, summarizer=summarizer, span=span, started=call.started, attempt=attempt,
        row=call.row, result=result, content=content, tokens=tokens, fact_score=fact_score,
        missing_facts=missing, flags=flags,
    )


def _refuse(call: Call, result: SummaryResult, outcome: str, reason: str) -> Declined:
    """A paid call whose summary is dropped; the span is latched."""
    call.record(outcome, result)
    latch_refusal(call.thread, call.span, reason, call.summarizer.model)
    return decline(call.thread, call.summarizer, call.span.purpose, reason, result)


def decline(
    thread: Thread,
    summarizer: BaseSummarizer,
    purpose: str,
    reason: str,
    result: SummaryResult | None = None,
    *,
    latched: bool = False,
    error: str = "",
) -> Declined:
    """Say out loud that a fold was not made: the ``fold_declined`` signal."""
    ledger.send_declined(
        thread, summarizer, purpose=purpose, reason=reason, result=result, latched=latched,
        error=error,
    )
    return Declined(reason)


def report_failure(
    thread: Thread, summarizer: BaseSummarizer, purpose: str, exc: BaseException
) -> Declined:
    """Law 4(b): one warning per process and strategy, and the decline signal."""
    ledger.warn_once(purpose, summarizer, exc)
    return decline(
        thread, summarizer, purpose, DeclineReason.SUMMARIZER_FAILED, error=type(exc).__name__
    )


def fact_gate() -> tuple[float | None, str]:
    """``FACT_GATE``: the threshold (None: no gate, nothing measured) and the action; a
    key left out of the dict takes its default."""
    gate = {**DEFAULTS["FACT_GATE"], **memory_settings.FACT_GATE}
    threshold = gate["THRESHOLD"]
    return (float(threshold) if threshold is not None else None), gate["ACTION"]


def prompt_hash(instruction: str) -> str:
    return hashlib.sha256(instruction.encode()).hexdigest()
