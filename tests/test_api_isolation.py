"""Isolation: users see only their own threads, and anything else answers 404.

A matrix over every endpoint and method: another user, a staff user without
permissions, a user granted ``agentmemory.expand_summary`` (who may read the
originals of anyone's summary and nothing else), a superuser (no exception: being a
superuser is not a grant) and a superuser granted the permission through a group (an
expander like any other), each through a different authentication class. Every
refusal is a 404 that reads like a missing id, and leaves the owner's data as it was.
Runs on SQLite and PostgreSQL alike; nothing here is skipped.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agentmemory import services
from agentmemory.models import (
    EntryKind,
    FoldedSpan,
    FoldLatch,
    MemoryEntry,
    RecallReceipt,
    SummarizerCall,
    SummaryCoverage,
    Thread,
)
from tests.helpers import add_turns, api_client_of, turn_messages

pytestmark = pytest.mark.django_db

API = "/api/memory/"
MISSING = 987_654_321
FOLD = {"preserve_recent": 2, "trigger_min_entries": 4, "load_count": 40}


@dataclass(frozen=True)
class Endpoint:
    name: str
    method: str
    path: str  # with {thread}, {entry}, {summary}, {receipt}
    body: Any = None

    @property
    def child(self) -> str | None:
        """The id below the thread that this path names, if any."""
        for name in ("entry", "summary", "receipt"):
            if "{" + name + "}" in self.path:
                return name
        return None


def window(first_turn: int = 1) -> list[dict[str, Any]]:
    """A pinned request and 60 messages: the default sliding window (40) folds some."""
    body = [message for n in range(first_turn, first_turn + 15) for message in turn_messages(n)]
    return [{"role": "user", "content": "Chase every late order."}, *body[1:61]]


#: Every endpoint under a thread, with a body that the owner's request would accept.
ENDPOINTS = [
    Endpoint("thread-retrieve", "get", "threads/{thread}/"),
    Endpoint("thread-put", "put", "threads/{thread}/", {"title": "taken over"}),
    Endpoint("thread-patch", "patch", "threads/{thread}/", {"title": "taken over"}),
    Endpoint("thread-delete", "delete", "threads/{thread}/"),
    Endpoint("entries-list", "get", "threads/{thread}/entries/"),
    Endpoint("entries-append", "post", "threads/{thread}/entries/",
             {"role": "user", "content": "planted"}),
    Endpoint("entries-append-batch", "post", "threads/{thread}/entries/",
             {"entries": [{"role": "user", "content": "planted"}]}),
    Endpoint("entry-retrieve", "get", "threads/{thread}/entries/{entry}/"),
    Endpoint("entry-delete", "delete", "threads/{thread}/entries/{entry}/"),
    Endpoint("recall", "post", "threads/{thread}/recall/", {"budget_tokens": 2000}),
    Endpoint("fold-inline", "post", "threads/{thread}/fold/", {"mode": "inline"}),
    Endpoint("fold-background", "post", "threads/{thread}/fold/", {"mode": "background"}),
    Endpoint("summaries-list", "get", "threads/{thread}/summaries/"),
    Endpoint("summary-retrieve", "get", "threads/{thread}/summaries/{summary}/"),
    Endpoint("summary-delete", "delete", "threads/{thread}/summaries/{summary}/"),
    Endpoint("originals", "get", "threads/{thread}/summaries/{summary}/originals/"),
    Endpoint("originals-recursive", "get",
             "threads/{thread}/summaries/{summary}/originals/?recursive=1"),
    Endpoint("compact", "post", "threads/{thread}/compact/", {"messages": window()}),
    Endpoint("folds-list", "get", "threads/{thread}/folds/"),
    Endpoint("folds-lookup", "post", "threads/{thread}/folds/lookup/",
             {"message": {"role": "user", "content": "{span}"}}),
    Endpoint("usage", "get", "threads/{thread}/usage/"),
    Endpoint("receipts-list", "get", "threads/{thread}/recalls/"),
    Endpoint("receipts-at-turn", "get", "threads/{thread}/recalls/?turn=3"),
    Endpoint("receipt-retrieve", "get", "threads/{thread}/recalls/{receipt}/"),
    Endpoint("thread-savings", "get", "threads/{thread}/savings/"),
    Endpoint("thread-search", "get", "threads/{thread}/search/?q=order"),
]
#: The endpoints without a thread in the path: each answers for the requesting user.
USER_ENDPOINTS = [
    Endpoint("threads-list", "get", "threads/"),
    Endpoint("threads-create", "post", "threads/", {"title": "mine"}),
    Endpoint("owner-savings", "get", "savings/"),
    Endpoint("owner-search", "get", "search/?q=order"),
]
BY_NAME = {endpoint.name: endpoint for endpoint in ENDPOINTS}
ORIGINALS = {"originals", "originals-recursive"}
OUTSIDERS = ["other-user", "staff-user", "expander", "superuser", "granted-superuser"]
#: The outsiders who may read the originals of anyone's summary.
EXPANDERS = {"expander", "granted-superuser"}
#: The username each outsider logs in with.
USERNAMES = {"other-user": "bob", "staff-user": "staff", "expander": "erin",
             "superuser": "root", "granted-superuser": "groot"}


@dataclass
class World:
    owner: Any
    thread: Thread
    entry: MemoryEntry
    summary: MemoryEntry  # nested: it covers an earlier summary
    span: FoldedSpan
    receipt: RecallReceipt
    other: Any
    other_thread: Thread
    other_entry: MemoryEntry
    other_summary: MemoryEntry


def build_thread(
    owner: Any, title: str, first_turn: int
) -> tuple[Thread, MemoryEntry, MemoryEntry, FoldedSpan]:
    thread = Thread.objects.create(owner=owner, title=title, metadata={"owner": title})
    add_turns(thread, 3, with_tools=False)
    inner = services.fold(thread, **FOLD).summary
    add_turns(thread, 2, start=4, with_tools=False)
    outer = services.fold(thread, **FOLD).summary
    assert inner is not None and outer is not None
    inner.refresh_from_db()
    assert inner.covered_by_id == outer.pk
    # Each owner folds other orders, so their spans' contents differ.
    span = services.compact(thread, window(first_turn)).span
    assert span is not None
    services.recall(thread, 4000, mode="background")  # recorded: RECEIPTS is on
    entry = MemoryEntry.objects.filter(thread=thread, kind=EntryKind.MESSAGE).first()
    assert entry is not None
    return thread, entry, outer, span


@pytest.fixture(autouse=True)
def _fast_passwords_and_fresh_throttle_cache(settings: Any, fresh_cache: None) -> None:
    # Basic and session auth hash a password per request; PBKDF2 would dominate the run.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]



@pytest.fixture
def world(eager_celery: None, settings: Any) -> World:
    settings.AGENTMEMORY = {"RECEIPTS": True}
    users = get_user_model().objects
    owner = users.create_user("alice", password="pw-alice")
    other = users.create_user("bob", password="pw-bob")
    thread, entry, summary, span = build_thread(owner, "alice's", 1)
    other_thread, other_entry, other_summary, _ = build_thread(other, "bob's", 50)
    receipt = RecallReceipt.objects.get(thread=thread)
    return World(owner, thread, entry, summary, span, receipt, other, other_thread, other_entry,
                 other_summary)


def actor(name: str, world: World) -> APIClient:
    """An authenticated client for one outsider, each through another auth class."""
    users = get_user_model().objects
    client = APIClient()
    if name == "other-user":  # token authentication
        token = Token.objects.create(user=world.other)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    elif name == "staff-user":  # basic authentication; staff, but no permissions
        users.create_user("staff", password="pw-staff", is_staff=True)
        pair = base64.b64encode(b"staff:pw-staff").decode()
        client.credentials(HTTP_AUTHORIZATION=f"Basic {pair}")
    elif name == "expander":  # session authentication; may expand any summary
        expander = users.create_user("erin", password="pw-erin")
        expander.user_permissions.add(
            Permission.objects.get(codename="expand_summary", content_type__app_label="agentmemory")
        )
        assert client.login(username="erin", password="pw-erin")
    elif name == "superuser":  # Django's has_perm says yes to everything: not a grant here
        client.force_authenticate(users.create_superuser("root", password="pw-root"))
    elif name == "granted-superuser":  # granted through a group, like any reviewer
        reviewers = Group.objects.create(name="reviewers")
        reviewers.permissions.add(
            Permission.objects.get(codename="expand_summary", content_type__app_label="agentmemory")
        )
        superuser = users.create_superuser("groot", password="pw-groot")
        superuser.groups.add(reviewers)
        client.force_authenticate(superuser)
    else:
        raise AssertionError(name)
    return client


def owner_client(world: World) -> APIClient:
    return api_client_of(world.owner)


def fill(endpoint: Endpoint, *, thread: int, entry: int, summary: int,
         receipt: int | None = None) -> str:
    receipt = summary if receipt is None else receipt
    return API + endpoint.path.format(thread=thread, entry=entry, summary=summary,
                                      receipt=receipt)


def body_of(endpoint: Endpoint, world: World) -> Any:
    if endpoint.body is None:
        return None
    text = json.dumps(endpoint.body).replace("{span}", json.dumps(world.span.content)[1:-1])
    return json.loads(text)


def call(client: APIClient, endpoint: Endpoint, path: str, body: Any) -> Any:
    method = getattr(client, endpoint.method)
    if body is None:
        return method(path)
    return method(path, body, format="json")


def a_paths(endpoint: Endpoint, world: World) -> str:
    return fill(endpoint, thread=world.thread.pk, entry=world.entry.pk,
                summary=world.summary.pk, receipt=world.receipt.pk)


def snapshot(world: World) -> dict[str, Any]:
    """Everything of the owner's that an outsider might change."""
    thread = world.thread
    entries = MemoryEntry.objects.filter(thread=thread)
    return {
        "thread": Thread.objects.filter(pk=thread.pk).values(
            "title", "metadata", "client_key", "ttl", "write_tier", "last_turn", "last_position"
        ).first(),
        "entries": list(entries.order_by("pk").values_list("pk", "content", "covered_by_id")),
        "coverage": SummaryCoverage.objects.filter(summary__thread=thread).count(),
        "spans": FoldedSpan.objects.filter(thread=thread).count(),
        "latches": FoldLatch.objects.filter(thread=thread).count(),
        "calls": SummarizerCall.objects.filter(thread=thread).count(),
        "receipts": RecallReceipt.objects.filter(thread=thread).count(),
        "threads": Thread.objects.filter(owner=world.owner).count(),
    }


