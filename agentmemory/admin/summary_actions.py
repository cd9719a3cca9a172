"""The summary list's actions: unfold (with its confirmation), approve, reject, regenerate."""

from __future__ import annotations

from typing import Any, cast

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse

from agentmemory import services
from agentmemory.admin.base import PagesAdmin
from agentmemory.folding.reasons import in_words
from agentmemory.models import EntryKind, MemoryEntry, Summary
from agentmemory.permissions import holds_expand
from agentmemory.querysets import MemoryEntryQuerySet


def came_back(before: set[int]) -> tuple[int, int]:
    """Of the rows covered ``before``, how many messages and how many summaries recall
    loads again (uncovered and live: a retired summary comes back as history only)."""
    kinds = MemoryEntry.objects.filter(pk__in=before).uncovered().live().values_list(
        "kind", flat=True
    )
    summaries = sum(kind == EntryKind.SUMMARY for kind in kinds)
    return len(kinds) - summaries, summaries


def unfolded_message(retired: int, originals: int, summaries: int) -> str:
    said = f"Unfolded {retired} summary row(s); "
    if not summaries:
        return said + "their originals are recalled verbatim."
    return said + (
        f"recall loads what they covered again: {originals} original(s) verbatim and "
        f"{summaries} earlier summary(ies) they had folded in, which still stand for "
        "their own originals (unfold those too to recall them verbatim)."
    )


class SummaryActions(PagesAdmin):
    actions = ["unfold", "approve", "reject", "regenerate"]

    # Deleting is refused (ReadOnlyAdmin): unfold is the action, with its own confirmation.

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        if not request.user.has_perm("agentmemory.delete_memoryentry"):
            for name in ("unfold", "regenerate"):
                actions.pop(name, None)
        if not holds_expand(request.user):
            # Reviewing a flagged summary means reading what it stands for.
            for name in ("approve", "reject"):
                actions.pop(name, None)
        return actions

    @admin.action(description="Approve flagged summaries (held ones start covering)")
    def approve(self, request: HttpRequest, queryset: QuerySet[Summary]) -> None:
        covering = sum(services.review(summary, request.user, approve=True)
                       for summary in queryset.select_related("coverage"))
        self.message_user(request, f"Approved; {covering} summary(ies) now cover their span.")

    @admin.action(description="Reject flagged summaries (retire them; recall stays verbatim)")
    def reject(self, request: HttpRequest, queryset: QuerySet[Summary]) -> None:
        for summary in queryset:
            services.review(summary, request.user, approve=False)
        self.message_user(request, f"Rejected {queryset.count()} summary(ies).")

    @admin.action(description="Regenerate (a new call; the old version stays readable)")
    def regenerate(self, request: HttpRequest, queryset: QuerySet[Summary]) -> None:
        for summary in cast(MemoryEntryQuerySet, queryset).unretired():
            outcome = services.regenerate(summary)
            self.message_user(
                request,
                f"{summary.summary_key}: "
                + (f"version {outcome.summary.coverage.version} written."
                   if outcome.summary else f"not regenerated. {in_words(outcome.decline or '')}"),
                messages.SUCCESS if outcome.summary else messages.WARNING,
            )

    @admin.action(description="Unfold: retire the selected summaries (recall what they covered)")
    def unfold(self, request: HttpRequest, queryset: QuerySet[Summary]) -> HttpResponse | None:
        if request.POST.get("confirm") == "yes":
            threads = queryset.values_list("thread", flat=True)
            covered = set(
                MemoryEntry.objects.filter(thread__in=threads).covered().values_list(
                    "pk", flat=True
                )
            )
            retired = 0
            for pk in list(queryset.values_list("pk", flat=True)):
                # Read afresh: unfolding an inner summary retires the ones built on it,
                # which may be selected too and must not be counted twice.
                summary = Summary.objects.filter(pk=pk).first()
                if summary is not None:
                    retired += services.unfold(summary)
            self.message_user(
                request, unfolded_message(retired, *came_back(covered)), messages.SUCCESS
            )
            return None
        context = {
            "title": "Unfold summaries?",
            "crumb": "unfold",
            "summaries": queryset.select_related("coverage", "thread").annotate(
                nested_summaries=Count(
                    "covered_entries", filter=Q(covered_entries__kind=EntryKind.SUMMARY)
                )
            ),
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
        }
        return self.render(request, "unfold_confirmation.html", context)
