"""Honest records (issue 12, item 6): what the ledger, the logs and the signatures say.

- A failed call's ledger row keeps a short, redacted message (class, HTTP status,
  provider code and type): never a key, a masked key echo or conversation text.
- Log lines, Celery's retry line included, carry no provider text.
- The signature covers everything recall or a reviewer trusts, coverage rows included;
  a signature without its scheme vouches for nothing.
- The quota reserves an estimate before each call: a day's spend passes the quota by at
  most the estimate error of the calls it admitted, and a call larger than the quota is
  never made.
"""

from __future__ import annotations

import http.server
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import override_settings
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from agentmemory import services
from agentmemory.exceptions import AgentMemoryError, SummarizerError
from agentmemory.models import (
    CallOutcome,
    FoldedSpan,
    MemoryEntry,
    OwnerQuota,
    SpanSource,
    SummarizerCall,
    SummaryCoverage,
    SummarySource,
    Thread,
)
from agentmemory.redaction import MAX_ERROR_CHARS, describe_error, redact
from agentmemory.tasks import fold_thread
from agentmemory.trust import ledger, signing
from agentmemory.window.compact import compact
from tests.helpers import INJECTION, add_user_messages, make_thread, recording_settings
from tests.openai_server import TEST_API_KEY, Delay, OpenAIServer, Reply, summarizer_settings

pytestmark = pytest.mark.django_db

BIG = 100_000
#: The seeds' count-driven recall: 25 entries fold 6-20 with one call.
COUNTS = {"LOAD_COUNT": 20, "TRIGGER_MIN_ENTRIES": 20, "FOLD_HIGH_WATER": None}
CANARY = "CANARY-the-patient-takes-warfarin-7f3e"
MASKED = "sk-canar*******T123"
WINDOW = {"CLASS": "agentmemory.window.seams.SlidingWindow", "OPTIONS": {"MAX_MESSAGES": 4}}


def memory(base: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**base, **COUNTS, **extra}


def canary_thread(owner: Any = None) -> Thread:
    """25 user messages, one of the folded ones carrying the canary."""
    thread = make_thread(owner=owner)
    add_user_messages(thread, 7)
    services.append(thread, [{"role": "user", "content": f"My note: {CANARY}."}])
    add_user_messages(thread, 17, start=9)
    return thread


def provider_echo(status: int) -> str:
    """What a careless provider answers: the key (masked and whole) and the prompt."""
    return (
        f"Incorrect API key provided: {MASKED} ({TEST_API_KEY}). Your request was: "
        f"user: My note: {CANARY}."
    )


def leaks(text: str) -> list[str]:
    return [secret for secret in (CANARY, MASKED, "T123", TEST_API_KEY, "Incorrect API key")
            if secret in text]


# ------------------------------------------------------------------ the ledger's message


