"""The admin in a real browser: log in, walk to a thread's timeline and a summary, expand
it down to the originals, and keep screenshots; and, as staff who may not expand, find no
expand link and a refusal that explains itself.

Playwright for Python drives Debian's chromium (``/usr/bin/chromium``); Playwright's own
browser downloads are never used. Screenshots go to ``artifacts/admin-browser/``
(gitignored). With ``AGENTMEMORY_UPDATE_SCREENSHOTS=1`` the timeline and expand-view
shots are also copied to ``docs/img/``. Under ``CI=true`` a missing chromium or
playwright fails the test; on a developer's machine it skips and says why.

All database work happens before Playwright starts: its sync API runs an event loop in
this thread, and Django refuses database access from a thread with a running loop.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.urls import reverse

from agentmemory import services
from agentmemory.models import MemoryEntry, Thread
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
ORIGINAL = "Order 1 left the Leipzig depot on Tuesday; courier reference QUOKKA-7731-ZED."
TITLE = "Northwind support: late orders"
BIG = 100_000
#: Small enough that one screen shows a fold: the first recall folds turns 1-2, the
#: second folds that summary with turns 3-4.
KNOBS = {"preserve_recent": 4, "trigger_min_entries": 8, "load_count": 50}


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
    thread, inner, outer = folded_conversation()
    base = live_server.url
    shots = ARTIFACTS
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)

    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
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
            page.screenshot(path=shots / "02-threads.png", full_page=True)

            page.click(f"#result_list a:text-is('{TITLE}')")
            page.wait_for_url(f"**{reverse('admin:agentmemory_thread_change', args=[thread.pk])}")
            page.screenshot(path=shots / "03-thread.png", full_page=True)

            timeline = reverse("admin:agentmemory_thread_timeline", args=[thread.pk])
            page.click(f"a[href='{timeline}']")
            page.wait_for_url(f"**{timeline}")
            assert page.locator("#am-timeline").is_visible()
            page.screenshot(path=shots / "04-timeline.png", full_page=True)

            summary_page = reverse("admin:agentmemory_summary_change", args=[outer.pk])
            page.click(f"#am-timeline a[href='{summary_page}']")
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
        finally:
            browser.close()

    if UPDATE_SCREENSHOTS:
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shots / "07-expand-nested.png", DOCS_IMG / "admin-summary-expand.png")
        shutil.copyfile(shots / "04-timeline.png", DOCS_IMG / "admin-thread-timeline.png")


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
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
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
            page.click(f"#am-timeline a[href='{summary_page}']")
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
