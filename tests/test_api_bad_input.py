"""Bad input answers 400 with field-level messages and writes nothing; never a 5xx.

Also the regressions schemathesis and probing found (each named in its test): values a
JSON column or the renderer cannot take, bodies nested too deep, a turn that leaves
no room to count up, a thread TTL that failed to render, and form bodies.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from agentmemory import services
from agentmemory.api.serializers.base import MAX_BUDGET, MAX_JSON_DEPTH, MAX_TURN
from agentmemory.api.serializers.entries import MessageSerializer
from agentmemory.models import FoldedSpan, MemoryEntry, SummarizerCall, Thread
from tests.helpers import turn_messages

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_cache"),
              pytest.mark.server_errors_answered]

API = "/api/memory/"
HUGE = 10**40


def rows() -> dict[str, int]:
    return {
        "threads": Thread.objects.count(),
        "entries": MemoryEntry.objects.count(),
        "spans": FoldedSpan.objects.count(),
        "calls": SummarizerCall.objects.count(),
    }


def bad(response: Any, *fields: str, status: int = 400) -> dict[str, Any]:
    """Assert the status and that the body names every field in ``fields``."""
    assert response.status_code == status, (response.status_code, response.content)
    body = response.json()
    for name in fields:
        assert name in body, (name, body)
        assert body[name], body
    return dict(body)


def item_errors(errors: Any) -> dict[int, Any]:
    """A list field's per-item errors as {index: detail}, in either of DRF's shapes."""
    if isinstance(errors, dict):
        return {int(index): detail for index, detail in errors.items()}
    assert isinstance(errors, list), errors
    return {index: detail for index, detail in enumerate(errors) if detail}


def post_json(client: APIClient, path: str, body: Any) -> Any:
    return client.post(path, body, format="json")


def entries(thread: Thread) -> str:
    return f"{API}threads/{thread.pk}/entries/"


def endpoint(thread: Thread, tail: str) -> str:
    return f"{API}threads/{thread.pk}/{tail}"


# ---------------------------------------------------------------- messages


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ({"role": "robot", "content": "hi"}, "role"),
        ({"role": "", "content": "hi"}, "role"),
        ({"role": None, "content": "hi"}, "role"),
        ({"role": 7, "content": "hi"}, "role"),
        ({"content": "hi"}, "role"),
        ({"role": "user", "content": ""}, "content"),
        ({"role": "user", "content": "   \n\t"}, "content"),
        ({"role": "user"}, "content"),
        ({"role": "user", "content": None}, "content"),
        ({"role": "user", "content": ["not", "text"]}, "content"),
        ({"role": "user", "content": "a\x00b"}, "content"),
        ({"role": "tool", "content": "result"}, "tool_call_id"),
        ({"role": "tool", "content": "result", "tool_call_id": ""}, "tool_call_id"),
        ({"role": "user", "content": "hi", "tool_call_id": "call-1"}, "tool_call_id"),
        ({"role": "tool", "content": "x", "tool_call_id": "c" * 201}, "tool_call_id"),
        (
            {"role": "user", "content": "hi",
             "tool_calls": [{"id": "call-1", "name": "lookup_order"}]},
            "tool_calls",
        ),
        (
            {"role": "tool", "content": "hi", "tool_call_id": "c",
             "tool_calls": [{"id": "call-1", "name": "lookup_order"}]},
            "tool_calls",
        ),
        ({"role": "assistant", "content": "", "tool_calls": [{"id": "", "name": "x"}]},
         "tool_calls"),
        ({"role": "assistant", "content": "x", "tool_calls": [{"id": "c"}]}, "tool_calls"),
        ({"role": "assistant", "content": "x", "tool_calls": "lookup"}, "tool_calls"),
        ({"role": "assistant", "content": "x",
          "tool_calls": [{"id": "c", "name": "n", "extra": 1}]}, "tool_calls"),
        ({"role": "user", "content": "hi", "turn": 0}, "turn"),
        ({"role": "user", "content": "hi", "turn": -3}, "turn"),
        ({"role": "user", "content": "hi", "turn": "two"}, "turn"),
        ({"role": "user", "content": "hi", "turn": 1.5}, "turn"),
        ({"role": "user", "content": "hi", "turn": HUGE}, "turn"),
        ({"role": "user", "content": "hi", "tier": "lukewarm"}, "tier"),
        ({"role": "user", "content": "hi", "metadata": "tag"}, "metadata"),
        ({"role": "user", "content": "hi", "metadata": ["tag"]}, "metadata"),
        ({"role": "user", "content": "hi", "colour": "blue"}, "colour"),
        ({"role": "user", "content": "hi", "kind": "summary"}, "kind"),
        ({"role": "user", "content": "hi", "covered_by": 1}, "covered_by"),
    ],
)
def test_a_bad_message_is_a_field_error(
    client: APIClient, thread: Thread, message: dict[str, Any], field: str
) -> None:
    before = rows()
    bad(post_json(client, entries(thread), message), field)
    assert rows() == before


def test_content_over_the_limit_is_refused(
    client: APIClient, thread: Thread, settings: Any
) -> None:
    settings.AGENTMEMORY = {"API_MAX_CONTENT_CHARS": 10}
    before = rows()
    body = bad(post_json(client, entries(thread), {"role": "user", "content": "x" * 11}),
               "content")
    assert "10" in body["content"][0]
    batch = {"entries": [{"role": "user", "content": "ok"}, {"role": "user", "content": "y" * 11}]}
    body = bad(post_json(client, entries(thread), batch), "entries")
    assert list(item_errors(body["entries"])) == [1]
    assert "content" in item_errors(body["entries"])[1]
    assert rows() == before
    assert post_json(client, entries(thread), {"role": "user", "content": "x" * 10}).status_code \
        == 201


def test_a_batch_over_the_limit_is_refused(
    client: APIClient, thread: Thread, settings: Any
) -> None:
    settings.AGENTMEMORY = {"API_MAX_BATCH": 3}
    before = rows()
    batch = {"entries": [{"role": "user", "content": f"m{n}"} for n in range(4)]}
    body = bad(post_json(client, entries(thread), batch), "entries")
    assert "3" in body["entries"][0]
    assert rows() == before
    batch["entries"].pop()
    assert post_json(client, entries(thread), batch).status_code == 201


@pytest.mark.parametrize(
    ("index", "broken", "field"),
    [
        (0, {"role": "robot", "content": "hi"}, "role"),
        (3, {"role": "tool", "content": "result"}, "tool_call_id"),
        (5, {"role": "user", "content": ""}, "content"),
        (7, {"role": "user", "content": "x", "tool_calls": [{"id": "c", "name": "n"}]},
         "tool_calls"),
        (2, {"role": "user", "content": "x", "extra": True}, "extra"),
        (6, {"role": "user", "content": "x", "turn": 1}, "turn"),  # a conflict: 409
    ],
)
def test_one_bad_entry_in_a_batch_writes_nothing(
    client: APIClient, thread: Thread, index: int, broken: dict[str, Any], field: str
) -> None:
    batch = [message for n in range(3, 5) for message in turn_messages(n)]
    batch[index] = broken
    thread_before = Thread.objects.values("last_turn", "last_position").get(pk=thread.pk)
    before = rows()
    status = 409 if field == "turn" else 400
    body = bad(post_json(client, entries(thread), {"entries": batch}), "entries", status=status)
    errors = item_errors(body["entries"])
    assert list(errors) == [index] and field in errors[index], body
    assert rows() == before
    assert Thread.objects.values("last_turn", "last_position").get(pk=thread.pk) == thread_before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"entries": []}, "entries"),
        ({"entries": None}, "entries"),
        ({"entries": "user: hi"}, "entries"),
        ({"entries": {"role": "user", "content": "hi"}}, "entries"),
        ({"entries": [None]}, "entries"),
        ({"entries": [[]]}, "entries"),
        ({"entries": [{"role": "user", "content": "hi"}], "mode": "fast"}, "mode"),
    ],
)
def test_malformed_batches_are_field_errors(
    client: APIClient, thread: Thread, body: dict[str, Any], field: str
) -> None:
    before = rows()
    bad(post_json(client, entries(thread), body), field)
    assert rows() == before


# ---------------------------------------------------------------- recall and fold


@pytest.mark.parametrize(
    "budget", [0, -1, -(10**6), MAX_BUDGET + 1, HUGE, -HUGE, "lots", "", None, 12.5, [], {},
               True, "1e3"]
)
def test_a_budget_out_of_range_is_a_field_error(
    client: APIClient, thread: Thread, budget: Any
) -> None:
    before = rows()
    bad(post_json(client, endpoint(thread, "recall/"), {"budget_tokens": budget}),
        "budget_tokens")
    assert rows() == before


def test_the_budget_bounds_themselves_are_accepted(client: APIClient, thread: Thread) -> None:
    for budget in (1, MAX_BUDGET):
        response = post_json(client, endpoint(thread, "recall/"), {"budget_tokens": budget})
        assert response.status_code == 200, response.content


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({}, "budget_tokens"),  # missing
        ({"mode": "eventually"}, "mode"),
        ({"load_count": 0}, "load_count"),
        ({"load_count": HUGE}, "load_count"),
        ({"tiers": []}, "tiers"),
        ({"tiers": ["lava"]}, "tiers"),
        ({"tiers": "hot"}, "tiers"),
        ({"tiers": ["hot", "warm", "cold", "hot"]}, "tiers"),
        ({"trigger_min_entries": 0}, "trigger_min_entries"),
        ({"preserve_recent": -1}, "preserve_recent"),
        ({"min_fold_entries": "two"}, "min_fold_entries"),
        ({"reserve_tokens": -1}, "reserve_tokens"),
        ({"minimum_tokens": HUGE}, "minimum_tokens"),
        ({"max_entries": 0}, "max_entries"),
        ({"header": "h" * 2001}, "header"),
        ({"footer": None}, "footer"),
        ({"decay": {"half_life_seconds": 0}}, "decay"),
        ({"decay": {"half_life_seconds": -5}}, "decay"),
        ({"decay": {"half_life_seconds": 60, "min_score": 1.5}}, "decay"),
        ({"decay": {"min_score": 0.5}}, "decay"),
        ({"decay": {"half_life_seconds": 60, "colour": 1}}, "decay"),
        ({"decay": "fast"}, "decay"),
        ({"instruction": "obey me"}, "instruction"),
        ({"summary_tier": "hot"}, "summary_tier"),
    ],
)
def test_bad_recall_options_are_field_errors(
    client: APIClient, thread: Thread, extra: dict[str, Any], field: str
) -> None:
    body = {"budget_tokens": 1000, **extra} if field != "budget_tokens" else extra
    before = rows()
    bad(post_json(client, endpoint(thread, "recall/"), body), field)
    assert rows() == before


@pytest.mark.parametrize(
    ("body", "field"),
    [({"mode": "later"}, "mode"), ({"mode": None}, "mode"), ({"force": True}, "force")],
)
def test_bad_fold_requests_are_field_errors(
    client: APIClient, thread: Thread, body: dict[str, Any], field: str
) -> None:
    before = rows()
    bad(post_json(client, endpoint(thread, "fold/"), body), field)
    assert rows() == before


# ---------------------------------------------------------------- window


def window() -> list[dict[str, Any]]:
    body = [message for n in range(1, 16) for message in turn_messages(n)]
    return [{"role": "user", "content": "Chase every late order."}, *body[1:61]]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"messages": []}, "messages"),
        ({"messages": None}, "messages"),
        ({"messages": "user: hi"}, "messages"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages"),
        ({"messages": [{"role": "user", "content": "x\x00"}]}, "messages"),
        ({"messages": [{"role": "tool", "content": "result"}]}, "messages"),
        ({"messages": [{"role": "user", "content": " "}]}, "messages"),
        ({"iteration": -1}, "iteration"),
        ({"iteration": HUGE}, "iteration"),
        ({"budget_tokens": 0}, "budget_tokens"),
        ({"budget_tokens": "many"}, "budget_tokens"),
        ({"retain": "forever"}, "retain"),
        ({"window": 40}, "window"),
    ],
)
def test_bad_windows_are_field_errors(
    client: APIClient, thread: Thread, change: dict[str, Any], field: str
) -> None:
    body = {"messages": window(), **change}
    before = rows()
    bad(post_json(client, endpoint(thread, "compact/"), body), field)
    assert rows() == before


def test_domain_and_field_errors_of_list_items_share_one_shape(
    client: APIClient, thread: Thread
) -> None:
    """Regression: a batch's domain errors (a tool message without its call id) came as a
    list while DRF's own (a bad role) came as a dict keyed by index."""
    ok = {"role": "user", "content": "fine"}
    for key, path, extra in (("entries", entries(thread), {}),
                             ("messages", endpoint(thread, "compact/"), {})):
        shapes = []
        for broken, field in (({"role": "robot", "content": "x"}, "role"),
                              ({"role": "tool", "content": "x"}, "tool_call_id")):
            body = bad(post_json(client, path, {key: [ok, broken, ok], **extra}), key)
            shapes.append(type(body[key]))
            assert list(item_errors(body[key])) == [1]
            assert field in item_errors(body[key])[1]
        assert shapes[0] is shapes[1], (key, shapes)


