"""Choices that the models and their querysets both name (querysets cannot import the
models, which import them)."""

from __future__ import annotations

from django.db import models


class CallOutcome(models.TextChoices):
    # Written before the call with the quota's estimate; settled to another outcome after.
    RESERVED = "reserved", "reserved (call in flight)"
    FOLDED = "folded", "folded"
    DECLINED = "declined", "declined"
    REFUSED_NOT_SMALLER = "refused-not-smaller", "refused: not smaller"
    REFUSED_LOST_FACTS = "refused-lost-facts", "refused: lost facts"
    FAILED = "failed", "failed"
    # The attempt died during the call (its worker killed, its lease lapsed): settled by
    # whoever found it so, its estimate kept as its cost.
    KILLED = "killed", "killed (the attempt died)"
