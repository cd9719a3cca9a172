"""Entries: the messages and summaries of a thread, what a summary stands for
(`SummarySource`) and what it records of its fold (`SummaryCoverage`); the choices
their columns take."""

from __future__ import annotations

from typing import ClassVar

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone
from django.utils.functional import cached_property

from agentmemory.choices import EntryKind, Role, Tier
from agentmemory.models.provenance import FoldProvenance
from agentmemory.models.threads import Thread
from agentmemory.querysets import (
    MemoryEntryQuerySet,
)

SUMMARY_KEY_PREFIX = "msg-summary-"


def summary_key(from_turn: int, to_turn: int) -> str:
    """The deterministic key a fold over ``[from_turn, to_turn]`` is stored under."""
    return f"{SUMMARY_KEY_PREFIX}{from_turn}-{to_turn}"


def summary_handle(key: str) -> str:
    """The handle a summary's label shows and the memory tools take: the turns it stands
    for, ``from-to`` (its key without the prefix; a key shorter by a prefix is paid for
    less on every turn the label is in a context)."""
    return key.removeprefix(SUMMARY_KEY_PREFIX)


def key_of_handle(handle: str) -> str:
    """The key a handle names: a label's turns (``3-17``) or the whole key."""
    return handle if handle.startswith(SUMMARY_KEY_PREFIX) else f"{SUMMARY_KEY_PREFIX}{handle}"


class MemoryEntry(models.Model):
    """One message of a thread, or a summary standing in for several of them."""

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="entries")
    kind = models.CharField(max_length=8, choices=EntryKind.choices, default=EntryKind.MESSAGE)
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.TextField(blank=True)
    tool_calls = models.JSONField(default=list, blank=True)
    tool_name = models.CharField(max_length=200, blank=True, default="")
    tool_call_id = models.CharField(max_length=200, blank=True, default="")
    turn = models.PositiveIntegerField()
    position = models.BigIntegerField(help_text="Orders the thread; a summary takes the "
                                      "position of the newest entry it covers.")
    tier = models.CharField(max_length=8, choices=Tier.choices, default=Tier.HOT)
    token_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(
        default=timezone.now,
        help_text="For a summary: the time of the newest entry it covers (the span's clock).",
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    # NULL, not "", for messages: the unique (thread, summary_key) must ignore them.
    summary_key = models.CharField(  # noqa: DJ001
        max_length=64, null=True, blank=True, editable=False
    )
    retired_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="Summaries only: unfolded, regenerated or found tampered. Kept readable "
        "(receipts and older versions point at it), never recalled, covers nothing.",
    )
    held_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="Summaries only: flagged for review and held back from recall (it covers "
        "nothing until approved).",
    )
    # The live coverage link: the one thing that hides an original from recall. It names
    # the exact row, never a turn range; unfolding sets it back to NULL. What a summary
    # stood for stays recorded in SummarySource, which outlives the link.
    covered_by = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="covered_entries",
        editable=False,
    )

    objects = MemoryEntryQuerySet.as_manager()

    class Meta:
        ordering = ["position", "id"]
        verbose_name = "memory entry"
        verbose_name_plural = "memory entries"
        indexes = [
            # Recall reads the newest uncovered rows of one thread: a partial index
            # holds only those, so the read stays short however long the thread is.
            # (Made wider to cover recall's count, it looked dearer than the order index
            # below to PostgreSQL before ANALYZE: tests/test_query_plan.py.)
            models.Index(
                fields=["thread", "-position", "-id"],
                condition=Q(covered_by__isnull=True),
                name="agentmemory_entry_visible",
            ),
            # Every row of a thread in order: API pages, the timeline, summaries. With the
            # id it is as wide as the partial index above. Narrower, it looked cheaper to
            # SQLite for recall's load until ANALYZE had run, and the load walked past
            # every covered row of a folded thread (tests/test_query_plan.py).
            models.Index(fields=["thread", "position", "id"], name="agentmemory_entry_order"),
            # A thread's uncovered summaries: a short load reads those older than its
            # newest rows without walking every row of a long unfolded thread.
            models.Index(
                fields=["thread", "-position", "-id"],
                condition=Q(kind="summary", covered_by__isnull=True),
                name="agentmemory_entry_summaries",
            ),
            # Every version of one summary key, retired ones too: the fold counts them.
            models.Index(
                fields=["thread", "summary_key"],
                condition=Q(summary_key__isnull=False),
                name="agentmemory_summary_versions",
            ),
            models.Index(
                fields=["expires_at"],
                condition=Q(expires_at__isnull=False),
                name="agentmemory_entry_expiry",
            ),
        ]
        constraints = [
            # One live summary per key; retired versions keep theirs. Only summaries
            # have a key: the index holds none of a thread's messages, so no append
            # writes to it, and PostgreSQL, before ANALYZE, cannot take it for the way
            # to a thread's rows (a bitmap over a 1,000,000-message thread, 40 ms).
            models.UniqueConstraint(
                fields=["thread", "summary_key"],
                condition=Q(retired_at__isnull=True, summary_key__isnull=False),
                name="agentmemory_summary_key_unique",
            ),
            models.CheckConstraint(
                condition=(Q(kind=EntryKind.SUMMARY) & Q(summary_key__isnull=False))
                | (Q(kind=EntryKind.MESSAGE) & Q(summary_key__isnull=True)),
                name="agentmemory_summary_has_key",
            ),
        ]
        permissions = [("expand_summary", "Can expand a summary into its originals")]

    def __str__(self) -> str:
        if self.kind == EntryKind.SUMMARY:
            return f"{self.summary_key} (thread {self.thread_id})"
        return f"turn {self.turn} {self.role} #{self.pk}"

    @cached_property
    def is_summary(self) -> bool:
        # Cached: a recall asks it a dozen times an entry, and an entry's kind never changes.
        return self.kind == EntryKind.SUMMARY