def test_a_window_over_the_limit_is_refused(
    client: APIClient, thread: Thread, settings: Any
) -> None:
    settings.AGENTMEMORY = {"API_MAX_WINDOW": 10}
    before = rows()
    body = bad(post_json(client, endpoint(thread, "compact/"), {"messages": window()}),
               "messages")
    assert "10" in body["messages"][0]
    assert rows() == before


# ---------------------------------------------------------------- limits before work


@pytest.fixture
def item_validations(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every message the API validates, counted on the way through (a spy, not a stub)."""
    seen: list[object] = []
    validate = MessageSerializer.to_internal_value

    def counted(self: MessageSerializer, data: Any) -> Any:
        seen.append(data)
        return validate(self, data)

    monkeypatch.setattr(MessageSerializer, "to_internal_value", counted)
    return seen


def test_a_150000_item_batch_is_refused_before_any_item_is_validated(
    client: APIClient, thread: Thread, settings: Any, item_validations: list[object]
) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 2**20  # the batch limit answers, not the cap
    before = rows()
    batch = {"entries": [{"role": "user", "content": "x"}] * 150_000}
    body = bad(post_json(client, entries(thread), batch), "entries")
    assert "API_MAX_BATCH" in body["entries"][0] and "500" in body["entries"][0]
    assert item_validations == []
    assert rows() == before


@hypothesis_settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(limit=st.integers(1, 12), size=st.integers(1, 30))
def test_counts_are_checked_before_items_for_batches_and_windows(
    client: APIClient, thread: Thread, item_validations: list[object], limit: int, size: int
) -> None:
    """Over a limit, no item is validated (bad items included); within it, each is once."""
    item_validations.clear()
    before = rows()
    messages = [{"role": "user", "content": f"m{n}"} for n in range(size)]
    with override_settings(AGENTMEMORY={"API_MAX_BATCH": limit, "API_MAX_WINDOW": limit}):
        over = [*messages, {"role": "nobody"}] if size >= limit else messages
        for path, key, setting in (
            (entries(thread), "entries", "API_MAX_BATCH"),
            (endpoint(thread, "compact/"), "messages", "API_MAX_WINDOW"),
        ):
            if len(over) > limit:
                body = bad(post_json(client, path, {key: over}), key)
                assert setting in body[key][0]
                assert item_validations == []
                assert rows() == before
            else:
                item_validations.clear()
                post_json(client, path, {key: over})
                assert len(item_validations) == len(over)
                item_validations.clear()


@pytest.mark.parametrize("tail", ["entries/", "compact/", "recall/"])
def test_a_body_over_the_upload_cap_is_a_413_naming_the_setting(
    client: APIClient, thread: Thread, settings: Any, tail: str
) -> None:
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    before = rows()
    body = {"entries": [{"role": "user", "content": "x" * 2000}],
            "messages": [{"role": "user", "content": "x" * 2000}], "budget_tokens": 10}
    response = post_json(client, endpoint(thread, tail), body)
    assert response.status_code == 413
    assert response["Content-Type"].startswith("application/json")
    assert "DATA_UPLOAD_MAX_MEMORY_SIZE" in response.json()["detail"]
    assert rows() == before


def test_a_body_django_itself_finds_over_the_cap_says_so_in_the_same_words(
    client: APIClient, thread: Thread, settings: Any
) -> None:
    """Django raises its own RequestDataTooBig when a body over the cap is read before
    the parser runs (its text names the setting differently); the API answers that with
    the parser's 413, word for word."""
    from django.core.exceptions import RequestDataTooBig
    from rest_framework.request import Request
    from rest_framework.test import APIRequestFactory

    from agentmemory.api.views.base import MemoryAPIView

    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    parsed = post_json(client, endpoint(thread, "entries/"),
                       {"entries": [{"role": "user", "content": "x" * 2000}]})
    view = MemoryAPIView()
    view.request = Request(APIRequestFactory().post(endpoint(thread, "entries/")))
    view.args, view.kwargs, view.headers = (), {}, {}
    found = view.handle_exception(RequestDataTooBig(
        "Request body exceeded settings.DATA_UPLOAD_MAX_MEMORY_SIZE."))
    expected = "The body is over 1000 bytes (settings.DATA_UPLOAD_MAX_MEMORY_SIZE)."
    assert parsed.status_code == found.status_code == 413
    assert parsed.json() == {"detail": expected} and found.data == {"detail": expected}


def test_the_body_cap_check_warns_when_one_message_at_the_limit_cannot_pass(
    settings: Any,
) -> None:
    from django.core.checks import run_checks

    def warnings() -> list[str]:
        return [m.id for m in run_checks() if m.id == "agentmemory.W003"]

    settings.AGENTMEMORY = {"API_MAX_CONTENT_CHARS": 100_000}
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2_621_440  # Django's default: one fits
    assert warnings() == []
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 50_000
    assert warnings() == ["agentmemory.W003"]
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = None
    assert warnings() == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "message"),
        ({"message": None}, "message"),
        ({"message": "[summary of earlier turns]"}, "message"),
        ({"message": {"content": "[summary of earlier turns]"}}, "message"),
        ({"message": {"role": "user", "content": "x", "colour": 1}}, "message"),
        ({"message": {"role": "user", "content": "x"}, "thread": 1}, "thread"),
    ],
)
def test_bad_lookups_are_field_errors(
    client: APIClient, thread: Thread, body: dict[str, Any], field: str
) -> None:
    bad(post_json(client, endpoint(thread, "folds/lookup/"), body), field)