def assert_reads_like_missing(response: Any, missing: Any, real_id: int) -> None:
    """A refusal says no more than an id that never existed would."""
    assert response.status_code == 404, (response.status_code, response.content)
    assert missing.status_code == 404
    assert response.content.decode().replace(str(real_id), "ID") == (
        missing.content.decode().replace(str(MISSING), "ID")
    )


# ---------------------------------------------------------------- the owner


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: e.name)
def test_the_owner_reaches_every_endpoint(endpoint: Endpoint, world: World) -> None:
    """The control: every path of the matrix is real, so its 404s mean isolation."""
    response = call(owner_client(world), endpoint, a_paths(endpoint, world),
                    body_of(endpoint, world))
    assert response.status_code in (200, 201, 202, 204), (response.status_code,
                                                          response.content)
    if endpoint.name == "folds-lookup":
        assert response.json()["span"]["id"] == world.span.pk


# ---------------------------------------------------------------- outsiders


@pytest.mark.parametrize("who", OUTSIDERS)
@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: e.name)
def test_outsiders_get_404_on_the_owners_objects(
    endpoint: Endpoint, who: str, world: World
) -> None:
    client = actor(who, world)
    before = snapshot(world)
    response = call(client, endpoint, a_paths(endpoint, world), body_of(endpoint, world))
    if who in EXPANDERS and endpoint.name in ORIGINALS:
        assert response.status_code == 200, response.content
        body = response.json()
        assert body["summary"]["id"] == world.summary.pk
        expected = set(
            MemoryEntry.objects.filter(covered_by=world.summary).values_list("pk", flat=True)
        )
        if endpoint.name == "originals":
            assert {row["id"] for row in body["originals"]} == expected
        else:
            assert {row["kind"] for row in body["originals"]} == {"message"}
    else:
        missing = call(
            client,
            endpoint,
            fill(endpoint, thread=MISSING, entry=world.entry.pk, summary=world.summary.pk,
                 receipt=world.receipt.pk),
            body_of(endpoint, world),
        )
        assert_reads_like_missing(response, missing, world.thread.pk)
    assert snapshot(world) == before


