"""Recall receipts: what the model was shown at each recall, entry by entry."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import models
from django.db.models import Q
from django.utils import timezone

from agentmemory.models.entries import MemoryEntry
from agentmemory.models.threads import Thread
from agentmemory.querysets import (
    RecallReceiptQuerySet,
)


class RecallReceipt(models.Model):
    """What one recall gave the agent: the ids in order, the budget, the settings in force.

    Small on purpose: ids and token counts, never copies. The context is rebuilt from
    the rows it names, which folding and unfolding never change (summaries are retired,
    not deleted, while a receipt may still point at them). What it names is one column of
    its own row (``shown``), written with it in one statement: a row per item cost
    more than the recall it records (issue 24). Erasure finds a receipt by the positions
    it shows between (``oldest_position``, ``newest_position``), then by its ``shown`` ids.
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
    shown = models.JSONField(
        default=list, blank=True,
        help_text="What the context showed, in order: [entry id, kind, tokens] each.",
    )
    oldest_position = models.BigIntegerField(
        null=True, blank=True,
        help_text="The oldest position among the entries shown (none when it shows none).",
    )
    newest_position = models.BigIntegerField(
        null=True, blank=True,
        help_text="The newest position among the entries shown (none when it shows none).",
    )
    summary_loads = models.PositiveIntegerField(
        default=0, help_text="Summaries shown in place of their originals."
    )
    saved_tokens = models.IntegerField(
        default=0,
        help_text="Tokens of the originals those summaries stood for, less their own.",
    )
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)

    objects = RecallReceiptQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["thread", "turn"], name="agentmemory_receipt_turn"),
            models.Index(fields=["thread", "oldest_position"],
                         name="agentmemory_receipt_oldest"),
            models.Index(
                fields=["expires_at"],
                condition=Q(expires_at__isnull=False),
                name="agentmemory_receipt_expiry",
            ),
        ]

    def __str__(self) -> str:
        return f"recall at turn {self.turn} (thread {self.thread_id})"

    @property
    def items(self) -> list[ReceiptItem]:
        """The entries shown, in context order."""
        return [ReceiptItem(order, int(entry_id), str(kind), int(tokens))
                for order, (entry_id, kind, tokens) in enumerate(self.shown)]

    def entry_ids(self) -> list[int]:
        """The ids of the entries shown, in context order."""
        return [int(item[0]) for item in self.shown]



@dataclass(frozen=True, slots=True)
class ReceiptItem:
    """One entry a receipt names: its place in the context, and its kind and token count
    at recall time. Not a table: a receipt keeps its items in its own row (``shown``)."""

    order: int
    entry_id: int
    kind: str
    tokens: int

    def __str__(self) -> str:
        return f"#{self.entry_id} at {self.order}"
