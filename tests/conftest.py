"""Shared fixtures. PostgreSQL and Redis are real; absent ones skip locally, fail in CI."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from agentmemory.models import Thread
from agentmemory.summarizers import testing
from agentmemory.summarizers.base import ChatMessage
from agentmemory.trust import ledger
from tests.helpers import add_turns, api_client_of

pytest_plugins = ["tests.openai_server", "tests.admin_fixtures"]

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def require_service(name: str, host: str, port: int) -> None:
    """Skip with a clear reason on a developer's machine; fail under CI=true."""
    if reachable(host, port):
        return
    message = f"{name} is not reachable on {host}:{port}"
    if IN_CI:
        pytest.fail(f"{message}, and CI=true forbids skipping: start {name}.", pytrace=False)
    pytest.skip(f"{message}; start it to run these tests.")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "server_errors_answered: the client fixture answers a view's unhandled exception "
        "as the 500 a caller would get instead of raising it into the test",
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    if settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):
        host = settings.DATABASES["default"]["HOST"]
        port = int(settings.DATABASES["default"]["PORT"])
        if not reachable(host, port):
            message = f"PostgreSQL is not reachable on {host}:{port}"
            if IN_CI:
                pytest.exit(f"{message}, and CI=true forbids skipping.", returncode=1)
            pytest.exit(f"{message}: the PostgreSQL run is skipped.", returncode=0)


#: Fixtures through which a test reaches the database (pytest-django blocks every other
#: way in), directly or through a fixture of its own; and the one that asks the vendor.
DATABASE_FIXTURES = frozenset({"db", "transactional_db", "django_db_reset_sequences",
                               "django_db_serialized_rollback", "live_server",
                               "on_postgres"})


def touches_the_database(item: pytest.Item) -> bool:
    return bool(item.get_closest_marker("django_db")
                or DATABASE_FIXTURES & set(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With AGENTMEMORY_TEST_DATABASE_ONLY=1, run only the tests that reach the database.

    ``scripts/test_both.sh`` sets it for the PostgreSQL run: a test that cannot reach the
    database runs the same on either, and the SQLite run beside it already runs it.
    """
    if os.environ.get("AGENTMEMORY_TEST_DATABASE_ONLY") != "1":
        return
    kept, dropped = [], []
    for item in items:
        (kept if touches_the_database(item) else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture
def on_postgres() -> bool:
    return bool(settings.DATABASES["default"]["ENGINE"].endswith("postgresql"))


@pytest.fixture
def redis_url() -> str:
    from urllib.parse import urlparse

    url = settings.REDIS_URL
    parsed = urlparse(url)
    require_service("Redis", parsed.hostname or "127.0.0.1", parsed.port or 6379)
    return str(url)


@pytest.fixture(autouse=True)
def _fresh_process_state() -> Iterator[None]:
    """Each test sees the process as new: cached summarizer, warn-once memory."""
    from agentmemory import services
    from agentmemory.conf import memory_settings

    memory_settings.reload()
    ledger._warned.clear()
    services.broker.reset()
    yield
    memory_settings.reload()


@pytest.fixture(autouse=True)
def recorded() -> Iterator[list[ChatMessage]]:
    """The prompts the recording summarizer was sent in this test (empty at its start)."""
    testing.reset()
    yield testing.calls
    testing.reset()


@pytest.fixture
def eager_celery() -> Iterator[None]:
    """The tests' Celery app (eager, from tests/settings.py) current for the test, so a
    task sent with ``delay``/``apply_async`` runs inline instead of looking for a broker,
    whichever app an earlier test left current."""
    from celery import current_app

    from tests.celery_app import app

    previous = current_app._get_current_object()
    app.set_current()
    try:
        yield
    finally:
        previous.set_current()


#: The seeds' count-driven recall: load the newest 20, fold once 20 are loaded. The
#: law-by-law tests written for it keep it; the recall contract's tests use the defaults.
SEED_COUNTS = {"LOAD_COUNT": 20, "TRIGGER_MIN_ENTRIES": 20, "FOLD_HIGH_WATER": None}

#: Test modules written law by law against the count-driven recall.
SEED_MODULES = {
    "test_admin", "test_admin_browser", "test_api_bad_input", "test_api_flow",
    "test_api_isolation", "test_append", "test_erasure", "test_fact_gate", "test_fold_laws",
    "test_invariants", "test_quarantine", "test_query_counts", "test_quota", "test_recall",
    "test_receipts", "test_retention", "test_signing", "test_summarizers", "test_window",
    "test_worker",
}


@pytest.fixture(autouse=True)
def _seed_counts_in_law_modules(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """In SEED_MODULES the count-driven mode is the default (settings still override)."""
    from agentmemory.conf import DEFAULTS, memory_settings

    if request.module.__name__.split(".")[-1] in SEED_MODULES:
        for key, value in SEED_COUNTS.items():
            monkeypatch.setitem(DEFAULTS, key, value)
        memory_settings.reload()
    yield
    memory_settings.reload()


# ---------------------------------------------------------------- the REST API's tests


@pytest.fixture
def fresh_cache() -> Iterator[None]:
    """An empty cache before and after the test, so no throttle count carries over from
    another test (``pytest.mark.usefixtures("fresh_cache")`` in the module)."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def user() -> Any:
    """Ada, a plain user: the one ``client`` acts as and ``thread`` belongs to."""
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user("ada")


@pytest.fixture
def client(request: pytest.FixtureRequest, user: Any) -> APIClient:
    """The REST API's test client, authenticated as ``user`` (in place of pytest-django's
    anonymous ``client``; ``helpers.api_client_of`` builds one for another user).

    Like Django's, it raises a view's unhandled exception into the test; under the marker
    ``server_errors_answered`` (on a test or its module) it answers the 500 a caller
    would get, for the tests that assert a request is never answered with one."""
    answered = request.node.get_closest_marker("server_errors_answered") is not None
    return api_client_of(user, raise_request_exception=not answered)


@pytest.fixture
def thread(user: Any) -> Thread:
    """``user``'s thread "orders", with two turns in it (tool calls and all)."""
    thread = Thread.objects.create(owner=user, title="orders")
    add_turns(thread, 2)
    return thread
