"""List filters. Each calls the querysets' rules (:mod:`agentmemory.querysets`) rather
than spelling them again."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from agentmemory.folding.reasons import label
from agentmemory.querysets import ExpiringQuerySet, MemoryEntryQuerySet


class ReasonFilter(admin.AllValuesFieldListFilter):
    """A column of reason codes (`agentmemory.folding.reasons`): each value there is, by
    its label in words."""

    def choices(self, changelist: Any) -> Iterator[Any]:
        first = True
        for choice in super().choices(changelist):
            if not first:  # "All" stays; a value is shown as "code" or "code (count)"
                code, paren, count = str(choice["display"]).partition(" (")
                choice["display"] = (label(code) if code else "none") + paren + count
            first = False
            yield choice


class ExpiredFilter(admin.SimpleListFilter):
    """For every model with ``expires_at`` (its queryset is an `ExpiringQuerySet`)."""

    title = "expiry"
    parameter_name = "expired"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "expired"), ("no", "live"), ("never", "never expires")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        rows = cast(ExpiringQuerySet[Any], queryset)
        if self.value() == "yes":
            return rows.expired(timezone.now())
        if self.value() == "no":
            return rows.unexpired(timezone.now())
        if self.value() == "never":
            return rows.never_expiring()
        return queryset


#: value: (label, the queryset method that selects it)
STATUSES = {
    "review": ("needs review (flagged)", MemoryEntryQuerySet.needs_review),
    "held": ("held for review", MemoryEntryQuerySet.held),
    "tampered": ("tampered", MemoryEntryQuerySet.tampered),
    "retired": ("retired", MemoryEntryQuerySet.retired),
    "live": ("live", MemoryEntryQuerySet.live),
    "lost-facts": ("missing facts", MemoryEntryQuerySet.lost_facts),
}


class StatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(value, label) for value, (label, _) in STATUSES.items()]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        status = STATUSES.get(self.value() or "")
        return queryset if status is None else status[1](queryset)  # type: ignore[arg-type]


class CoveredFilter(admin.SimpleListFilter):
    title = "coverage"
    parameter_name = "covered"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("no", "visible to recall (not covered)"), ("yes", "covered by a summary")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        rows: MemoryEntryQuerySet = queryset  # type: ignore[assignment]
        if self.value() == "no":
            return rows.uncovered()
        if self.value() == "yes":
            return rows.covered()
        return queryset