#: The endpoints that name an object below the thread.
CHILDREN = [endpoint for endpoint in ENDPOINTS if endpoint.child]


@pytest.mark.parametrize("who", OUTSIDERS)
@pytest.mark.parametrize("endpoint", CHILDREN, ids=lambda e: e.name)
def test_an_own_thread_does_not_open_the_owners_entries(
    endpoint: Endpoint, who: str, world: World
) -> None:
    """Bob's thread id with Alice's entry, summary or receipt id: nothing of Alice's."""
    client = actor(who, world)
    if who == "other-user":
        thread = world.other_thread.pk
    else:
        outsider = get_user_model().objects.get(username=USERNAMES[who])
        thread = Thread.objects.create(owner=outsider, title="own").pk
        add_turns(Thread.objects.get(pk=thread), 1)
    real = {"entry": world.entry.pk, "summary": world.summary.pk,
            "receipt": world.receipt.pk}[endpoint.child or ""]
    before = snapshot(world)
    response = call(client, endpoint, fill(endpoint, thread=thread, entry=world.entry.pk,
                                           summary=world.summary.pk, receipt=world.receipt.pk),
                    None)
    missing = call(client, endpoint, fill(endpoint, thread=thread, entry=MISSING,
                                          summary=MISSING, receipt=MISSING), None)
    assert_reads_like_missing(response, missing, real)
    assert snapshot(world) == before


