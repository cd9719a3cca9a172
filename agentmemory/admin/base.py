"""The mixins every admin of the app is built from, and the one pattern of its custom
pages (a URL per object, a link to it, a view that refuses in the admin's look)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar

from django.contrib import admin
from django.contrib.auth import get_permission_codename, get_user_model
from django.contrib.auth.models import Permission
from django.db.models.constants import LOOKUP_SEP
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from agentmemory.models import FoldedSpan, MemoryEntry, RecallReceipt, Summary, Thread
from agentmemory.permissions import EXPAND_PERMISSION, holds_expand

#: Hex digits of a hash shown in a cell; the whole hash is in the cell's title.
HASH_DIGITS = 12
#: Characters of a thread's name in a list's thread column; the whole name is in the title.
THREAD_CHARS = 24


def links(request: HttpRequest, site: admin.AdminSite) -> dict[str, bool]:
    """Which of the app's pages this user may open: a custom page links no refusal."""
    models = {"threads": Thread, "entries": MemoryEntry, "summaries": Summary,
              "spans": FoldedSpan, "receipts": RecallReceipt}
    return {
        name: site.get_model_admin(model).has_view_permission(request)
        for name, model in models.items()
    }


def short_hash(value: str) -> str:
    """A hash as its first :data:`HASH_DIGITS` characters, the whole of it in the title."""
    if not value:
        return "-"
    if len(value) <= HASH_DIGITS:
        return format_html("<code>{}</code>", value)
    return format_html('<code title="{}">{}…</code>', value, value[:HASH_DIGITS])


def figures(*lines: str) -> str:
    """Figures of one list cell, each on its own line and named ("384 prompt"), so a
    narrow column reads them apart."""
    return format_html_join("", '<span class="am-figure">{}</span>', ((line,) for line in lines))


def hash_display(field: str, description: str) -> Callable[[Any, Any], str]:
    """A read-only admin field showing ``field`` through :func:`short_hash`."""

    @admin.display(description=description)
    def display(model_admin: Any, obj: Any) -> str:
        return short_hash(getattr(obj, field))

    return display


@admin.display(description="thread", ordering="thread")
def thread_column(obj: Any) -> str:
    """The row's thread in a list, cut to fit a narrow column; its whole name in the title."""
    name = str(obj.thread) if obj.thread_id is not None else "-"
    shown = Truncator(name).chars(THREAD_CHARS)
    return format_html('<span title="{}">{}</span>', name, shown) if shown != name else name


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


class ReadOnly:
    """A record: viewable, never added, changed or deleted from the admin, superusers
    included (deleting a ledger row would change cost and quota accounting); rows go
    with their thread through the erasure and purge services. For admins and inlines."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyAdmin(ReadOnly, admin.ModelAdmin):
    """A `ReadOnly` model admin."""


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


class PagesAdmin(admin.ModelAdmin):
    """The app's own pages in the admin's look, all on ``agentmemory/admin/base.html``.

    ``pages`` names each custom page of one object (``"timeline"``: URL
    ``<id>/timeline/``, URL name ``agentmemory_thread_timeline``, method
    ``timeline_view(request, object_id)``) and what the refusal calls it. Without the
    model's view permission a page answers 403 saying what it needs; with it, the method
    does the rest and renders through :meth:`render`."""

    pages: ClassVar[dict[str, str]] = {}

    def page_name(self, page: str) -> str:
        return f"{self.model._meta.app_label}_{self.model._meta.model_name}_{page}"

    def get_urls(self) -> list[URLPattern]:
        own = [
            path(
                f"<int:object_id>/{page}/",
                self.admin_site.admin_view(partial(self.open_page, page)),
                name=self.page_name(page),
            )
            for page in self.pages
        ]
        return [*own, *super().get_urls()]

    def open_page(self, page: str, request: HttpRequest, object_id: int) -> HttpResponse:
        if not self.has_view_permission(request):
            opts = self.model._meta
            return self.refuse(
                request,
                f"{self.pages[page]} needs the permission to view {opts.verbose_name_plural}.",
                needs=f"{opts.app_label}.{get_permission_codename('view', opts)}",
            )
        response: HttpResponse = getattr(self, f"{page}_view")(request, object_id)
        return response

    def page_link(self, obj: Any, page: str, text: str) -> str:
        if obj.pk is None:
            return "-"
        url = reverse(f"{self.admin_site.name}:{self.page_name(page)}", args=[obj.pk])
        return format_html('<a href="{}">{}</a>', url, text)

    def render(
        self, request: HttpRequest, template: str, context: dict[str, Any], status: int = 200
    ) -> TemplateResponse:
        """``template`` (under ``agentmemory/admin/``) with the admin's context, this
        model's options for the breadcrumbs and which of the app's pages to link."""
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "changelist": self.has_view_permission(request),
            "links": links(request, self.admin_site),
            **context,
        }
        return TemplateResponse(request, f"agentmemory/admin/{template}", context, status=status)

    def refuse(
        self, request: HttpRequest, reason: str, obj: Any = None, *,
        needs: str = EXPAND_PERMISSION,
    ) -> TemplateResponse:
        """Status 403 in the admin's look, saying why (``reason``) and how to get access:
        the permission ``needs`` (``app_label.codename``) by the name the user form shows
        it under, and a link to the user's own page when they may grant it themselves."""
        shown = obj if obj is not None and self.has_view_permission(request, obj) else None
        context = {"title": "Not shown to you", "reason": reason, "obj": shown,
                   "crumb": "not shown", **access(request, self.admin_site, needs)}
        return self.render(request, "refused.html", context, status=403)


def access(request: HttpRequest, site: admin.AdminSite, needs: str) -> dict[str, Any]:
    """How ``request.user`` gets the permission ``needs``: its label in the user form's
    permission list, and the URL of their own user page in ``site`` when they may change
    it there (a superuser, or staff who may change users), else ``None``."""
    app_label, codename = needs.split(".")
    permission = Permission.objects.filter(
        content_type__app_label=app_label, codename=codename
    ).select_related("content_type").first()
    user_model, user = get_user_model(), request.user
    own_page = None
    if (isinstance(user, user_model) and site.is_registered(user_model)
            and site.get_model_admin(user_model).has_change_permission(request, user)):
        opts = user_model._meta
        own_page = reverse(f"{site.name}:{opts.app_label}_{opts.model_name}_change",
                           args=[user.pk])
    return {"permission": str(permission) if permission else needs, "needs": needs,
            "own_page": own_page}
