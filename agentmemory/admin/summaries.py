"""Summaries: the list with status badges, their coverage, and the expand page."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.utils.html import format_html_join

from agentmemory import services
from agentmemory.admin.base import (
    PagesAdmin,
    ReadOnly,
    ReadOnlyAdmin,
    covered_by_link,
    figures,
    hash_display,
    thread_column,
)
from agentmemory.admin.entries import CoveredTextAdmin
from agentmemory.admin.filters import CoveredFilter, ExpiredFilter, StatusFilter
from agentmemory.admin.summary_actions import SummaryActions
from agentmemory.admin.text import (
    expandable,
    may_read,
    shown_missing_facts,
    split_summary,
)
from agentmemory.models import MemoryEntry, Summary, SummaryCoverage
from agentmemory.permissions import expand_refusal
from agentmemory.trust.savings import summary_savings
from agentmemory.trust.signing import summary_is_intact


def summary_badges(summary: MemoryEntry) -> list[tuple[str, bool]]:
    coverage = summary.coverage
    return [
        ("tampered", coverage.tampered_at is not None),
        ("flagged", bool(coverage.injection_flags) and coverage.reviewed_at is None),
        ("held for review", summary.held_at is not None),
        ("retired", summary.retired_at is not None),
        ("lost facts", bool(coverage.missing_facts)),
        (f"version {coverage.version}", coverage.version > 1),
    ]


BADGE_COLOURS = {"tampered": "#a61b1b", "flagged": "#8a5a00", "held": "#8a5a00",
                 "lost": "#5d2a75", "retired": "#666"}


class SummaryCoverageInline(ReadOnly, admin.StackedInline):
    model = SummaryCoverage
    can_delete = False
    extra = 0
    fields = (
        "from_turn", "to_turn", "entry_count", "span_tokens", "original_tokens", "level",
        "model", "summarized_at", "prompt_tokens", "completion_tokens", "version",
        "prompt_hash_shown", "temperature", "seed", "library_version", "signature_shown",
        "tampered_at", "fact_score", "missing_facts_shown", "injection_flags", "reviewed_at",
        "reviewed_by",
    )
    readonly_fields = fields
    prompt_hash_shown = hash_display("prompt_hash", "prompt hash")
    signature_shown = hash_display("signature", "signature")

    def get_queryset(self, request: HttpRequest) -> QuerySet[SummaryCoverage]:
        return super().get_queryset(request).annotate(
            expandable=expandable(request, "summary__thread")
        )

    @admin.display(description="missing facts")
    def missing_facts_shown(self, obj: SummaryCoverage) -> str:
        return shown_missing_facts(obj)


@admin.register(Summary)
class SummaryAdmin(SummaryActions, ReadOnlyAdmin, CoveredTextAdmin, PagesAdmin):
    pages = {"expand": "Expanding"}
    list_display = (
        "id", "summary_key", "expand_link", thread_column, "covers", "tokens",
        "summarizer_model", "status", "fact_score", covered_by_link,
    )
    list_filter = (StatusFilter, "coverage__model", "tier", ExpiredFilter, CoveredFilter)
    search_fields = ("readable_content", "summary_key", "thread__client_key", "thread__title")
    list_select_related = ("thread", "coverage")
    date_hierarchy = "created_at"
    inlines = [SummaryCoverageInline]
    fields = ("thread", "summary_key", "shown_content", "turn", "tier", "token_count",
              "expires_at", "covered_by", "expand_link")
    readonly_fields = fields

    @admin.display(description="status")
    def status(self, obj: Summary) -> str:
        """Badges: what recall does with this summary, and what needs a person."""
        badges = [label for label, on in summary_badges(obj) if on]
        return format_html_join(
            " ", '<span style="color:{};font-weight:600">{}</span>',
            ((BADGE_COLOURS.get(label.split()[0], "#444"), label) for label in badges),
        ) or "-"

    @admin.display(description="facts kept", ordering="coverage__fact_score")
    def fact_score(self, obj: Summary) -> str:
        score = obj.coverage.fact_score
        return "-" if score is None else f"{score:.0%}"

    @admin.display(description="covers", ordering="coverage__from_turn")
    def covers(self, obj: Summary) -> str:
        coverage = obj.coverage
        entries = f"{coverage.entry_count} entr{'y' if coverage.entry_count == 1 else 'ies'}"
        return figures(f"turns {coverage.from_turn}-{coverage.to_turn}", entries)

    @admin.display(description="tokens: span → summary")
    def tokens(self, obj: Summary) -> str:
        return f"{obj.coverage.span_tokens} → {obj.token_count}"

    # Not named ``model``: that would shadow ModelAdmin.model, the admin's model class.
    @admin.display(description="model", ordering="coverage__model")
    def summarizer_model(self, obj: Summary) -> str:
        return obj.coverage.model

    @admin.display(description="originals")
    def expand_link(self, obj: Summary) -> str:
        if not may_read(obj):
            return "-"  # no link this user could follow
        return self.page_link(obj, "expand", "expand")

    def expand_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """The summary beside the exact originals it covers, nested summaries expandable."""
        summary = get_object_or_404(
            self.get_queryset(request).select_related("coverage", "thread"), pk=object_id
        )
        if not may_read(summary):
            return self.refuse(request, expand_refusal(summary.thread.owner_id), summary)
        originals = services.expand(summary)
        nested = {
            entry.pk: services.expand(entry, recursive=True)
            for entry in originals
            if entry.is_summary
        }
        label, text, note = split_summary(summary.content, summary.coverage.missing_facts)
        rows = [
            {
                "entry": entry,
                "label_text": (
                    split_summary(entry.content, entry.coverage.missing_facts)
                    if entry.is_summary else None
                ),
                "nested": nested.get(entry.pk),
            }
            for entry in originals
        ]
        context = {
            "title": f"Summary {summary.summary_key}",
            "obj": summary,
            "obj_label": summary.summary_key,
            "crumb": "originals",
            "summary": summary,
            "coverage": summary.coverage,
            "loaded_instead": MemoryEntry.objects.filter(thread=summary.thread_id)
            .recalled_in_place().get(summary.pk),
            "badges": [label for label, on in summary_badges(summary) if on],
            "intact": summary_is_intact(summary),
            "savings": summary_savings(summary),
            "versions": Summary.objects.filter(
                thread=summary.thread, summary_key=summary.summary_key
            ).select_related("coverage").order_by("coverage__version"),
            "label": label,
            "model_text": text,
            "fact_note": note,
            "rows": rows,
        }
        return self.render(request, "summary_expand.html", context)
