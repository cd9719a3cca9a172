"""Why a fold was not made, and why a context declined or left entries out: the codes
stored and sent, and each said in words for people (`in_words`), in one place."""

from __future__ import annotations

from django.db import models


class DeclineReason(models.TextChoices):
    """The ``reason`` of ``fold_declined``, a recall's ``decline``, a compaction's
    ``refusal``, a latch's ``reason``; stored and sent as the value ("not-smaller")."""

    NOT_WORTH_A_CALL = "not-worth-a-call", "not worth a call"
    SUMMARIZER_FAILED = "summarizer-failed", "summarizer failed"
    SUMMARIZER_UNAVAILABLE = "summarizer-unavailable", "the summarizer's circuit is open"
    NOT_SMALLER = "not-smaller", "not smaller than its span"
    LOST_FACTS = "lost-facts", "lost facts"
    QUOTA_EXCEEDED = "quota-exceeded", "daily quota exceeded"
    ALREADY_FOLDED = "already-folded", "already folded"
    HELD_FOR_REVIEW = "held-for-review", "held for review"
    FOLD_IN_PROGRESS = "fold-in-progress", "another fold of the thread is running"
    FOLD_PARKED = "fold-parked", "the fold died FOLD_MAX_DEATHS times and is parked"
    TAMPERED = "tampered", "tampered"
    UNFOLDED = "unfolded", "unfolded"
    NOT_REGENERABLE = "not-regenerable", "not regenerable"


class ContextReason(models.TextChoices):
    """A recall's ``budget_decline`` (the first two: no context at all) and its
    ``omitted_reason`` (why visible entries were left out of the context)."""

    BELOW_MINIMUM = "below-minimum-tokens", "below the minimum room"
    NEWEST_TURN_TOO_LARGE = "newest-turn-too-large", "the newest turn is too large"
    OVER_BUDGET = "over-budget", "over the budget"
    MAX_ENTRIES = "max-entries", "over max_entries"
    UNPAIRED_TOOL_MESSAGE = "unpaired-tool-message", "a tool message without its pair"
    DECAYED = "decayed", "decayed"
    FOLD_PENDING = "fold-pending", "a fold is on its way"


#: What each code means, and what followed from it, for the admin's pages.
EXPLANATIONS: dict[str, str] = {
    DeclineReason.NOT_WORTH_A_CALL: "too few entries or tokens to fold yet (fewer than "
    "min_fold_entries foldable, or below the fold trigger), so no summarizer was called "
    "and the context stayed verbatim",
    DeclineReason.SUMMARIZER_FAILED: "the summarizer raised; the recall went on verbatim and "
    "the ledger holds the failed call with its error",
    DeclineReason.SUMMARIZER_UNAVAILABLE: "the summarizer failed CIRCUIT_FAILURES times in a "
    "row, so no fold calls it until its circuit's back-off ends",
    DeclineReason.NOT_SMALLER: "the summary was not shorter than the span it would replace, "
    "so it was dropped and the span latched (it is not asked again)",
    DeclineReason.LOST_FACTS: "the summary kept fewer of its span's facts than "
    "FACT_GATE's threshold, so it was dropped and the span latched",
    DeclineReason.QUOTA_EXCEEDED: "the owner's daily summarizer token quota is used up; "
    "folding resumes tomorrow or once the quota is raised",
    DeclineReason.ALREADY_FOLDED: "this span already has a summary; it was loaded, not "
    "asked for again",
    DeclineReason.HELD_FOR_REVIEW: "the summary was flagged and is held until a reviewer "
    "approves it; until then recall stays verbatim",
    DeclineReason.FOLD_IN_PROGRESS: "another fold of this thread was running, so this one "
    "did not start a second call",
    DeclineReason.FOLD_PARKED: "the background fold killed its worker FOLD_MAX_DEATHS times "
    "and is parked until an operator unparks it",
    DeclineReason.TAMPERED: "a summary or recorded window fold it would use no longer "
    "matches its signature; it was retired (or refused) and nothing was folded over it",
    DeclineReason.UNFOLDED: "a person unfolded this span's summary; the same span is folded "
    "again only once it has grown",
    DeclineReason.NOT_REGENERABLE: "only a live summary that no later summary covers can be "
    "regenerated",
    ContextReason.BELOW_MINIMUM: "the budget less the reserve is below minimum_tokens, so "
    "nothing was put in the context",
    ContextReason.NEWEST_TURN_TOO_LARGE: "the newest turn alone does not fit the room, so "
    "the recall declined instead of cutting it",
    ContextReason.OVER_BUDGET: "older entries did not fit the room and were left out",
    ContextReason.MAX_ENTRIES: "older entries were left out to keep within max_entries",
    ContextReason.UNPAIRED_TOOL_MESSAGE: "a tool call or result whose pair was not loaded "
    "was left out",
    ContextReason.DECAYED: "entries scored below the decay stage's min_score were left out",
    ContextReason.FOLD_PENDING: "older entries did not fit the room; background mode queued "
    "a fold for this room, and recall leaves them out until the worker has run",
}

LABELS: dict[str, str] = {member.value: member.label for member in [*DeclineReason, *ContextReason]}


def label(code: str) -> str:
    """``code``'s short label ("not worth a call"), or the code if this version does not
    know it."""
    return LABELS.get(code, code)


def in_words(code: str) -> str:
    """``code`` (a `DeclineReason` or `ContextReason` value) as a sentence: its label, then
    what it means; a code this version does not know is shown as it was stored."""
    if code not in LABELS:
        return code
    label = LABELS[code]
    return f"{label[0].upper()}{label[1:]}: {EXPLANATIONS[code]}."
