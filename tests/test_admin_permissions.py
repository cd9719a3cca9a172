"""One permission rule, everywhere in the admin (issue 12, item 1).

A matrix in Django's test client: every admin URL of the app (changelists, change, add,
delete and history pages, the timeline and the expand views, search, URL lookups and
autocomplete) for staff granted ``agentmemory.expand_summary``, staff who may view
everything but not expand, staff with no agentmemory permission, and a superuser who
was not granted it. Each cell asserts the status code and whether :data:`CANARY`, a
string that exists only in a covered original (its content and metadata), and from
there in the fact note, the missing facts, a recall receipt and a window span's
retained messages, appears in the response. It appears for the expander on the pages
listed in :data:`CANARY_PAGES` and for nobody else anywhere.

The thread belongs to a user who is none of these, so the owner's own access (the
other half of the rule) is tested apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import URLPattern, reverse
from hypothesis import given
from hypothesis import strategies as st

from agentmemory import services
from agentmemory.models import (
    EntryKind,
    FoldedSpan,
    FoldLatch,
    FoldPurpose,
    MemoryEntry,
    OwnerQuota,
    RecallReceipt,
    SummarizerCall,
    SummarizerCircuit,
    Thread,
)
from agentmemory.permissions import REFUSAL
from agentmemory.trust.facts import FACT_NOTE_OPENING, missing_facts_note, split_fact_note
from tests.admin_fixtures import logged_in, make_user
from tests.helpers import AMOUNT, DROPS_AMOUNT, ORDER, recording_settings

pytestmark = pytest.mark.django_db

User = get_user_model()

#: Only in one original: it reaches pages through that original, its summary's fact
#: note and missing facts, a receipt and a span. (An id, so the fact gate lists it.)
CANARY = "CANARY-4417-QX"
SPAN = [
    "Hello, I need some help with a refund for an order that I cancelled right after "
    "placing it, because I picked the wrong size by mistake.",
    f"{CANARY}: my order {ORDER} was charged {AMOUNT} even though I cancelled it on the "
    "same day, and the money has not come back to my account yet.",
    "I would like the money returned to the card that was used for the purchase, not as "
    "store credit, because I do not shop here very often.",
    "The confirmation message said the cancellation went through, so I do not understand "
    "why the charge is still showing on my statement.",
    "Could you also make sure that I am not charged again when the replacement in the "
    "right size ships next week?",
    "Thank you, and please let me know once the refund has been started so that I can keep "
    "an eye on my statement.",
]
KEPT = [
    "Is there anything else you need from me to process this?",
    "Great, I will wait for your confirmation then.",
]
FOLD = {"trigger_min_entries": 6, "preserve_recent": 2, "min_fold_entries": 2}
BIG = 100_000
SETTINGS = recording_settings(
    DROPS_AMOUNT,
    FACT_GATE={"THRESHOLD": 0.9, "ACTION": "append"},
    RECEIPTS=True,
    WINDOW={"CLASS": "agentmemory.window.seams.SlidingWindow", "OPTIONS": {"MAX_MESSAGES": 4}},
)
APP_MODELS = ("thread", "memoryentry", "summary", "foldedspan", "foldlatch", "summarizercall",
              "summarizercircuit", "recallreceipt", "ownerquota")
#: Never added, changed or deleted in the admin, by anyone.
RECORDS = ("foldedspan", "foldlatch", "summarizercall", "summarizercircuit", "recallreceipt")
USERS = ("expander", "viewer", "no-permission", "superuser")


@dataclass
class World:
    thread: Thread
    original: MemoryEntry  # holds the canary; covered by ``summary``
    summary: MemoryEntry  # its fact note lists the canary
    span: FoldedSpan  # retained the canary's message; its note lists the canary
    latch: FoldLatch
    call: SummarizerCall
    receipts: list[RecallReceipt]  # the first sent the original verbatim
    quota: OwnerQuota
    circuit: SummarizerCircuit
    clients: dict[str, Client] = field(default_factory=dict)


def view_all() -> list[str]:
    return [f"view_{model}" for model in APP_MODELS]


@pytest.fixture
def world(settings: Any) -> World:
    settings.AGENTMEMORY = SETTINGS
    owner = User.objects.create_user("alice", password="pw")
    thread = Thread.objects.create(owner=owner, title="Refund chase")
    messages = [{"role": "user", "content": text} for text in SPAN + KEPT]
    messages[1]["metadata"] = {"reference": CANARY}
    first = services.append(thread, messages[:4])
    services.recall(thread, BIG, **FOLD)  # below the trigger: verbatim, and recorded
    services.append(thread, messages[4:])
    summary_id = services.recall(thread, BIG, **FOLD).folded_summary_id
    assert summary_id is not None
    summary = MemoryEntry.objects.select_related("coverage").get(pk=summary_id)
    original = MemoryEntry.objects.get(pk=first[1].pk)
    assert original.covered_by_id == summary.pk and CANARY in original.content
    assert CANARY in summary.coverage.missing_facts and CANARY in summary.content

    window = [{"role": "user", "content": "Draft the refund reply."}] + [
        {"role": ("assistant", "user")[i % 2], "content": text}
        for i, text in enumerate(SPAN + KEPT)
    ]
    span = services.compact(thread, window).span
    assert span is not None and span.messages and CANARY in span.missing_facts
    latch = FoldLatch.objects.create(
        thread=thread, purpose=FoldPurpose.RECALL_FOLD, span_key="k" * 64, reason="not-smaller",
        entry_count=3, model="m",
    )
    call = SummarizerCall.objects.filter(thread=thread).first()
    assert call is not None
    receipts = list(RecallReceipt.objects.filter(thread=thread).order_by("id"))
    assert len(receipts) == 2
    quota = OwnerQuota.objects.create(owner=owner, daily_tokens=1000)
    circuit = SummarizerCircuit.objects.create(backend="tests.Backend", model="m", failures=2,
                                               last_error="HTTP 500")
    return World(thread, original, summary, span, latch, call, receipts, quota, circuit)


def users() -> dict[str, Any]:
    return {
        "expander": make_user("expander", *view_all(), "expand_summary"),
        "viewer": make_user("viewer", *view_all()),
        "no-permission": make_user("nobody"),
        "superuser": User.objects.create_superuser("root", password="pw"),
    }


# ---------------------------------------------------------------- the URLs


def object_ids(world: World) -> dict[str, list[int]]:
    return {
        "thread": [world.thread.pk],
        "memoryentry": [world.original.pk, world.summary.pk],
        "summary": [world.summary.pk],
        "foldedspan": [world.span.pk],
        "foldlatch": [world.latch.pk],
        "summarizercall": [world.call.pk],
        "summarizercircuit": [world.circuit.pk],
        "recallreceipt": [receipt.pk for receipt in world.receipts],
        "ownerquota": [world.quota.pk],
    }


#: The app's admin URL names that take an object id, beside the model they are about.
OBJECT_VIEWS = {"change", "delete", "history", "timeline", "expand"}


def app_url_names() -> set[str]:
    """Every URL name the app's model admins register."""
    names = set()
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label != "agentmemory":
            continue
        for pattern in model_admin.urls:
            if isinstance(pattern, URLPattern) and pattern.name:
                names.add(pattern.name)
    return names