# ---------------------------------------------------------------- threads


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"title": "t" * 201}, "title"),
        ({"title": None}, "title"),
        ({"client_key": "k" * 201}, "client_key"),
        ({"metadata": "tag"}, "metadata"),
        ({"metadata": [1, 2]}, "metadata"),
        ({"ttl_seconds": 0}, "ttl_seconds"),
        ({"ttl_seconds": -60}, "ttl_seconds"),
        ({"ttl_seconds": HUGE}, "ttl_seconds"),
        ({"ttl_seconds": "a day"}, "ttl_seconds"),
        ({"write_tier": "lava"}, "write_tier"),
        ({"window_retain": "forever"}, "window_retain"),
        ({"owner": 1}, "owner"),
        ({"id": 5}, "id"),
        ({"last_turn": 9}, "last_turn"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_bad_threads_are_field_errors(
    client: APIClient, thread: Thread, body: dict[str, Any], field: str
) -> None:
    before = rows()
    bad(post_json(client, f"{API}threads/", body), field)
    bad(client.patch(f"{API}threads/{thread.pk}/", body, format="json"), field)
    bad(client.put(f"{API}threads/{thread.pk}/", body, format="json"), field)
    assert rows() == before
    assert Thread.objects.get(pk=thread.pk).title == "orders"


# ---------------------------------------------------------------- bodies that are not objects


POSTS = ["threads/", "{t}/entries/", "{t}/recall/", "{t}/fold/", "{t}/compact/",
         "{t}/folds/lookup/"]


def post_path(thread: Thread, template: str) -> str:
    return API + template.replace("{t}", f"threads/{thread.pk}")


@pytest.mark.parametrize("template", POSTS)
@pytest.mark.parametrize(
    ("raw", "content_type", "status"),
    [
        ('{"role": "user", "content": ', "application/json", 400),  # cut short
        ("{'role': 'user'}", "application/json", 400),  # not JSON
        ('{"budget_tokens": NaN}', "application/json", 400),
        ('{"budget_tokens": Infinity}', "application/json", 400),
        ('{"budget_tokens": -Infinity}', "application/json", 400),
        ("[" * 100_000 + "]" * 100_000, "application/json", 400),  # regression: was a 500
        (b"\xff\xfe{}", "application/json", 400),  # not UTF-8
        ("null", "application/json", 400),
        ("[]", "application/json", 400),
        ('[{"role": "user", "content": "hi"}]', "application/json", 400),
        ("42", "application/json", 400),
        ('"a string"', "application/json", 400),
        ("true", "application/json", 400),
        ("role=user&content=hi", "text/plain", 415),
        ("role=user&content=hi", "application/x-www-form-urlencoded", 415),
        ("<message/>", "application/xml", 415),
    ],
)
def test_bodies_that_are_not_json_objects_are_refused(
    client: APIClient, thread: Thread, template: str, raw: str | bytes, content_type: str,
    status: int,
) -> None:
    before = rows()
    response = client.post(post_path(thread, template), raw, content_type=content_type)
    assert response.status_code == status, (response.status_code, response.content)
    assert "detail" in response.json() or "non_field_errors" in response.json()
    assert rows() == before


@pytest.mark.parametrize("template", POSTS)
def test_multipart_forms_are_unsupported(
    client: APIClient, thread: Thread, template: str
) -> None:
    """Regression: form bodies used to be parsed, and appended a message."""
    before = rows()
    response = client.post(post_path(thread, template), {"role": "user", "content": "hi"})
    assert response.status_code == 415, response.content
    assert rows() == before


def test_an_empty_json_body_names_the_required_fields(client: APIClient, thread: Thread) -> None:
    bad(client.post(entries(thread), "", content_type="application/json"), "role")
    bad(client.post(endpoint(thread, "recall/"), "", content_type="application/json"),
        "budget_tokens")
    bad(client.post(endpoint(thread, "compact/"), "", content_type="application/json"),
        "messages")


# ---------------------------------------------------------------- regressions


@pytest.mark.parametrize(
    "value",
    [
        {"note": "a\x00b"},  # PostgreSQL cannot store NUL in jsonb
        {"a\x00": 1},
        {"note": "\ud800"},  # a lone surrogate cannot be encoded
        {"ratio": float("inf")},  # would store, then fail to render as strict JSON
        {"deep": json.loads("[" * (MAX_JSON_DEPTH + 5) + "]" * (MAX_JSON_DEPTH + 5))},
    ],
    ids=["nul", "nul-key", "surrogate", "infinity", "deep"],
)
def test_json_values_the_database_cannot_store_are_400(
    client: APIClient, thread: Thread, value: dict[str, Any]
) -> None:
    """Regression: each of these was a 500 (on PostgreSQL, or on both databases)."""
    before = rows()
    raw = json.dumps({"role": "user", "content": "hi", "metadata": value}, allow_nan=True)
    raw = raw.replace("Infinity", "1e400")  # what a client sends: finite text, infinite float
    bad(client.post(entries(thread), raw, content_type="application/json"), "metadata")
    call = {"role": "assistant", "content": "",
            "tool_calls": [{"id": "c", "name": "n", "arguments": value}]}
    raw = json.dumps(call, allow_nan=True).replace("Infinity", "1e400")
    bad(client.post(entries(thread), raw, content_type="application/json"), "tool_calls")
    raw = json.dumps({"metadata": value}, allow_nan=True).replace("Infinity", "1e400")
    bad(client.patch(f"{API}threads/{thread.pk}/", raw, content_type="application/json"),
        "metadata")
    compact = {"messages": [*window()[:-1], call]}
    raw = json.dumps(compact, allow_nan=True).replace("Infinity", "1e400")
    bad(client.post(endpoint(thread, "compact/"), raw, content_type="application/json"),
        "messages")
    assert rows() == before


def test_json_values_within_the_limits_are_stored(client: APIClient, thread: Thread) -> None:
    nested: Any = "leaf"
    for _ in range(MAX_JSON_DEPTH - 2):
        nested = [nested]
    metadata = {"deep": nested, "big": HUGE, "unicode": "naïve ☃ 𝄞", "empty": ""}
    response = post_json(client, entries(thread), {"role": "user", "content": "hi",
                                                   "metadata": metadata})
    assert response.status_code == 201, response.content
    assert response.json()[0]["metadata"] == metadata


def test_the_largest_turn_leaves_room_to_count_up(client: APIClient, thread: Thread) -> None:
    """Regression: turn 2**31-1 was accepted, and the next user message overflowed the
    turn column on PostgreSQL (a 500)."""
    bad(post_json(client, entries(thread), {"role": "user", "content": "x", "turn": 2**31 - 1}),
        "turn")
    first = post_json(client, entries(thread), {"role": "user", "content": "x", "turn": MAX_TURN})
    assert first.status_code == 201, first.content
    again = post_json(client, entries(thread), {"role": "user", "content": "y"})
    assert again.status_code == 201 and again.json()[0]["turn"] == MAX_TURN + 1


def test_a_thread_with_a_ttl_renders(client: APIClient) -> None:
    """Regression: ttl_seconds was rendered with int(timedelta), a 500 on every read."""
    created = post_json(client, f"{API}threads/", {"title": "t", "ttl_seconds": 90})
    assert created.status_code == 201, created.content
    assert created.json()["ttl_seconds"] == 90
    thread_id = created.json()["id"]
    assert client.get(f"{API}threads/{thread_id}/").json()["ttl_seconds"] == 90
    assert client.get(f"{API}threads/").json()["results"][0]["ttl_seconds"] == 90
    assert Thread.objects.get(pk=thread_id).ttl.total_seconds() == 90
    entry = post_json(client, f"{API}threads/{thread_id}/entries/",
                      {"role": "user", "content": "hi"}).json()[0]
    assert entry["expires_at"] is not None


@pytest.mark.parametrize(
    "query",
    ["page_size=0", "page_size=-1", "page_size=lots", f"page_size={HUGE}", "page_size=8.0",
     "page_size=5&page_size=6", "page=0", "page=last", f"page={HUGE}", "page=1&page=1"],
)
def test_odd_page_parameters_are_a_400_naming_them(
    client: APIClient, thread: Thread, query: str
) -> None:
    """Regression (schemathesis, negative_data_rejection): page_size out of range or not a
    number was silently the default; now every listing refuses it and names it."""
    name = query.split("=")[0]
    for url in [endpoint(thread, tail) for tail in ("entries/", "summaries/", "folds/",
                                                   "usage/", "recalls/")] + [f"{API}threads/"]:
        response = client.get(f"{url}?{query}")
        assert response.status_code == 400, (url, query, response.content)
        assert list(response.json()) == [name]


@pytest.mark.parametrize(
    ("tail", "query"),
    [("entries/", "include_covered=maybe"), ("entries/", "include_covered=1&include_covered=0"),
     ("summaries/", "include_retired=yes"), ("recalls/", "turn=-1"), ("recalls/", "turn=7.0"),
     ("recalls/", f"turn={HUGE}")],
)
def test_odd_flags_and_turns_are_a_400_naming_them(
    client: APIClient, thread: Thread, tail: str, query: str
) -> None:
    response = client.get(endpoint(thread, f"{tail}?{query}"))
    assert response.status_code == 400, response.content
    assert list(response.json()) == [query.split("=")[0]]


def test_a_page_past_the_last_is_a_404(client: APIClient, thread: Thread) -> None:
    response = client.get(endpoint(thread, "entries/?page=999"))
    assert response.status_code == 404 and "detail" in response.json()


@pytest.mark.parametrize("big", [2**31, 2**63, HUGE])
def test_ids_beyond_the_column_are_404(client: APIClient, thread: Thread, big: int) -> None:
    services.fold(thread, trigger_min_entries=4, preserve_recent=2)
    own = f"threads/{thread.pk}/"
    for path in (f"threads/{big}/", f"threads/{big}/entries/", f"{own}entries/{big}/",
                 f"{own}summaries/{big}/", f"{own}summaries/{big}/originals/"):
        assert client.get(API + path).status_code == 404, path
    assert client.delete(f"{API}threads/{thread.pk}/entries/{big}/").status_code == 404


# ---------------------------------------------------------------- schemathesis findings


def schema(client: APIClient) -> dict[str, Any]:
    response = client.get(f"{API}schema/?format=json")
    assert response.status_code == 200
    return dict(json.loads(response.content))


def test_an_append_answers_a_plain_list_as_its_schema_says(
    client: APIClient, thread: Thread
) -> None:
    """Regression (schemathesis, response_schema_conformance): the schema documented the
    append's 201 as a page ({count, results}) with page parameters; it is a list."""
    operation = schema(client)["paths"][f"{API}threads/{{thread_id}}/entries/"]["post"]
    body = operation["responses"]["201"]["content"]["application/json"]["schema"]
    assert body["type"] == "array" and body["items"]["$ref"].endswith("/Entry")
    assert {p["name"] for p in operation.get("parameters", [])} == {"thread_id"}
    assert list(operation["requestBody"]["content"]) == ["application/json"]
    response = post_json(client, entries(thread), {"role": "user", "content": "hi"})
    assert response.status_code == 201 and isinstance(response.json(), list)


def test_originals_that_are_messages_have_a_null_coverage_the_schema_allows(
    client: APIClient, thread: Thread
) -> None:
    """Regression (schemathesis): originals are messages with coverage null, which the
    schema did not allow."""
    coverage = schema(client)["components"]["schemas"]["Summary"]["properties"]["coverage"]
    assert coverage.get("nullable") is True
    summary = services.fold(thread, trigger_min_entries=4, preserve_recent=2).summary
    assert summary is not None
    body = client.get(endpoint(thread, f"summaries/{summary.pk}/originals/")).json()
    assert body["originals"] and all(row["coverage"] is None for row in body["originals"])
    assert body["summary"]["coverage"]["entry_count"] == len(body["originals"])
