"""The admin (SPEC section 4): who sees what, the expand views, the actions, query counts.

The smoke tests over the demo data live in tests/test_demo.py; these build their own
conversations so each assertion names the exact row and text it is about. The
distinctive original (:data:`ORIGINAL`) is an assistant answer: the offline summarizer
keeps only user requests and tool names, so no summary repeats it, and wherever it
appears on a page it came from the original itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from html import unescape
from html.parser import HTMLParser
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from agentmemory import services
from agentmemory.models import (
    CallOutcome,
    EntryKind,
    FoldedSpan,
    FoldLatch,
    FoldPurpose,
    MemoryEntry,
    RetainPolicy,
    SummarizerCall,
    SummaryCoverage,
    Thread,
    summary_key,
)
from tests.admin_fixtures import (
    BIG,
    ORIGINAL,
    VIEW_PERMISSIONS,
    Folded,
    append_turns,
    logged_in,
    make_user,
)
from tests.helpers import turn_messages

pytestmark = pytest.mark.django_db

User = get_user_model()

SMALL_WINDOW = {
    "WINDOW": {
        "CLASS": "agentmemory.window.seams.SlidingWindow",
        "OPTIONS": {"MAX_MESSAGES": 6},
    }
}
NOT_RETAINED = (
    "The originals of this fold were not retained (policy: discard). Only the summary "
    "message carries them forward; nothing else can be shown."
)


# ---------------------------------------------------------------- page readers and builders
# (the folded thread, the users and their clients are tests/admin_fixtures.py's)


class ElementText(HTMLParser):
    """The text inside the element with a given id, or inside every element of a tag
    (of a CSS class, when one is given)."""

    def __init__(
        self, *, element_id: str | None = None, tag: str | None = None, css_class: str = ""
    ) -> None:
        super().__init__(convert_charrefs=True)
        self.element_id, self.tag, self.css_class = element_id, tag, css_class
        self.found: list[str] = []
        self.depth = 0  # open elements inside the current match

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.depth:
            self.depth += tag not in VOID_TAGS
            return
        attributes = dict(attrs)
        classes = (attributes.get("class") or "").split()
        if (self.element_id and attributes.get("id") == self.element_id) or (
            tag == self.tag and (not self.css_class or self.css_class in classes)
        ):
            self.depth = 1
            self.found.append("")

    def handle_endtag(self, tag: str) -> None:
        if self.depth and tag not in VOID_TAGS:
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if self.depth:
            self.found[-1] += data


VOID_TAGS = {"br", "hr", "img", "input", "meta", "link", "source", "wbr", "col", "area"}


def text_by_id(html: str, element_id: str) -> str:
    parser = ElementText(element_id=element_id)
    parser.feed(html)
    assert len(parser.found) == 1, f"expected one element #{element_id}, got {len(parser.found)}"
    return parser.found[0]


def texts_of_tag_with_class(html: str, tag: str, css_class: str) -> list[str]:
    parser = ElementText(tag=tag, css_class=css_class)
    parser.feed(html)
    return [text.strip() for text in parser.found]


def texts_of_tag(html: str, tag: str) -> list[str]:
    parser = ElementText(tag=tag)
    parser.feed(html)
    return parser.found


def page(client: Client, url: str, status: int = 200) -> str:
    response = client.get(url)
    assert response.status_code == status, (url, response.status_code)
    return response.content.decode()


def admin_urls(folded: Folded, span: FoldedSpan, call: SummarizerCall) -> list[str]:
    """Every admin page of the app that exists for this data, expand views included."""
    entry = folded.original.pk
    return [
        reverse("admin:index"),
        reverse("admin:app_list", kwargs={"app_label": "agentmemory"}),
        *(
            reverse(f"admin:agentmemory_{model}_changelist")
            for model in (
                "thread", "memoryentry", "summary", "foldedspan", "foldlatch", "summarizercall",
            )
        ),
        reverse("admin:agentmemory_thread_change", args=[folded.thread.pk]),
        reverse("admin:agentmemory_thread_timeline", args=[folded.thread.pk]),
        reverse("admin:agentmemory_memoryentry_change", args=[entry]),
        reverse("admin:agentmemory_memoryentry_delete", args=[entry]),
        reverse("admin:agentmemory_summary_change", args=[folded.outer.pk]),
        reverse("admin:agentmemory_summary_expand", args=[folded.outer.pk]),
        reverse("admin:agentmemory_summary_expand", args=[folded.inner.pk]),
        reverse("admin:agentmemory_foldedspan_change", args=[span.pk]),
        reverse("admin:agentmemory_foldedspan_expand", args=[span.pk]),
        reverse("admin:agentmemory_summarizercall_change", args=[call.pk]),
    ]


@override_settings(AGENTMEMORY=SMALL_WINDOW)
def window_span(thread: Thread, retain: str, count: int = 10) -> FoldedSpan:
    """A live-window fold of ``count`` messages after the request, through compact."""
    result = services.compact(thread, window_messages(count), retain=retain)
    assert result.span is not None, result.refusal
    return result.span


def window_messages(count: int, start: int = 1) -> list[dict[str, Any]]:
    request = {"role": "user", "content": "Chase every late order and draft the replies."}
    body = [
        {"role": "assistant", "content": f"Step {n}: checked parcel {n}, it is at the depot "
         f"in Leipzig and leaves tomorrow morning with the second truck of the day."}
        for n in range(start, start + count)
    ]
    return [request, *body]


# ---------------------------------------------------------------- who may open what


@pytest.mark.parametrize("as_user", ["anonymous", "non-staff"])
def test_non_staff_are_sent_to_the_admin_login_everywhere(folded: Folded, as_user: str) -> None:
    span = window_span(folded.thread, RetainPolicy.CONVERSATION)
    call = SummarizerCall.objects.filter(thread=folded.thread).first()
    assert call is not None
    client = Client()
    if as_user == "non-staff":
        client.force_login(make_user("visitor", *VIEW_PERMISSIONS, "expand_summary", staff=False))
    login = reverse("admin:login")

    for url in admin_urls(folded, span, call):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(f"{login}?next="), url
        assert ORIGINAL not in response.content.decode()


def test_staff_without_the_permission_get_403_on_the_expand_views(
    folded: Folded, viewer: Client
) -> None:
    spans = [window_span(folded.thread, retain) for retain in RetainPolicy.values]
    page(viewer, reverse("admin:agentmemory_summary_changelist"))
    page(viewer, reverse("admin:agentmemory_foldedspan_changelist"))

    for summary in (folded.outer, folded.inner):
        page(viewer, reverse("admin:agentmemory_summary_expand", args=[summary.pk]), 403)
    for span in spans:
        page(viewer, reverse("admin:agentmemory_foldedspan_expand", args=[span.pk]), 403)


def test_staff_without_the_permission_see_no_covered_original(
    folded: Folded, viewer: Client, expander: Client
) -> None:
    urls = {
        "entries": reverse("admin:agentmemory_memoryentry_changelist"),
        "entries of the summary": reverse("admin:agentmemory_memoryentry_changelist")
        + f"?covered_by__id__exact={folded.inner.pk}",
        "entry": reverse("admin:agentmemory_memoryentry_change", args=[folded.original.pk]),
        "timeline": reverse("admin:agentmemory_thread_timeline", args=[folded.thread.pk]),
    }
    for name, url in urls.items():
        hidden, shown = page(viewer, url), page(expander, url)
        assert ORIGINAL not in hidden, name
        assert f"hidden by summary #{folded.inner.pk}" in hidden, name
        assert ORIGINAL in shown, name  # the same page, with the permission


def test_hidden_text_cannot_be_found_by_search_or_url_lookups(
    folded: Folded, viewer: Client, expander: Client
) -> None:
    """A search or a filter that matches hidden text would reveal it a word at a time."""
    entries = reverse("admin:agentmemory_memoryentry_changelist")
    summaries = reverse("admin:agentmemory_summary_changelist")
    spans = reverse("admin:agentmemory_foldedspan_changelist")
    span = window_span(folded.thread, RetainPolicy.CONVERSATION)
    inner_words = folded.inner.content.split("\n", 1)[1].splitlines()[0]

    def rows(client: Client, url: str, status: int = 200) -> int | None:
        response = client.get(url)
        assert response.status_code == status, url
        return response.context["cl"].result_count if status == 200 else None

    # (Not the courier reference: summaries keep it as a fact, and the live one is shown.)
    assert rows(expander, f"{entries}?q=Leipzig+depot") == 1
    assert rows(viewer, f"{entries}?q=Leipzig+depot") == 0
    assert rows(viewer, f"{entries}?q=Order+9+is+in+transit") == 1  # live text: searchable
    assert rows(viewer, f"{entries}?q=call-1") == 1  # ids and names stay searchable
    assert rows(expander, f"{summaries}?q={inner_words[-20:]}") == 2
    assert rows(viewer, f"{summaries}?q={inner_words[-20:]}") == 1  # the live outer one
    for lookup in ("content__icontains=Leipzig", "content__startswith=Order+1+left",
                   "tool_calls__icontains=lookup"):
        assert rows(expander, f"{entries}?{lookup}") in (1, 9)
        rows(viewer, f"{entries}?{lookup}", 400)
        rows(viewer, f"{summaries}?{lookup}", 400)
    assert rows(expander, f"{spans}?messages__icontains=Step+1") == 1
    rows(viewer, f"{spans}?messages__icontains=Step+1", 400)
    assert span.messages


def test_staff_without_the_permission_see_no_covered_tool_call(
    folded: Folded, viewer: Client, expander: Client
) -> None:
    call = MemoryEntry.objects.get(thread=folded.thread, tool_calls__0__id="call-1")
    assert call.covered_by_id == folded.inner.pk
    url = reverse("admin:agentmemory_memoryentry_change", args=[call.pk])
    arguments = call.tool_calls[0]["arguments"]

    hidden = unescape(page(viewer, url))
    assert arguments not in hidden and "lookup_order" not in hidden
    assert json.dumps(call.tool_calls) in unescape(page(expander, url))


def test_staff_without_the_permission_see_no_covered_summary_text(
    folded: Folded, viewer: Client, expander: Client
) -> None:
    """The inner summary is one of the outer one's originals: hidden the same way."""
    _, inner_text = folded.inner.content.split("\n", 1)
    urls = [
        reverse("admin:agentmemory_memoryentry_change", args=[folded.inner.pk]),
        reverse("admin:agentmemory_summary_change", args=[folded.inner.pk]),
        reverse("admin:agentmemory_thread_timeline", args=[folded.thread.pk]),
    ]
    for url in urls:
        assert folded.inner.summary_key in page(viewer, url), url
        assert inner_text.splitlines()[0] not in strip_outer(page(viewer, url), folded), url
        assert inner_text.splitlines()[0] in page(expander, url), url
    # The live summary is no one's original: everyone who may view it reads it.
    outer_url = reverse("admin:agentmemory_summary_change", args=[folded.outer.pk])
    outer_last_line = folded.outer.content.split("\n", 1)[1].splitlines()[-1]
    assert outer_last_line in unescape(page(viewer, outer_url))


