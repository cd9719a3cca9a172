"""`services.append_owned`: `append` to a thread only if the user owns it, as the REST API
appends. On PostgreSQL outside a transaction, plain messages are one statement that is
the owner's check too and takes the rows' tier and expiry from the thread row it locks
(`sql.append_owned_in_one_statement`); elsewhere, and for tool rounds or explicit turns,
the thread is read first. Held to `append` over random batches, thread policies and
settings: the same rows field for field, the same counters, on both databases.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmemory import services
from agentmemory.exceptions import InvalidMessageError
from agentmemory.models import MemoryEntry, Thread
from tests.test_append_statement import FUNCTION_CALL, STATEMENT, counters_of, rows_of

pytestmark = pytest.mark.django_db(transaction=True)

NOW = datetime(2026, 12, 1, tzinfo=UTC)
TIERS = ["hot", "warm", "cold"]

messages = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system"]),
     "content": st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"),
                        max_size=20).filter(str.strip)},
    optional={"tier": st.sampled_from(TIERS),
              "metadata": st.dictionaries(st.sampled_from(["k", "ü"]), st.integers(),
                                          max_size=2)})
batches = st.lists(st.lists(messages, min_size=1, max_size=5), min_size=1, max_size=4)
ttls = st.sampled_from([None, timedelta(days=2, seconds=5, microseconds=7),
                        timedelta(seconds=90)])


def user(name: str) -> Any:
    return get_user_model().objects.get_or_create(username=name)[0]


@pytest.mark.parametrize("kept", [True, False], ids=["kept", "a request's"])
@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=batches, ttl=ttls, default_ttl=st.sampled_from([None, 3600]),
       write_tier=st.sampled_from(["", *TIERS]), default_tier=st.sampled_from(TIERS))
def test_append_owned_writes_what_append_writes(
    on_postgres: bool, monkeypatch: pytest.MonkeyPatch, kept: bool,
    batches: list[list[dict[str, Any]]], ttl: timedelta | None, default_ttl: int | None,
    write_tier: str, default_tier: str,
) -> None:
    """Positions, turns, tiers (an entry's own, else the thread's, else WRITE_TIER),
    expiries (now plus the thread's ttl, else DEFAULT_TTL), every other column and the
    counters; on PostgreSQL in one statement per append, the function's call on a
    connection kept past a request, its body on one opened for a request."""
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 60 if kept else 0)
    sent = FUNCTION_CALL if kept else STATEMENT
    owner = user("owner")
    mine, theirs = (Thread.objects.create(owner=owner, ttl=ttl, write_tier=write_tier)
                    for _ in range(2))
    with override_settings(AGENTMEMORY={"DEFAULT_TTL": default_ttl,
                                        "WRITE_TIER": default_tier}):
        for number, batch in enumerate(batches):
            now = NOW + timedelta(minutes=number)
            with CaptureQueriesContext(connection) as captured:
                entries = services.append_owned(owner, mine.pk, batch, now=now)
            if on_postgres:
                [query] = captured.captured_queries
                assert query["sql"].startswith(sent), query
            expected = services.append(theirs, batch, now=now)
            assert entries is not None
            assert [(e.position, e.turn, e.tier, e.expires_at) for e in entries] == [
                (e.position, e.turn, e.tier, e.expires_at) for e in expected]
            stored = MemoryEntry.objects.filter(thread=mine).order_by("position")
            assert [e.pk for e in entries] == list(
                stored.values_list("pk", flat=True))[-len(batch):]
    assert rows_of(mine) == rows_of(theirs)
    assert counters_of(mine) == counters_of(theirs)


def test_the_thread_it_read_loads_what_it_did_not(on_postgres: bool) -> None:
    """The thread the statement read holds its counters and policy; a field it did not
    read loads when asked for."""
    owner = user("owner")
    thread = Thread.objects.create(owner=owner, title="parcels", ttl=timedelta(days=1))
    [entry] = services.append_owned(owner, thread.pk, {"role": "user", "content": "hi"},
                                    now=NOW) or []
    read = entry.thread
    assert (read.pk, read.last_position, read.last_turn, read.ttl) == (
        thread.pk, 1, 1, timedelta(days=1))
    assert read.title == "parcels"
    assert entry.expires_at == NOW + timedelta(days=1)


@pytest.mark.parametrize("batch", [
    [{"role": "user", "content": "plain"}],
    [{"role": "user", "content": "where is it?"},
     {"role": "assistant", "content": "", "tool_calls": [
         {"id": "c1", "name": "track", "arguments": "{}"}]},
     {"role": "tool", "tool_call_id": "c1", "tool_name": "track", "content": "{}"}],
], ids=["plain", "tool round"])
def test_another_users_thread_and_a_missing_one_take_nothing(batch: list[Any]) -> None:
    owner, stranger = user("owner"), user("stranger")
    thread = Thread.objects.create(owner=owner)
    before = counters_of(thread)
    assert services.append_owned(stranger, thread.pk, batch, now=NOW) is None
    gone = Thread.objects.create(owner=owner)
    Thread.objects.filter(pk=gone.pk).delete()
    assert services.append_owned(owner, gone.pk, batch, now=NOW) is None
    assert services.append_owned(owner, 2**63, batch, now=NOW) is None  # beyond bigint
    assert not MemoryEntry.objects.exists()
    assert counters_of(thread) == before


def test_a_bad_message_is_refused_before_the_thread_is_read() -> None:
    owner = user("owner")
    thread = Thread.objects.create(owner=owner)
    with CaptureQueriesContext(connection) as captured, pytest.raises(InvalidMessageError):
        services.append_owned(owner, thread.pk, [{"role": "user", "content": "ok"},
                                                 {"role": "nobody", "content": "x"}])
    assert captured.captured_queries == []
    assert not MemoryEntry.objects.exists()
