"""The records: fold latches, the usage ledger, summarizer circuits and owner quotas
(recall receipts have their own module)."""

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.utils.html import format_html
from django.utils.text import Truncator

from agentmemory.admin.base import ReadOnlyAdmin, figures, hash_display, thread_column
from agentmemory.admin.filters import ReasonFilter
from agentmemory.folding.reasons import in_words, label
from agentmemory.models import (
    FoldLatch,
    OwnerQuota,
    SummarizerCall,
    SummarizerCircuit,
)
from agentmemory.trust.ledger import tokens_used_today


@admin.register(FoldLatch)
class FoldLatchAdmin(ReadOnlyAdmin):
    list_display = (
        "id", thread_column, "purpose", "reason_label", "entry_count", "span_tokens", "model",
        "created_at",
    )
    list_filter = ("purpose", ("reason", ReasonFilter), "model")
    search_fields = ("span_key", "start_key", "model", "thread__client_key")
    list_select_related = ("thread",)
    fields = ("thread", "purpose", "reason_in_words", "entry_count", "span_tokens", "model",
              "span_key_shown", "start_key_shown", "created_at")
    readonly_fields = fields
    span_key_shown = hash_display("span_key", "span key")
    start_key_shown = hash_display("start_key", "start key")

    @admin.display(description="reason", ordering="reason")
    def reason_label(self, obj: FoldLatch) -> str:
        return format_html('<span title="{}">{}</span>', in_words(obj.reason), label(obj.reason))

    @admin.display(description="reason")
    def reason_in_words(self, obj: FoldLatch) -> str:
        return in_words(obj.reason)


@admin.register(SummarizerCircuit)
class SummarizerCircuitAdmin(ReadOnlyAdmin):
    """Which summarizers folds may call now: an open circuit is an outage, seen once."""

    list_display = ("model", "backend", "state", "failures", "last_error", "updated_at")
    list_filter = ("model", "backend")
    search_fields = ("model", "backend")
    fields = ("backend", "model", "state", "failures", "openings", "open_until",
              "last_error", "updated_at")
    readonly_fields = fields

    @admin.display(description="state", ordering="open_until")
    def state(self, obj: SummarizerCircuit) -> str:
        if obj.open_until is None:
            return "closed"
        return f"open: no call until {obj.open_until:%Y-%m-%d %H:%M:%S} UTC, then one probes it"


@admin.register(SummarizerCall)
class SummarizerCallAdmin(ReadOnlyAdmin):
    list_display = (
        "created_at", thread_column, "model", "outcome_attempt", "entries",
        "tokens", "took", "error", "summary_id",
    )
    list_filter = ("outcome", "purpose", "model", "backend")
    search_fields = ("model", "backend", "error_class", "span_key", "thread__client_key")
    list_select_related = ("thread",)
    date_hierarchy = "created_at"

    @admin.display(description="outcome: purpose, attempt", ordering="outcome")
    def outcome_attempt(self, obj: SummarizerCall) -> str:
        attempt = f", attempt {obj.attempt}" if obj.attempt > 1 else ""
        return f"{obj.get_outcome_display()}: {obj.get_purpose_display()}{attempt}"

    @admin.display(description="entries", ordering="entry_count")
    def entries(self, obj: SummarizerCall) -> int:
        return obj.entry_count

    @admin.display(description="took", ordering="duration_ms")
    def took(self, obj: SummarizerCall) -> str:
        return f"{obj.duration_ms} ms"

    @admin.display(description="tokens")
    def tokens(self, obj: SummarizerCall) -> str:
        """One figure a line, each named: what the call used, then what was reserved."""
        lines = []
        if obj.prompt_tokens is not None:
            lines.append(f"{obj.prompt_tokens:,} prompt")
            lines.append(f"{obj.completion_tokens or 0:,} completion")
        else:
            lines.append("none reported")
        # Shown only when the provider said: no figure is not "none were cached".
        if obj.cached_tokens is not None:
            lines.append(f"{obj.cached_tokens:,} cached")
        if obj.estimated_tokens is not None:
            lines.append(f"{obj.estimated_tokens:,} reserved")
        return figures(*lines)

    @admin.display(description="error", ordering="error_class")
    def error(self, obj: SummarizerCall) -> str:
        if not obj.error_class:
            return "-"
        # The class's own name and the message's start; both whole in the title.
        return format_html(
            '<span title="{}: {}">{}: {}</span>', obj.error_class, obj.error_message,
            obj.error_class.rpartition(".")[2], Truncator(obj.error_message).chars(40),
        )


@admin.register(OwnerQuota)
class OwnerQuotaAdmin(admin.ModelAdmin):
    list_display = ("owner", "daily_tokens", "used_today")
    raw_id_fields = ("owner",)
    search_fields = (f"owner__{get_user_model().USERNAME_FIELD}",)
    list_select_related = ("owner",)

    @admin.display(description="tokens used today")
    def used_today(self, obj: OwnerQuota) -> int:
        return tokens_used_today(obj.owner_id)