def strip_outer(html: str, folded: Folded) -> str:
    """The page without the live outer summary's text, which carries inner lines forward."""
    _, outer_text = folded.outer.content.split("\n", 1)
    return unescape(html).replace(outer_text, "")


def test_the_summary_changelist_shows_what_each_summary_covers(
    folded: Folded, viewer: Client
) -> None:
    body = page(viewer, reverse("admin:agentmemory_summary_changelist"))

    cells = {
        column: texts_of_tag_with_class(body, "td", f"field-{column}")
        for column in ("summary_key", "covers", "summarizer_model")
    }
    assert cells["summary_key"] == [folded.inner.summary_key, folded.outer.summary_key]
    assert cells["covers"] == ["turns 1-312 entries", "turns 1-717 entries"]
    assert cells["summarizer_model"] == ["offline-extractive-1"] * 2  # the summarizer's model


# ---------------------------------------------------------------- the summary expand view


def test_the_expand_view_shows_label_and_model_text_apart_and_the_originals(
    folded: Folded, expander: Client
) -> None:
    body = page(expander, reverse("admin:agentmemory_summary_expand", args=[folded.inner.pk]))

    label, text = folded.inner.content.split("\n", 1)
    label_block = text_by_id(body, "am-summary-label")
    text_block = text_by_id(body, "am-summary-text")
    assert label in label_block and text not in label_block
    assert text in text_block and label not in text_block
    assert folded.inner.coverage.model in text_block  # who wrote the text, said beside it
    originals = text_by_id(body, "am-originals")
    assert ORIGINAL in originals
    for entry in services.expand(folded.inner):
        assert reverse("admin:agentmemory_memoryentry_change", args=[entry.pk]) in body
    assert "lookup_order" in originals  # the tool calls are shown with the messages


