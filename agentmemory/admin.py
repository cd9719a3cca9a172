"""The admin: threads, entries, summaries, folded spans and the usage ledger.

Staff answer two questions here: what did the agent see, and what does this summary
stand for. Records are read-only; entries are written by ``services.append`` and by
folding (law 1), so only an entry's tier and metadata are editable, and deleting goes
through the erasure services (law 7). Text of an original hidden by a summary (its
content, the facts a fact note or a coverage lists from it, a receipt's context, a
span's messages) is shown by the one rule of :mod:`agentmemory.permissions`.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth import get_user_model
from django.core.paginator import Paginator
from django.db.models import BooleanField, Case, F, Q, QuerySet, TextField, Value, When
from django.db.models.constants import LOOKUP_SEP
from django.db.models.expressions import Combinable
from django.db.models.functions import Left, StrIndex
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from agentmemory import services
from agentmemory.facts import FACT_NOTE_OPENING, split_fact_note
from agentmemory.ledger import tokens_used_today
from agentmemory.models import (
    EntryKind,
    FoldedSpan,
    FoldLatch,
    MemoryEntry,
    OwnerQuota,
    RecallReceipt,
    SummarizerCall,
    Summary,
    SummaryCoverage,
    Thread,
)
from agentmemory.permissions import REFUSAL, expandable_rows, holds_expand, may_expand
from agentmemory.receipts import replay, savings, summary_savings
from agentmemory.signing import summary_is_intact
from agentmemory.window.compact import expand_span

TIMELINE_PAGE_SIZE = 200
FACT_NOTE = "\n" + FACT_NOTE_OPENING
FACT_NOTE_WITHHELD = (
    "[agentmemory's note of the facts from the originals that this summary does not "
    "mention: withheld; reading it needs permission]"
)


def split_summary(content: str, missing: list[str]) -> tuple[str, str, str]:
    """The authored label (first line), the model's text and agentmemory's fact note (or
    ``""``), shown apart: what agentmemory wrote is never shown as the model's."""
    label, _, text = content.partition("\n")
    text, note = split_fact_note(text, missing)
    return label, text, note


def summary_parts(content: str, missing: list[str], may_expand: bool) -> tuple[str, str, str]:
    """:func:`split_summary` for display: a fact note this user may not read is replaced by
    a line that says it was withheld."""
    label, text, note = split_summary(content, missing)
    return label, text, note if may_expand or not note else FACT_NOTE_WITHHELD


def expandable(request: HttpRequest, thread_field: str = "thread") -> Combinable:
    """Per row: may this user read the hidden text of the row's thread?"""
    rows = expandable_rows(request.user, thread_field)
    if rows is None:
        return Value(True)
    return Case(When(rows, then=Value(True)), default=Value(False), output_field=BooleanField())


def readable_text(
    request: HttpRequest, field: str, covered: Q | None = None, summaries: Q | None = None
) -> Combinable:
    """Per row, the text of ``field`` this user may read (for search and lists): all of it
    where they may expand; elsewhere nothing of a ``covered`` row, and of the
    ``summaries`` (every row when ``None``) the text before the fact note that lists
    facts of their originals (cut at its first opening, so a model's imitation of it
    hides more, never less)."""
    rows = expandable_rows(request.user)
    if rows is None:
        return F(field)
    cases = [When(rows, then=F(field))]
    if covered is not None:
        cases.append(When(covered, then=Value("")))
    cases.append(When(
        Q(**{f"{field}__contains": FACT_NOTE}) & (summaries or Q()),
        then=Left(field, StrIndex(field, Value(FACT_NOTE)) - 1),
    ))
    return Case(*cases, default=F(field), output_field=TextField())


def may_read(obj: Any) -> bool:
    """The per-row answer that the admin's ``get_queryset`` annotates (``expandable``)."""
    return bool(obj.expandable)


def readable(obj: Any) -> str:
    """The row's text this user may read, annotated by ``get_queryset``."""
    return str(obj.readable_content)


def shown_text(obj: Any, content: str) -> str:
    """``content`` as this user may read it, saying where a fact note was withheld."""
    text = readable(obj)
    return text if text == content else f"{text}\n{FACT_NOTE_WITHHELD}"


