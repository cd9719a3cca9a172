"""The choices of the models' columns, apart from the models so that the querysets and
every model module can name them (querysets cannot import the models, which import them)."""

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


class Role(models.TextChoices):
    USER = "user", "user"
    ASSISTANT = "assistant", "assistant"
    SYSTEM = "system", "system"
    TOOL = "tool", "tool"


class Tier(models.TextChoices):
    HOT = "hot", "hot"
    WARM = "warm", "warm"
    COLD = "cold", "cold"


class EntryKind(models.TextChoices):
    MESSAGE = "message", "message"
    SUMMARY = "summary", "summary"


class RetainPolicy(models.TextChoices):
    CONVERSATION = "conversation", "retained with the conversation"
    DISCARD = "discard", "not retained"


class FoldPurpose(models.TextChoices):
    RECALL_FOLD = "recall-fold", "recall fold"
    WINDOW_FOLD = "window-fold", "window fold"