@pytest.mark.parametrize(
    ("status", "error_class", "code", "error_type"),
    [
        (401, "SummarizerError", "invalid_api_key", "invalid_request_error"),
        (429, "TransientSummarizerError", "rate_limit_exceeded", "requests"),
        (500, "TransientSummarizerError", None, "server_error"),
    ],
)
def test_a_failed_call_keeps_class_status_code_and_type_and_nothing_of_the_reply(
    openai_server: OpenAIServer,
    openai_summarizer_settings: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
    status: int,
    error_class: str,
    code: str | None,
    error_type: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    openai_server.fail(status, provider_echo(status))
    with override_settings(AGENTMEMORY=memory(openai_summarizer_settings)):
        result = services.recall(canary_thread(), BIG)

    assert result.decline == "summarizer-failed"
    (call,) = SummarizerCall.objects.all()
    assert call.outcome == CallOutcome.FAILED and call.error_class == error_class
    assert f"HTTP {status}" in call.error_message
    assert f"type {error_type}" in call.error_message
    if code is not None:
        assert f"code {code}" in call.error_message
    assert leaks(call.error_message) == [] and len(call.error_message) <= MAX_ERROR_CHARS
    # The warning that said so (law 4(b)) carries the same redacted description.
    assert "agentmemory" in caplog.text and f"HTTP {status}" in caplog.text
    assert leaks(caplog.text) == []


class _HTMLHandler(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = f"<html><body>Bad gateway {MASKED} {CANARY}</body></html>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """Silent."""


@pytest.fixture
def html_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A proxy that answers every request with an HTML page and status 200."""
    monkeypatch.setenv("OPENAI_API_KEY", TEST_API_KEY)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _HTMLHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_an_html_reply_is_recorded_as_not_a_completion_not_as_an_attribute_error(
    html_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with override_settings(AGENTMEMORY=memory(summarizer_settings(html_server))):
        services.recall(canary_thread(), BIG)

    (call,) = SummarizerCall.objects.all()
    assert call.error_class == "SummarizerError"
    assert "not a chat completion" in call.error_message
    assert leaks(call.error_message) == [] and leaks(caplog.text) == []


def test_an_empty_reply_says_so(
    openai_server: OpenAIServer, openai_summarizer_settings: dict[str, Any]
) -> None:
    openai_server.reply("")
    with override_settings(AGENTMEMORY=memory(openai_summarizer_settings)):
        services.recall(canary_thread(), BIG)

    (call,) = SummarizerCall.objects.all()
    assert call.error_class == "SummarizerError"
    assert "the answer held no summary text" in call.error_message


def failing_with_the_prompt(messages: list[dict[str, str]]) -> str:
    """A callable backend whose error quotes the conversation."""
    raise ValueError(f"cannot summarize {messages[-1]['content']}")


def test_a_foreign_exception_keeps_its_class_only() -> None:
    settings = memory({"SUMMARIZER": {
        "BACKEND": "agentmemory.summarizers.callable.CallableSummarizer",
        "MODEL": "in-house",
        "OPTIONS": {"FUNCTION": "tests.test_honest_records.failing_with_the_prompt"},
    }})
    with override_settings(AGENTMEMORY=settings):
        services.recall(canary_thread(), BIG)

    (call,) = SummarizerCall.objects.all()
    assert (call.error_class, call.error_message) == ("ValueError", "ValueError")


KEYS = st.one_of(
    st.from_regex(r"sk-(proj-)?[A-Za-z0-9]{20,48}", fullmatch=True),
    st.from_regex(r"sk-[a-z]{3,8}\*{3,12}[A-Za-z0-9]{2,6}", fullmatch=True),
    st.from_regex(r"[A-Za-z0-9]{2,8}\*{3,12}[A-Za-z0-9]{2,6}", fullmatch=True),
    st.from_regex(r"[A-Fa-f0-9]{40,64}", fullmatch=True),
    st.from_regex(r"Bearer [A-Za-z0-9._\-]{12,40}", fullmatch=True),
)
WORDS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=400)


@hypothesis_settings(max_examples=200, deadline=None)
@given(before=WORDS, key=KEYS, after=WORDS)
def test_redaction_removes_every_key_like_string_and_bounds_the_message(
    before: str, key: str, after: str
) -> None:
    text = redact(f"{before} {key} {after}")
    secret = key.removeprefix("Bearer ")
    assert secret not in text
    assert len(text) <= MAX_ERROR_CHARS and "\n" not in text


@hypothesis_settings(max_examples=200, deadline=None)
@given(message=st.text(min_size=1, max_size=300), status=st.integers(100, 599))
def test_a_foreign_exceptions_message_never_reaches_the_description(
    message: str, status: int
) -> None:
    marked = f"CONVERSATION:{message}"
    error = RuntimeError(marked)
    error.status_code = status  # type: ignore[attr-defined]
    described = describe_error(error)
    assert "CONVERSATION:" not in described
    assert described == f"RuntimeError (HTTP {status})"
    ours = describe_error(SummarizerError(marked, status_code=status))
    assert ours.startswith("SummarizerError: CONVERSATION:") and len(ours) <= MAX_ERROR_CHARS


# ------------------------------------------------------------------ the logs


def test_a_masked_key_echo_is_not_logged(
    openai_server: OpenAIServer,
    openai_summarizer_settings: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    openai_server.fail(401, f"Incorrect API key provided: {MASKED}. Find your key at ...")
    window = [{"role": "user", "content": "Handle the refunds."}] + [
        {"role": ("assistant", "user")[n % 2], "content": f"Refund {n}: {CANARY} " * 8}
        for n in range(12)
    ]
    with override_settings(AGENTMEMORY=memory(openai_summarizer_settings, WINDOW=WINDOW)):
        result = compact(make_thread(), window)

    assert result.refusal == "summarizer-failed"
    assert "failed during a window-fold" in caplog.text
    assert leaks(caplog.text) == []
    (call,) = SummarizerCall.objects.all()
    assert leaks(call.error_message) == []


def test_the_background_retries_log_no_provider_text(
    openai_server: OpenAIServer,
    openai_summarizer_settings: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    for _ in range(3):
        openai_server.fail(500, provider_echo(500))
    settings = memory(openai_summarizer_settings, FOLD_RETRY_MAX=2, FOLD_RETRY_BACKOFF=0.01)
    with override_settings(AGENTMEMORY=settings):
        thread = canary_thread()
        outcome = fold_thread.apply(args=(thread.pk,)).get()

    assert outcome["declined"] == ["summarizer-failed"]
    calls = SummarizerCall.objects.order_by("attempt")
    assert list(calls.values_list("attempt", "error_class")) == [
        (attempt, "TransientSummarizerError") for attempt in (1, 2, 3)
    ]
    # Celery said it retried (the line this test is about), twice, and quoted nothing.
    # (Celery's own task-trace lines only: a Redis client elsewhere in the process may log
    # its reconnect "Retry (n/20)" meanwhile.)
    retries = [r for r in caplog.records
               if r.name == "celery.app.trace" and "retry" in r.getMessage().lower()]
    assert len(retries) == 2, caplog.text
    assert all("HTTP 500" in record.getMessage() for record in retries)
    assert leaks(caplog.text) == []
    assert all(leaks(call.error_message) == [] for call in calls)


# ------------------------------------------------------------------ the signature


def folded_summary(**extra: Any) -> MemoryEntry:
    with override_settings(AGENTMEMORY={**COUNTS, **extra}):
        thread = make_thread()
        add_user_messages(thread, 25)
        summary_id = services.recall(thread, BIG).folded_summary_id
    assert summary_id is not None
    return MemoryEntry.objects.select_related("coverage").get(pk=summary_id)


def reload(summary: MemoryEntry) -> MemoryEntry:
    return MemoryEntry.objects.select_related("coverage").get(pk=summary.pk)


SUMMARY_EDITS: dict[str, Any] = {
    "injection flags cleared": lambda s: SummaryCoverage.objects.filter(pk=s.pk).update(
        injection_flags=[]
    ),
    "flags changed": lambda s: SummaryCoverage.objects.filter(pk=s.pk).update(
        injection_flags=["forged"]
    ),
    "fact score changed": lambda s: SummaryCoverage.objects.filter(pk=s.pk).update(
        fact_score=0.123
    ),
    "missing facts changed": lambda s: SummaryCoverage.objects.filter(pk=s.pk).update(
        missing_facts=["forged"]
    ),
    "marked reviewed": lambda s: SummaryCoverage.objects.filter(pk=s.pk).update(
        reviewed_at=timezone.now()
    ),
    "level changed": lambda s: SummaryCoverage.objects.filter(pk=s.pk).update(level=3),
    "source row deleted": lambda s: SummarySource.objects.filter(
        pk=SummarySource.objects.filter(summary=s).order_by("pk").values("pk")[:1]
    ).delete(),
    "source row added": lambda s: SummarySource.objects.create(
        summary=s,
        entry=MemoryEntry.objects.filter(thread=s.thread, kind="message")
        .exclude(summarized_in__summary=s)
        .first(),
    ),
    "expiry moved": lambda s: MemoryEntry.objects.filter(pk=s.pk).update(
        expires_at=timezone.now() + timedelta(days=3650)
    ),
    "held": lambda s: MemoryEntry.objects.filter(pk=s.pk).update(held_at=timezone.now()),
}


def flagged_summary() -> MemoryEntry:
    """A summary whose output tripped the quarantine: it carries injection flags."""
    summary = folded_summary(
        **recording_settings(INJECTION),
        FACT_GATE={"THRESHOLD": 0.0, "ACTION": "append"},
    )
    assert summary.coverage.injection_flags and summary.coverage.fact_score is not None
    return summary


@pytest.mark.parametrize("edit", list(SUMMARY_EDITS))
def test_an_edit_of_any_trusted_field_or_coverage_row_is_detected(edit: str) -> None:
    summary = flagged_summary()
    assert signing.summary_is_intact(summary)

    SUMMARY_EDITS[edit](summary)

    assert not signing.summary_is_intact(reload(summary))
    assert services.verify()["summaries"] == [summary.pk]
    assert reload(summary).retired_at is not None
    assert reload(summary).coverage.tampered_at is not None


def test_recall_retires_a_summary_whose_flags_were_cleared() -> None:
    summary = flagged_summary()
    SummaryCoverage.objects.filter(pk=summary.pk).update(injection_flags=[])

    result = services.recall(summary.thread, BIG)

    assert summary.pk not in result.summaries_used
    assert reload(summary).retired_at is not None


SPAN_EDITS: dict[str, dict[str, Any]] = {
    "injection flags": {"injection_flags": ["output:role-override"]},
    "fact score": {"fact_score": 0.01},
    "missing facts": {"missing_facts": ["SKU-3002"]},
    "expiry": {"expires_at": timezone.now() + timedelta(days=3650)},
}


def signed_span() -> FoldedSpan:
    """A window span just written: signed, intact."""
    window = [{"role": "user", "content": "Handle the refunds."}] + [
        {"role": ("assistant", "user")[n % 2],
         "content": f"Refund request {n}: the parcel never arrived and the customer asks "
         "for the money back on the original card, as the shop promised."}
        for n in range(12)
    ]
    with override_settings(AGENTMEMORY={"WINDOW": WINDOW}):
        span = compact(make_thread(), window).span
    assert span is not None and signing.span_is_intact(span)
    return span


@pytest.mark.parametrize("edit", list(SPAN_EDITS))
def test_an_edit_of_a_spans_trusted_fields_is_detected(edit: str) -> None:
    span = signed_span()

    FoldedSpan.objects.filter(pk=span.pk).update(**SPAN_EDITS[edit])

    assert not signing.span_is_intact(FoldedSpan.objects.get(pk=span.pk))


# JSON text PostgreSQL can store (no NUL), as a forger would have to write it.
LABELS = st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",)),
                 max_size=12)
TRUSTED_VALUES = st.one_of(
    st.tuples(st.just("fact_score"), st.floats(0, 1)),
    st.tuples(st.just("missing_facts"), st.lists(LABELS, max_size=3)),
    st.tuples(st.just("injection_flags"), st.lists(LABELS, max_size=3)),
    st.tuples(st.just("level"), st.integers(1, 6)),
)


@hypothesis_settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(change=TRUSTED_VALUES)
def test_any_change_to_a_signed_coverage_field_breaks_the_signature(
    change: tuple[str, Any],
) -> None:
    summary = folded_summary()
    field, value = change
    unchanged = getattr(summary.coverage, field) == value
    SummaryCoverage.objects.filter(pk=summary.pk).update(**{field: value})
    assert signing.summary_is_intact(reload(summary)) is unchanged


def test_a_signature_without_its_scheme_vouches_for_nothing() -> None:
    summary = folded_summary()
    assert signing.summary_is_intact(summary)
    bare = summary.coverage.signature.removeprefix(f"{signing.SCHEME}:")
    assert bare != summary.coverage.signature  # the right HMAC, without its scheme
    SummaryCoverage.objects.filter(pk=summary.pk).update(signature=bare)
    assert not signing.summary_is_intact(reload(summary))
    assert services.verify()["summaries"] == [summary.pk]


def test_agentmemory_verify_never_re_signs_an_edited_row() -> None:
    summary = folded_summary()
    signature = summary.coverage.signature
    MemoryEntry.objects.filter(pk=summary.pk).update(content="edited")

    found = services.verify()

    assert found["summaries"] == [summary.pk] and found["resigned_summaries"] == []
    assert reload(summary).coverage.signature == signature
    assert reload(summary).retired_at is not None


def test_review_re_signs_and_refuses_to_approve_an_edited_summary() -> None:
    user = get_user_model().objects.create_user("staff")
    first = folded_summary()
    assert services.review(first, user, approve=True)
    reviewed = reload(first)
    assert reviewed.coverage.reviewed_by_id == user.pk
    assert signing.summary_is_intact(reviewed)  # the review is signed with it

    third = folded_summary()
    MemoryEntry.objects.filter(pk=third.pk).update(content="edited by hand")
    assert not services.review(reload(third), user, approve=True)
    assert reload(third).coverage.reviewed_at is None
    assert reload(third).retired_at is not None


# ------------------------------------------------------------------ the quota


def owner_named() -> Any:
    return get_user_model().objects.create_user(f"owner-{uuid.uuid4().hex[:12]}")


def measured_estimate(base: dict[str, Any]) -> int:
    """What one call for a 25-entry thread reserves, read from a call without a quota."""
    with override_settings(AGENTMEMORY=memory(base)):
        thread = make_thread()
        add_user_messages(thread, 25)
        services.recall(thread, BIG)
    row = SummarizerCall.objects.filter(thread=thread).get()
    assert row.estimated_tokens is not None
    return row.estimated_tokens


@hypothesis_settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    usage=st.lists(st.tuples(st.integers(1, 3000), st.integers(1, 600)), min_size=1,
                   max_size=5),
    quota_share=st.floats(0.0, 4.0),
    already=st.integers(0, 2000),
)
def test_a_days_spend_passes_the_quota_by_at_most_the_last_calls_estimate_error(
    openai_server: OpenAIServer,
    openai_summarizer_settings: dict[str, Any],
    usage: list[tuple[int, int]],
    quota_share: float,
    already: int,
) -> None:
    openai_server.reset()
    estimate = measured_estimate(openai_summarizer_settings)
    owner = owner_named()
    quota = max(1, int(quota_share * estimate)) + already
    OwnerQuota.objects.create(owner=owner, daily_tokens=quota)
    SummarizerCall.objects.create(
        owner=owner, purpose="recall-fold", backend="earlier", model="earlier",
        prompt_tokens=already, completion_tokens=0, outcome=CallOutcome.FOLDED,
    )
    for prompt_tokens, completion_tokens in usage:
        openai_server.reply(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    requests_before = len(openai_server.chat_requests)

    declined = False
    with override_settings(AGENTMEMORY=memory(openai_summarizer_settings)):
        for _ in usage:
            thread = make_thread(owner=owner)
            add_user_messages(thread, 25)
            spent_before = ledger.tokens_used_today(owner.pk)
            result = services.recall(thread, BIG)
            if result.decline == "quota-exceeded":
                # Declined only when the estimate did not fit, and without a call.
                assert spent_before + estimate > quota
                declined = True
                break
            assert result.folded_summary_id is not None
            assert spent_before + estimate <= quota  # admitted only when it fitted

    calls = list(SummarizerCall.objects.filter(owner=owner, thread__isnull=False).order_by("pk"))
    assert len(openai_server.chat_requests) - requests_before == len(calls)
    # The ledger holds what the server reported, and each call's reservation.
    assert [(c.prompt_tokens, c.completion_tokens) for c in calls] == usage[: len(calls)]
    assert all(c.estimated_tokens == estimate for c in calls)
    spent = ledger.tokens_used_today(owner.pk)
    assert spent == already + sum(p + c for p, c in usage[: len(calls)])
    if calls:
        last = calls[-1]
        error = (last.prompt_tokens or 0) + (last.completion_tokens or 0) - estimate
        assert spent <= quota + max(0, error)
    else:
        assert spent == already
    assert declined or len(calls) == len(usage)


def test_a_call_larger_than_the_quota_is_never_made(
    openai_server: OpenAIServer, openai_summarizer_settings: dict[str, Any]
) -> None:
    # The measured overshoot: a 3,000-token quota, checked before a call, let a
    # 6,000-token call through. The call's estimate alone passes the quota now.
    owner = owner_named()
    OwnerQuota.objects.create(owner=owner, daily_tokens=3_000)
    thread = make_thread(owner=owner)
    services.append(thread, [
        {"role": "user", "content": f"Order {n}: " + "the parcel is late again. " * 60}
        for n in range(25)
    ])
    with override_settings(AGENTMEMORY=memory(openai_summarizer_settings)):
        result = services.recall(thread, BIG)

    assert result.decline == "quota-exceeded"
    assert openai_server.chat_requests == []
    assert SummarizerCall.objects.count() == 0
    assert ledger.tokens_used_today(owner.pk) == 0


PEEKED: list[list[tuple[str, int | None]]] = []


def peeking_summary(messages: list[dict[str, str]]) -> str:
    """Reads the ledger while its call is in flight."""
    PEEKED.append(list(SummarizerCall.objects.values_list("outcome", "estimated_tokens")))
    return "The user asked about orders."


def test_a_call_in_flight_counts_its_estimate_and_settles_to_its_outcome() -> None:
    PEEKED.clear()
    owner = owner_named()
    settings = memory({"SUMMARIZER": {
        "BACKEND": "agentmemory.summarizers.callable.CallableSummarizer",
        "MODEL": "in-house",
        "OPTIONS": {"FUNCTION": "tests.test_honest_records.peeking_summary"},
    }}, DAILY_TOKEN_QUOTA=1_000_000)
    thread = make_thread(owner=owner)
    add_user_messages(thread, 25)
    with override_settings(AGENTMEMORY=settings):
        services.recall(thread, BIG)

    ((outcome, estimate),) = PEEKED[0]
    assert outcome == CallOutcome.RESERVED and estimate and estimate > 0
    (call,) = SummarizerCall.objects.all()
    assert call.outcome == CallOutcome.FOLDED and call.estimated_tokens == estimate
    # A callable backend reports no usage: its estimate is what the quota counts.
    assert (call.prompt_tokens, call.completion_tokens) == (None, None)
    assert ledger.tokens_used_today(owner.pk) == estimate


PARALLEL = 6


@pytest.mark.django_db(transaction=True)
def test_concurrent_folds_of_one_owner_admit_only_the_estimates_the_quota_holds(
    on_postgres: bool, openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not on_postgres:
        pytest.skip("concurrent writers need PostgreSQL")
    monkeypatch.setenv("OPENAI_API_KEY", TEST_API_KEY)
    base = summarizer_settings(openai_server.base_url)
    estimate = measured_estimate(base)
    owner = owner_named()
    quota = 2 * estimate + estimate // 2  # room for two estimates, not three
    OwnerQuota.objects.create(owner=owner, daily_tokens=quota)
    error = estimate // 10  # each call costs a tenth more than its estimate
    for _ in range(PARALLEL):
        openai_server.script(Delay(0.5, Reply(prompt_tokens=estimate, completion_tokens=error)))
    threads = [make_thread(owner=owner) for _ in range(PARALLEL)]
    for thread in threads:
        add_user_messages(thread, 25)
    barrier = threading.Barrier(PARALLEL)
    results: list[Any] = []

    def fold(thread: Thread) -> None:
        try:
            barrier.wait(timeout=10)
            results.append(services.recall(thread, BIG))
        except Exception as exc:  # surfaced below
            results.append(exc)
        finally:
            connection.close()

    with override_settings(AGENTMEMORY=memory(base)):
        started = time.monotonic()
        workers = [threading.Thread(target=fold, args=(t,)) for t in threads]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)

    assert not [r for r in results if isinstance(r, Exception | AgentMemoryError)], results
    calls = SummarizerCall.objects.filter(owner=owner)
    admitted = calls.count()
    assert 1 <= admitted <= quota // estimate
    assert [r.decline for r in results].count("quota-exceeded") == PARALLEL - admitted
    assert len(openai_server.chat_requests) - 1 == admitted  # one was the measurement
    spent = ledger.tokens_used_today(owner.pk)
    assert spent == admitted * (estimate + error)
    assert spent <= quota + admitted * error  # each admitted call's estimate error, no more
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("edit", ["digest", "deleted", "added"])
def test_an_edit_of_what_a_span_was_made_from_is_detected(edit: str) -> None:
    span = signed_span()
    sources = SpanSource.objects.filter(span=span).order_by("position")
    assert sources.count() >= 2

    first = sources.first()
    assert first is not None
    if edit == "digest":
        SpanSource.objects.filter(pk=first.pk).update(digest="0" * 64)
    elif edit == "deleted":
        SpanSource.objects.filter(span=span, position=first.position).delete()
    else:
        SpanSource.objects.create(span=span, position=99, digest="f" * 64)

    assert not signing.span_is_intact(FoldedSpan.objects.get(pk=span.pk))
