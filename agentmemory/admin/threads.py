"""Threads: the list, the fold actions, erasure, and the timeline page."""

from __future__ import annotations

from collections import Counter
from functools import partial
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import timezone

from agentmemory import services
from agentmemory.admin.base import PagesAdmin, links
from agentmemory.admin.overview import Links, overview
from agentmemory.admin.text import summary_parts
from agentmemory.admin.thread_chart import thread_chart
from agentmemory.admin.timeline import PageRow, collapsed
from agentmemory.models import MemoryEntry, Thread
from agentmemory.permissions import may_expand
from agentmemory.querysets import loaded_in_place
from agentmemory.trust.savings import savings

TIMELINE_PAGE_SIZE = 200


def recalls_url(thread: int, first: int, last: int) -> str:
    """The receipts list of ``thread``'s turns ``first`` to ``last``."""
    query = urlencode({"thread": thread, "turn__gte": first, "turn__lte": last})
    return f"{reverse('admin:agentmemory_recallreceipt_changelist')}?{query}"


def window_fold_url(pk: int) -> str:
    return reverse("admin:agentmemory_foldedspan_change", args=[pk])


@admin.register(Thread)
class ThreadAdmin(PagesAdmin):
    pages = {"timeline": "The timeline"}
    list_display = (
        "id", "__str__", "owner", "client_key", "last_turn", "ttl", "timeline_link",
        "fold_status", "updated_at",
    )
    list_display_links = ("id", "__str__")
    list_filter = (
        "write_tier", "window_retain", "created_at",
        ("fold_parked_until", admin.EmptyFieldListFilter),
    )
    search_fields = ("title", "client_key", f"owner__{get_user_model().USERNAME_FIELD}")
    list_select_related = ("owner",)
    raw_id_fields = ("owner",)
    date_hierarchy = "created_at"
    readonly_fields = (
        "last_position", "last_turn", "created_at", "updated_at", "timeline_link", "savings",
        "fold_status",
    )
    fields = (
        "owner", "client_key", "title", "metadata", "ttl", "write_tier", "window_retain",
        "fold_budget", "timeline_link", "savings", "fold_status", "last_turn", "last_position",
        "created_at", "updated_at",
    )
    actions = ["fold_now", "unpark_folds", "purge_expired"]

    @admin.display(description="summarizing: spent and saved")
    def savings(self, obj: Thread) -> str:
        if obj.pk is None:
            return "-"
        totals = savings(thread=obj)
        return (
            f"{totals['spent_tokens']} tokens spent summarizing; {totals['saved_tokens']} "
            f"saved over {totals['summary_loads']} summary loads in recorded recalls"
            + (f" (ratio {totals['ratio']})" if totals["ratio"] is not None else "")
        )

    @admin.display(description="timeline")
    def timeline_link(self, obj: Thread) -> str:
        return self.page_link(obj, "timeline", "timeline")

    def timeline_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """The thread in order, opened by its overview strip and chart: every entry and
        summary, the runs a summary hides collapsed under one line. The rows are read once
        for all three (`services.thread_picture`), the page's entries in one more query."""
        thread: Thread = get_object_or_404(Thread.objects.select_related("owner"), pk=object_id)
        can_expand = may_expand(request.user, thread.owner_id)
        picture = services.thread_picture(thread)
        page = Paginator(picture.rows, TIMELINE_PAGE_SIZE).get_page(request.GET.get("page"))
        shown = MemoryEntry.objects.select_related("coverage").in_bulk(
            [row.id for row in page]
        )
        # The summary recall loads in place of each covered row, by recall's own rule.
        loaded = loaded_in_place({row.id: row.covered_by for row in picture.rows
                                  if row.is_summary})
        rows = [
            PageRow(
                entry=entry,
                label_text=(
                    summary_parts(entry.content, entry.coverage.missing_facts, can_expand)
                    if entry.is_summary else None
                ),
                loaded_instead=loaded.get(entry.covered_by_id or 0),
                expired=row.expired,
            )
            for row, entry in ((row, shown[row.id]) for row in page if row.id in shown)
        ]
        pages = links(request, self.admin_site)
        context = {
            "title": f"Timeline of {thread}",
            "obj": thread,
            "crumb": "timeline",
            "thread": thread,
            "page": page,
            "groups": collapsed(rows),
            "overview": overview(picture, TIMELINE_PAGE_SIZE, Links(
                recalls=partial(recalls_url, thread.pk) if pages["receipts"] else None,
                window_fold=window_fold_url if pages["spans"] else None,
            )),
            "chart": thread_chart(picture),
            "can_expand": can_expand,
        }
        return self.render(request, "thread_timeline.html", context)

    @admin.action(description="Fold now (enqueue the fold; runs inline under eager Celery)")
    def fold_now(self, request: HttpRequest, queryset: QuerySet[Thread]) -> None:
        self.report_folds(request, [services.request_fold(thread.pk) for thread in queryset])

    @admin.action(description="Unpark folds (forget their deaths and enqueue them now)")
    def unpark_folds(self, request: HttpRequest, queryset: QuerySet[Thread]) -> None:
        parked = queryset.filter(fold_parked_until__isnull=False)
        self.report_folds(request, [services.unpark_fold(thread) for thread in parked])

    def report_folds(self, request: HttpRequest, asked: list[services.FoldRequest]) -> None:
        states = Counter(fold.state for fold in asked)
        sent = states.pop(services.FoldState.QUEUED, 0)
        self.message_user(request, f"Fold enqueued for {sent} thread(s).", messages.SUCCESS)
        if states.get(services.FoldState.BROKER_DOWN):
            self.message_user(
                request,
                f"{states.pop(services.FoldState.BROKER_DOWN)} fold(s) could not be enqueued "
                "(broker unreachable); the sweep task will enqueue them.",
                messages.WARNING,
            )
        if states:
            others = ", ".join(f"{count} {state.label}" for state, count in states.items())
            self.message_user(request, f"Not sent again: {others}.", messages.INFO)

    @admin.display(description="background fold")
    def fold_status(self, obj: Thread) -> str:
        now = timezone.now()
        if obj.fold_parked_until is not None:
            return (f"parked until {obj.fold_parked_until:%Y-%m-%d %H:%M:%S} after "
                    f"{obj.fold_deaths} deaths")  # fmt: skip
        if obj.fold_lease_owner and (obj.fold_lease_until or now) >= now:
            return "folding" + (f" ({obj.fold_deaths} deaths)" if obj.fold_deaths else "")
        if obj.fold_cooling:
            return "gave up: the sweep retries it"
        if obj.fold_queued_until is not None and obj.fold_queued_until >= now:
            return "queued"
        return "-"

    @admin.action(description="Purge expired entries, summaries and spans")
    def purge_expired(self, request: HttpRequest, queryset: QuerySet[Thread]) -> None:
        result = services.purge_expired(thread_ids=queryset.values_list("pk", flat=True))
        self.message_user(
            request,
            f"Purged {result.entries} expired entries and {result.spans} spans in "
            f"{result.batches} batch(es).",
            messages.SUCCESS,
        )

    def delete_model(self, request: HttpRequest, obj: Thread) -> None:
        services.erase_thread(obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Thread]) -> None:
        for thread in queryset:
            services.erase_thread(thread)
