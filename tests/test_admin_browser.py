"""The admin in a real browser: log in, walk to a thread's timeline (its overview strip,
its chart, the runs a summary hides collapsed) and a summary, expand it down to the
originals, and keep screenshots; and, as staff who may not expand, find no expand link
and a refusal that explains itself.

Playwright for Python drives Debian's chromium (``/usr/bin/chromium``); Playwright's own
browser downloads are never used. Screenshots go to ``artifacts/admin-browser/``
(gitignored), at a 1400 px wide window and again at 1024 px, where the timeline's
pictures and every list of the app fit without scrolling sideways. With
``AGENTMEMORY_UPDATE_SCREENSHOTS=1`` the timeline, expand-view, summary-list and (at
1024 px) ledger shots are also copied to ``docs/img/``. Under ``CI=true`` a missing chromium or
playwright fails the test; on a developer's machine it skips and says why.

All database work happens before Playwright starts: its sync API runs an event loop in
this thread, and Django refuses database access from a thread with a running loop.
"""

from __future__ import annotations

import os
import shutil
from datetime import timedelta
from hashlib import sha256
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from agentmemory import services
from agentmemory.models import (
    CallOutcome,
    FoldLatch,
    FoldPurpose,
    MemoryEntry,
    RecallReceipt,
    SummarizerCall,
    Thread,
)
from agentmemory.permissions import REFUSAL
from tests.conftest import IN_CI
from tests.helpers import turn_messages

pytestmark = pytest.mark.django_db(transaction=True)

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "artifacts" / "admin-browser"
DOCS_IMG = ROOT / "docs" / "img"
UPDATE_SCREENSHOTS = os.environ.get("AGENTMEMORY_UPDATE_SCREENSHOTS") == "1"
USERNAME, PASSWORD = "curator", "a-long-test-password"
VIEWPORT = {"width": 1400, "height": 1000}
NARROW = {"width": 1024, "height": 900}
ORIGINAL = "Order 1 left the Leipzig depot on Tuesday; courier reference QUOKKA-7731-ZED."
TITLE = "Northwind support: late orders"
BIG = 100_000
#: Small enough that one screen shows a fold: the first recall folds turns 1-2, the
#: second folds that summary with turns 3-4.
KNOBS = {"preserve_recent": 4, "trigger_min_entries": 8, "load_count": 50}
LONG_LINE = "".join(f'{{"order":"NW-{n:04}","status":"in-transit"}},' for n in range(60))
SMALL_WINDOW = {
    "WINDOW": {"CLASS": "agentmemory.window.seams.SlidingWindow", "OPTIONS": {"MAX_MESSAGES": 6}}
}


#: Every list of the app with rows in this test, and the cell that must be on screen:
#: the one that opens a custom page (expand, timeline), else the last column.
LISTS = {
    "thread": "td.field-timeline_link a",
    "memoryentry": "td.field-expires_at",
    "summary": "td.field-expand_link a",
    "foldedspan": "td.field-expand_link a",
    "foldlatch": "td.field-created_at",
    "summarizercall": "td.field-summary_id",
    "recallreceipt": "td.field-created_at",
}


#: At 1024 px, the columns of these lists from the tokens on, each checked like the last.
NARROW_COLUMNS = {
    "summary": ("td.field-tokens", "td.field-summarizer_model", "td.field-status"),
    "summarizercall": ("td.field-tokens", "td.field-took", "td.field-error"),
    "recallreceipt": ("td.field-tokens", "td.field-declined"),
}


def assert_fits(page: Any, cell: str) -> None:
    """The list's table needs no sideways scrolling, and ``cell`` of its first row lies
    within the viewport's width."""
    hidden = page.locator("#changelist-form .results").evaluate(
        "results => results.scrollWidth - results.clientWidth"
    )
    assert hidden <= 0, f"{page.url}: {hidden} px of the table are scrolled out of view"
    width = page.viewport_size["width"]
    box = page.locator(cell).first.bounding_box()
    assert box is not None, f"{page.url}: no {cell}"
    assert 0 <= box["x"] and box["x"] + box["width"] <= width, (page.url, cell, box, width)


