"""Cached token authentication: one query fewer per request, and revocation still works.

Through the real API with DRF's test client: the second request with a token reads no
token row; deleting the token or deactivating its user refuses the next request at
once in this process; a token deleted behind the signals' back (another process, raw
SQL) is refused once the window (``TOKEN_CACHE_SECONDS``) has passed, and at once with
a window of 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agentmemory.api import authentication
from agentmemory.api.authentication import CachedTokenAuthentication

pytestmark = pytest.mark.django_db

THREADS = "/api/memory/threads/"
# Session authentication comes first in the settings, so a refused token answers 403.
REFUSED = 403


@pytest.fixture(autouse=True)
def _empty_table() -> Iterator[None]:
    authentication._remembered.clear()
    yield
    authentication._remembered.clear()


def client_for(name: str) -> tuple[APIClient, Token]:
    user = get_user_model().objects.create_user(name)
    token = Token.objects.create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client, token


def token_queries(client: APIClient) -> tuple[int, int]:
    """(status, queries that read the token table) of one list request."""
    with CaptureQueriesContext(connection) as queries:
        status = client.get(THREADS).status_code
    return status, sum("authtoken_token" in query["sql"] for query in queries)


def test_a_known_token_is_not_read_again() -> None:
    client, _ = client_for("agent")
    assert token_queries(client) == (200, 1)
    assert token_queries(client) == (200, 0)
    assert token_queries(client) == (200, 0)


def test_a_bad_token_is_refused_and_never_remembered() -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)
    assert token_queries(client) == (REFUSED, 1)
    assert token_queries(client) == (REFUSED, 1)


def test_deleting_the_token_refuses_the_next_request() -> None:
    client, token = client_for("agent")
    assert token_queries(client)[0] == 200
    token.delete()
    assert client.get(THREADS).status_code == REFUSED


def test_deleting_the_user_refuses_the_next_request() -> None:
    client, token = client_for("agent")
    assert token_queries(client)[0] == 200
    token.user.delete()  # the token goes by cascade, with its signal
    assert client.get(THREADS).status_code == REFUSED


def test_deactivating_the_user_refuses_the_next_request() -> None:
    client, token = client_for("agent")
    assert token_queries(client)[0] == 200
    user = token.user
    user.is_active = False
    user.save()
    assert client.get(THREADS).status_code == REFUSED


def test_another_process_revocation_holds_within_cache_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client, token = client_for("agent")
    clock = [1000.0]
    monkeypatch.setattr(authentication.time, "monotonic", lambda: clock[0])
    assert token_queries(client) == (200, 1)
    with connection.cursor() as cursor:  # no signal: as if deleted by another process
        cursor.execute(f"DELETE FROM {Token._meta.db_table} WHERE key = %s", [token.key])
    clock[0] += CachedTokenAuthentication().window() - 0.5
    assert client.get(THREADS).status_code == 200  # the documented window
    clock[0] += 1.0
    assert token_queries(client) == (REFUSED, 1)


def test_the_table_is_bounded_and_keeps_the_recently_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(CachedTokenAuthentication, "cache_size", 3)
    clients = [client_for(f"agent{n}")[0] for n in range(5)]
    for client in clients:
        assert client.get(THREADS).status_code == 200
    assert len(authentication._remembered) == 3
    assert token_queries(clients[-1]) == (200, 0)
    assert token_queries(clients[0]) == (200, 1)


def test_a_request_cannot_change_the_user_another_request_gets() -> None:
    client, token = client_for("agent")
    auth = CachedTokenAuthentication()
    first, _ = auth.authenticate_credentials(token.key)
    first.first_name = "changed by a view"
    second, _ = auth.authenticate_credentials(token.key)
    assert second.first_name == ""
    assert second.pk == first.pk


@pytest.mark.parametrize("window", [0, 3.0])
def test_the_window_is_the_setting_and_0_reads_the_token_every_time(
    monkeypatch: pytest.MonkeyPatch, settings: Any, window: float,
) -> None:
    settings.AGENTMEMORY = {"TOKEN_CACHE_SECONDS": window}
    client, token = client_for("agent")
    clock = [1000.0]
    monkeypatch.setattr(authentication.time, "monotonic", lambda: clock[0])
    assert token_queries(client) == (200, 1)
    assert token_queries(client) == (200, 0 if window else 1)
    with connection.cursor() as cursor:  # no signal: as if deleted by another process
        cursor.execute(f"DELETE FROM {Token._meta.db_table} WHERE key = %s", [token.key])
    if window:
        clock[0] += window - 0.5
        assert client.get(THREADS).status_code == 200  # within the window
        clock[0] += 1.0
    assert token_queries(client) == (REFUSED, 1)
    assert not authentication._remembered or window


def test_a_negative_window_is_a_check_error(settings: Any) -> None:
    from django.core.checks import run_checks

    settings.AGENTMEMORY = {"TOKEN_CACHE_SECONDS": -1}
    errors = [e for e in run_checks() if e.id == "agentmemory.E010"]
    assert any("TOKEN_CACHE_SECONDS" in e.msg for e in errors), errors
