"""What the admin's pages say matches what the code does: the summary a timeline names
is the one recall loads, the unfold action says what comes back, the filters select what
the queryset rules select, and hashes, seeds and latches read as they should.

The builders and fixtures (a thread folded twice, users and their clients) are those
of ``tests/admin_fixtures.py``; the page readers are ``tests/test_admin.py``'s.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agentmemory import services
from agentmemory.admin.base import HASH_DIGITS
from agentmemory.models import (
    CallOutcome,
    FoldLatch,
    FoldPurpose,
    MemoryEntry,
    RetainPolicy,
    SummarizerCall,
    SummaryCoverage,
    Thread,
)
from tests.admin_fixtures import BIG, ORIGINAL, Folded, make_user
from tests.test_admin import (
    changelist_action,
    messages_of,
    page,
    text_by_id,
    texts_of_tag_with_class,
    window_span,
)

pytestmark = pytest.mark.django_db


def timeline(client: Client, folded: Folded) -> str:
    return page(client, reverse("admin:agentmemory_thread_timeline", args=[folded.thread.pk]))


def test_the_timeline_names_the_summary_recall_loads(folded: Folded, expander: Client) -> None:
    """Turn 1's answer is covered by the inner summary, which the outer one folded again:
    recall loads the outer one, and the timeline says so beside "hidden by"."""
    recalled = services.recall(folded.thread, BIG, trigger_min_entries=10**6, load_count=100)
    assert folded.outer.pk in recalled.summaries_used
    assert folded.inner.pk not in recalled.summaries_used
    loaded = MemoryEntry.objects.filter(thread=folded.thread).recalled_in_place()
    assert loaded[folded.inner.pk] == loaded[folded.outer.pk] == folded.outer.pk

    body = timeline(expander, folded)
    original = text_by_id(body, f"am-entry-{folded.original.pk}")
    assert f"hidden by summary #{folded.inner.pk}" in original
    assert f"recall loads #{folded.outer.pk}" in original
    # Covered by the summary recall loads: nothing more to say.
    inner = text_by_id(body, f"am-entry-{folded.inner.pk}")
    assert f"hidden by summary #{folded.outer.pk}" in inner and "recall loads" not in inner


def test_the_expand_view_says_which_summary_recall_loads(
    folded: Folded, expander: Client
) -> None:
    def heading(summary: MemoryEntry) -> str:
        url = reverse("admin:agentmemory_summary_expand", args=[summary.pk])
        return texts_of_tag_with_class(page(expander, url), "h2", "")[0]

    assert heading(folded.outer) == "The summary recall loads in place of them"
    assert heading(folded.inner) == (
        f"The summary that stands for them, folded again: recall loads #{folded.outer.pk}"
    )


def test_unfolding_the_outer_summary_says_the_inner_one_comes_back(
    folded: Folded, root: Client
) -> None:
    """Not "originals verbatim": what the outer summary covered directly comes back
    verbatim, and the inner summary comes back live, still hiding its originals."""
    own = [entry for entry in services.expand(folded.outer) if not entry.is_summary]
    confirm = changelist_action(root, "summary", "unfold", [folded.outer.pk])
    assert "1 of them earlier summary, which comes back unless selected too" in (
        confirm.content.decode()
    )

    response = changelist_action(root, "summary", "unfold", [folded.outer.pk], confirm="yes")

    assert messages_of(root, response) == [
        f"Unfolded 1 summary row(s); recall loads what they covered again: {len(own)} "
        "original(s) verbatim and 1 earlier summary(ies) they had folded in, which still "
        "stand for their own originals (unfold those too to recall them verbatim)."
    ]
    recalled = services.recall(folded.thread, BIG, trigger_min_entries=10**6, load_count=100)
    assert folded.inner.pk in recalled.summaries_used
    assert ORIGINAL not in recalled.text  # still hidden by the inner summary
    assert all(entry.content in recalled.text for entry in own if entry.content)


def status_rows(client: Client, query: str) -> set[str]:
    body = page(client, reverse("admin:agentmemory_summary_changelist") + query)
    return set(texts_of_tag_with_class(body, "th", "field-id"))


def test_each_summary_filter_selects_what_its_queryset_rule_selects(
    folded: Folded, root: Client
) -> None:
    """The filters call the rules of agentmemory.querysets: each choice lists exactly the
    rows its rule selects, on summaries in every state."""
    other = Folded(owner=make_user("other"))
    services.unfold(other.outer)  # retired
    SummaryCoverage.objects.filter(summary=folded.inner).update(
        injection_flags=["instructions"], missing_facts=["QUOKKA-7731-ZED"]
    )
    SummaryCoverage.objects.filter(summary=other.inner).update(tampered_at=timezone.now())
    MemoryEntry.objects.filter(pk=other.inner.pk).update(held_at=timezone.now())
    MemoryEntry.objects.filter(pk=folded.outer.pk).update(
        expires_at=timezone.now() - timedelta(minutes=1)
    )
    summaries = MemoryEntry.objects.summaries()
    rules = {
        "?status=review": summaries.needs_review(),
        "?status=held": summaries.held(),
        "?status=tampered": summaries.tampered(),
        "?status=retired": summaries.retired(),
        "?status=live": summaries.live(),
        "?status=lost-facts": summaries.lost_facts(),
        "?covered=yes": summaries.covered(),
        "?covered=no": summaries.uncovered(),
        "?expired=yes": summaries.expired(),
        "?expired=no": summaries.unexpired(),
        "?expired=never": summaries.filter(expires_at__isnull=True),
    }
    for query, rule in rules.items():
        expected = {str(pk) for pk in rule.values_list("pk", flat=True)}
        assert expected, query  # every rule selects something here
        assert status_rows(root, query) == expected, query


def test_the_expand_view_says_plainly_what_was_not_set(folded: Folded, expander: Client) -> None:
    url = reverse("admin:agentmemory_summary_expand", args=[folded.outer.pk])
    SummaryCoverage.objects.filter(summary=folded.outer).update(temperature=None)
    assert folded.outer.coverage.seed is None
    made_with = text_by_id(page(expander, url), "am-trust")
    assert "no seed set" in made_with and "no temperature set" in made_with
    assert "?" not in made_with

    SummaryCoverage.objects.filter(summary=folded.outer).update(seed=7, temperature=0.2)
    made_with = text_by_id(page(expander, url), "am-trust")
    assert "seed 7" in made_with and "temperature 0.2" in made_with


def test_hashes_are_shown_short_with_the_whole_in_the_title(folded: Folded, root: Client) -> None:
    span = window_span(folded.thread, RetainPolicy.CONVERSATION)
    coverage = folded.outer.coverage
    pages = {
        reverse("admin:agentmemory_foldedspan_change", args=[span.pk]): (
            span.fingerprint, span.span_fingerprint, span.prompt_hash, span.signature
        ),
        reverse("admin:agentmemory_summary_change", args=[folded.outer.pk]): (
            coverage.prompt_hash, coverage.signature
        ),
    }
    for url, values in pages.items():
        body = page(root, url)  # the coverage inline needs view_summarycoverage
        for value in values:
            assert len(value) > HASH_DIGITS
            assert f'<code title="{value}">{value[:HASH_DIGITS]}…</code>' in body
            assert f">{value}<" not in body and f"{value}\n" not in body


def test_lists_cut_long_values_and_keep_them_whole_in_the_title(root: Client) -> None:
    name = "Northwind support: late orders of the Leipzig depot"
    thread = Thread.objects.create(title=name)
    call = SummarizerCall.objects.create(
        thread=thread, purpose=FoldPurpose.RECALL_FOLD, backend="openai", model="m",
        outcome=CallOutcome.FAILED, attempt=2, error_class="openai.APITimeoutError",
        error_message="Request timed out after 30.0 seconds while waiting for the response.",
    )
    body = page(root, reverse("admin:agentmemory_summarizercall_changelist"))
    assert f'<span title="{name}">{name[:23]}…</span>' in body
    error = f"{call.error_class}: {call.error_message}"
    assert f'<span title="{error}">APITimeoutError: Request timed out after' in body
    assert call.error_message not in body.replace(f'title="{error}"', "")
    assert "failed: recall fold, attempt 2" in texts_of_tag_with_class(
        body, "td", "field-outcome_attempt"
    )


def test_fold_latches_are_named_in_the_plural_and_show_short_keys(
    folded: Folded, root: Client
) -> None:
    assert "Fold latches" in page(root, reverse("admin:index"))
    key = "a" * 64
    latch = FoldLatch.objects.create(
        thread=folded.thread, purpose=FoldPurpose.RECALL_FOLD, span_key=key, reason="not-smaller",
        entry_count=3, model="offline-extractive-1",
    )
    body = page(root, reverse("admin:agentmemory_foldlatch_change", args=[latch.pk]))
    assert f'<code title="{key}">{key[:HASH_DIGITS]}…</code>' in body


def test_the_custom_pages_share_one_breadcrumb_trail(folded: Folded, expander: Client) -> None:
    span = window_span(folded.thread, RetainPolicy.CONVERSATION)
    pages = {
        ("thread", "timeline", folded.thread.pk): f"Threads › {folded.thread} › timeline",
        ("summary", "expand", folded.outer.pk): (
            f"Summaries › {folded.outer.summary_key} › originals"
        ),
        ("foldedspan", "expand", span.pk): f"Folded spans › #{span.pk} › originals",
    }
    for (model, name, pk), trail in pages.items():
        body = page(expander, reverse(f"admin:agentmemory_{model}_{name}", args=[pk]))
        crumbs = " ".join(texts_of_tag_with_class(body, "div", "breadcrumbs")[0].split())
        assert crumbs == f"Home › Agent memory › {trail}", crumbs
        for link in (
            reverse("admin:index"),
            reverse("admin:app_list", kwargs={"app_label": "agentmemory"}),
            reverse(f"admin:agentmemory_{model}_changelist"),
            reverse(f"admin:agentmemory_{model}_change", args=[pk]),
        ):
            assert f'href="{link}"' in body, (model, link)