def page_urls(world: World) -> dict[str, str]:
    """One URL per (URL name, object): every page of the app's admin."""
    ids = object_ids(world)
    urls = {"index": reverse("admin:index"),
            "app": reverse("admin:app_list", kwargs={"app_label": "agentmemory"})}
    for name in sorted(app_url_names()):
        model, view = name.removeprefix("agentmemory_").rsplit("_", 1)
        if view in OBJECT_VIEWS:
            for pk in ids[model]:
                urls[f"{model}_{view}:{pk}"] = reverse(f"admin:{name}", args=[pk])
        else:
            urls[f"{model}_{view}"] = reverse(f"admin:{name}")
    return urls


def canary_pages(world: World) -> set[str]:
    """Where the expander reads the canary: everything that shows the original's text."""
    return {
        "memoryentry_changelist",
        f"memoryentry_change:{world.original.pk}",
        f"memoryentry_change:{world.summary.pk}",  # the fact note
        f"summary_change:{world.summary.pk}",  # the fact note and the missing facts
        f"summary_expand:{world.summary.pk}",
        f"thread_timeline:{world.thread.pk}",
        f"foldedspan_change:{world.span.pk}",  # the fact note and the missing facts
        f"foldedspan_expand:{world.span.pk}",
        *(f"recallreceipt_change:{receipt.pk}" for receipt in world.receipts),
    }