def test_nested_summaries_expand_down_to_the_originals(folded: Folded, expander: Client) -> None:
    body = page(expander, reverse("admin:agentmemory_summary_expand", args=[folded.outer.pk]))

    originals = text_by_id(body, "am-originals")
    inner_label, inner_text = folded.inner.content.split("\n", 1)
    assert inner_label in originals and inner_text in originals
    assert reverse("admin:agentmemory_summary_expand", args=[folded.inner.pk]) in body
    nested = texts_of_tag(body, "details")
    assert len(nested) == 1
    assert ORIGINAL in nested[0]  # two levels down, behind the <details> of the inner one
    deep = services.expand(folded.inner, recursive=True)
    assert all(entry.content in nested[0] for entry in deep if entry.content)
    # Turns 4-7 are the outer summary's own originals, outside the nested block.
    own = [entry for entry in services.expand(folded.outer) if not entry.is_summary]
    assert own and all(entry.content not in nested[0] for entry in own if entry.content)


def test_superusers_expand_their_own_threads_and_others_once_granted(
    folded: Folded, superuser: Any
) -> None:
    """Being a superuser is not a grant of expand_summary (agentmemory.permissions)."""
    span = window_span(folded.thread, RetainPolicy.CONVERSATION)
    expand = reverse("admin:agentmemory_summary_expand", args=[folded.outer.pk])
    span_expand = reverse("admin:agentmemory_foldedspan_expand", args=[span.pk])
    entries = reverse("admin:agentmemory_memoryentry_changelist")
    root = logged_in(superuser)
    assert ORIGINAL not in page(root, expand, 403)
    page(root, span_expand, 403)
    assert ORIGINAL not in page(root, entries)

    own = Folded(owner=superuser)  # the owner reads their own thread's originals
    assert ORIGINAL in page(root, reverse("admin:agentmemory_summary_expand",
                                          args=[own.outer.pk]))

    superuser.user_permissions.add(
        Permission.objects.get(codename="expand_summary", content_type__app_label="agentmemory")
    )
    granted = logged_in(User.objects.get(pk=superuser.pk))
    assert ORIGINAL in page(granted, expand)
    page(granted, span_expand)
    assert ORIGINAL in page(granted, entries)


