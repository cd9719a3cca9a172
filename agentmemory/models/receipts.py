"""Recall receipts: what the model was shown at each recall, entry by entry."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from agentmemory.choices import EntryKind
from agentmemory.models.entries import MemoryEntry
from agentmemory.models.threads import Thread
from agentmemory.querysets import (
    RecallReceiptQuerySet,
)


class RecallReceipt(models.Model):
    """What one recall gave the agent: the ids in order, the budget, the settings in force.

    Small on purpose: ids and token counts, never copies. The context is rebuilt from
    the rows it names, which folding and unfolding never change (summaries are retired,
    not deleted, while a receipt may still point at them).
    """

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="receipts")
    turn = models.PositiveIntegerField(help_text="The thread's latest turn at recall time.")
    budget_tokens = models.PositiveIntegerField()
    tokens = models.PositiveIntegerField(help_text="Tokens of the formatted context.")
    decline = models.CharField(max_length=32, blank=True, default="")
    budget_decline = models.CharField(max_length=32, blank=True, default="")
    omitted = models.PositiveIntegerField(
        default=0, help_text="Visible entries of the thread the context left out."
    )
    omitted_reason = models.CharField(max_length=32, blank=True, default="")
    folded_summary = models.ForeignKey(
        MemoryEntry, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    config = models.JSONField(default=dict, help_text="The recall settings in force.")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)

    objects = RecallReceiptQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["thread", "turn"], name="agentmemory_receipt_turn"),
            models.Index(
                fields=["expires_at"],
                condition=Q(expires_at__isnull=False),
                name="agentmemory_receipt_expiry",
            ),
        ]

    def __str__(self) -> str:
        return f"recall at turn {self.turn} (thread {self.thread_id})"


class ReceiptItem(models.Model):
    # No database constraint or index of its own: an item is only ever written in the
    # statement (or transaction) that writes its receipt, and deleted with it by Django's
    # cascade; a constraint would check the same receipt row again for every item at
    # commit (2.5 ms for a context of 776 messages on PostgreSQL). The unique (receipt,
    # order) index serves every lookup by receipt.
    receipt = models.ForeignKey(
        RecallReceipt, on_delete=models.CASCADE, related_name="items",
        db_constraint=False, db_index=False,
    )
    entry = models.ForeignKey(MemoryEntry, on_delete=models.CASCADE, related_name="+")
    order = models.PositiveIntegerField()
    kind = models.CharField(max_length=8, choices=EntryKind.choices)
    tokens = models.PositiveIntegerField()

    class Meta:
        ordering = ["receipt", "order"]
        constraints = [
            models.UniqueConstraint(fields=["receipt", "order"], name="agentmemory_item_order")
        ]

    def __str__(self) -> str:
        return f"#{self.entry_id} at {self.order}"