def expected_status(who: str, key: str) -> int:
    model, view = key.split(":")[0].rsplit("_", 1) if "_" in key else (key, key)
    if who == "no-permission":
        return {"index": 200, "app": 404}.get(key, 403)
    if key in ("index", "app") or view in ("changelist", "change", "history", "timeline"):
        return 200
    if view == "expand":
        return 200 if who == "expander" else 403
    if who != "superuser":
        return 403  # add and delete: the staff here hold view permissions only
    if view == "add":
        return 200 if model in ("thread", "ownerquota") else 403
    assert view == "delete"
    return 200 if model in ("thread", "memoryentry", "ownerquota") else 403


def test_the_matrix_covers_every_url_the_app_registers(world: World) -> None:
    """A new admin view fails here until the matrix knows what it shows."""
    urls = page_urls(world)
    views = {key.split(":")[0].rsplit("_", 1)[1] for key in urls if "_" in key}
    assert views == {"changelist", "add", "change", "delete", "history", "timeline", "expand"}
    assert {key.split("_")[0] for key in urls if "_" in key} == set(APP_MODELS)
    assert len(app_url_names()) == 5 * len(APP_MODELS) + 3


@pytest.mark.parametrize("who", USERS)
def test_every_admin_page_shows_hidden_text_only_where_allowed(who: str, world: World) -> None:
    client = logged_in(users()[who])
    allowed = canary_pages(world) if who == "expander" else set()
    wrong = []
    for key, url in page_urls(world).items():
        response = client.get(url)
        body = response.content.decode()
        status = expected_status(who, key)
        if response.status_code != status or (CANARY in body) != (key in allowed):
            wrong.append((key, response.status_code, status, CANARY in body))
    assert wrong == [], f"{who}: (page, status, expected status, canary shown)"


def result_count(client: Client, url: str) -> int | None:
    """Rows a changelist found, or ``None`` when the request was refused."""
    response = client.get(url)
    if response.status_code != 200:
        return None
    return int(response.context["cl"].result_count)


@pytest.mark.parametrize("who", USERS)
def test_search_and_url_lookups_find_hidden_text_only_for_the_expander(
    who: str, world: World
) -> None:
    """A row count that answers a search would confirm hidden text a word at a time."""
    client = logged_in(users()[who])
    expander = who == "expander"
    changelist = {model: reverse(f"admin:agentmemory_{model}_changelist") for model in APP_MODELS}
    # What the canary's search finds for the expander: the original and the summary whose
    # fact note lists it (among entries), that summary, and the span whose note lists it.
    found = {"memoryentry": 2, "summary": 1, "foldedspan": 1}
    for model, url in changelist.items():
        count = result_count(client, f"{url}?q={CANARY}")
        if who == "no-permission":
            assert count is None, model
        else:
            assert count == (found.get(model, 0) if expander else 0), (model, count)
    # The summary's own words stay searchable for everyone who may view it.
    words = DROPS_AMOUNT.split(" on ")[0].replace(" ", "+")
    if who != "no-permission":
        assert result_count(client, f"{changelist['summary']}?q={words}") == 1

    lookups = {
        "memoryentry": ["content__icontains", "tool_calls__icontains", "metadata__icontains"],
        "summary": ["content__icontains"],
        "foldedspan": ["messages__icontains", "content__icontains", "missing_facts__icontains"],
    }
    for model, names in lookups.items():
        for name in names:
            response = client.get(f"{changelist[model]}?{name}={CANARY}")
            if who == "no-permission":
                assert response.status_code == 403
            elif expander:
                assert response.status_code == 200, (model, name)
            else:
                assert response.status_code == 400, (model, name)  # refused, not counted


