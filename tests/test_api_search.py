"""The search endpoints (issue 23, item 4): ``threads/{id}/search/`` and ``search/``.

Hits of the caller's own threads only (another user's thread answers 404 like a missing
one, and an owner-wide search never reaches another owner's rows); every bad parameter
a 400 that names it, never a 500; a constant number of queries however many hits; and
a schema that accepts exactly the query text the parser does, so a fuzzer and the
server agree.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import jsonschema
import jsonschema_rs
import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from agentmemory import services
from agentmemory.models import MemoryEntry, Thread, summary_handle
from agentmemory.search.query import (
    MAX_QUERY_CHARS,
    MAX_TERMS,
    InvalidSearchQuery,
    parse_query,
    query_pattern,
)
from agentmemory.search.schema import catch_up
from tests.helpers import add_turns, api_client_of, turn_messages

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache"),
              pytest.mark.server_errors_answered]

API = "/api/memory/"
FOLD = {"preserve_recent": 2, "trigger_min_entries": 4, "load_count": 40}
AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
HIT_FIELDS = {"entry_id", "thread_id", "turn", "position", "role", "snippet", "score",
              "covered_by", "covered_by_handle"}


@pytest.fixture
def ada(user: Any) -> Any:
    """The conftest's ``user`` (whom ``client`` acts as), by name beside bob."""
    return user


@pytest.fixture
def bob() -> Any:
    return get_user_model().objects.create_user("bob")


def say(thread: Thread, *texts: str, role: str = "user", now: datetime | None = None
        ) -> list[MemoryEntry]:
    return services.append(thread, [{"role": role, "content": text} for text in texts],
                           now=now)


def search(client: APIClient, path: str, status: int = 200, **params: Any) -> Any:
    """GET ``path`` (under the API) with ``params`` (a list value repeats the parameter)."""
    response = client.get(f"{API}{path}?{urlencode(params, doseq=True)}")
    assert response.status_code == status, (response.status_code, response.content)
    return response.json()


def ids(body: dict[str, Any]) -> list[int]:
    return [hit["entry_id"] for hit in body["results"]]


# ---------------------------------------------------------------- results


def test_a_thread_search_answers_its_hits_best_first(client: APIClient, ada: Any) -> None:
    thread = Thread.objects.create(owner=ada)
    weak, strong, _ = say(
        thread,
        "The parcel for the refund went out on Monday with several other items, a long "
        "message about many unrelated things such as weather and opening hours.",
        "Refund parcel: the refund for the parcel is approved.",
        "Nothing about it here.",
    )
    body = search(client, f"threads/{thread.pk}/search/", q="refund parcel")
    assert list(body) == ["results"]
    assert ids(body) == [strong.pk, weak.pk]
    first = body["results"][0]
    assert set(first) == HIT_FIELDS
    assert first["thread_id"] == thread.pk and first["role"] == "user"
    assert (first["turn"], first["position"]) == (strong.turn, strong.position)
    assert "**" in first["snippet"] and "refund" in first["snippet"].lower()
    assert first["covered_by"] is None and first["covered_by_handle"] is None
    assert first["score"] > body["results"][1]["score"]
    assert search(client, f"threads/{thread.pk}/search/", q="refund zebra") == {"results": []}


def test_a_covered_hit_names_the_summary_that_stands_for_it(
    client: APIClient, ada: Any
) -> None:
    thread = Thread.objects.create(owner=ada)
    batch = [message for n in (1, 2, 3) for message in turn_messages(n, with_tools=False)]
    batch[1]["content"] = "Order 1 left the depot with courier reference QUOKKA-7731."
    early = services.append(thread, batch)[1]
    summary = services.fold(thread, **FOLD).summary
    assert summary is not None
    early.refresh_from_db()
    assert early.covered_by_id == summary.pk

    hit, = search(client, f"threads/{thread.pk}/search/", q="quokka 7731")["results"]
    assert hit["entry_id"] == early.pk
    assert (hit["covered_by"], hit["covered_by_handle"]) == (
        summary.pk, summary_handle(summary.summary_key))


