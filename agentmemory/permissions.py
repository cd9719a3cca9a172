"""Who may read the text a summary hides: one rule, used by the admin and the API.

The text of a covered original (an entry a summary stands for, a folded span's
messages, a recall receipt's context, the facts a fact note or a coverage lists from
the originals) belongs to the thread's owner. A user reads it when they own the
thread, or when they were granted ``agentmemory.expand_summary``: directly, through a
group, or by an authentication backend. Superuser status alone is not a grant, in the
admin as in the API: reading other people's conversations is an act a project grants
to named reviewers, and a grant leaves a trace in the admin's history that being a
superuser does not.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Permission
from django.db.models import Q

EXPAND_APP_LABEL = "agentmemory"
EXPAND_CODENAME = "expand_summary"
EXPAND_PERMISSION = f"{EXPAND_APP_LABEL}.{EXPAND_CODENAME}"
REFUSAL = (
    "Reading the text a summary hides needs the permission “Can expand a summary into "
    "its originals” (agentmemory.expand_summary), granted to your user or one of its "
    "groups; being a superuser does not grant it."
)


def expand_refusal(owner_id: int | None) -> str:
    """Why a user who neither owns the thread (owned by ``owner_id``) nor holds the grant
    is refused the text its summaries hide, and what would open it (`REFUSAL`)."""
    if owner_id is None:
        whose = ("This thread has no owner (it was created without one), so nobody reads "
                 "what its summaries hide as its owner; an agent's thread created with its "
                 "user as owner, Thread.objects.create(owner=user), is open to that user.")
    else:
        whose = "This thread belongs to another user, who reads what its summaries hide."
    return f"{whose} {REFUSAL}"


_CACHE = "_agentmemory_expand_cache"  # on the user object, as Django caches permissions


def holds_expand(user: Any) -> bool:
    """True when ``user`` was granted ``expand_summary``; superuser status does not count."""
    if not (user.is_authenticated and user.is_active):
        return False
    if not user.is_superuser:
        return bool(user.has_perm(EXPAND_PERMISSION))
    # Django answers every has_perm of a superuser with True (ModelBackend too), so a
    # superuser's grant is read from the rows that record it.
    if not hasattr(user, _CACHE):
        granted = Permission.objects.filter(
            content_type__app_label=EXPAND_APP_LABEL, codename=EXPAND_CODENAME
        ).filter(Q(user=user) | Q(group__user=user))
        setattr(user, _CACHE, granted.exists())
    return bool(getattr(user, _CACHE))


def may_expand(user: Any, owner_id: int | None) -> bool:
    """May ``user`` read the hidden text of a thread owned by ``owner_id``?"""
    if user.is_authenticated and owner_id is not None and owner_id == user.pk:
        return True
    return holds_expand(user)


def expandable_rows(user: Any, thread_field: str = "thread") -> Q | None:
    """The rows whose hidden text ``user`` may read, as a filter over ``thread_field``;
    ``None`` when that is every row (no filter to apply)."""
    if holds_expand(user):
        return None
    if not user.is_authenticated:
        return Q(pk__in=[])
    return Q(**{f"{thread_field}__owner": user.pk})