MemoryEntryManager = models.Manager.from_queryset(MemoryEntryQuerySet)


class SummaryManager(MemoryEntryManager[MemoryEntry]):
    def get_queryset(self) -> MemoryEntryQuerySet:
        # from_queryset managers return their queryset class; django-stubs types the
        # inherited get_queryset() as a plain QuerySet.
        return super().get_queryset().filter(kind=EntryKind.SUMMARY)  # type: ignore[return-value]


class Summary(MemoryEntry):
    """Summaries only: the same rows as MemoryEntry, for their own admin pages."""

    # django-stubs types a proxy's manager by its parent's when they are in a package.
    objects: ClassVar[SummaryManager] = SummaryManager()  # type: ignore[assignment]

    class Meta:
        proxy = True
        verbose_name = "summary"
        verbose_name_plural = "summaries"


class SummarySource(models.Model):
    """One entry a summary stands for. Written with the fold and never changed, so a
    retired summary can still be expanded and erasure finds every summary derived from
    an entry, live or retired."""

    summary = models.ForeignKey(MemoryEntry, on_delete=models.CASCADE, related_name="sources")
    entry = models.ForeignKey(MemoryEntry, on_delete=models.CASCADE, related_name="summarized_in")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["summary", "entry"], name="agentmemory_source_once")
        ]

    def __str__(self) -> str:
        return f"#{self.summary_id} stands for #{self.entry_id}"


class SummaryCoverage(FoldProvenance):
    """What one summary stands for. The covered rows point back through ``covered_by``."""

    summary = models.OneToOneField(
        MemoryEntry, on_delete=models.CASCADE, primary_key=True, related_name="coverage"
    )
    from_turn = models.PositiveIntegerField()
    to_turn = models.PositiveIntegerField()
    entry_count = models.PositiveIntegerField()
    span_tokens = models.PositiveIntegerField(help_text="Tokens of the entries it replaced.")
    summarized_at = models.DateTimeField(default=timezone.now)
    original_tokens = models.PositiveIntegerField(
        default=0, help_text="Tokens of the messages it stands for, through nested summaries."
    )
    message_count = models.PositiveIntegerField(
        default=0, help_text="Original messages it stands for, through nested summaries (its "
        "label says so)."
    )
    level = models.PositiveSmallIntegerField(
        default=1,
        help_text="1: folded from messages only; n + 1: folded from summaries of level n "
        "or lower (the nesting depth).",
    )
    # Which write of this span it is (a regeneration is the next), and its review.
    version = models.PositiveIntegerField(default=1)
    reviewed_at = models.DateTimeField(null=True, blank=True)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        verbose_name_plural = "summary coverages"

    def __str__(self) -> str:
        return f"turns {self.from_turn}-{self.to_turn} ({self.entry_count} entries)"