def test_an_owner_wide_search_reaches_every_thread_of_the_caller_and_no_other(
    ada: Any, bob: Any
) -> None:
    first, second = Thread.objects.create(owner=ada), Thread.objects.create(owner=ada)
    theirs = Thread.objects.create(owner=bob)
    mine = [say(first, "The zeppelin lands at noon.")[0].pk,
            say(second, "A zeppelin was seen over the depot.")[0].pk]
    bobs = say(theirs, "Bob's zeppelin is the red one.")[0].pk

    ada_hits = search(api_client_of(ada, raise_request_exception=False), "search/",
                      q="zeppelin")["results"]
    assert sorted(hit["entry_id"] for hit in ada_hits) == sorted(mine)
    assert {hit["thread_id"] for hit in ada_hits} == {first.pk, second.pk}
    bob_hits = search(api_client_of(bob, raise_request_exception=False), "search/",
                      q="zeppelin")["results"]
    assert [(hit["entry_id"], hit["thread_id"]) for hit in bob_hits] == [(bobs, theirs.pk)]
    # A user with no threads finds nothing, not everything.
    loner = get_user_model().objects.create_user("loner")
    loner_client = api_client_of(loner, raise_request_exception=False)
    assert search(loner_client, "search/", q="zeppelin") == {"results": []}


def test_another_users_thread_answers_404_like_a_missing_one(
    client: APIClient, bob: Any
) -> None:
    theirs = Thread.objects.create(owner=bob)
    say(theirs, "Bob's secret zeppelin.")
    missing = theirs.pk + 1000
    for params in ({"q": "zeppelin"}, {"q": '"unbalanced'}, {"q": "x", "limit": "0"}):
        found = client.get(f"{API}threads/{theirs.pk}/search/?{urlencode(params)}")
        absent = client.get(f"{API}threads/{missing}/search/?{urlencode(params)}")
        assert found.status_code == absent.status_code == 404, params
        assert found.json()["detail"].replace(str(theirs.pk), "N") == (
            absent.json()["detail"].replace(str(missing), "N")
        )


def test_unauthenticated_searches_are_refused(ada: Any) -> None:
    thread = Thread.objects.create(owner=ada)
    say(thread, "The zeppelin lands at noon.")
    for path in (f"threads/{thread.pk}/search/", "search/"):
        response = APIClient().get(f"{API}{path}?q=zeppelin")
        assert response.status_code in (401, 403), (path, response.status_code)
        assert "zeppelin" not in response.content.decode()


# ---------------------------------------------------------------- filters and bounds


def test_roles_are_repeated_or_joined_with_commas(client: APIClient, ada: Any) -> None:
    thread = Thread.objects.create(owner=ada)
    asked = say(thread, "Where is the parcel?")[0].pk
    answered = say(thread, "The parcel is at the depot.", role="assistant")[0].pk
    path = f"threads/{thread.pk}/search/"
    assert ids(search(client, path, q="parcel", role="assistant")) == [answered]
    assert ids(search(client, path, q="parcel", role="user")) == [asked]
    for both in ({"role": ["user", "assistant"]}, {"role": "user,assistant"},
                 {"role": ["user,assistant", "user"]}):
        assert sorted(ids(search(client, path, q="parcel", **both))) == [asked, answered]
    assert search(client, path, q="parcel", role="tool,system") == {"results": []}


def test_before_and_after_bound_the_time_written_strictly_in_any_offset(
    client: APIClient, ada: Any
) -> None:
    thread = Thread.objects.create(owner=ada)
    older = say(thread, "The parcel left.", now=AT - timedelta(hours=2))[0].pk
    newer = say(thread, "The parcel arrived.", now=AT)[0].pk
    path = f"threads/{thread.pk}/search/"

    def found(**bounds: str) -> list[int]:
        return sorted(ids(search(client, path, q="parcel", **bounds)))

    assert found(before="2026-11-30T11:00:00Z") == [older]
    assert found(after="2026-11-30T11:00:00Z") == [newer]
    # The same instants in other offsets (SQLite compares stored UTC text).
    assert found(before="2026-11-30T16:00:00+05:00") == [older]
    assert found(after="2026-11-30T06:00:00-05:00") == [newer]
    assert found(after="2026-11-30t09:59:59.999999z") == [older, newer]
    # Strict at both ends: an entry written at the bound is neither before nor after it.
    assert found(before="2026-11-30T12:00:00Z") == [older]
    assert found(after="2026-11-30T12:00:00Z") == []
    assert found(after="2026-11-30T10:00:00Z", before="2026-11-30T12:00:00.000001Z") == [newer]
    # Instants Python cannot hold in UTC are earlier or later than anything stored.
    assert found(before="0001-01-01T00:00:00+01:00") == []
    assert found(after="0001-01-01T00:00:00+01:00") == [older, newer]
    assert found(after="9999-12-31T23:59:59-01:00") == []
    assert found(before="9999-12-31T23:59:59-23:59") == [older, newer]