@pytest.mark.parametrize("who", USERS)
def test_autocomplete_finds_hidden_text_only_for_the_expander(who: str, world: World) -> None:
    client = logged_in(users()[who])
    sources = {("memoryentry", "covered_by"): 2,
               ("foldedspan", "nested_spans"): 1}
    for (model, field_name), found in sources.items():
        response = client.get(reverse("admin:autocomplete"), {
            "app_label": "agentmemory", "model_name": model, "field_name": field_name,
            "term": CANARY,
        })
        if who == "no-permission":
            assert response.status_code == 403
            continue
        assert response.status_code == 200, (model, response.status_code)
        results = response.json()["results"]
        assert CANARY not in json.dumps(results)
        assert len(results) == (found if who == "expander" else 0), (model, results)


# ---------------------------------------------------------------- the owner


def test_the_owner_reads_their_own_threads_hidden_text(world: World) -> None:
    """The other half of the rule: the thread's owner needs no grant (as in the API)."""
    owner = Thread.objects.get(pk=world.thread.pk).owner
    assert owner is not None
    owner.is_staff = True
    owner.save()
    owner.user_permissions.set(Permission.objects.filter(
        content_type__app_label="agentmemory", codename__in=view_all()
    ))
    client = logged_in(User.objects.get(pk=owner.pk))
    for url in (
        reverse("admin:agentmemory_summary_expand", args=[world.summary.pk]),
        reverse("admin:agentmemory_foldedspan_expand", args=[world.span.pk]),
        reverse("admin:agentmemory_recallreceipt_change", args=[world.receipts[0].pk]),
        reverse("admin:agentmemory_memoryentry_change", args=[world.original.pk]),
    ):
        response = client.get(url)
        assert response.status_code == 200 and CANARY in response.content.decode(), url
    # Someone else's thread stays hidden from them.
    other = Thread.objects.create(owner=make_user("carol"), title="not theirs")
    services.append(other, [{"role": "user", "content": text} for text in SPAN + KEPT])
    other_summary = services.recall(other, BIG, **FOLD).folded_summary_id
    response = client.get(reverse("admin:agentmemory_summary_expand", args=[other_summary]))
    assert response.status_code == 403 and CANARY not in response.content.decode()


# ---------------------------------------------------------------- links and refusals


def test_expand_links_are_shown_only_to_those_they_open_for(world: World) -> None:
    by_user = users()
    pages = [
        reverse("admin:agentmemory_summary_changelist"),
        reverse("admin:agentmemory_summary_change", args=[world.summary.pk]),
        reverse("admin:agentmemory_foldedspan_changelist"),
        reverse("admin:agentmemory_foldedspan_change", args=[world.span.pk]),
        reverse("admin:agentmemory_thread_timeline", args=[world.thread.pk]),
        *(reverse("admin:agentmemory_recallreceipt_change", args=[receipt.pk])
          for receipt in world.receipts),
    ]
    expand_urls = [
        reverse("admin:agentmemory_summary_expand", args=[world.summary.pk]),
        reverse("admin:agentmemory_foldedspan_expand", args=[world.span.pk]),
    ]
    for who in ("expander", "viewer", "superuser"):
        client = logged_in(by_user[who])
        linked = set()
        for url in pages:
            body = client.get(url).content.decode()
            linked |= {target for target in expand_urls if f'href="{target}"' in body}
            if "/expand/" in body:
                assert who == "expander", (who, url)
        assert linked == (set(expand_urls) if who == "expander" else set()), who