def inside(inner: dict[str, float], outer: dict[str, float]) -> bool:
    return (outer["x"] - 0.5 <= inner["x"]
            and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + 0.5)


def overlaps(one: dict[str, float], other: dict[str, float]) -> bool:
    return not (one["x"] + one["width"] <= other["x"] or other["x"] + other["width"] <= one["x"]
                or one["y"] + one["height"] <= other["y"]
                or other["y"] + other["height"] <= one["y"])


def assert_readable_columns(page: Any, cell: str) -> None:
    """Every ``cell`` of the list is on screen and none lies under the filter sidebar."""
    assert_fits(page, cell)
    sidebar = page.locator("#changelist-filter").bounding_box()
    for box in (c.bounding_box() for c in page.locator(cell).all()):
        assert box is not None and box["width"] > 20, (page.url, cell, box)
        assert sidebar is None or not overlaps(box, sidebar), (page.url, cell, box, sidebar)


def assert_overview(page: Any, outer: MemoryEntry, inner: MemoryEntry) -> None:
    """The timeline opens with the overview strip and the chart, within the window: every
    segment lies on its lane's track, the summary recall loads spans the one folded into
    it, the erased and expired entries have their own runs; the runs a summary hides are
    collapsed, their originals out of sight."""
    width = page.viewport_size["width"]
    sideways = page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert sideways <= 0, f"{width} px: the timeline scrolls {sideways} px sideways"
    strip = page.locator("#am-overview")
    first = page.locator("#content-main > *, #content > .am-card").first
    assert first.get_attribute("id") == "am-overview", "the page does not open with the strip"
    strip_box = strip.bounding_box()
    assert strip_box is not None and strip_box["x"] + strip_box["width"] <= width
    for lane in strip.locator(".am-lane[data-lane]").all():
        track = lane.locator(".am-lane-track").bounding_box()
        for segment in lane.locator(".am-seg").all():
            box = segment.bounding_box()
            assert box is not None and box["width"] >= 1 and inside(box, track), (
                lane.get_attribute("data-lane"), segment.get_attribute("title"), box, track)
    entries = {kind: strip.locator(f"[data-lane=entries] .am-seg-{kind}")
               for kind in ("live", "hidden", "expired", "gone")}
    assert {kind: seg.count() for kind, seg in entries.items()} == {
        "live": 2, "hidden": 1, "expired": 1, "gone": 1}
    assert f"recall loads summary #{outer.pk}" in entries["hidden"].get_attribute("title")
    top = strip.locator("[data-lane=top] .am-seg")
    nested = strip.locator("[data-lane=nested] .am-seg")
    assert top.count() == 1 and f"summary #{outer.pk}," in top.get_attribute("title")
    assert nested.count() == 1 and f"summary #{inner.pk}," in nested.get_attribute("title")
    top_box, nested_box = top.bounding_box(), nested.bounding_box()
    assert inside(nested_box, top_box) and nested_box["width"] < top_box["width"]
    # The hidden run covers exactly the positions of the summary recall loads.
    assert entries["hidden"].bounding_box()["x"] == pytest.approx(top_box["x"], abs=1)
    assert page.locator("#am-overview [data-lane=recalls] .am-seg").count() >= 1
    chart = page.locator("#am-chart")
    assert chart.bounding_box()["x"] + chart.bounding_box()["width"] <= width
    assert page.locator("#am-chart-context polyline").count() == 1
    # Two recall folds and one window fold.
    assert page.locator("#am-chart-context line.am-fold").count() == 3
    assert page.locator("#am-chart-spend rect").count() >= 2
    spans = page.locator("#am-timeline details.am-span")
    assert spans.count() == 1 and spans.get_attribute("open") is None
    assert f"recall loads summary #{outer.pk}" in spans.locator("summary").inner_text()
    assert not page.locator("#am-timeline").get_by_text(ORIGINAL).is_visible()


def unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"{reason}, and CI=true forbids skipping this test.", pytrace=False)
    pytest.skip(reason)