def test_limit_bounds_the_hits_and_defaults_to_ten(client: APIClient, ada: Any) -> None:
    thread = Thread.objects.create(owner=ada)
    say(thread, *[f"Parcel number {n} is late." for n in range(services.MAX_SEARCH_LIMIT + 5)])
    path = f"threads/{thread.pk}/search/"
    assert len(ids(search(client, path, q="parcel"))) == 10
    assert len(ids(search(client, path, q="parcel", limit="1"))) == 1
    assert len(ids(search(client, path, q="parcel", limit="007"))) == 7
    top = ids(search(client, path, q="parcel", limit=str(services.MAX_SEARCH_LIMIT)))
    assert len(top) == services.MAX_SEARCH_LIMIT


def test_expired_and_erased_entries_are_never_returned(client: APIClient, ada: Any) -> None:
    thread = Thread.objects.create(owner=ada, ttl=timedelta(days=1))
    say(thread, "The expired zeppelin.", now=datetime.now(UTC) - timedelta(days=2))
    kept, erased = say(thread, "The live zeppelin.", "The erased zeppelin.")
    path = f"threads/{thread.pk}/search/"
    assert sorted(ids(search(client, path, q="zeppelin"))) == [kept.pk, erased.pk]  # not purged
    response = client.delete(f"{API}threads/{thread.pk}/entries/{erased.pk}/")
    assert response.status_code == 204
    assert ids(search(client, path, q="zeppelin")) == [kept.pk]
    assert ids(search(client, "search/", q="zeppelin")) == [kept.pk]


# ---------------------------------------------------------------- bad input


LONG_NUMBER = "9" * 5_000  # more digits than Python converts: a 500 before the bound check
BAD = [
    ({}, "q"),
    ({"q": ""}, "q"),
    ({"q": "   "}, "q"),
    ({"q": '"unbalanced phrase'}, "q"),
    ({"q": "nul\x00byte"}, "q"),
    ({"q": "bell\x07"}, "q"),
    ({"q": "* - ^ : ( ) + {}"}, "q"),  # FTS5 operators alone
    ({"q": "a" * (MAX_QUERY_CHARS + 1)}, "q"),
    ({"q": " ".join(f"w{n}" for n in range(MAX_TERMS + 1))}, "q"),
    ({"q": ["parcel", "refund"]}, "q"),
    ({"q": "parcel", "limit": "0"}, "limit"),
    ({"q": "parcel", "limit": str(services.MAX_SEARCH_LIMIT + 1)}, "limit"),
    ({"q": "parcel", "limit": "ten"}, "limit"),
    ({"q": "parcel", "limit": "2.0"}, "limit"),
    ({"q": "parcel", "limit": "-1"}, "limit"),
    ({"q": "parcel", "limit": "１"}, "limit"),  # a fullwidth digit
    ({"q": "parcel", "limit": ""}, "limit"),
    ({"q": "parcel", "limit": LONG_NUMBER}, "limit"),
    ({"q": "parcel", "limit": ["1", "2"]}, "limit"),
    ({"q": "parcel", "role": "robot"}, "role"),
    ({"q": "parcel", "role": ""}, "role"),
    ({"q": "parcel", "role": "user,,tool"}, "role"),
    ({"q": "parcel", "role": ["user", "User"]}, "role"),
    ({"q": "parcel", "before": "yesterday"}, "before"),
    ({"q": "parcel", "before": "2026-11-30"}, "before"),
    ({"q": "parcel", "before": "2026-11-30T12:00:00"}, "before"),  # no offset
    ({"q": "parcel", "before": "2026-11-30 12:00:00Z"}, "before"),
    ({"q": "parcel", "before": "2026-02-30T12:00:00Z"}, "before"),
    ({"q": "parcel", "before": "2026-11-30T24:00:00Z"}, "before"),
    ({"q": "parcel", "before": "2026-11-30T12:00:00+24:00"}, "before"),
    ({"q": "parcel", "before": "2026-11-30T12:00:00+05:60"}, "before"),
    ({"q": "parcel", "before": "0000-01-01T00:00:00Z"}, "before"),
    ({"q": "parcel", "before": "２０２６-11-30T12:00:00Z"}, "before"),
    ({"q": "parcel", "before": "2026-11-30T12:00:00Z\x00"}, "before"),
    ({"q": "parcel", "before": ["2026-11-30T12:00:00Z"] * 2}, "before"),
    ({"q": "parcel", "after": "12:99"}, "after"),
]