def test_expanding_a_message_or_a_missing_summary_is_404(
    folded: Folded, expander: Client
) -> None:
    page(expander, reverse("admin:agentmemory_summary_expand", args=[folded.original.pk]), 404)
    page(expander, reverse("admin:agentmemory_summary_expand", args=[10**9]), 404)
    page(expander, reverse("admin:agentmemory_foldedspan_expand", args=[10**9]), 404)


# ---------------------------------------------------------------- the span expand view


def test_the_span_expand_view_says_plainly_when_originals_were_not_kept(
    expander: Client,
) -> None:
    thread = Thread.objects.create(title="window run")
    span = window_span(thread, RetainPolicy.DISCARD)
    assert span.messages is None

    body = page(expander, reverse("admin:agentmemory_foldedspan_expand", args=[span.pk]))

    assert NOT_RETAINED in " ".join(text_by_id(body, "am-originals").split())
    assert "Step 1: checked parcel 1" not in body
    label, text = span.content.split("\n", 1)
    assert label in body and text in body


def test_the_span_expand_view_shows_retained_originals(expander: Client) -> None:
    thread = Thread.objects.create(title="window run")
    span = window_span(thread, RetainPolicy.CONVERSATION)
    assert span.messages

    body = page(expander, reverse("admin:agentmemory_foldedspan_expand", args=[span.pk]))

    originals = text_by_id(body, "am-originals")
    assert "not retained" not in originals
    for message in span.messages:
        assert message["content"] in originals
    assert f"The {span.message_count} folded messages" in originals


def test_the_span_expand_view_expands_the_summary_messages_it_swallowed(
    expander: Client,
) -> None:
    thread = Thread.objects.create(title="window run")
    with override_settings(AGENTMEMORY=SMALL_WINDOW):
        first = services.compact(thread, window_messages(10))
        assert first.span is not None
        grown = [*first.window, *window_messages(6, start=11)[1:]]
        second = services.compact(thread, grown, iteration=1)
    assert second.span is not None
    assert list(second.span.nested_spans.all()) == [first.span]

    body = page(expander, reverse("admin:agentmemory_foldedspan_expand", args=[second.span.pk]))

    assert reverse("admin:agentmemory_foldedspan_expand", args=[first.span.pk]) in body
    nested = texts_of_tag(body, "details")
    assert len(nested) == 1
    assert first.span.messages
    for message in first.span.messages:
        assert message["content"] in nested[0]