def links(request: HttpRequest, site: admin.AdminSite) -> dict[str, bool]:
    """Which of the app's pages this user may open: a custom page links no refusal."""
    models = {"threads": Thread, "entries": MemoryEntry, "summaries": Summary}
    return {
        name: site.get_model_admin(model).has_view_permission(request)
        for name, model in models.items()
    }


class RefusingAdmin(admin.ModelAdmin):
    """Refuses a custom view in the admin's own look (status 403), saying what it needs."""

    def refuse(self, request: HttpRequest, reason: str, obj: Any = None) -> TemplateResponse:
        opts = self.model._meta
        context = {
            **self.admin_site.each_context(request),
            "title": "Not shown to you",
            "opts": opts,
            "reason": reason,
            "changelist": self.has_view_permission(request),
            "obj": obj if obj is not None and self.has_view_permission(request, obj) else None,
        }
        return TemplateResponse(
            request, "agentmemory/admin/refused.html", context, status=403
        )


@admin.display(description="covered by", ordering="covered_by")
def covered_by_link(obj: MemoryEntry) -> str:
    """The covering summary's id, read from the row itself: no query per row."""
    if obj.covered_by_id is None:
        return "-"
    return format_html(
        '<a href="{}">#{}</a>',
        reverse("admin:agentmemory_summary_change", args=[obj.covered_by_id]),
        obj.covered_by_id,
    )


class ReadOnlyAdmin(admin.ModelAdmin):
    """A record: viewable, never added, changed or deleted from the admin, superusers
    included (deleting a ledger row would change cost and quota accounting); rows go
    with their thread through the erasure and purge services."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ExpiredFilter(admin.SimpleListFilter):
    title = "expiry"
    parameter_name = "expired"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "expired"), ("no", "live"), ("never", "never expires")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        now = timezone.now()
        if self.value() == "yes":
            return queryset.filter(expires_at__lte=now)
        if self.value() == "no":
            return queryset.exclude(expires_at__lte=now)
        if self.value() == "never":
            return queryset.filter(expires_at__isnull=True)
        return queryset


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


class StatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [
            ("review", "needs review (flagged)"),
            ("held", "held for review"),
            ("tampered", "tampered"),
            ("retired", "retired"),
            ("live", "live"),
            ("lost-facts", "missing facts"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value == "review":
            return queryset.exclude(coverage__injection_flags=[]).filter(
                coverage__reviewed_at__isnull=True
            )
        if value == "held":
            return queryset.filter(held_at__isnull=False)
        if value == "tampered":
            return queryset.filter(coverage__tampered_at__isnull=False)
        if value == "retired":
            return queryset.filter(retired_at__isnull=False)
        if value == "live":
            return queryset.filter(retired_at__isnull=True, held_at__isnull=True)
        if value == "lost-facts":
            return queryset.exclude(coverage__missing_facts=[])
        return queryset


class CoveredFilter(admin.SimpleListFilter):
    title = "coverage"
    parameter_name = "covered"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("no", "visible to recall (not covered)"), ("yes", "covered by a summary")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() in ("yes", "no"):
            return queryset.filter(covered_by__isnull=self.value() == "no")
        return queryset


# ---------------------------------------------------------------- threads


@admin.register(Thread)
class ThreadAdmin(RefusingAdmin):
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
    actions = ["fold_now", "unpark_folds", "purge_expired"]

    @admin.display(description="timeline")
    def timeline_link(self, obj: Thread) -> str:
        if obj.pk is None:
            return "-"
        return format_html(
            '<a href="{}">timeline</a>',
            reverse("admin:agentmemory_thread_timeline", args=[obj.pk]),
        )

    def get_urls(self) -> list[URLPattern]:
        timeline = path(
            "<int:thread_id>/timeline/",
            self.admin_site.admin_view(self.timeline_view),
            name="agentmemory_thread_timeline",
        )
        return [timeline, *super().get_urls()]

    def timeline_view(self, request: HttpRequest, thread_id: int) -> HttpResponse:
        """The thread in order: every entry and summary, and which summary hides what."""
        if not self.has_view_permission(request):
            return self.refuse(request, "The timeline needs the permission to view threads.")
        thread: Thread = get_object_or_404(Thread.objects.select_related("owner"), pk=thread_id)
        can_expand = may_expand(request.user, thread.owner_id)
        entries = (
            MemoryEntry.objects.filter(thread=thread)
            .select_related("coverage")
            .order_by("position", "kind", "id")
        )
        page = Paginator(entries, TIMELINE_PAGE_SIZE).get_page(request.GET.get("page"))
        rows = [
            {
                "entry": entry,
                "label_text": (
                    summary_parts(entry.content, entry.coverage.missing_facts, can_expand)
                    if entry.is_summary else None
                ),
                "hidden": entry.covered_by_id is not None,
            }
            for entry in page
        ]
        context = {
            **self.admin_site.each_context(request),
            "title": f"Timeline of {thread}",
            "opts": self.model._meta,
            "thread": thread,
            "page": page,
            "rows": rows,
            "links": links(request, self.admin_site),
            "can_expand": can_expand,
            "now": timezone.now(),
        }
        return TemplateResponse(request, "agentmemory/admin/thread_timeline.html", context)

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


class OriginalsLookupGuard(admin.ModelAdmin):
    """Without the permission, no URL lookup (``?content__icontains=``) on the fields that
    hold originals: the row count would confirm hidden text a word at a time."""

    original_fields: tuple[str, ...] = ()

    def lookup_allowed(self, lookup: str, value: str, request: Any = None) -> bool:
        if lookup.split(LOOKUP_SEP)[0] in self.original_fields and not (
            request is not None and holds_expand(request.user)
        ):
            return False
        return bool(super().lookup_allowed(lookup, value, request))


class CoveredTextAdmin(OriginalsLookupGuard):
    """Shows a covered row's text (an original of some summary) only to expanders, and
    searches only the text the user may read (``search_fields`` name ``readable_content``).
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


