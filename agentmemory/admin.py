"""The admin: threads, entries, summaries, folded spans and the usage ledger.

Records are read-only here. Entries are written by ``services.append`` and folding
(law 1: originals stay byte-identical), so only an entry's tier and metadata are
editable, and deleting goes through the erasure services so no summary outlives an
original it covers (law 7).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from agentmemory import services
from agentmemory.models import (
    FoldedSpan,
    FoldLatch,
    MemoryEntry,
    SummarizerCall,
    SummaryCoverage,
    Thread,
)


def _entries_url(**filters: Any) -> str:
    query = "&".join(f"{key}={value}" for key, value in filters.items())
    return f"{reverse('admin:agentmemory_memoryentry_changelist')}?{query}"


class ReadOnlyAdmin(admin.ModelAdmin):
    """A record: viewable and deletable, never written from the admin."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Thread)
class ThreadAdmin(admin.ModelAdmin):
    list_display = (
        "id", "__str__", "owner", "client_key", "last_turn", "entries_link", "updated_at",
    )
    list_display_links = ("id", "__str__")
    list_filter = ("write_tier", "window_retain", "created_at")
    search_fields = ("title", "client_key", f"owner__{get_user_model().USERNAME_FIELD}")
    list_select_related = ("owner",)
    raw_id_fields = ("owner",)
    readonly_fields = ("last_position", "last_turn", "created_at", "updated_at", "entries_link")
    fields = (
        "owner", "client_key", "title", "metadata", "ttl", "write_tier", "window_retain",
        "entries_link", "last_turn", "last_position", "created_at", "updated_at",
    )

    @admin.display(description="entries")
    def entries_link(self, obj: Thread) -> str:
        if obj.pk is None:
            return "-"
        return format_html(
            '<a href="{}">entries</a> / <a href="{}">summaries</a>',
            _entries_url(thread__id__exact=obj.pk),
            _entries_url(thread__id__exact=obj.pk, kind__exact="summary"),
        )

    def delete_model(self, request: HttpRequest, obj: Thread) -> None:
        services.erase_thread(obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Thread]) -> None:
        for thread in queryset:
            services.erase_thread(thread)


class CoveredFilter(admin.SimpleListFilter):
    title = "coverage"
    parameter_name = "covered"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("no", "visible to recall (not covered)"), ("yes", "covered by a summary")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() in ("yes", "no"):
            return queryset.filter(covered_by__isnull=self.value() == "no")
        return queryset


class SummaryCoverageInline(admin.StackedInline):
    model = SummaryCoverage
    can_delete = False
    extra = 0
    readonly_fields = (
        "from_turn", "to_turn", "entry_count", "span_tokens", "model", "summarized_at",
        "prompt_tokens", "completion_tokens",
    )

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(MemoryEntry)
class MemoryEntryAdmin(admin.ModelAdmin):
    list_display = (
        "id", "thread", "turn", "role", "kind", "short_content", "token_count", "tier",
        "covered_by", "created_at",
    )
    list_filter = ("kind", "role", "tier", CoveredFilter)
    search_fields = ("content", "summary_key", "tool_name", "tool_call_id")
    list_select_related = ("thread", "covered_by")
    ordering = ("-thread_id", "position", "id")
    fields = (
        "thread", "kind", "summary_key", "role", "turn", "position", "content", "tool_calls",
        "tool_name", "tool_call_id", "token_count", "tier", "created_at", "expires_at",
        "covered_by", "covered_entries_link", "metadata",
    )
    readonly_fields = tuple(
        name for name in fields if name not in ("tier", "metadata")
    )

    @admin.display(description="content")
    def short_content(self, obj: MemoryEntry) -> str:
        if obj.tool_calls and not obj.content:
            names = ", ".join(call.get("name", "?") for call in obj.tool_calls)
            return f"(calls {names})"
        return Truncator(obj.content).chars(90)

    @admin.display(description="covers")
    def covered_entries_link(self, obj: MemoryEntry) -> str:
        if not obj.is_summary:
            return "-"
        return format_html(
            '<a href="{}">the entries this summary covers</a>',
            _entries_url(covered_by__id__exact=obj.pk),
        )

    def get_inlines(self, request: HttpRequest, obj: MemoryEntry | None) -> list[Any]:
        return [SummaryCoverageInline] if obj is not None and obj.is_summary else []

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # entries are written by services.append, which numbers and counts them

    def delete_model(self, request: HttpRequest, obj: MemoryEntry) -> None:
        services.erase_entry(obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[MemoryEntry]) -> None:
        for entry in queryset:
            services.erase_entry(entry)


@admin.register(SummaryCoverage)
class SummaryCoverageAdmin(ReadOnlyAdmin):
    list_display = (
        "summary", "thread", "from_turn", "to_turn", "entry_count", "span_tokens", "model",
        "prompt_tokens", "completion_tokens", "summarized_at",
    )
    list_filter = ("model", "summarized_at")
    search_fields = ("summary__summary_key", "summary__content", "model")
    list_select_related = ("summary__thread",)

    @admin.display(description="thread", ordering="summary__thread")
    def thread(self, obj: SummaryCoverage) -> Thread:
        return obj.summary.thread

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # unfold by deleting the summary entry itself


@admin.register(FoldedSpan)
class FoldedSpanAdmin(ReadOnlyAdmin):
    list_display = (
        "id", "thread", "message_count", "iteration", "model", "retain", "created_at",
        "expires_at",
    )
    list_filter = ("retain", "model", "created_at")
    search_fields = ("fingerprint", "span_fingerprint", "content")
    list_select_related = ("thread",)


@admin.register(FoldLatch)
class FoldLatchAdmin(ReadOnlyAdmin):
    list_display = ("id", "thread", "purpose", "reason", "entry_count", "model", "created_at")
    list_filter = ("purpose", "reason", "model")
    search_fields = ("span_key", "model")
    list_select_related = ("thread",)


@admin.register(SummarizerCall)
class SummarizerCallAdmin(ReadOnlyAdmin):
    list_display = (
        "created_at", "thread", "purpose", "model", "outcome", "entry_count", "attempt",
        "prompt_tokens", "completion_tokens", "duration_ms", "error_class", "summary",
    )
    list_filter = ("outcome", "purpose", "model", "backend")
    search_fields = ("model", "backend", "error_class", "span_key")
    list_select_related = ("thread", "summary")
    date_hierarchy = "created_at"