# ---------------------------------------------------------------- actions


def coverage(thread: Thread) -> list[tuple[int, int | None]]:
    return sorted(MemoryEntry.objects.filter(thread=thread).values_list("pk", "covered_by_id"))


def assert_unfolded(thread: Thread, summary_ids: list[int]) -> None:
    """The summaries cover nothing and recall no longer loads them, whether unfolding
    deletes them or keeps them as history."""
    assert not MemoryEntry.objects.filter(thread=thread, covered_by__isnull=False).exists()
    verbatim = services.recall(thread, BIG, trigger_min_entries=10**6, load_count=100)
    assert not set(verbatim.summaries_used) & set(summary_ids)
    assert ORIGINAL in verbatim.text


def changelist_action(
    client: Client, model: str, action: str, ids: list[int], **extra: str
) -> Any:
    return client.post(
        reverse(f"admin:agentmemory_{model}_changelist"),
        {"action": action, "_selected_action": [str(pk) for pk in ids], **extra},
    )


def messages_of(client: Client, response: Any) -> list[str]:
    assert response.status_code == 302, response.status_code
    return [str(message) for message in client.get(response["Location"]).context["messages"]]


def test_fold_now_folds_the_selected_threads(root: Client, eager_celery: None) -> None:
    due = Thread.objects.create(title="due")
    append_turns(due, 1, 5)  # 20 entries: a recall would fold now
    quiet = Thread.objects.create(title="quiet")
    append_turns(quiet, 1, 5)

    response = changelist_action(root, "thread", "fold_now", [due.pk])

    assert messages_of(root, response) == ["Fold enqueued for 1 thread(s)."]
    summary = MemoryEntry.objects.get(thread=due, kind=EntryKind.SUMMARY)
    assert MemoryEntry.objects.get(thread=due, content=ORIGINAL).covered_by_id == summary.pk
    assert not MemoryEntry.objects.filter(thread=quiet, kind=EntryKind.SUMMARY).exists()
    assert SummarizerCall.objects.filter(thread=due, outcome=CallOutcome.FOLDED).count() == 1


def test_unfold_asks_first_then_unfolds_and_the_originals_are_visible_again(
    folded: Folded, root: Client, viewer: Client
) -> None:
    selected = [folded.inner.pk, folded.outer.pk]
    entries = reverse("admin:agentmemory_memoryentry_changelist")
    assert ORIGINAL not in page(viewer, entries)
    before = coverage(folded.thread)

    first = changelist_action(root, "summary", "unfold", selected)

    assert first.status_code == 200
    assert first.templates[0].name == "agentmemory/admin/unfold_confirmation.html"
    body = first.content.decode()
    assert folded.inner.summary_key in body and folded.outer.summary_key in body
    assert coverage(folded.thread) == before  # nothing unfolded yet

    second = changelist_action(root, "summary", "unfold", selected, confirm="yes")

    assert messages_of(root, second) == [
        "Unfolded 2 summary row(s); their originals are recalled verbatim."
    ]
    assert_unfolded(folded.thread, selected)
    assert ORIGINAL in page(viewer, entries)
    timeline = page(root, reverse("admin:agentmemory_thread_timeline", args=[folded.thread.pk]))
    for pk in selected:
        if MemoryEntry.objects.filter(pk=pk).exists():  # kept as history: never "live"
            entry = text_by_id(timeline, f"am-entry-{pk}")
            assert "retired" in entry and "live" not in entry.split()
    assert ORIGINAL in page(viewer, reverse("admin:agentmemory_thread_timeline",
                                            args=[folded.thread.pk]))


def test_unfolding_the_inner_summary_takes_the_outer_one_along(
    folded: Folded, root: Client
) -> None:
    response = changelist_action(root, "summary", "unfold", [folded.inner.pk], confirm="yes")

    assert messages_of(root, response) == [
        "Unfolded 2 summary row(s); their originals are recalled verbatim."
    ]
    assert_unfolded(folded.thread, [folded.inner.pk, folded.outer.pk])


