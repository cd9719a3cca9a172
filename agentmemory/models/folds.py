"""The fold's own records: window spans (`FoldedSpan`) and what they folded
(`SpanSource`), and the latches that keep a refused span from being asked again."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from agentmemory.choices import FoldPurpose, RetainPolicy
from agentmemory.models.entries import MemoryEntry
from agentmemory.models.provenance import FoldProvenance
from agentmemory.models.threads import Thread
from agentmemory.querysets import (
    FoldedSpanQuerySet,
)


class FoldedSpan(FoldProvenance):
    """The record of one live-window compaction, joined to its message by fingerprint."""

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="folded_spans")
    fingerprint = models.CharField(max_length=64, help_text="Hash of the whole summary message.")
    span_fingerprint = models.CharField(
        max_length=64, help_text="Hash of the folded messages, every field of each."
    )
    content = models.TextField(help_text="The summary message, label included.")
    message_count = models.PositiveIntegerField()
    iteration = models.PositiveIntegerField(default=0)
    retain = models.CharField(max_length=16, choices=RetainPolicy.choices)
    messages = models.JSONField(
        null=True, blank=True, help_text="The folded messages; empty when not retained."
    )
    nested_spans = models.ManyToManyField(
        "self",
        symmetrical=False,
        blank=True,
        related_name="swallowed_by",
        help_text="Earlier folds whose summary message this fold swallowed.",
    )
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)

    objects = FoldedSpanQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["thread", "fingerprint"], name="agentmemory_span_lookup")]
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "span_fingerprint"], name="agentmemory_span_once"
            )
        ]

    def __str__(self) -> str:
        return f"fold of {self.message_count} messages (thread {self.thread_id})"


class SpanSource(models.Model):
    """One message a window fold folded, recorded with the fold whatever ``retain`` was.

    ``entry`` names each entry of the thread that was this exact message when the fold
    was made; ``digest`` (a hash of the message, never its text) finds an entry appended
    after the fold. Erasure follows these rows, never the span's stored text.
    """

    span = models.ForeignKey(FoldedSpan, on_delete=models.CASCADE, related_name="sources")
    position = models.PositiveIntegerField(help_text="The message's place in the folded span.")
    entry = models.ForeignKey(
        MemoryEntry, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    digest = models.CharField(max_length=64, help_text="Hash of role, content and tool fields.")

    class Meta:
        ordering = ["span", "position", "id"]
        indexes = [models.Index(fields=["digest"], name="agentmemory_span_source_digest")]

    def __str__(self) -> str:
        return f"span #{self.span_id} message {self.position}"


class FoldLatch(models.Model):
    """A span the summarizer already refused on; the same span is never asked again."""

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="fold_latches")
    purpose = models.CharField(max_length=16, choices=FoldPurpose.choices)
    span_key = models.CharField(max_length=64, help_text="Hash of the span's exact entry ids.")
    start_key = models.CharField(
        max_length=64,
        blank=True,
        default="",
        help_text="The span's first item: a refused span backs off every span that starts "
        "there until it has twice the tokens.",
    )
    span_tokens = models.PositiveIntegerField(default=0)
    reason = models.CharField(max_length=32)
    entry_count = models.PositiveIntegerField()
    model = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "fold latches"
        indexes = [
            models.Index(
                fields=["thread", "purpose", "start_key"], name="agentmemory_latch_start"
            )
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["thread", "purpose", "span_key"], name="agentmemory_latch_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.reason} latch on {self.entry_count} entries (thread {self.thread_id})"