def test_the_timeline_links_only_pages_the_user_may_open(world: World) -> None:
    """Staff who may view threads only: the timeline names summaries and entries without
    linking pages that would refuse them."""
    client = logged_in(make_user("threads-only", "view_thread"))
    body = client.get(
        reverse("admin:agentmemory_thread_timeline", args=[world.thread.pk])
    ).content.decode()
    assert world.summary.summary_key in body and CANARY not in body
    for name in ("summary", "memoryentry"):
        prefix = reverse(f"admin:agentmemory_{name}_changelist")
        assert f'href="{prefix}' not in body, name
    assert "/expand/" not in body
    # With the view permissions, the same rows link their pages.
    viewer = logged_in(users()["viewer"])
    body = viewer.get(
        reverse("admin:agentmemory_thread_timeline", args=[world.thread.pk])
    ).content.decode()
    for url in (reverse("admin:agentmemory_summary_change", args=[world.summary.pk]),
                reverse("admin:agentmemory_memoryentry_change", args=[world.original.pk])):
        assert f'href="{url}"' in body


def test_a_receipt_links_only_pages_the_user_may_open(world: World) -> None:
    url = reverse("admin:agentmemory_recallreceipt_change", args=[world.receipts[1].pk])
    summary = reverse("admin:agentmemory_summary_change", args=[world.summary.pk])
    entries = reverse("admin:agentmemory_memoryentry_changelist")
    only_receipts = logged_in(make_user("receipts-only", "view_recallreceipt"))
    body = only_receipts.get(url).content.decode()
    assert f"#{world.summary.pk}" in body and CANARY not in body
    assert summary not in body and f'href="{entries}' not in body
    viewer = logged_in(users()["viewer"]).get(url).content.decode()
    assert f'href="{summary}"' in viewer and f'href="{entries}' in viewer


@pytest.mark.parametrize("who", ["viewer", "superuser"])
def test_a_refused_expand_view_explains_itself_in_the_admins_look(
    who: str, world: World
) -> None:
    client = logged_in(users()[who])
    for url, crumb in (
        (reverse("admin:agentmemory_summary_expand", args=[world.summary.pk]),
         reverse("admin:agentmemory_summary_change", args=[world.summary.pk])),
        (reverse("admin:agentmemory_foldedspan_expand", args=[world.span.pk]),
         reverse("admin:agentmemory_foldedspan_change", args=[world.span.pk])),
    ):
        response = client.get(url)
        assert response.status_code == 403
        rendered = [template.name for template in response.templates]
        assert rendered[0] == "agentmemory/admin/refused.html"
        assert "admin/base_site.html" in rendered
        body = response.content.decode()
        assert REFUSAL.replace("“", "&ldquo;")[:40] in body or REFUSAL[:40] in body
        assert 'class="breadcrumbs"' in body and f'href="{crumb}"' in body
        assert 'id="site-name"' in body  # the admin's header, not a bare 403
        assert CANARY not in body
        # Why: the thread is another user's. How: the permission by the name the user
        # form lists it under; a superuser may grant it to themself on their own page.
        refused = refusal_text(body)
        assert "This thread belongs to another user" in refused
        assert f"“{EXPAND_LABEL}”" in refused
        own_page = reverse("admin:auth_user_change", args=[response.wsgi_request.user.pk])
        if who == "superuser":
            assert "You may grant it to yourself" in refused
            assert f'href="{own_page}"' in body
        else:
            assert "ask an administrator to grant" in refused
            assert "/auth/user/" not in body


def test_a_user_without_view_permission_is_refused_without_learning_the_object(
    world: World,
) -> None:
    client = logged_in(make_user("expander-only", "expand_summary"))
    response = client.get(reverse("admin:agentmemory_summary_expand", args=[world.summary.pk]))
    assert response.status_code == 403
    body = response.content.decode()
    assert "permission to view summaries" in body and world.summary.summary_key not in body
    assert reverse("admin:agentmemory_summary_changelist") not in body  # no dead link
    assert ("ask an administrator to grant “Agent memory | summary | Can view summary” "
            "(agentmemory.view_summary)") in refusal_text(body)
    timeline = client.get(reverse("admin:agentmemory_thread_timeline", args=[world.thread.pk]))
    assert timeline.status_code == 403 and "permission to view threads" in timeline.content.decode()