def test_unfold_is_offered_only_to_those_who_may_delete_entries(
    folded: Folded, viewer: Client
) -> None:
    response = viewer.get(reverse("admin:agentmemory_summary_changelist"))
    assert b'value="unfold"' not in response.content
    before = coverage(folded.thread)
    changelist_action(viewer, "summary", "unfold", [folded.outer.pk], confirm="yes")
    assert coverage(folded.thread) == before


def test_purge_expired_deletes_the_expired_rows_of_the_selected_threads(root: Client) -> None:
    now = timezone.now()
    hours_ago = now - timedelta(hours=3)
    expired = Thread.objects.create(title="expired", ttl=timedelta(hours=1))
    append_turns(expired, 1, 2, now=hours_ago)
    live = append_turns(expired, 3, 1, now=now)
    unselected = Thread.objects.create(title="also expired", ttl=timedelta(hours=1))
    append_turns(unselected, 1, 2, now=hours_ago)
    old_span = FoldedSpan.objects.create(
        thread=expired, fingerprint="f", span_fingerprint="s", content="[folded]",
        message_count=2, model="offline-extractive-1", retain=RetainPolicy.DISCARD,
        expires_at=hours_ago,
    )

    response = changelist_action(root, "thread", "purge_expired", [expired.pk])

    assert messages_of(root, response) == [
        "Purged 8 expired entries and 1 spans in 1 batch(es)."
    ]
    remaining = MemoryEntry.objects.filter(thread=expired)
    assert sorted(remaining.values_list("pk", flat=True)) == sorted(e.pk for e in live)
    assert not FoldedSpan.objects.filter(pk=old_span.pk).exists()
    assert MemoryEntry.objects.filter(thread=unselected).count() == 8


def csrf_token(client: Client, url: str) -> str:
    assert client.get(url).status_code == 200
    return str(client.cookies["csrftoken"].value)


def test_actions_refuse_a_post_without_the_csrf_token(
    folded: Folded, superuser: Any, eager_celery: None
) -> None:
    client = logged_in(superuser, enforce_csrf_checks=True)
    due = Thread.objects.create(title="due")
    append_turns(due, 1, 5)
    stale = Thread.objects.create(title="stale", ttl=timedelta(hours=1))
    append_turns(stale, 1, 2, now=timezone.now() - timedelta(hours=2))
    before = sorted(MemoryEntry.objects.values_list("pk", "covered_by_id"))
    summaries = sorted(MemoryEntry.objects.summaries().values_list("pk", flat=True))

    attempts = [
        ("thread", "fold_now", [due.pk], {}),
        ("thread", "purge_expired", [stale.pk], {}),
        ("summary", "unfold", [folded.outer.pk], {}),
        ("summary", "unfold", [folded.outer.pk], {"confirm": "yes"}),
    ]
    for model, action, ids, extra in attempts:
        response = changelist_action(client, model, action, ids, **extra)
        assert response.status_code == 403, (action, extra)
        assert b"CSRF" in response.content
    assert sorted(MemoryEntry.objects.values_list("pk", "covered_by_id")) == before
    assert sorted(MemoryEntry.objects.summaries().values_list("pk", flat=True)) == summaries
    assert not SummarizerCall.objects.filter(thread=due).exists()

    # The same POST with the token goes through: the 403 above was the missing token.
    token = csrf_token(client, reverse("admin:agentmemory_summary_changelist"))
    response = changelist_action(
        client, "summary", "unfold", [folded.outer.pk], confirm="yes", csrfmiddlewaretoken=token
    )
    assert response.status_code == 302
    assert not MemoryEntry.objects.filter(covered_by=folded.outer.pk).exists()


# ---------------------------------------------------------------- query counts


def make_threads(count: int) -> list[Thread]:
    users = User.objects.bulk_create(
        [User(username=f"owner{n}-{count}") for n in range(count)]
    )
    return Thread.objects.bulk_create(
        [
            Thread(owner=user, client_key=f"t{n}", title=f"thread {n}", ttl=timedelta(days=1))
            for n, user in enumerate(users)
        ]
    )