@pytest.mark.parametrize("who", OUTSIDERS)
@pytest.mark.parametrize(
    "endpoint", [e for e in ENDPOINTS if e.body is not None], ids=lambda e: e.name
)
def test_bad_bodies_on_the_owners_thread_are_404_not_400(
    endpoint: Endpoint, who: str, world: World
) -> None:
    """Validation never runs before the ownership check: a 400 would confirm the id."""
    client = actor(who, world)
    before = snapshot(world)
    for body in ({"unknown": 1}, [], {"budget_tokens": -1, "role": "nobody"}):
        response = call(client, endpoint, a_paths(endpoint, world), body)
        assert response.status_code == 404, (body, response.status_code, response.content)
    assert snapshot(world) == before


@pytest.mark.parametrize("who", OUTSIDERS)
def test_lists_never_show_the_owners_data(who: str, world: World) -> None:
    client = actor(who, world)
    threads = client.get(f"{API}threads/")
    assert threads.status_code == 200
    ids = {row["id"] for row in threads.json()["results"]}
    assert world.thread.pk not in ids
    # An owner-wide search reads the caller's own threads, whatever they were granted.
    hits = client.get(f"{API}search/?q=order&limit=50").json()["results"]
    assert {hit["thread_id"] for hit in hits} == ids
    if who == "other-user":
        assert ids == {world.other_thread.pk}
        a_entries = set(MemoryEntry.objects.filter(thread=world.thread).values_list("pk",
                                                                                   flat=True))
        a_spans = set(FoldedSpan.objects.filter(thread=world.thread).values_list("pk", flat=True))
        a_calls = set(
            SummarizerCall.objects.filter(thread=world.thread).values_list("pk", flat=True)
        )
        own = f"{API}threads/{world.other_thread.pk}/"
        for path, owned_by_a in (
            ("entries/?include_covered=1&page_size=500", a_entries),
            ("summaries/?page_size=500", a_entries),
            ("folds/?page_size=500", a_spans),
            ("usage/?page_size=500", a_calls),
        ):
            response = client.get(own + path)
            assert response.status_code == 200
            rows = {row["id"] for row in response.json()["results"]}
            assert rows and not rows & owned_by_a, path
        usage = client.get(own + "usage/").json()["totals"]
        assert usage["calls"] == SummarizerCall.objects.filter(thread=world.other_thread).count()
        receipts = client.get(own + "recalls/").json()["results"]
        assert [row["id"] for row in receipts] == list(
            RecallReceipt.objects.filter(thread=world.other_thread).values_list("pk", flat=True)
        )
        assert client.get(f"{API}savings/").json() == client.get(own + "savings/").json()
        lookup = client.post(own + "folds/lookup/",
                             {"message": {"role": "user", "content": world.span.content}},
                             format="json")
        assert lookup.status_code == 200 and lookup.json()["span"] is None
    else:
        assert ids == set()
        savings = client.get(f"{API}savings/").json()
        assert savings["spent_tokens"] == savings["saved_tokens"] == 0