#: The expand permission as Django's user form lists it (app, model, name).
EXPAND_LABEL = "Agent memory | memory entry | Can expand a summary into its originals"


def refusal_text(body: str) -> str:
    from tests.test_admin import text_by_id

    return " ".join(text_by_id(body, "am-refused").split())


def test_a_superuser_refused_an_ownerless_thread_learns_why_and_grants_themself(
    settings: Any,
) -> None:
    """The first thing a developer tries after an agent example: a thread created without
    an owner, opened in the admin as a superuser. The refusal says the thread has no
    owner and links the superuser's own page, where the permission it names is granted."""
    settings.AGENTMEMORY = SETTINGS
    thread = Thread.objects.create(title="agent run")  # no owner
    services.append(thread, [{"role": "user", "content": text} for text in SPAN + KEPT])
    summary = services.recall(thread, BIG, **FOLD).folded_summary_id
    root = User.objects.create_superuser("root", password="pw")
    client = logged_in(root)
    expand = reverse("admin:agentmemory_summary_expand", args=[summary])

    response = client.get(expand)
    assert response.status_code == 403
    refused = refusal_text(response.content.decode())
    assert "This thread has no owner" in refused and "owner=user" in refused
    assert "being a superuser does not grant it" in refused
    own_page = reverse("admin:auth_user_change", args=[root.pk])
    assert f'href="{own_page}"' in response.content.decode()

    # Following it: the permission is listed under the name the refusal gave; saving the
    # form with it chosen grants it, and the admin's history records the change.
    page = client.get(own_page)
    form = page.context["adminform"].form
    permission = Permission.objects.get(codename="expand_summary")
    assert dict(form.fields["user_permissions"].choices)[permission.pk] == EXPAND_LABEL
    data = form_data(form)
    data["user_permissions"] = [*data.get("user_permissions", []), permission.pk]
    assert client.post(own_page, data).status_code == 302
    assert LogEntry.objects.filter(object_id=str(root.pk), user=root).exists()

    granted = logged_in(User.objects.get(pk=root.pk)).get(expand)
    assert granted.status_code == 200 and CANARY in granted.content.decode()


def form_data(form: Any) -> dict[str, Any]:
    """What a browser posts back for an unchanged admin form."""
    from django.forms import MultiWidget

    data: dict[str, Any] = {}
    for name, form_field in form.fields.items():
        value = form[name].value()
        if form_field.disabled or value is None or value is False:
            continue
        if isinstance(form_field.widget, MultiWidget):
            for index, part in enumerate(form_field.widget.decompress(value)):
                data[f"{name}_{index}"] = "" if part is None else part
        else:
            data[name] = "on" if value is True else value
    return data


# ---------------------------------------------------------------- records


def test_records_cannot_be_added_changed_or_deleted_by_a_superuser(world: World) -> None:
    client = logged_in(users()["superuser"])
    ids = object_ids(world)
    counts = {model: admin_model(model).objects.count() for model in RECORDS}
    for model in RECORDS:
        pk = ids[model][0]
        change = reverse(f"admin:agentmemory_{model}_change", args=[pk])
        assert client.post(change, {}).status_code == 403, model
        assert client.post(reverse(f"admin:agentmemory_{model}_add"), {}).status_code == 403
        delete = reverse(f"admin:agentmemory_{model}_delete", args=[pk])
        assert client.post(delete, {"post": "yes"}).status_code == 403, model
        changelist = reverse(f"admin:agentmemory_{model}_changelist")
        form = client.get(changelist).context["action_form"]
        assert form is None or "delete_selected" not in dict(form.fields["action"].choices)
        client.post(changelist, {"action": "delete_selected", "_selected_action": [pk],
                                 "post": "yes"})
    assert {model: admin_model(model).objects.count() for model in RECORDS} == counts
    # The summary (unfold is its action) and its coverage inline are records too.
    summary = reverse("admin:agentmemory_summary_delete", args=[world.summary.pk])
    assert client.post(summary, {"post": "yes"}).status_code == 403
    assert MemoryEntry.objects.filter(pk=world.summary.pk).exists()


