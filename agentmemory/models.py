"""The tables. Schema never depends on a setting; a thread's policy reads the settings
only when asked (`Thread.effective_ttl`...)."""

from __future__ import annotations

from datetime import timedelta
from typing import ClassVar

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from agentmemory.choices import CallOutcome
from agentmemory.conf import memory_settings
from agentmemory.querysets import (
    FoldedSpanQuerySet,
    MemoryEntryQuerySet,
    RecallReceiptQuerySet,
    SummarizerCallQuerySet,
    ThreadQuerySet,
)

SUMMARY_KEY_PREFIX = "msg-summary-"


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



def summary_key(from_turn: int, to_turn: int) -> str:
    """The deterministic key a fold over ``[from_turn, to_turn]`` is stored under."""
    return f"{SUMMARY_KEY_PREFIX}{from_turn}-{to_turn}"


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
        if self.ttl is not None:
            return self.ttl
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

    @property
    def is_summary(self) -> bool:
        return self.kind == EntryKind.SUMMARY


MemoryEntryManager = models.Manager.from_queryset(MemoryEntryQuerySet)


class SummaryManager(MemoryEntryManager[MemoryEntry]):
    def get_queryset(self) -> MemoryEntryQuerySet:
        # from_queryset managers return their queryset class; django-stubs types the
        # inherited get_queryset() as a plain QuerySet.
        return super().get_queryset().filter(kind=EntryKind.SUMMARY)  # type: ignore[return-value]


class Summary(MemoryEntry):
    """Summaries only: the same rows as MemoryEntry, for their own admin pages."""

    objects: ClassVar[SummaryManager] = SummaryManager()

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


class SummaryCoverage(models.Model):
    """What one summary stands for. The covered rows point back through ``covered_by``."""

    summary = models.OneToOneField(
        MemoryEntry, on_delete=models.CASCADE, primary_key=True, related_name="coverage"
    )
    from_turn = models.PositiveIntegerField()
    to_turn = models.PositiveIntegerField()
    entry_count = models.PositiveIntegerField()
    span_tokens = models.PositiveIntegerField(help_text="Tokens of the entries it replaced.")
    model = models.CharField(max_length=200)
    summarized_at = models.DateTimeField(default=timezone.now)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
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
    # Provenance (how it was made) and its keyed fingerprint (that it was not edited).
    version = models.PositiveIntegerField(default=1)
    prompt_hash = models.CharField(max_length=64, blank=True, default="")
    temperature = models.FloatField(null=True, blank=True)
    seed = models.IntegerField(null=True, blank=True)
    library_version = models.CharField(max_length=32, blank=True, default="")
    signature = models.CharField(max_length=80, blank=True, default="")
    tampered_at = models.DateTimeField(null=True, blank=True)
    # The fact-retention gate and the injection quarantine.
    fact_score = models.FloatField(null=True, blank=True)
    missing_facts = models.JSONField(default=list, blank=True)
    injection_flags = models.JSONField(default=list, blank=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        verbose_name_plural = "summary coverages"

    def __str__(self) -> str:
        return f"turns {self.from_turn}-{self.to_turn} ({self.entry_count} entries)"


class FoldedSpan(models.Model):
    """The record of one live-window compaction, joined to its message by fingerprint."""

    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="folded_spans")
    fingerprint = models.CharField(max_length=64, help_text="Hash of the whole summary message.")
    span_fingerprint = models.CharField(
        max_length=64, help_text="Hash of the folded messages, every field of each."
    )
    content = models.TextField(help_text="The summary message, label included.")
    message_count = models.PositiveIntegerField()
    iteration = models.PositiveIntegerField(default=0)
    model = models.CharField(max_length=200)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    retain = models.CharField(max_length=16, choices=RetainPolicy.choices)
    messages = models.JSONField(
        null=True, blank=True, help_text="The folded messages; empty when not retained."
    )
    prompt_hash = models.CharField(max_length=64, blank=True, default="")
    temperature = models.FloatField(null=True, blank=True)
    seed = models.IntegerField(null=True, blank=True)
    library_version = models.CharField(max_length=32, blank=True, default="")
    signature = models.CharField(max_length=80, blank=True, default="")
    tampered_at = models.DateTimeField(null=True, blank=True)
    fact_score = models.FloatField(null=True, blank=True)
    missing_facts = models.JSONField(default=list, blank=True)
    injection_flags = models.JSONField(default=list, blank=True)
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