@pytest.mark.parametrize("who", OUTSIDERS)
def test_a_created_thread_belongs_to_its_creator(who: str, world: World) -> None:
    client = actor(who, world)
    before = snapshot(world)
    response = client.post(f"{API}threads/", {"title": "mine"}, format="json")
    assert response.status_code == 201, response.content
    created = Thread.objects.get(pk=response.json()["id"])
    assert created.owner is not None and created.owner != world.owner
    assert snapshot(world) == before
    # A client_key the owner uses is no clash for someone else, and reveals nothing.
    Thread.objects.filter(pk=world.thread.pk).update(client_key="shared-key")
    again = client.post(f"{API}threads/", {"client_key": "shared-key"}, format="json")
    assert again.status_code == 201, again.content


def test_the_expander_reads_originals_but_cannot_unfold(world: World) -> None:
    client = actor("expander", world)
    path = a_paths(BY_NAME["originals"], world)
    assert client.get(path).status_code == 200
    summary = a_paths(BY_NAME["summary-delete"], world)
    assert client.delete(summary).status_code == 404
    assert MemoryEntry.objects.filter(pk=world.summary.pk).exists()
    # A message is not a summary, whoever asks.
    not_a_summary = path.replace(f"/summaries/{world.summary.pk}/", f"/summaries/{world.entry.pk}/")
    assert client.get(not_a_summary).status_code == 404
    missing_thread = path.replace(f"/threads/{world.thread.pk}/", f"/threads/{MISSING}/")
    assert client.get(missing_thread).status_code == 404


def test_a_superuser_reads_others_originals_only_once_granted(world: World) -> None:
    """Superusers are no exception in the API: ``has_perm`` is True for them, but only a
    recorded grant of ``expand_summary`` opens another owner's originals."""
    root = get_user_model().objects.create_superuser("root", password="pw-root")
    assert root.has_perm("agentmemory.expand_summary")  # Django's implicit answer
    path = a_paths(BY_NAME["originals"], world)
    client = APIClient()
    client.force_authenticate(root)
    assert client.get(path).status_code == 404

    root.user_permissions.add(
        Permission.objects.get(codename="expand_summary", content_type__app_label="agentmemory")
    )
    granted = APIClient()
    granted.force_authenticate(get_user_model().objects.get(pk=root.pk))  # no cached answer
    response = granted.get(path)
    assert response.status_code == 200, response.content
    assert {row["id"] for row in response.json()["originals"]} == set(
        MemoryEntry.objects.filter(covered_by=world.summary).values_list("pk", flat=True)
    )
    # The grant opens originals only: the rest of the thread still answers 404.
    assert granted.get(a_paths(BY_NAME["summary-retrieve"], world)).status_code == 404


def test_the_matrix_covers_every_route_and_method() -> None:
    """A new endpoint or method fails here until it joins the matrix above."""
    from django.urls import URLPattern

    from agentmemory.api import urls

    def shape(path: str) -> str:
        path = path.split("?")[0]
        for name in ("thread", "entry", "summary", "receipt"):
            path = path.replace("{" + name + "}", "<id>")
        return path

    covered = {(shape(e.path), e.method) for e in [*ENDPOINTS, *USER_ENDPOINTS]}
    routes = set()
    for pattern in urls.urlpatterns:
        assert isinstance(pattern, URLPattern)
        if pattern.name == "schema":
            continue  # the OpenAPI document, public by design
        if pattern.name == "unknown-path":
            continue  # a 404 for everybody (after authentication)
        view = pattern.callback.view_class
        route = re.sub(r"<int:\w+>", "<id>", str(pattern.pattern))
        for method in view.http_method_names:
            if method not in ("options", "head") and hasattr(view, method):
                routes.add((route, method))
    assert routes == covered


# ---------------------------------------------------------------- anonymous


@pytest.mark.parametrize(
    "credentials",
    [None, "Token 0000000000000000000000000000000000000000",
     "Basic " + base64.b64encode(b"alice:wrong").decode()],
    ids=["none", "bad-token", "bad-password"],
)
@pytest.mark.parametrize(
    "endpoint",
    [*USER_ENDPOINTS, *ENDPOINTS],
    ids=lambda e: e.name,
)
def test_unauthenticated_requests_are_refused(
    endpoint: Endpoint, credentials: str | None, world: World
) -> None:
    client = APIClient()
    if credentials:
        client.credentials(HTTP_AUTHORIZATION=credentials)
    before = snapshot(world)
    threads = Thread.objects.count()
    response = call(client, endpoint, a_paths(endpoint, world), body_of(endpoint, world))
    assert response.status_code in (401, 403), (response.status_code, response.content)
    assert snapshot(world) == before and Thread.objects.count() == threads
