"""Who may see what: owners see their own threads; nobody else learns they exist."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.http import Http404
from rest_framework.exceptions import NotAuthenticated
from rest_framework.request import Request

from agentmemory.models import Thread
from agentmemory.permissions import holds_expand
from agentmemory.sql import owned_thread as owned_by_id

if TYPE_CHECKING:
    from django.contrib.auth.models import _User

def authenticated_user(request: Request) -> _User:
    """The requesting user, who may own threads. The views require IsAuthenticated, so
    an anonymous request is refused before it gets here."""
    user = request.user
    if not user.is_authenticated:
        raise NotAuthenticated()
    return user


def owned_thread(request: Request, thread_id: int) -> Thread:
    """The thread if the requesting user owns it; 404 otherwise, staff included."""
    user = authenticated_user(request)
    if isinstance(user.pk, int):
        # Every request to a thread asks this: its SQL is written once (`agentmemory.sql`).
        thread = owned_by_id(user.pk, thread_id)
    else:  # a user model keyed otherwise (UUID, text): the statement binds integers
        thread = Thread.objects.owned_by(user).filter(pk=thread_id).first()
    if thread is None:
        raise Http404(f"No thread {thread_id}.")
    return thread


def expandable_thread(request: Request, thread_id: int) -> Thread:
    """Originals are shown to the owner, or to a user granted ``expand_summary`` (the one
    rule of :mod:`agentmemory.permissions`: a superuser without the grant is refused)."""
    if holds_expand(authenticated_user(request)):
        thread = Thread.objects.filter(pk=thread_id).first()
        if thread is None:
            raise Http404(f"No thread {thread_id}.")
        return thread
    return owned_thread(request, thread_id)