@pytest.mark.parametrize("params, field", BAD, ids=[f"{f}-{i}" for i, (_, f) in enumerate(BAD)])
def test_a_bad_parameter_is_a_400_naming_it(
    client: APIClient, ada: Any, params: dict[str, Any], field: str
) -> None:
    thread = Thread.objects.create(owner=ada)
    say(thread, "The parcel is late.")
    for path in (f"threads/{thread.pk}/search/", "search/"):
        body = search(client, path, 400, **params)
        assert list(body) == [field], body
        assert body[field] and all(isinstance(reason, str) for reason in body[field])


def test_messages_say_what_to_send(client: APIClient, ada: Any) -> None:
    thread = Thread.objects.create(owner=ada)
    path = f"threads/{thread.pk}/search/"
    assert search(client, path, 400, q='"parcel')["q"] == [
        'Has an unbalanced double quote: close the phrase with ".'
    ]
    assert search(client, path, 400, q="*:()")["q"] == [
        "Must hold at least one word (letters or digits)."
    ]
    assert search(client, path, 400, q="parcel", limit="99")["limit"] == [
        f"Must be a whole number from 1 to {services.MAX_SEARCH_LIMIT}."
    ]
    assert "user, assistant, system, tool" in search(client, path, 400, q="x",
                                                     role="bot")["role"][0]
    assert "2026-11-30T12:00:00Z" in search(client, path, 400, q="x", after="now")["after"][0]


def test_long_numbers_in_other_query_parameters_are_400_too(
    client: APIClient, ada: Any
) -> None:
    """The same 4,300-digit limit answered 500 on every paginated list and on ``turn``."""
    thread = Thread.objects.create(owner=ada)
    for path in ("threads/", f"threads/{thread.pk}/entries/", f"threads/{thread.pk}/recalls/"):
        for name in ("page", "page_size"):
            assert name in search(client, path, 400, **{name: LONG_NUMBER})
    assert "turn" in search(client, f"threads/{thread.pk}/recalls/", 400, turn=LONG_NUMBER)
    assert search(client, "threads/", page_size="0" * 5_000 + "5")["count"] == 1


@hypothesis_settings(max_examples=60, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(st.sampled_from('ab é日½_"*-:()\t\n\x00\x85'), max_size=40)
       | st.text(max_size=30))
def test_any_query_text_answers_200_or_a_400_naming_q(
    client: APIClient, ada: Any, text: str
) -> None:
    try:
        parse_query(text)
        accepted = True
    except InvalidSearchQuery:
        accepted = False
    response = client.get(f"{API}search/", {"q": text})
    assert response.status_code == (200 if accepted else 400), (text, response.content)
    if not accepted:
        assert list(response.json()) == ["q"]


# ---------------------------------------------------------------- queries


def test_a_search_costs_the_same_queries_for_one_hit_and_for_fifty(
    ada: Any,
) -> None:
    client = api_client_of(ada, raise_request_exception=False)
    few, many = Thread.objects.create(owner=ada), Thread.objects.create(owner=ada)
    say(few, "One zeppelin here.")
    say(many, *[f"Zeppelin number {n}." for n in range(60)])
    # The appends' last batch indexed first: a search behind the appends also sends the
    # catch-up (tests/test_search_batches.py), which this count leaves out.
    catch_up(connection)
    counts = {}
    for name, path in (("thread-few", f"threads/{few.pk}/search/"),
                       ("thread-many", f"threads/{many.pk}/search/"),
                       ("owner", "search/")):
        with CaptureQueriesContext(connection) as captured:
            hits = search(client, path, q="zeppelin", limit="50")["results"]
        counts[name] = (len(hits), len(captured.captured_queries))
    assert counts["thread-few"][0] == 1 and counts["thread-many"][0] == 50
    assert counts["owner"][0] == 50
    # The thread (owned by the caller), the newest matches in scope with their texts (and
    # on SQLite whether the index is behind the appends, and the terms' rarity, for the
    # ranking made in Python), the hits' rows, the snippets of those kept; the owner's
    # search needs no thread lookup.
    index = 3 if connection.vendor == "sqlite" else 1
    assert counts["thread-few"][1] == counts["thread-many"][1] == 3 + index, counts
    assert counts["owner"][1] == 2 + index, counts


# ---------------------------------------------------------------- the schema


def openapi() -> dict[str, Any]:
    response = APIClient().get(f"{API}schema/", {"format": "json"})
    assert response.status_code == 200
    return dict(json.loads(response.content))


