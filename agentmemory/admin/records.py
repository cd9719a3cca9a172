"""The records: fold latches, the usage ledger, summarizer circuits, recall receipts,
and owner quotas."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models import QuerySet, Value
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from agentmemory.admin.base import ReadOnlyAdmin, hash_display, links, thread_column
from agentmemory.admin.filters import ExpiredFilter
from agentmemory.admin.text import expandable, may_read
from agentmemory.models import (
    EntryKind,
    FoldLatch,
    OwnerQuota,
    RecallReceipt,
    SummarizerCall,
    SummarizerCircuit,
)
from agentmemory.trust.ledger import tokens_used_today
from agentmemory.trust.replay import replay


@admin.register(FoldLatch)
class FoldLatchAdmin(ReadOnlyAdmin):
    list_display = (
        "id", thread_column, "purpose", "reason", "entry_count", "span_tokens", "model",
        "created_at",
    )
    list_filter = ("purpose", "reason", "model")
    search_fields = ("span_key", "start_key", "model", "thread__client_key")
    list_select_related = ("thread",)
    fields = ("thread", "purpose", "reason", "entry_count", "span_tokens", "model",
              "span_key_shown", "start_key_shown", "created_at")
    readonly_fields = fields
    span_key_shown = hash_display("span_key", "span key")
    start_key_shown = hash_display("start_key", "start key")


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

    @admin.display(description="tokens: reserved, prompt + completion (cached)")
    def tokens(self, obj: SummarizerCall) -> str:
        reserved = "-" if obj.estimated_tokens is None else obj.estimated_tokens
        used = (f"{obj.prompt_tokens} + {obj.completion_tokens or 0}"
                if obj.prompt_tokens is not None else "-")
        # Shown only when the provider said: no figure is not "none were cached".
        cached = f" ({obj.cached_tokens} cached)" if obj.cached_tokens is not None else ""
        return f"{reserved}; {used}{cached}"

    @admin.display(description="error", ordering="error_class")
    def error(self, obj: SummarizerCall) -> str:
        if not obj.error_class:
            return "-"
        # The class's own name and the message's start; both whole in the title.
        return format_html(
            '<span title="{}: {}">{}: {}</span>', obj.error_class, obj.error_message,
            obj.error_class.rpartition(".")[2], Truncator(obj.error_message).chars(40),
        )


@admin.register(RecallReceipt)
class RecallReceiptAdmin(ReadOnlyAdmin):
    # Its stylesheet wraps the context as sent, which has lines of any length.
    change_form_template = "agentmemory/admin/receipt_change_form.html"
    list_display = ("id", thread_column, "turn", "budget_tokens", "tokens", "decline",
                    "budget_decline", "created_at")
    list_filter = ("decline", "budget_decline", ExpiredFilter)
    search_fields = ("thread__client_key", "thread__title")
    list_select_related = ("thread",)
    raw_id_fields = ("thread",)
    date_hierarchy = "created_at"
    fields = ("thread", "turn", "budget_tokens", "tokens", "decline", "budget_decline",
              "config", "created_at", "expires_at", "context_as_sent")
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[RecallReceipt]:
        # Which pages the items may link ride on the row, like the permission itself.
        pages = links(request, self.admin_site)
        return super().get_queryset(request).annotate(
            expandable=expandable(request),
            link_entries=Value(pages["entries"]),
            link_summaries=Value(pages["summaries"]),
        )

    @admin.display(description="the context exactly as sent")
    def context_as_sent(self, obj: RecallReceipt) -> str:
        """Each item links to its entry, or to its summary's expand view (its page without
        the permission); the text only to those who may expand (it can hold originals
        that a summary now hides). No link to a page this user may not open."""
        items = obj.items.select_related("entry").order_by("order")
        summary_view = "expand" if may_read(obj) else "change"

        def item_link(item: Any) -> str:
            if item.kind == EntryKind.SUMMARY and getattr(obj, "link_summaries", False):
                url = reverse(f"admin:agentmemory_summary_{summary_view}", args=[item.entry_id])
            elif item.kind != EntryKind.SUMMARY and getattr(obj, "link_entries", False):
                url = reverse("admin:agentmemory_memoryentry_change", args=[item.entry_id])
            else:
                return format_html("#{}", item.entry_id)
            return format_html('<a href="{}">#{}</a>', url, item.entry_id)

        rows = format_html_join(
            "",
            "<li>{} {} · {} tokens</li>",
            (
                (
                    item_link(item),
                    item.entry.summary_key if item.kind == EntryKind.SUMMARY else item.entry.role,
                    item.tokens,
                )
                for item in items
            ),
        )
        if not may_read(obj):
            return format_html(
                '<ol class="am-receipt">{}</ol><p class="am-withheld">The text is withheld: it '
                "can hold originals that a summary now hides, and reading them needs "
                "permission.</p>",
                rows,
            )
        return format_html('<ol class="am-receipt">{}</ol><pre class="am-receipt-text">{}</pre>',
                           rows, replay(obj).text)


@admin.register(OwnerQuota)
class OwnerQuotaAdmin(admin.ModelAdmin):
    list_display = ("owner", "daily_tokens", "used_today")
    raw_id_fields = ("owner",)
    search_fields = (f"owner__{get_user_model().USERNAME_FIELD}",)
    list_select_related = ("owner",)

    @admin.display(description="tokens used today")
    def used_today(self, obj: OwnerQuota) -> int:
        return tokens_used_today(obj.owner_id)

