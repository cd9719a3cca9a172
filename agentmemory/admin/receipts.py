"""Recall receipts: the context exactly as sent, the declines and the settings in force,
said in words."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.db.models import QuerySet, Value
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from agentmemory.admin.base import ReadOnlyAdmin, links, thread_column
from agentmemory.admin.filters import ExpiredFilter, ReasonFilter
from agentmemory.admin.text import expandable, may_read
from agentmemory.folding.reasons import in_words, label
from agentmemory.models import EntryKind, MemoryEntry, RecallReceipt
from agentmemory.trust.replay import replay


def _count(value: Any, one: str, many: str, none: str) -> str:
    if value is None:
        return none
    return one.format(n=f"{value:,}") if value == 1 else many.format(n=f"{value:,}")


def _share(value: Any, text: str, none: str = "") -> str:
    return none if value is None else text.format(p=f"{value:.0%}")


def _quoted(value: Any) -> str:
    return f"“{value}”" if value else "none"


#: Each recall option a receipt records: the setting it defaults from, and its value in
#: words (a receipt written by another version may lack some, or hold others).
SETTING_WORDS: dict[str, tuple[str, Callable[[Any], str]]] = {
    "mode": ("RECALL_MODE", lambda v: {
        "inline": "inline: a due fold happens inside the recall",
        "background": "background: the recall never calls a model; a Celery task folds",
    }.get(v, str(v))),
    "load_count": ("LOAD_COUNT", lambda v: _count(
        v, "load the newest entry", "load the newest {n} entries, and fold by counts",
        "load as much as the room can show, and fold by tokens")),
    "tiers": ("TIERS", lambda v: "every tier" if v is None else "tiers " + ", ".join(v)),
    "trigger_min_entries": ("TRIGGER_MIN_ENTRIES", lambda v: _count(
        v, "also fold once 1 entry is loaded", "also fold once {n} entries are loaded",
        "no count trigger")),
    "preserve_recent": ("PRESERVE_RECENT", lambda v: _count(
        v, "a count-driven fold keeps the newest entry verbatim",
        "a count-driven fold keeps the newest {n} entries verbatim", "")),
    "min_fold_entries": ("MIN_FOLD_ENTRIES", lambda v: _count(
        v, "fold at least 1 entry a call", "fold at least {n} entries a call "
        "(or PRESERVE_RECENT, if more)", "")),
    "summary_tier": ("SUMMARY_TIER", lambda v: f"summaries are written in the {v} tier"),
    "decay": ("DECAY", lambda v: "no decay stage" if not v else (
        f"drop entries scoring below {v.get('min_score')} with a half-life of "
        f"{v.get('half_life_seconds'):,.0f} s")),
    "reserve_tokens": ("RESERVE_TOKENS", lambda v: f"keep {v:,} tokens of the budget free "
                       "for the answer"),
    "minimum_tokens": ("MINIMUM_TOKENS", lambda v: f"inject nothing when less than {v:,} "
                       "tokens of room are left"),
    "max_entries": ("MAX_ENTRIES", lambda v: _count(
        v, "at most 1 entry", "at most {n} entries", "no cap on entries")),
    "header": ("FORMAT_HEADER", lambda v: f"header {_quoted(v)}"),
    "footer": ("FORMAT_FOOTER", lambda v: f"footer {_quoted(v)}"),
    "high_water": ("FOLD_HIGH_WATER", lambda v: _share(
        v, "fold when the context would take more than {p} of the room",
        "no token trigger")),
    "trigger_min_tokens": ("FOLD_TRIGGER_MIN_TOKENS", lambda v: (
        "the token trigger applies at every room" if not v else
        f"a room up to {v:,} tokens folds only when full")),
    "low_water": ("FOLD_LOW_WATER", lambda v: _share(
        v, "a fold leaves at most {p} of the room verbatim")),
    "cache_min_tokens": ("FOLD_CACHE_MIN_TOKENS", lambda v: (
        "no planning for the provider's prompt cache" if not v else
        f"the provider caches prefixes of {v:,} tokens or more")),
    "summary_share": ("SUMMARY_SHARE", lambda v: _share(
        v, "summaries take at most {p} of the room")),
    "input_limit": ("FOLD_INPUT_LIMIT", lambda v: f"one summarizer call reads at most {v:,} "
                    "tokens of span"),
}


def described(entry: MemoryEntry | None, kind: str) -> str:
    """A shown entry as the receipt's list names it: a summary by its key, a message by
    its role; one erased since (a receipt outlives only a deletion made outside the
    services) as such."""
    if entry is None:
        return "(no longer stored)"
    return (entry.summary_key or "") if kind == EntryKind.SUMMARY else entry.role


def settings_in_words(config: dict[str, Any]) -> list[tuple[str, str]]:
    """A receipt's settings in force, each as (``AGENTMEMORY`` key, value in words); an
    option this version has no words for is shown as stored."""
    said = []
    for name, value in config.items():
        setting, words = SETTING_WORDS.get(name, (name, repr))
        try:
            text = words(value)
        except (TypeError, ValueError, AttributeError):  # a value of another shape
            text = repr(value)
        said.append((setting, text))
    return said


@admin.register(RecallReceipt)
class RecallReceiptAdmin(ReadOnlyAdmin):
    # Its stylesheet wraps the context as sent, which has lines of any length.
    change_form_template = "agentmemory/admin/receipt_change_form.html"
    list_display = ("id", thread_column, "turn", "budget_tokens", "tokens", "declined",
                    "created_at")
    list_filter = (("decline", ReasonFilter), ("budget_decline", ReasonFilter),
                   ("omitted_reason", ReasonFilter), ExpiredFilter)
    search_fields = ("thread__client_key", "thread__title")
    list_select_related = ("thread",)
    raw_id_fields = ("thread",)
    date_hierarchy = "created_at"
    fields = ("thread", "turn", "budget_tokens", "tokens", "outcome", "settings",
              "created_at", "expires_at", "context_as_sent")
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[RecallReceipt]:
        # Which pages the items may link ride on the row, like the permission itself.
        pages = links(request, self.admin_site)
        return super().get_queryset(request).annotate(
            expandable=expandable(request),
            link_entries=Value(pages["entries"]),
            link_summaries=Value(pages["summaries"]),
        )

    @admin.display(description="declined or left out", ordering="decline")
    def declined(self, obj: RecallReceipt) -> str:
        """Each code of the row by its label, the whole sentence in the title."""
        codes = [code for code in (obj.budget_decline, obj.decline, obj.omitted_reason) if code]
        if not codes:
            return "-"
        return format_html_join(
            "", '<div title="{}">{}</div>', ((in_words(code), label(code)) for code in codes))

    @admin.display(description="what happened")
    def outcome(self, obj: RecallReceipt) -> str:
        said = []
        if obj.budget_decline:
            said.append(("The context was declined", in_words(obj.budget_decline)))
        if obj.decline:
            said.append(("No fold", in_words(obj.decline)))
        if obj.omitted:
            why = ("for that reason" if obj.omitted_reason == obj.budget_decline else
                   in_words(obj.omitted_reason) if obj.omitted_reason else "no reason recorded")
            said.append((f"{obj.omitted:,} visible entr{'y' if obj.omitted == 1 else 'ies'} "
                         "left out", why))
        if obj.folded_summary_id:
            said.append(("Folded", f"this recall wrote summary #{obj.folded_summary_id}."))
        if not said:
            return "A context was given, nothing declined and nothing left out."
        return format_html('<dl class="am-said">{}</dl>', format_html_join(
            "", "<dt>{}</dt><dd>{}</dd>", said))

    @admin.display(description="settings in force")
    def settings(self, obj: RecallReceipt) -> str:
        return format_html('<dl class="am-said">{}</dl>', format_html_join(
            "", "<dt><code>{}</code></dt><dd>{}</dd>", settings_in_words(obj.config)))

    @admin.display(description="the context exactly as sent")
    def context_as_sent(self, obj: RecallReceipt) -> str:
        """Each item links to its entry, or to its summary's expand view (its page without
        the permission); the text only to those who may expand (it can hold originals
        that a summary now hides). No link to a page this user may not open."""
        items = obj.items
        entries = MemoryEntry.objects.in_bulk([item.entry_id for item in items])
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
                    described(entries.get(item.entry_id), item.kind),
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