# ---------------------------------------------------------------- entries


@admin.register(MemoryEntry)
class MemoryEntryAdmin(CoveredTextAdmin):
    list_display = (
        "id", "thread", "turn", "role", "kind", "short_content", "token_count", "tier",
        covered_by_link, "expires_at",
    )
    list_filter = ("kind", "role", "tier", CoveredFilter, ExpiredFilter)
    search_fields = (
        "readable_content", "summary_key", "tool_name", "tool_call_id", "thread__client_key",
    )
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

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # entries are written by services.append, which numbers and counts them

    def delete_model(self, request: HttpRequest, obj: MemoryEntry) -> None:
        services.erase_entry(obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[MemoryEntry]) -> None:
        for entry in queryset:
            services.erase_entry(entry)


# ---------------------------------------------------------------- summaries


def shown_missing_facts(obj: Any) -> str:
    """The facts of the originals a summary or span does not mention: originals' text."""
    if not obj.missing_facts:
        return "-"
    if not may_read(obj):
        return f"{len(obj.missing_facts)} (withheld: reading them needs permission)"
    return "; ".join(obj.missing_facts)


class SummaryCoverageInline(admin.StackedInline):
    model = SummaryCoverage
    can_delete = False
    extra = 0
    fields = (
        "from_turn", "to_turn", "entry_count", "span_tokens", "original_tokens", "level",
        "model", "summarized_at", "prompt_tokens", "completion_tokens", "version",
        "prompt_hash", "temperature", "seed", "library_version", "signature", "tampered_at",
        "fact_score", "missing_facts_shown", "injection_flags", "reviewed_at", "reviewed_by",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[SummaryCoverage]:
        return super().get_queryset(request).annotate(
            expandable=expandable(request, "summary__thread")
        )

    @admin.display(description="missing facts")
    def missing_facts_shown(self, obj: SummaryCoverage) -> str:
        return shown_missing_facts(obj)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Summary)