def admin_model(name: str) -> Any:
    return {"foldedspan": FoldedSpan, "foldlatch": FoldLatch, "summarizercall": SummarizerCall,
            "summarizercircuit": SummarizerCircuit, "recallreceipt": RecallReceipt}[name]


# ---------------------------------------------------------------- who wrote what


def test_the_fact_note_is_shown_as_agentmemorys_never_as_the_models(world: World) -> None:
    client = logged_in(users()["expander"])
    note = missing_facts_note(world.summary.coverage.missing_facts)
    for url, text_id, note_id in (
        (reverse("admin:agentmemory_summary_expand", args=[world.summary.pk]),
         "am-summary-text", "am-summary-note"),
        (reverse("admin:agentmemory_foldedspan_expand", args=[world.span.pk]),
         "am-span-text", "am-span-note"),
    ):
        body = client.get(url).content.decode()
        model_block = element_text(body, text_id)
        note_block = element_text(body, note_id)
        assert DROPS_AMOUNT in model_block and FACT_NOTE_OPENING not in model_block, url
        assert note_block.startswith("fact note · written by agentmemory"), url
        assert CANARY in note_block
    timeline = client.get(reverse("admin:agentmemory_thread_timeline", args=[world.thread.pk]))
    models = blocks(timeline.content.decode(), "am-model")
    assert models and all(FACT_NOTE_OPENING not in block for block in models)
    assert any(note in block for block in blocks(timeline.content.decode(), "am-fact-note"))


def test_the_viewer_sees_that_a_fact_note_was_withheld(world: World) -> None:
    client = logged_in(users()["viewer"])
    body = client.get(
        reverse("admin:agentmemory_thread_timeline", args=[world.thread.pk])
    ).content.decode()
    (note,) = blocks(body, "am-fact-note")
    assert "withheld" in note and CANARY not in note
    summary = client.get(
        reverse("admin:agentmemory_summary_change", args=[world.summary.pk])
    ).content.decode()
    assert DROPS_AMOUNT in summary and "withheld" in summary and CANARY not in summary


def element_text(html: str, element_id: str) -> str:
    from tests.test_admin import text_by_id

    return " ".join(text_by_id(html, element_id).split())


def blocks(html: str, css_class: str) -> list[str]:
    from tests.test_admin import texts_of_tag_with_class

    return texts_of_tag_with_class(html, "div", css_class)


# ---------------------------------------------------------------- the fact note's shape

facts = st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1,
                         max_size=12), min_size=1, max_size=4)


@given(model_text=st.text(max_size=80), missing=facts)
def test_the_fact_note_is_split_off_exactly(model_text: str, missing: list[str]) -> None:
    """The gate's note is recognised whatever the model wrote; the model's words are
    never taken for a note, nor a note for the model's words."""
    note = missing_facts_note(missing)
    assert split_fact_note(f"{model_text}\n{note}", missing) == (model_text, note)
    assert split_fact_note(model_text, missing) == (model_text, "") or model_text.endswith(
        f"\n{note}"
    )
    # A model imitating a note (for facts that are not the missing ones) stays the model's.
    imitation = f"{model_text}\n{missing_facts_note([*missing, 'x'])}"
    assert split_fact_note(imitation, missing) == (imitation, "")


def test_entries_of_kind_message_never_lose_text_to_the_fact_note_rule(world: World) -> None:
    """A user who pastes the note's opening into a message keeps their words visible."""
    pasted = f"quoting:\n{FACT_NOTE_OPENING}{ORDER}]"
    (entry,) = services.append(world.thread, [{"role": "user", "content": pasted}])
    assert entry.kind == EntryKind.MESSAGE
    client = logged_in(users()["viewer"])
    url = reverse("admin:agentmemory_memoryentry_change", args=[entry.pk])
    assert ORDER in client.get(url).content.decode()
