"""The admin tests' builders and fixtures: a thread folded twice, staff users with
given permissions, and Django test clients logged in as them.

``tests/conftest.py`` names this module in ``pytest_plugins``, so the fixtures are there
for ``tests/test_admin.py``, ``tests/test_admin_pages.py``, ``tests/test_admin_search.py``
and any other test of the admin without an import; the builders are imported by name.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client

from agentmemory import services
from agentmemory.models import MemoryEntry, Thread
from tests.helpers import turn_messages

#: Turn 1's answer, which no summary repeats (the offline summarizer keeps only user
#: requests and tool names): wherever it appears on a page it came from the original.
ORIGINAL = "Order 1 left the Leipzig depot on Tuesday; courier reference QUOKKA-7731-ZED."
BIG = 100_000
VIEW_PERMISSIONS = [
    f"view_{model}"
    for model in ("thread", "memoryentry", "summary", "foldedspan", "foldlatch", "summarizercall")
]


def append_turns(thread: Thread, start: int, count: int, **fields: Any) -> list[MemoryEntry]:
    """``count`` turns with a tool call each; turn 1's answer is :data:`ORIGINAL`."""
    batch = [m for n in range(start, start + count) for m in turn_messages(n)]
    if start == 1:
        batch[3]["content"] = ORIGINAL
    return services.append(thread, batch, **fields)


class Folded:
    """Turns 1-9 of one thread: ``inner`` covers turns 1-3, ``outer`` covers inner and
    turns 4-7; turns 8-9 are live. ``original`` is turn 1's answer, two levels down."""

    def __init__(self, owner: Any = None) -> None:
        self.thread = Thread.objects.create(owner=owner, title="Parcel chase", client_key="chase")
        first = append_turns(self.thread, 1, 5)
        inner_id = services.recall(self.thread, BIG, load_count=50).folded_summary_id
        append_turns(self.thread, 6, 4)
        outer_id = services.recall(self.thread, BIG, load_count=50).folded_summary_id
        self.inner = MemoryEntry.objects.select_related("coverage").get(pk=inner_id)
        self.outer = MemoryEntry.objects.select_related("coverage").get(pk=outer_id)
        self.original = first[3]
        assert self.original.content == ORIGINAL
        assert self.inner.covered_by_id == self.outer.pk
        assert MemoryEntry.objects.get(pk=self.original.pk).covered_by_id == self.inner.pk
        assert ORIGINAL not in self.inner.content + self.outer.content


def make_user(username: str, *permissions: str, staff: bool = True, **fields: Any) -> Any:
    """A user (staff unless ``staff=False``) with password "pw" and the named
    ``agentmemory`` permissions."""
    user = get_user_model().objects.create_user(
        username, password="pw", is_staff=staff, **fields
    )
    if permissions:
        user.user_permissions.set(
            Permission.objects.filter(
                content_type__app_label="agentmemory", codename__in=permissions
            )
        )
    return user


def logged_in(user: Any, **options: Any) -> Client:
    """A Django test client (built with ``options``) logged in as ``user``."""
    client = Client(**options)
    client.force_login(user)
    return client


@pytest.fixture
def folded() -> Folded:
    """A fresh :class:`Folded` thread, owned by no one."""
    return Folded()


@pytest.fixture
def viewer() -> Client:
    """Staff who may view every agentmemory page but not expand summaries."""
    return logged_in(make_user("viewer", *VIEW_PERMISSIONS))


@pytest.fixture
def expander() -> Client:
    """Staff who may view every agentmemory page and expand summaries."""
    return logged_in(make_user("expander", *VIEW_PERMISSIONS, "expand_summary"))


@pytest.fixture
def superuser() -> Any:
    """The superuser "root" (password "pw")."""
    return get_user_model().objects.create_superuser("root", password="pw")


@pytest.fixture
def root(superuser: Any) -> Client:
    """A client logged in as :func:`superuser`."""
    return logged_in(superuser)