class SummaryAdmin(ReadOnlyAdmin, CoveredTextAdmin, RefusingAdmin):
    list_display = (
        "id", "summary_key", "thread", "turns", "entry_count", "span_tokens", "token_count",
        "summarizer_model", "status", "fact_score", "expires_at", covered_by_link, "expand_link",
    )
    list_filter = (StatusFilter, "coverage__model", "tier", ExpiredFilter, CoveredFilter)
    search_fields = ("readable_content", "summary_key", "thread__client_key", "thread__title")
    list_select_related = ("thread", "coverage")
    date_hierarchy = "created_at"
    inlines = [SummaryCoverageInline]
    fields = ("thread", "summary_key", "shown_content", "turn", "tier", "token_count",
              "expires_at", "covered_by", "expand_link")
    readonly_fields = fields
    actions = ["unfold", "approve", "reject", "regenerate"]

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

    @admin.display(description="turns")
    def turns(self, obj: Summary) -> str:
        return f"{obj.coverage.from_turn}-{obj.coverage.to_turn}"

    @admin.display(description="entries")
    def entry_count(self, obj: Summary) -> int:
        return obj.coverage.entry_count

    @admin.display(description="span tokens")
    def span_tokens(self, obj: Summary) -> int:
        return obj.coverage.span_tokens

    # Not named ``model``: that would shadow ModelAdmin.model, the admin's model class.
    @admin.display(description="model", ordering="coverage__model")
    def summarizer_model(self, obj: Summary) -> str:
        return obj.coverage.model

    @admin.display(description="originals")
    def expand_link(self, obj: Summary) -> str:
        if not may_read(obj):
            return "-"  # no link this user could follow
        return format_html(
            '<a href="{}">expand</a>', reverse("admin:agentmemory_summary_expand", args=[obj.pk])
        )

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
        for summary in queryset.filter(retired_at__isnull=True):
            outcome = services.regenerate(summary)
            self.message_user(
                request,
                f"{summary.summary_key}: "
                + (f"version {outcome.summary.coverage.version} written."
                   if outcome.summary else f"declined ({outcome.decline})."),
                messages.SUCCESS if outcome.summary else messages.WARNING,
            )

    def get_urls(self) -> list[URLPattern]:
        expand = path(
            "<int:summary_id>/expand/",
            self.admin_site.admin_view(self.expand_view),
            name="agentmemory_summary_expand",
        )
        return [expand, *super().get_urls()]

    def expand_view(self, request: HttpRequest, summary_id: int) -> HttpResponse:
        """The summary beside the exact originals it covers, nested summaries expandable."""
        if not self.has_view_permission(request):
            return self.refuse(request, "Expanding needs the permission to view summaries.")
        summary = get_object_or_404(
            self.get_queryset(request).select_related("coverage", "thread"), pk=summary_id
        )
        if not may_read(summary):
            return self.refuse(request, REFUSAL, summary)
        originals = services.expand(summary)
        nested = {
            entry.pk: services.expand(entry, recursive=True)
            for entry in originals
            if entry.is_summary
        }
        label, text, note = split_summary(summary.content, summary.coverage.missing_facts)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Summary {summary.summary_key}",
            "opts": self.model._meta,
            "summary": summary,
            "coverage": summary.coverage,
            "badges": [label for label, on in summary_badges(summary) if on],
            "intact": summary_is_intact(summary),
            "savings": summary_savings(summary),
            "versions": Summary.objects.filter(
                thread=summary.thread, summary_key=summary.summary_key
            ).select_related("coverage").order_by("coverage__version"),
            "label": label,
            "model_text": text,
            "links": links(request, self.admin_site),
            "fact_note": note,
            "rows": [
                {
                    "entry": entry,
                    "label_text": (
                        split_summary(entry.content, entry.coverage.missing_facts)
                        if entry.is_summary else None
                    ),
                    "nested": nested.get(entry.pk),
                }
                for entry in originals
            ],
        }
        return TemplateResponse(request, "agentmemory/admin/summary_expand.html", context)

    @admin.action(description="Unfold: retire the selected summaries (originals verbatim)")
    def unfold(self, request: HttpRequest, queryset: QuerySet[Summary]) -> HttpResponse | None:
        if request.POST.get("confirm") == "yes":
            deleted = 0
            for pk in list(queryset.values_list("pk", flat=True)):
                # Read afresh: unfolding an inner summary retires the ones built on it,
                # which may be selected too and must not be counted twice.
                summary = Summary.objects.filter(pk=pk).first()
                if summary is not None:
                    deleted += services.unfold(summary)
            self.message_user(
                request,
                f"Unfolded {deleted} summary row(s); their originals are recalled verbatim.",
                messages.SUCCESS,
            )
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Unfold summaries?",
            "opts": self.model._meta,
            "summaries": queryset.select_related("coverage", "thread"),
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "agentmemory/admin/unfold_confirmation.html", context)


