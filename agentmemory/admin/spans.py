"""Folded spans: each live-window compaction, and its expand page."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404

from agentmemory.admin.base import (
    OriginalsLookupGuard,
    PagesAdmin,
    ReadOnlyAdmin,
    figures,
    hash_display,
    thread_column,
)
from agentmemory.admin.filters import ExpiredFilter
from agentmemory.admin.text import (
    expandable,
    may_read,
    readable_text,
    shown_missing_facts,
    shown_text,
    split_summary,
)
from agentmemory.models import FoldedSpan
from agentmemory.permissions import expand_refusal
from agentmemory.window.lookup import expand_span


@admin.register(FoldedSpan)
class FoldedSpanAdmin(ReadOnlyAdmin, OriginalsLookupGuard, PagesAdmin):
    pages = {"expand": "Expanding"}
    list_display = (
        "id", "expand_link", thread_column, "message_count", "iteration", "model", "retain",
        "call_tokens", "created_at",
    )
    list_filter = ("retain", "model", ExpiredFilter)
    search_fields = ("fingerprint", "span_fingerprint", "readable_content", "thread__client_key")
    list_select_related = ("thread",)
    date_hierarchy = "created_at"
    # The messages are shown by the expand view; the summary message's fact note and the
    # missing facts are the originals' text too.
    original_fields = ("messages", "content", "missing_facts")
    fields = (
        "thread", "shown_content", "message_count", "iteration", "model", "retain",
        "prompt_tokens", "completion_tokens", "fact_score", "missing_facts_shown",
        "injection_flags", "fingerprint_shown", "span_fingerprint_shown", "prompt_hash_shown",
        "temperature", "seed", "library_version", "signature_shown", "tampered_at",
        "created_at", "expires_at", "expand_link",
    )
    readonly_fields = fields
    fingerprint_shown = hash_display("fingerprint", "fingerprint")
    span_fingerprint_shown = hash_display("span_fingerprint", "span fingerprint")
    prompt_hash_shown = hash_display("prompt_hash", "prompt hash")
    signature_shown = hash_display("signature", "signature")

    def get_queryset(self, request: HttpRequest) -> QuerySet[FoldedSpan]:
        return super().get_queryset(request).annotate(
            expandable=expandable(request), readable_content=readable_text(request, "content")
        )

    @admin.display(description="summary message")
    def shown_content(self, obj: FoldedSpan) -> str:
        return shown_text(obj, obj.content)

    @admin.display(description="missing facts")
    def missing_facts_shown(self, obj: FoldedSpan) -> str:
        return shown_missing_facts(obj)

    @admin.display(description="tokens")
    def call_tokens(self, obj: FoldedSpan) -> str:
        if obj.prompt_tokens is None:
            return "-"
        return figures(f"{obj.prompt_tokens:,} prompt",
                       f"{obj.completion_tokens or 0:,} completion")

    @admin.display(description="originals")
    def expand_link(self, obj: FoldedSpan) -> str:
        if not may_read(obj):
            return "-"  # no link this user could follow
        return self.page_link(obj, "expand", "expand")

    def expand_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """The window summary message beside its retained originals, or a plain "not kept"."""
        span = get_object_or_404(
            self.get_queryset(request).select_related("thread").prefetch_related("nested_spans"),
            pk=object_id,
        )
        if not may_read(span):
            return self.refuse(request, expand_refusal(span.thread.owner_id), span)
        label, text, note = split_summary(span.content, span.missing_facts)
        context = {
            "title": f"Folded span #{span.pk}",
            "obj": span,
            "obj_label": f"#{span.pk}",
            "crumb": "originals",
            "span": span,
            "label": label,
            "model_text": text,
            "fact_note": note,
            "retained": span.messages is not None,
            "messages_shown": span.messages or [],
            "expanded": expand_span(span, recursive=True) if span.nested_spans.all() else None,
        }
        return self.render(request, "span_expand.html", context)
