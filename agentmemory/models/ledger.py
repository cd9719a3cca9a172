"""The usage ledger: one row per summarizer call, and each backend's circuit."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from agentmemory.choices import CallOutcome, FoldPurpose
from agentmemory.models.entries import MemoryEntry
from agentmemory.models.threads import Thread
from agentmemory.querysets import (
    SummarizerCallQuerySet,
)


class SummarizerCall(models.Model):
    """The usage ledger: one row per summarizer call, whatever its outcome."""

    thread = models.ForeignKey(
        Thread, null=True, blank=True, on_delete=models.SET_NULL, related_name="summarizer_calls"
    )
    # Kept apart from the thread so quotas and totals survive the thread's erasure.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    summary = models.ForeignKey(
        MemoryEntry, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    purpose = models.CharField(max_length=16, choices=FoldPurpose.choices)
    backend = models.CharField(max_length=200)
    model = models.CharField(max_length=200)
    span_key = models.CharField(max_length=64, blank=True, default="")
    entry_count = models.PositiveIntegerField(default=0)
    attempt = models.PositiveSmallIntegerField(default=1)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    cached_tokens = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="The prompt tokens the provider reports it read from its prompt cache; "
        "empty when the response does not say.",
    )
    duration_ms = models.PositiveIntegerField(default=0)
    outcome = models.CharField(max_length=24, choices=CallOutcome.choices)
    error_class = models.CharField(max_length=200, blank=True, default="")
    error_message = models.CharField(
        max_length=300,
        blank=True,
        default="",
        help_text="The failure, redacted: class, HTTP status, provider error code and type; "
        "never a key or the provider's text.",
    )
    estimated_tokens = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="The tokens reserved against the owner's quota before the call.",
    )
    created_at = models.DateTimeField(default=timezone.now)

    objects = SummarizerCallQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "summarizer call"
        indexes = [
            models.Index(fields=["thread", "created_at"], name="agentmemory_ledger_thread"),
            models.Index(fields=["owner", "created_at"], name="agentmemory_ledger_owner"),
            # The sweep's look for calls whose attempt died (`ledger.settle_abandoned`).
            models.Index(fields=["created_at"], condition=models.Q(outcome="reserved"),
                         name="agentmemory_ledger_reserved"),
        ]

    def __str__(self) -> str:
        return f"{self.model} {self.outcome} ({self.purpose})"


class SummarizerCircuit(models.Model):
    """Whether one summarizer backend and model may be called: its failed calls in a row
    and, once they reach CIRCUIT_FAILURES, until when no fold calls it
    (`agentmemory.folding.circuit`)."""

    backend = models.CharField(max_length=200)
    model = models.CharField(max_length=200)
    failures = models.PositiveIntegerField(default=0, help_text="Failed calls in a row.")
    openings = models.PositiveIntegerField(
        default=0, help_text="Times it opened in a row: each doubles the back-off."
    )
    open_until = models.DateTimeField(
        null=True, blank=True,
        help_text="No call before this; then one call probes it. Empty: closed.",
    )
    last_error = models.CharField(max_length=300, blank=True, default="")
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "summarizer circuit"
        constraints = [
            models.UniqueConstraint(fields=["backend", "model"], name="agentmemory_circuit_once")
        ]

    def __str__(self) -> str:
        return f"{self.model} ({'open' if self.open_until else 'closed'})"