# ---------------------------------------------------------------- folded spans and records


@admin.register(FoldedSpan)
class FoldedSpanAdmin(ReadOnlyAdmin, OriginalsLookupGuard, RefusingAdmin):
    list_display = (
        "id", "thread", "message_count", "iteration", "model", "retain", "prompt_tokens",
        "completion_tokens", "created_at", "expires_at", "expand_link",
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
        "injection_flags", "fingerprint", "span_fingerprint", "prompt_hash", "temperature",
        "seed", "library_version", "signature", "tampered_at", "created_at", "expires_at",
        "expand_link",
    )
    readonly_fields = fields

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

    @admin.display(description="originals")
    def expand_link(self, obj: FoldedSpan) -> str:
        if not may_read(obj):
            return "-"  # no link this user could follow
        return format_html(
            '<a href="{}">expand</a>',
            reverse("admin:agentmemory_foldedspan_expand", args=[obj.pk]),
        )

    def get_urls(self) -> list[URLPattern]:
        expand = path(
            "<int:span_id>/expand/",
            self.admin_site.admin_view(self.expand_view),
            name="agentmemory_foldedspan_expand",
        )
        return [expand, *super().get_urls()]

    def expand_view(self, request: HttpRequest, span_id: int) -> HttpResponse:
        """The window summary message beside its retained originals, or a plain "not kept"."""
        if not self.has_view_permission(request):
            return self.refuse(request, "Expanding needs the permission to view folded spans.")
        span = get_object_or_404(
            self.get_queryset(request).select_related("thread").prefetch_related("nested_spans"),
            pk=span_id,
        )
        if not may_read(span):
            return self.refuse(request, REFUSAL, span)
        label, text, note = split_summary(span.content, span.missing_facts)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Folded span #{span.pk}",
            "opts": self.model._meta,
            "span": span,
            "label": label,
            "model_text": text,
            "links": links(request, self.admin_site),
            "fact_note": note,
            "retained": span.messages is not None,
            "messages_shown": span.messages or [],
            "expanded": expand_span(span, recursive=True) if span.nested_spans.all() else None,
        }
        return TemplateResponse(request, "agentmemory/admin/span_expand.html", context)


@admin.register(FoldLatch)
class FoldLatchAdmin(ReadOnlyAdmin):
    list_display = (
        "id", "thread", "purpose", "reason", "entry_count", "span_tokens", "model", "created_at"
    )
    list_filter = ("purpose", "reason", "model")
    search_fields = ("span_key", "start_key", "model", "thread__client_key")
    list_select_related = ("thread",)


@admin.register(SummarizerCall)
class SummarizerCallAdmin(ReadOnlyAdmin):
    list_display = (
        "created_at", "thread", "purpose", "model", "outcome", "entry_count", "attempt",
        "estimated_tokens", "prompt_tokens", "completion_tokens", "duration_ms", "error_class",
        "error_message", "summary_id",
    )
    list_filter = ("outcome", "purpose", "model", "backend")
    search_fields = ("model", "backend", "error_class", "span_key", "thread__client_key")
    list_select_related = ("thread",)
    date_hierarchy = "created_at"


# ---------------------------------------------------------------- receipts and quotas


@admin.register(RecallReceipt)
class RecallReceiptAdmin(ReadOnlyAdmin):
    list_display = ("id", "thread", "turn", "budget_tokens", "tokens", "decline",
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
                '<ol>{}</ol><p class="am-withheld">The text is withheld: it can hold originals '
                "that a summary now hides, and reading them needs permission.</p>",
                rows,
            )
        return format_html('<ol>{}</ol><pre class="am-text">{}</pre>', rows, replay(obj).text)


@admin.register(OwnerQuota)
class OwnerQuotaAdmin(admin.ModelAdmin):
    list_display = ("owner", "daily_tokens", "used_today")
    raw_id_fields = ("owner",)
    search_fields = (f"owner__{get_user_model().USERNAME_FIELD}",)
    list_select_related = ("owner",)

    @admin.display(description="tokens used today")
    def used_today(self, obj: OwnerQuota) -> int:
        return tokens_used_today(obj.owner_id)
