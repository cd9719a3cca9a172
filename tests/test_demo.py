"""The demo command, the example project's front page and the admin over the demo data."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from io import StringIO
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.core.management import call_command, get_commands
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import resolve, reverse

import agentmemory
from agentmemory import services
from agentmemory.models import EntryKind, FoldedSpan, MemoryEntry, SummarizerCall, Thread
from example_project.demo.address import split_addr
from example_project.demo.conversation import DEMO_CLIENT_KEY, WINDOW_CLIENT_KEY

pytestmark = pytest.mark.django_db

SUMMARY_LINE = re.compile(
    r"^\s+#(?P<id>\d+) (?P<key>msg-summary-\d+-\d+) \(.*entries: (?P<ids>.+)$"
)
ID_OR_RANGE = re.compile(r"#(\d+)(?:-#(\d+))?")
ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_TEMPLATES = ROOT / "example_project" / "templates"


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
    first_entries = set(MemoryEntry.objects.filter(thread=first).values_list("pk", flat=True))
    admin = get_user_model().objects.get(username="admin")
    admin.set_password("changed")
    admin.save()

    output = run_demo("--turns", "12", "--quiet")

    assert Thread.objects.filter(client_key=DEMO_CLIENT_KEY).count() == 1
    second = demo_thread()
    assert second.pk == first.pk  # the same row, emptied and rebuilt
    assert MemoryEntry.objects.filter(thread=second, kind=EntryKind.MESSAGE).count() == count
    assert not MemoryEntry.objects.filter(pk__in=first_entries).exists()
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


LINK = re.compile(r"^  (?P<name>[a-z]+):\s+(?P<url>http://\S+)$")


def printed_links(output: str) -> dict[str, str]:
    """The "Where to look" section's links, by name."""
    where = output[output.index("Where to look"):]
    return {m["name"]: m["url"] for m in map(LINK.match, where.splitlines()) if m}


def linked_threads(path: str) -> set[int]:
    """The thread ids a printed admin or API path names: in the URL or in its filter."""
    match = resolve(urlsplit(path).path)
    ids = {int(match.kwargs["thread_id"])} if "thread_id" in match.kwargs else set()
    if match.url_name == "agentmemory_thread_timeline":
        ids.add(int(match.kwargs["object_id"]))
    query = parse_qs(urlsplit(path).query)
    return ids | {int(value) for value in query.get("thread__id__exact", [])}


def test_the_printed_links_open_the_same_threads_after_a_rerun() -> None:
    first = printed_links(run_demo("--turns", "12"))
    threads = (demo_thread().pk, Thread.objects.get(client_key=WINDOW_CLIENT_KEY).pk)

    second = printed_links(run_demo("--turns", "12"))

    assert second == first
    assert set(first) == {
        "admin", "timeline", "summaries", "entries", "receipts", "ledger", "spans", "api",
    }
    demo, window = demo_thread(), Thread.objects.get(client_key=WINDOW_CLIENT_KEY)
    assert (demo.pk, window.pk) == threads
    client = Client()
    client.force_login(get_user_model().objects.get(username="admin"))
    for name, url in second.items():
        assert url.startswith("http://127.0.0.1:8000/"), url
        path = url.removeprefix("http://127.0.0.1:8000")
        assert client.get(path).status_code == 200, url
        expected = {"admin": set(), "spans": {window.pk}}.get(name, {demo.pk})
        assert linked_threads(path) == expected, url
    # The summaries the rebuilt thread's links list are the new run's, and there are some.
    summaries = client.get(second["summaries"].removeprefix("http://127.0.0.1:8000"))
    assert MemoryEntry.objects.filter(thread=demo, kind=EntryKind.SUMMARY).exists()
    for summary in MemoryEntry.objects.filter(thread=demo, kind=EntryKind.SUMMARY):
        assert summary.summary_key in summaries.content.decode()


@pytest.mark.parametrize(
    ("addr", "site"),
    [("127.0.0.1:8000", "http://127.0.0.1:8000"), ("localhost:8123", "http://localhost:8123"),
     ("8080", "http://127.0.0.1:8080"), ("0.0.0.0:9000", "http://127.0.0.1:9000"),
     ("[::1]:8001", "http://[::1]:8001")],
)
def test_the_links_name_the_address_the_demo_serves_on(settings: Any, addr: str,
                                                        site: str) -> None:
    settings.DEMO_ADDR = addr
    links = printed_links(run_demo("--turns", "4", "--quiet"))
    assert links["admin"] == f"{site}/admin/"
    assert all(url.startswith(f"{site}/") for url in links.values())


def test_one_address_for_runserver_the_links_and_the_allowed_hosts() -> None:
    """`make demo ADDR=...` hands runserver its ADDR and the settings DEMO_ADDR."""
    makefile = (ROOT / "Makefile").read_text()
    assert "demo: export DEMO_ADDR := $(ADDR)" in makefile
    assert "$(PY) manage.py runserver $(ADDR)\n" in makefile
    probe = (
        "from django.conf import settings; import django; django.setup(); "
        "print(settings.DEMO_ADDR, ' '.join(settings.ALLOWED_HOSTS))"
    )
    for env, expected in [({}, "127.0.0.1:8000 127.0.0.1 localhost"),
                          ({"DEMO_ADDR": "demo.test:8080"},
                           "demo.test:8080 127.0.0.1 demo.test localhost")]:
        result = subprocess.run(
            [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True,
            timeout=120, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT),
                              "DJANGO_SETTINGS_MODULE": "example_project.settings", **env},
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == expected


def test_a_bad_address_says_what_to_give() -> None:
    with pytest.raises(ValueError, match=r"DEMO_ADDR .* is 'http://x:80': give a port"):
        split_addr("http://x:80")


def test_the_demo_extra_is_light_and_the_dev_extra_holds_it() -> None:
    """`make demo` installs [demo], `make test` [dev]; [dev] stamps [demo] as installed."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    [demo] = extras["demo"]
    wanted = set(demo.removeprefix("django-agentmemory[").removesuffix("]").split(","))
    [everything] = extras["all"]
    assert wanted <= set(everything.removeprefix("django-agentmemory[").removesuffix("]")
                         .split(","))
    assert "django-agentmemory[all]" in extras["dev"]
    assert not wanted & {"agents", "langchain", "dev"}
    makefile = (ROOT / "Makefile").read_text()
    assert "demo: $(DEMO_STAMP)" in makefile and "install --quiet -e '.[demo]'" in makefile
    assert "touch $(STAMP) $(DEMO_STAMP)" in makefile


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
