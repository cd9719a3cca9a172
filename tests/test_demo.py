"""The demo command, the example project's front page and the admin over the demo data."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.core.management import call_command, get_commands
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

import agentmemory
from agentmemory import services
from agentmemory.models import EntryKind, FoldedSpan, MemoryEntry, SummarizerCall, Thread
from example_project.demo.conversation import DEMO_CLIENT_KEY, WINDOW_CLIENT_KEY

pytestmark = pytest.mark.django_db

SUMMARY_LINE = re.compile(
    r"^\s+#(?P<id>\d+) (?P<key>msg-summary-\d+-\d+) \(.*entries: (?P<ids>.+)$"
)
ID_OR_RANGE = re.compile(r"#(\d+)(?:-#(\d+))?")
EXAMPLE_TEMPLATES = Path(__file__).resolve().parent.parent / "example_project" / "templates"


@pytest.fixture(autouse=True)
def _demo_app_installed(settings: Any) -> None:
    """The command ships with the example project's demo app, not with agentmemory."""
    settings.INSTALLED_APPS = [*settings.INSTALLED_APPS, "example_project.demo"]


def run_demo(*args: str) -> str:
    buf = StringIO()
    call_command("agentmemory_demo", *args, stdout=buf)
    return buf.getvalue()


def printed_coverage(output: str) -> dict[int, tuple[str, list[int]]]:
    found = {}
    for line in output.splitlines():
        match = SUMMARY_LINE.match(line)
        if match:
            ids: list[int] = []
            for first, last in ID_OR_RANGE.findall(match["ids"]):
                ids.extend(range(int(first), int(last or first) + 1))
            found[int(match["id"])] = (match["key"], ids)
    return found


def demo_thread() -> Thread:
    return Thread.objects.get(client_key=DEMO_CLIENT_KEY)


def test_demo_folds_and_prints_what_each_summary_covers() -> None:
    output = run_demo("--turns", "30")

    thread = demo_thread()
    summaries = MemoryEntry.objects.filter(thread=thread, kind=EntryKind.SUMMARY)
    assert summaries.exists()
    printed = printed_coverage(output)
    assert set(printed) == set(summaries.values_list("pk", flat=True))
    for summary in summaries:
        key, ids = printed[summary.pk]
        assert key == summary.summary_key
        assert sorted(ids) == sorted(entry.pk for entry in services.expand(summary))
    assert SummarizerCall.objects.filter(thread=thread).count() >= summaries.count()
    assert "admin / admin" in output
    assert f"/admin/agentmemory/thread/{thread.pk}/timeline/" in output

    # The second demo: a live window compacted twice, originals kept once, discarded once.
    window = Thread.objects.get(client_key=WINDOW_CLIENT_KEY)
    spans = list(FoldedSpan.objects.filter(thread=window).order_by("created_at", "id"))
    assert [span.retain for span in spans] == ["conversation", "discard"]
    assert spans[0].messages and spans[1].messages is None
    assert spans[0] in spans[1].nested_spans.all()
    for span in spans:
        assert services.folded_span_for(window, span.content) == span
        assert f"span #{span.pk}:" in output
    assert len(services.folded_messages(window)) == spans[0].message_count

    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and admin.is_staff
    assert admin.check_password("admin")


def test_the_installed_package_ships_no_demo_and_creates_no_users() -> None:
    without_demo = [app for app in django_settings.INSTALLED_APPS if app != "example_project.demo"]
    with override_settings(INSTALLED_APPS=without_demo):
        assert "agentmemory_demo" not in get_commands()
    package = Path(agentmemory.__file__).resolve().parent
    for source in package.rglob("*.py"):
        text = source.read_text()
        assert "create_superuser" not in text and "create_user" not in text, source


def test_demo_is_idempotent_and_leaves_one_thread() -> None:
    run_demo("--turns", "12", "--quiet")
    first = demo_thread()
    count = MemoryEntry.objects.filter(thread=first, kind=EntryKind.MESSAGE).count()
    admin = get_user_model().objects.get(username="admin")
    admin.set_password("changed")
    admin.save()

    output = run_demo("--turns", "12", "--quiet")

    assert Thread.objects.filter(client_key=DEMO_CLIENT_KEY).count() == 1
    second = demo_thread()
    assert second.pk != first.pk
    assert MemoryEntry.objects.filter(thread=second, kind=EntryKind.MESSAGE).count() == count
    assert get_user_model().objects.filter(username="admin").count() == 1
    assert get_user_model().objects.get(username="admin").check_password("changed")
    assert "left unchanged" in output
    assert "Summaries" not in output  # --quiet


def test_demo_writes_the_same_conversation_every_time() -> None:
    def conversation() -> list[tuple[str, str, str]]:
        return list(
            MemoryEntry.objects.filter(thread=demo_thread(), kind=EntryKind.MESSAGE)
            .order_by("position")
            .values_list("role", "content", "tool_call_id")
        )

    run_demo("--turns", "8", "--quiet")
    first = conversation()
    run_demo("--turns", "8", "--quiet")
    assert conversation() == first
    assert any(role == "tool" for role, _, _ in first)


@pytest.fixture
def admin_client_with_demo() -> Client:
    run_demo("--turns", "30", "--quiet")
    client = Client()
    client.force_login(get_user_model().objects.get(username="admin"))
    return client