def make_entries(count: int) -> None:
    """One message and one summary per thread, the summary covering the message."""
    threads = make_threads(count)
    summaries = MemoryEntry.objects.bulk_create(
        [
            MemoryEntry(
                thread=thread, kind=EntryKind.SUMMARY, summary_key=summary_key(1, 1),
                role="user", content="[label]\n- the user asked", turn=1, position=1,
            )
            for thread in threads
        ]
    )
    SummaryCoverage.objects.bulk_create(
        [
            SummaryCoverage(summary=summary, from_turn=1, to_turn=1, entry_count=1,
                            span_tokens=40, model="offline-extractive-1")
            for summary in summaries
        ]
    )
    MemoryEntry.objects.bulk_create(
        [
            MemoryEntry(thread=thread, role="assistant", content=f"answer {n}", turn=1,
                        position=1, covered_by=summary,
                        tool_calls=[{"id": "c", "name": "lookup_order", "arguments": "{}"}])
            for n, (thread, summary) in enumerate(zip(threads, summaries, strict=True))
        ]
    )


def make_spans(count: int) -> None:
    spans = FoldedSpan.objects.bulk_create(
        [
            FoldedSpan(thread=thread, fingerprint=f"f{n}", span_fingerprint=f"s{n}",
                       content="[folded]\ntext", message_count=2, model="offline-extractive-1",
                       retain=RetainPolicy.CONVERSATION, messages=[])
            for n, thread in enumerate(make_threads(count))
        ]
    )
    for earlier, later in zip(spans, spans[1:], strict=False):
        later.nested_spans.add(earlier)


def make_calls(count: int) -> None:
    threads = make_threads(count)
    SummarizerCall.objects.bulk_create(
        [
            SummarizerCall(thread=thread, purpose=FoldPurpose.RECALL_FOLD, backend="offline",
                           model="offline-extractive-1", outcome=CallOutcome.FOLDED)
            for thread in threads
        ]
    )


def make_latches(count: int) -> None:
    FoldLatch.objects.bulk_create(
        [
            FoldLatch(thread=thread, purpose=FoldPurpose.RECALL_FOLD, span_key=f"k{n}",
                      reason="not-smaller", entry_count=3, model="offline-extractive-1")
            for n, thread in enumerate(make_threads(count))
        ]
    )


def clear() -> None:
    Thread.objects.all().delete()
    SummarizerCall.objects.all().delete()
    User.objects.exclude(username__in=["root", "viewer"]).delete()


#: model: a builder of ``rows`` rows of its changelist
CHANGELISTS: dict[str, Callable[[int], Any]] = {
    "thread": make_threads,
    "memoryentry": lambda rows: make_entries(rows // 2),  # a summary and a message each
    "summary": make_entries,
    "foldedspan": make_spans,
    "summarizercall": make_calls,
    "foldlatch": make_latches,
}


def queries_for(client: Client, url: str, rows: int) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    if "cl" in response.context:
        assert response.context["cl"].result_count == rows
    return [query["sql"] for query in captured]


@pytest.mark.parametrize("model", list(CHANGELISTS))
@pytest.mark.parametrize("as_user", ["root", "viewer"])
def test_changelists_make_the_same_queries_for_10_and_100_rows(
    model: str, as_user: str, superuser: Any
) -> None:
    client = logged_in(superuser if as_user == "root" else make_user("viewer", *VIEW_PERMISSIONS))
    url = reverse(f"admin:agentmemory_{model}_changelist")
    counts = []
    for rows in (10, 100):
        clear()
        CHANGELISTS[model](rows)
        counts.append(queries_for(client, url, rows))
    assert len(counts[0]) == len(counts[1]), counts


def test_the_timeline_makes_the_same_queries_for_10_and_100_rows(root: Client) -> None:
    counts = []
    for turns in (5, 50):  # two entries a turn, one summary per fold
        thread = Thread.objects.create(title=f"{turns} turns")
        services.append(
            thread,
            [m for n in range(1, turns + 1) for m in turn_messages(n, with_tools=False)],
        )
        services.fold(thread, preserve_recent=2, trigger_min_entries=4, load_count=2 * turns)
        rows = MemoryEntry.objects.filter(thread=thread).count()
        assert rows in (11, 101)
        counts.append(
            queries_for(root, reverse("admin:agentmemory_thread_timeline", args=[thread.pk]),
                        rows)
        )
    assert len(counts[0]) == len(counts[1]), counts
