"""Memory entries: every message and summary, an original's text shown by the one rule."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils.text import Truncator, smart_split, unescape_string_literal

from agentmemory import services
from agentmemory.admin.base import OriginalsLookupGuard, covered_by_link, thread_column
from agentmemory.admin.filters import CoveredFilter, ExpiredFilter
from agentmemory.admin.text import expandable, may_read, readable, readable_text, shown_text
from agentmemory.exceptions import AgentMemoryConfigurationError
from agentmemory.models import EntryKind, MemoryEntry


class CoveredTextAdmin(OriginalsLookupGuard):
    """Shows a covered row's text (an original of some summary) only to expanders, and
    searches only the text the user may read (``readable_content``).
    """

    original_fields = ("content", "tool_calls", "metadata")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        # The permission rides on each row: no state on this ModelAdmin, which every
        # request shares.
        return super().get_queryset(request).annotate(
            expandable=expandable(request),
            readable_content=readable_text(
                request, "content", covered=Q(covered_by__isnull=False),
                summaries=Q(kind=EntryKind.SUMMARY),
            ),
        )

    def _hidden(self, obj: MemoryEntry) -> bool:
        return obj.covered_by_id is not None and not may_read(obj)

    def _hidden_note(self, obj: MemoryEntry) -> str:
        return f"(hidden by summary #{obj.covered_by_id}; expanding needs permission)"

    @admin.display(description="content")
    def shown_content(self, obj: MemoryEntry) -> str:
        return self._hidden_note(obj) if self._hidden(obj) else shown_text(obj, obj.content)

    @admin.display(description="metadata")
    def shown_metadata(self, obj: MemoryEntry) -> str:
        return self._hidden_note(obj) if self._hidden(obj) else json.dumps(obj.metadata)

    @admin.display(description="tool calls")
    def shown_tool_calls(self, obj: MemoryEntry) -> str:
        if self._hidden(obj):
            return self._hidden_note(obj)
        return json.dumps(obj.tool_calls) if obj.tool_calls else "-"


@admin.register(MemoryEntry)
class MemoryEntryAdmin(CoveredTextAdmin):
    list_display = (
        "id", thread_column, "turn", "role", "kind", "short_content", "token_count", "tier",
        covered_by_link, "expires_at",
    )
    list_filter = ("kind", "role", "tier", CoveredFilter, ExpiredFilter)
    # Ids and names; the text is searched in get_search_results.
    search_fields = ("summary_key", "tool_name", "tool_call_id", "thread__client_key")
    list_select_related = ("thread",)
    raw_id_fields = ("thread",)
    date_hierarchy = "created_at"
    ordering = ("-thread_id", "position", "id")
    fields = (
        "thread", "kind", "summary_key", "role", "turn", "position", "shown_content",
        "shown_tool_calls", "tool_name", "tool_call_id", "token_count", "tier", "created_at",
        "expires_at", "covered_by", "metadata",
    )
    readonly_fields = tuple(name for name in fields if name not in ("tier", "metadata"))

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # A hidden row's metadata is the original's too: shown (read-only) as withheld.
        if obj is not None and self._hidden(obj):
            return [name if name != "metadata" else "shown_metadata" for name in self.fields]
        return self.fields

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is not None and self._hidden(obj):
            return (*self.readonly_fields, "shown_metadata")
        return self.readonly_fields

    @admin.display(description="content")
    def short_content(self, obj: MemoryEntry) -> str:
        if self._hidden(obj):
            return self._hidden_note(obj)
        if obj.tool_calls and not obj.content:
            names = ", ".join(call.get("name", "?") for call in obj.tool_calls)
            return f"(calls {names})"
        return Truncator(readable(obj)).chars(90)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[MemoryEntry], search_term: str
    ) -> tuple[QuerySet[MemoryEntry], bool]:
        """The ids and names by Django's search, messages by the search index (the best
        `services.MAX_SEARCH_LIMIT` matches of unexpired ones, as `services.search`
        finds them), summaries by their readable text (the index holds no summary). A
        covered original matches only where its text may be read: the rule that hides
        it on the page hides it from the search."""
        found, duplicates = super().get_search_results(request, queryset, search_term)
        if not search_term.strip():
            return found, duplicates
        words = Q()
        for word in smart_split(search_term):  # as Django's search splits the term
            if word[:1] in ("'", '"') and len(word) > 1 and word[0] == word[-1]:
                word = unescape_string_literal(word)
            words &= Q(readable_content__icontains=word)
        text = words & Q(kind=EntryKind.SUMMARY)
        try:
            hits = services.search(services.EVERY_THREAD, search_term,
                                   limit=services.MAX_SEARCH_LIMIT)
        except services.InvalidSearchQuery:  # no words (a stray quote, punctuation)
            hits = []
        except AgentMemoryConfigurationError:  # a database without the index: every row
            hits, text = [], words
        indexed = Q(pk__in=[hit.entry_id for hit in hits]) & (
            Q(covered_by__isnull=True) | Q(expandable=True)
        )
        return found | queryset.filter(text | indexed), duplicates

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # entries are written by services.append, which numbers and counts them

    def delete_model(self, request: HttpRequest, obj: MemoryEntry) -> None:
        services.erase_entry(obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[MemoryEntry]) -> None:
        for entry in queryset:
            services.erase_entry(entry)