def draft7(schema: Any) -> Any:
    """OpenAPI 3.0's ``nullable`` as JSON Schema says it, for a Draft 7 validator."""
    if isinstance(schema, list):
        return [draft7(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {key: draft7(value) for key, value in schema.items() if key != "nullable"}
    if schema.get("nullable") and "type" in schema:
        converted["type"] = [schema["type"], "null"]
    return converted


def test_the_schema_documents_both_operations_and_their_hits(
    client: APIClient, ada: Any
) -> None:
    document = draft7(openapi())
    thread = Thread.objects.create(owner=ada)
    add_turns(thread, 3, with_tools=False)  # each turn's request names the parcel
    assert services.fold(thread, **FOLD).summary is not None
    resolver = jsonschema.RefResolver.from_schema(document)
    for path, url in ((f"{API}threads/{{thread_id}}/search/", f"threads/{thread.pk}/search/"),
                      (f"{API}search/", "search/")):
        operation = document["paths"][path]["get"]
        parameters = {p["name"]: p for p in operation["parameters"] if p["in"] == "query"}
        assert set(parameters) == {"q", "limit", "role", "before", "after"}
        assert parameters["q"]["required"] is True
        assert parameters["limit"]["schema"] == {"type": "integer", "minimum": 1,
                                                 "maximum": services.MAX_SEARCH_LIMIT,
                                                 "default": 10}
        assert {"200", "400", "401", "403"} <= set(operation["responses"])
        assert ("404" in operation["responses"]) == ("{" in path)
        for status, params in ((200, {"q": "parcel"}), (400, {"q": '"'})):
            body = search(client, url, status, **params)
            schema = operation["responses"][str(status)]["content"]["application/json"]
            jsonschema.Draft7Validator(schema["schema"], resolver=resolver).validate(body)
            if status == 200:  # turns 1 and 2 are covered, turn 3 is verbatim
                covered = [hit["covered_by"] is not None for hit in body["results"]]
                assert sorted(covered) == [False, True, True]


def test_the_documented_patterns_accept_exactly_what_the_server_does() -> None:
    document = openapi()
    text = document["components"]["schemas"]["SearchText"]
    assert text["pattern"] == query_pattern() and text["maxLength"] == MAX_QUERY_CHARS
    role = document["paths"][f"{API}search/"]["get"]["parameters"]
    item = next(p for p in role if p["name"] == "role")["schema"]["items"]["pattern"]
    for value, valid in (("user", True), ("user,tool", True), ("tool,tool", True),
                         ("", False), ("user,", False), ("robot", False), ("User", False)):
        assert bool(re.search(item, value)) is valid, value


# Python's re and the Rust engine Schemathesis validates with must agree with the parser:
# `\w` would not (ASCII in one, Unicode in the other), hence the listed ranges.
_RUST = jsonschema_rs.validator_for(
    {"type": "string", "maxLength": MAX_QUERY_CHARS, "pattern": query_pattern()}
)
_PYTHON = re.compile(query_pattern())


def accepted_by_parser(text: str) -> bool:
    try:
        parse_query(text)
    except InvalidSearchQuery:
        return False
    return True


@pytest.mark.parametrize("text", [
    "a", "ORD-55", '"blue box"', 'a"b"c', '"!" word', '""', '"', "!", "_", "a_b", "½", "é",
    "日本語", "a\u0301", "\U0001d400", "\U0001f600", "tab\there", "nul\x00", "next\x85line",
    "* - ^ : ( )", "AND OR NOT", " ".join("abcdefghijklmnop"), " ".join("abcdefghijklmnopq"),
    '"a" ' * MAX_TERMS, '"a" ' * (MAX_TERMS + 1), "a" * MAX_QUERY_CHARS,
    "a" * (MAX_QUERY_CHARS + 1), "a\n", "\n",
])
def test_the_query_pattern_agrees_with_the_parser_on_measured_cases(text: str) -> None:
    expected = accepted_by_parser(text)
    assert (bool(_PYTHON.search(text)) and len(text) <= MAX_QUERY_CHARS) is expected
    assert _RUST.is_valid(text) is expected


@hypothesis_settings(max_examples=400, deadline=None)
@given(text=st.text(st.sampled_from('ab é日½_"*\t\n\x00\x85 \u0301'), max_size=60)
       | st.text(max_size=40))
def test_the_query_pattern_agrees_with_the_parser(text: str) -> None:
    expected = accepted_by_parser(text)
    assert (bool(_PYTHON.search(text)) and len(text) <= MAX_QUERY_CHARS) is expected
    assert _RUST.is_valid(text) is expected


@hypothesis_settings(max_examples=100, deadline=None)
@given(text=st.from_regex(_PYTHON).filter(lambda text: len(text) <= MAX_QUERY_CHARS))
def test_text_generated_from_the_pattern_is_accepted(text: str) -> None:
    """What a fuzzer draws from the schema, the parser takes."""
    assert accepted_by_parser(text)