def test_admin_pages_open_for_a_superuser(admin_client_with_demo: Client) -> None:
    client = admin_client_with_demo
    thread = demo_thread()
    summary = MemoryEntry.objects.filter(thread=thread, kind=EntryKind.SUMMARY).first()
    message = MemoryEntry.objects.filter(thread=thread, kind=EntryKind.MESSAGE).first()
    call = SummarizerCall.objects.filter(thread=thread).first()
    assert summary is not None and message is not None and call is not None
    changelist = reverse("admin:agentmemory_memoryentry_changelist")
    urls = [
        reverse("admin:index"),
        *(
            reverse(f"admin:agentmemory_{model}_changelist")
            for model in (
                "thread", "memoryentry", "summary", "foldedspan", "foldlatch",
                "summarizercall",
            )
        ),
        reverse("admin:agentmemory_thread_change", args=[thread.pk]),
        reverse("admin:agentmemory_memoryentry_change", args=[summary.pk]),
        reverse("admin:agentmemory_memoryentry_change", args=[message.pk]),
        reverse("admin:agentmemory_summary_change", args=[summary.pk]),
        reverse("admin:agentmemory_summary_expand", args=[summary.pk]),
        reverse("admin:agentmemory_thread_timeline", args=[thread.pk]),
        reverse("admin:agentmemory_summarizercall_change", args=[call.pk]),
        f"{changelist}?thread__id__exact={thread.pk}&kind__exact=summary",
        f"{changelist}?covered_by__id__exact={summary.pk}",
        f"{changelist}?covered=no&q=refund",
    ]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, url


def test_admin_changelists_do_not_query_per_row(admin_client_with_demo: Client) -> None:
    client = admin_client_with_demo
    for model in ("thread", "memoryentry", "summary", "foldedspan", "summarizercall"):
        with CaptureQueriesContext(connection) as queries:
            response = client.get(reverse(f"admin:agentmemory_{model}_changelist"))
        assert response.status_code == 200
        assert len(queries) <= 12, (model, [q["sql"] for q in queries])


def test_deleting_an_original_in_the_admin_erases_its_summaries(
    admin_client_with_demo: Client,
) -> None:
    summary = MemoryEntry.objects.filter(
        thread=demo_thread(), kind=EntryKind.SUMMARY, covered_by__isnull=True
    ).first()
    assert summary is not None
    original = next(entry for entry in services.expand(summary, recursive=True))
    derived = services.derived_summaries([original])
    others = set(
        MemoryEntry.objects.filter(thread=demo_thread(), kind=EntryKind.SUMMARY)
        .exclude(pk__in=derived)
        .values_list("pk", flat=True)
    )
    url = reverse("admin:agentmemory_memoryentry_delete", args=[original.pk])

    response = admin_client_with_demo.post(url, {"post": "yes"})

    assert response.status_code == 302
    assert summary.pk in derived
    assert not MemoryEntry.objects.filter(pk__in=[original.pk, *derived]).exists()
    remaining = MemoryEntry.objects.filter(thread=demo_thread(), kind=EntryKind.SUMMARY)
    assert set(remaining.values_list("pk", flat=True)) == others


def test_records_are_read_only_in_the_admin(admin_client_with_demo: Client) -> None:
    call = SummarizerCall.objects.first()
    assert call is not None
    response = admin_client_with_demo.get(reverse("admin:agentmemory_summarizercall_add"))
    assert response.status_code == 403
    response = admin_client_with_demo.get(reverse("admin:agentmemory_memoryentry_add"))
    assert response.status_code == 403


@override_settings(
    ROOT_URLCONF="example_project.urls",
    TEMPLATES=[
        {
            "BACKEND": "django.template.backends.django.DjangoTemplates",
            "DIRS": [EXAMPLE_TEMPLATES],
            "APP_DIRS": True,
            "OPTIONS": {
                "context_processors": [
                    "django.template.context_processors.request",
                    "django.contrib.auth.context_processors.auth",
                    "django.contrib.messages.context_processors.messages",
                ]
            },
        }
    ],
)
def test_front_page_links_to_the_admin_and_the_demo_thread() -> None:
    response = Client().get("/")
    assert response.status_code == 200
    assert "agentmemory_demo" in response.content.decode()  # no demo yet: says how

    run_demo("--turns", "6", "--quiet")
    response = Client().get("/")
    body = response.content.decode()
    assert response.status_code == 200
    assert 'href="/admin/"' in body
    assert f'href="/admin/agentmemory/thread/{demo_thread().pk}/timeline/"' in body
    assert f'href="/api/memory/threads/{demo_thread().pk}/summaries/"' in body


def test_the_example_wsgi_application_loads_the_token_encoding_as_it_starts() -> None:
    """A worker that imports it has the exact counter, its encoding loaded, before its
    first request (loading it costs a few tenths of a second of CPU)."""
    import subprocess
    import sys

    probe = (
        "import example_project.wsgi\n"
        "from agentmemory.conf import memory_settings\n"
        "print(type(memory_settings._plugins.get('TOKEN_COUNTER')).__name__)\n"
    )
    root = Path(__file__).resolve().parent.parent
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root),
             "DJANGO_SETTINGS_MODULE": "example_project.settings"},
    )
    assert result.returncode == 0, result.stderr
    # EncodingCounter loads its encoding as it is built; the estimate would mean none.
    assert result.stdout.strip() == "EncodingCounter"