def require_browser() -> Any:
    """Playwright's sync entry point, once it is known chromium can be driven."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is not installed: pip install -e '.[dev]'")
    if not CHROMIUM.exists():
        unavailable(f"{CHROMIUM} is missing: apt-get install chromium (never playwright install)")
    return sync_playwright


def folded_conversation() -> tuple[Thread, MemoryEntry, MemoryEntry]:
    """Five turns with tool calls, folded twice by recall: ``outer`` covers ``inner``."""
    thread = Thread.objects.create(title=TITLE, client_key="late-orders")
    first = [m for n in range(1, 4) for m in turn_messages(n)]
    first[3]["content"] = ORIGINAL
    services.append(thread, first)
    inner = services.recall(thread, BIG, **KNOBS).folded_summary_id
    services.append(thread, [m for n in range(4, 6) for m in turn_messages(n)])
    outer = services.recall(thread, BIG, **KNOBS).folded_summary_id
    summaries = MemoryEntry.objects.in_bulk([inner, outer])
    assert summaries[inner].covered_by_id == outer
    return thread, summaries[inner], summaries[outer]


def records_of(thread: Thread) -> None:
    """One row of each record list for ``thread``: a receipt, a window fold, a latch and a
    failed call, with values as wide as real ones (64-hex keys, a long error)."""
    with override_settings(AGENTMEMORY={"RECEIPTS": True, **SMALL_WINDOW}):
        services.recall(thread, BIG, **KNOBS)
        request = {"role": "user", "content": "Chase every late order and draft the replies."}
        steps = [{"role": "assistant", "content": f"Step {n}: parcel {n} is at the Leipzig "
                  "depot and leaves tomorrow with the second truck."} for n in range(1, 11)]
        assert services.compact(thread, [request, *steps], retain="conversation").span
        # A receipt of its own thread, with a line as long as a tool result's JSON.
        long_line = Thread.objects.create(title="One long tool result", client_key="long")
        services.append(long_line, [{"role": "user", "content": LONG_LINE}])
        services.recall(long_line, BIG)
    FoldLatch.objects.create(
        thread=thread, purpose=FoldPurpose.RECALL_FOLD, span_key=sha256(b"span").hexdigest(),
        start_key=sha256(b"start").hexdigest(), reason="not-smaller", entry_count=6,
        span_tokens=420, model="offline-extractive-1",
    )
    SummarizerCall.objects.create(
        thread=thread, purpose=FoldPurpose.RECALL_FOLD, backend="openai", model="gpt-4o-mini",
        span_key=sha256(b"span").hexdigest(), entry_count=6, outcome=CallOutcome.FAILED,
        error_class="openai.APITimeoutError",
        error_message="Request timed out after 30.0 seconds while waiting for the first "
        "byte of the response from the summarization endpoint; the call will be retried.",
    )


def agentmemory_permissions(*codenames: str) -> list[Permission]:
    return list(Permission.objects.filter(content_type__app_label="agentmemory",
                                          codename__in=codenames))


def launch(playwright: Any) -> Any:
    return playwright.chromium.launch(
        executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
    )


def log_in(page: Any, base: str, username: str) -> None:
    page.goto(f"{base}{reverse('admin:index')}")
    assert page.url.startswith(f"{base}{reverse('admin:login')}")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}{reverse('admin:index')}")


def test_a_curator_expands_a_summary_down_to_the_originals(live_server: Any) -> None:
    sync_playwright = require_browser()
    curator = get_user_model().objects.create_superuser(USERNAME, password=PASSWORD)
    # Being a superuser is not a grant of expand_summary: the curator was granted it.
    curator.user_permissions.add(*agentmemory_permissions("expand_summary"))
    with override_settings(AGENTMEMORY={"RECEIPTS": True}):
        thread, inner, outer = folded_conversation()
    records_of(thread)
    # Two more turns, the first one's answer erased and the second one's expired: the
    # strip shows a run of each between live ones.
    sixth = services.append(thread, turn_messages(6))
    seventh = services.append(thread, turn_messages(7))
    services.erase_entry(sixth[-1])
    MemoryEntry.objects.filter(pk=seventh[-1].pk).update(
        expires_at=timezone.now() - timedelta(days=1))
    receipt = RecallReceipt.objects.get(thread__client_key="long")
    ledger_cells = [
        [f"{call.prompt_tokens:,} prompt", f"{call.completion_tokens:,} completion",
         f"{call.estimated_tokens:,} reserved"]
        if call.prompt_tokens is not None else ["none reported"]
        for call in SummarizerCall.objects.order_by("-created_at", "-id")
    ]
    assert ledger_cells[0] == ["none reported"] and len(ledger_cells) == 4
    receipt_page = reverse("admin:agentmemory_recallreceipt_change", args=[receipt.pk])
    base = live_server.url
    shots = ARTIFACTS
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(15_000)

            page.goto(f"{base}{reverse('admin:index')}")
            assert page.url.startswith(f"{base}{reverse('admin:login')}")
            page.fill("#id_username", USERNAME)
            page.fill("#id_password", PASSWORD)
            page.screenshot(path=shots / "01-login.png")
            page.click("input[type=submit]")
            page.wait_for_url(f"{base}{reverse('admin:index')}")

            page.click(f"a[href='{reverse('admin:agentmemory_thread_changelist')}']")
            page.wait_for_url(f"**{reverse('admin:agentmemory_thread_changelist')}")
            assert_fits(page, "td.field-timeline_link a")
            page.screenshot(path=shots / "02-threads.png", full_page=True)

            page.click(f"#result_list a:text-is('{TITLE}')")
            page.wait_for_url(f"**{reverse('admin:agentmemory_thread_change', args=[thread.pk])}")
            page.screenshot(path=shots / "03-thread.png", full_page=True)

            timeline = reverse("admin:agentmemory_thread_timeline", args=[thread.pk])
            page.click(f"a[href='{timeline}']")
            page.wait_for_url(f"**{timeline}")
            assert page.locator("#am-timeline").is_visible()
            assert_overview(page, outer, inner)
            page.screenshot(path=shots / "04-timeline.png", full_page=True)
            page.set_viewport_size(NARROW)
            assert_overview(page, outer, inner)
            page.screenshot(path=shots / "04-timeline-1024.png", full_page=True)
            page.set_viewport_size(VIEWPORT)

            # A hidden run on the strip leads to its rows, opened.
            page.click("#am-overview [data-lane=entries] .am-seg-hidden")
            original = page.locator("#am-timeline").get_by_text(ORIGINAL)
            original.wait_for(state="visible")
            assert page.locator("#am-timeline details.am-span").get_attribute("open") is not None

            summary_page = reverse("admin:agentmemory_summary_change", args=[outer.pk])
            page.click(f"#am-entry-{outer.pk} .am-meta a[href='{summary_page}']")
            page.wait_for_url(f"**{summary_page}")
            page.screenshot(path=shots / "05-summary.png", full_page=True)

            expand = reverse("admin:agentmemory_summary_expand", args=[outer.pk])
            page.click(f"#content a[href='{expand}']")
            page.wait_for_url(f"**{expand}")
            label, text = outer.content.split("\n", 1)
            assert page.locator("#am-summary-label").inner_text().endswith(label)
            assert text.splitlines()[0] in page.locator("#am-summary-text").inner_text()
            original = page.locator("#am-originals details").get_by_text(ORIGINAL)
            assert not original.is_visible()  # folded away until the curator opens it
            page.screenshot(path=shots / "06-expand.png", full_page=True)

            page.click(f"#am-originals details > summary:has-text('#{inner.pk}')")
            original.wait_for(state="visible")
            assert page.locator("#am-originals details").get_attribute("open") is not None
            page.screenshot(path=shots / "07-expand-nested.png", full_page=True)

            page.goto(f"{base}{receipt_page}")
            context = page.locator("pre.am-receipt-text")
            assert LONG_LINE in context.inner_text()
            # Wrapped, not cut off: the text lies within the window, none of it scrolled.
            assert context.evaluate("pre => pre.scrollWidth - pre.clientWidth") <= 0
            box = context.bounding_box()
            assert box is not None and box["x"] + box["width"] <= VIEWPORT["width"], box
            page.screenshot(path=shots / "15-receipt.png", full_page=True)

            for number, model in enumerate(LISTS, start=8):
                page.goto(f"{base}{reverse(f'admin:agentmemory_{model}_changelist')}")
                page.screenshot(path=shots / f"{number:02}-{model}-list.png", full_page=True)
                assert_fits(page, LISTS[model])

            page.set_viewport_size(NARROW)
            for number, model in enumerate(LISTS, start=16):
                page.goto(f"{base}{reverse(f'admin:agentmemory_{model}_changelist')}")
                page.screenshot(path=shots / f"{number:02}-{model}-list-1024.png",
                                full_page=True)
                assert_readable_columns(page, LISTS[model])
                for cell in NARROW_COLUMNS.get(model, ()):
                    assert_readable_columns(page, cell)
                if model == "summarizercall":  # each figure on its own line, named
                    cells = page.locator("td.field-tokens").all_inner_texts()
                    assert [cell.splitlines() for cell in cells] == ledger_cells, cells
        finally:
            browser.close()

    if UPDATE_SCREENSHOTS:
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shots / "07-expand-nested.png", DOCS_IMG / "admin-summary-expand.png")
        shutil.copyfile(shots / "04-timeline.png", DOCS_IMG / "admin-thread-timeline.png")
        shutil.copyfile(shots / "10-summary-list.png", DOCS_IMG / "admin-summary-list.png")
        shutil.copyfile(shots / "21-summarizercall-list-1024.png",
                        DOCS_IMG / "admin-usage-ledger-1024.png")


VIEWER = "viewer"
VIEWS = ["view_thread", "view_memoryentry", "view_summary", "view_foldedspan"]


def test_a_viewer_finds_no_expand_link_and_an_explained_refusal(live_server: Any) -> None:
    """Staff who may view everything but not expand: the timeline and the summary's page
    offer no expand link and show no covered original; the expand URL, typed in, answers
    403 with a page in the admin's look that says what is needed."""
    sync_playwright = require_browser()
    viewer = get_user_model().objects.create_user(VIEWER, password=PASSWORD, is_staff=True)
    viewer.user_permissions.add(*agentmemory_permissions(*VIEWS))
    thread, inner, outer = folded_conversation()
    base = live_server.url
    shots = ARTIFACTS / "viewer"
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)
    expand = reverse("admin:agentmemory_summary_expand", args=[outer.pk])

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(15_000)
            log_in(page, base, VIEWER)

            timeline = reverse("admin:agentmemory_thread_timeline", args=[thread.pk])
            page.goto(f"{base}{timeline}")
            assert page.locator("#am-timeline").is_visible()
            assert page.locator("a[href*='/expand/']").count() == 0
            assert page.get_by_text(ORIGINAL).count() == 0
            assert page.locator(".am-withheld").count() > 0
            page.screenshot(path=shots / "01-timeline.png", full_page=True)

            summary_page = reverse("admin:agentmemory_summary_change", args=[outer.pk])
            page.click(f"#am-entry-{outer.pk} .am-meta a[href='{summary_page}']")
            page.wait_for_url(f"**{summary_page}")
            assert page.locator("a[href*='/expand/']").count() == 0
            page.screenshot(path=shots / "02-summary.png", full_page=True)

            response = page.goto(f"{base}{expand}")
            assert response is not None and response.status == 403
            assert REFUSAL in page.locator("#am-refused").inner_text()
            crumbs = page.locator("div.breadcrumbs")
            assert crumbs.locator(f"a[href='{summary_page}']").count() == 1
            assert page.locator("#site-name").is_visible()  # the admin's own header
            assert page.get_by_text(ORIGINAL).count() == 0
            page.screenshot(path=shots / "03-refused.png", full_page=True)

            crumbs.locator(f"a[href='{summary_page}']").click()  # the way back works
            page.wait_for_url(f"**{summary_page}")
        finally:
            browser.close()
