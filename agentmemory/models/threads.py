"""Threads (one conversation, its owner and its policy) and owners' quotas."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from agentmemory.choices import RetainPolicy, Tier
from agentmemory.conf import memory_settings
from agentmemory.querysets import (
    ThreadQuerySet,
)


class Thread(models.Model):
    """One conversation, with its own retention policy."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="agentmemory_threads",
        help_text="Empty for system threads.",
    )
    client_key = models.CharField(
        max_length=200,
        blank=True,
        default="",
        help_text="The caller's own name for the thread, unique per owner.",
    )
    title = models.CharField(max_length=200, blank=True, default="")
    metadata = models.JSONField(default=dict, blank=True)
    ttl = models.DurationField(
        null=True,
        blank=True,
        help_text="How long written entries live. Empty: AGENTMEMORY['DEFAULT_TTL'].",
    )
    write_tier = models.CharField(
        max_length=8,
        choices=Tier.choices,
        blank=True,
        default="",
        help_text="Tier of written entries. Empty: AGENTMEMORY['WRITE_TIER'].",
    )
    fold_budget = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="The recall budget background folds keep this thread's context within, "
        "pinned. Empty: the smallest budget the thread was recalled at in background mode "
        "(recall_budget), else AGENTMEMORY['FOLD_BUDGET'].",
    )
    recall_budget = models.PositiveIntegerField(
        null=True,
        blank=True,
        editable=False,
        help_text="The smallest budget a background recall of this thread asked for: "
        "background folds follow it unless fold_budget pins one.",
    )
    window_retain = models.CharField(
        max_length=16,
        choices=RetainPolicy.choices,
        blank=True,
        default="",
        help_text="Whether window folds keep their originals. Empty: conversation.",
    )
    # Counters advanced under the thread's row lock by append: they make turn and
    # position assignment one UPDATE instead of a scan of the thread.
    last_position = models.BigIntegerField(default=0, editable=False)
    last_turn = models.PositiveIntegerField(default=0, editable=False)
    # Advanced with them while no fold has written a summary here; NULL from the first.
    unfolded_tokens = models.BigIntegerField(
        null=True, default=0, editable=False,
        help_text="What the messages appended to this thread take of a context (each one's "
        "token count and line break), while no summary has been written in it (then empty): "
        "no more than recall could load, so an append below the fold trigger asks no "
        "fold decision.",
    )
    # Advanced by every statement that deletes this thread's entries (a PostgreSQL trigger,
    # `agentmemory.trust.receipt_schema`): a receipt written while an erasure held the row
    # lock sees it move, and names nothing that erasure took. SQLite needs none.
    erasures = models.PositiveBigIntegerField(default=0, editable=False)
    # Set while a fold of this thread runs, so a second one stands aside; its holder's
    # heartbeat renews it, and an owner left behind (the lease not released) is a death.
    fold_lease_until = models.DateTimeField(null=True, blank=True, editable=False)
    fold_lease_owner = models.CharField(max_length=64, blank=True, default="", editable=False)
    # Set while a fold task is queued or waiting to retry: one retry chain per thread.
    fold_queued_until = models.DateTimeField(null=True, blank=True, editable=False)
    fold_deaths = models.PositiveSmallIntegerField(
        default=0, editable=False,
        help_text="Fold attempts in a row whose process died holding the lease.",
    )
    fold_cooling = models.BooleanField(
        default=False, editable=False,
        help_text="The background fold ran out of retries: only the sweep sends it again, "
        "once its queued mark has lapsed.",
    )
    fold_parked_until = models.DateTimeField(
        null=True, blank=True, editable=False,
        help_text="A fold that died FOLD_MAX_DEATHS times waits for the sweep after this, "
        "or for a person to unpark it.",
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ThreadQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner", "client_key"],
                condition=~Q(client_key=""),
                name="agentmemory_thread_owner_key_unique",
            ),
            models.UniqueConstraint(
                fields=["client_key"],
                condition=Q(owner__isnull=True) & ~Q(client_key=""),
                name="agentmemory_thread_system_key_unique",
            ),
        ]

    def __str__(self) -> str:
        return self.title or self.client_key or f"thread {self.pk}"

    def effective_ttl(self) -> timedelta | None:
        """How long entries written to the thread live: its ``ttl``, or DEFAULT_TTL."""
        return self.ttl if self.ttl is not None else Thread.default_ttl()

    @staticmethod
    def default_ttl() -> timedelta | None:
        """DEFAULT_TTL as a duration: how long entries of a thread without a ``ttl`` live
        (None: until erased)."""
        default = memory_settings.DEFAULT_TTL
        if default is None or isinstance(default, timedelta):
            return default
        return timedelta(seconds=default)

    def effective_write_tier(self) -> str:
        """The tier of entries written without one: its ``write_tier``, or WRITE_TIER."""
        return self.write_tier or str(memory_settings.WRITE_TIER)

    def effective_fold_budget(self) -> int:
        """The recall budget background folds keep the thread within: its ``fold_budget``
        (pinned), else the smallest budget it was recalled at in background mode, else
        FOLD_BUDGET (a thread not recalled yet)."""
        return int(self.fold_budget or self.recall_budget or memory_settings.FOLD_BUDGET)


class OwnerQuota(models.Model):
    """A per-owner daily summarizer token quota, over AGENTMEMORY['DAILY_TOKEN_QUOTA']."""

    owner = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="agentmemory_quota"
    )
    daily_tokens = models.PositiveIntegerField(
        null=True, blank=True, help_text="Empty: no limit for this owner."
    )

    def __str__(self) -> str:
        if self.daily_tokens is None:
            return f"{self.owner}: unlimited"
        return f"{self.owner}: {self.daily_tokens} tokens a day"
