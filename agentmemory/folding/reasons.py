"""Why a fold was not made: one list, for recall folds and window folds alike."""

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
