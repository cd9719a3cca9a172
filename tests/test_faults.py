"""Background folding under faults (issue 13, items 2 and 3), in-process.

A hung broker (a loopback server that accepts and never answers), a real Redis queue
counted for duplicate sends, the loopback OpenAI-compatible server for Retry-After,
and a database error raised by the database layer's execute hook. The real-worker side
(a summarizer that kills its process, retry chains timed at the provider) is in
``tests/test_worker.py``.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import OperationalError, connection, connections
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agentmemory import services, signals
from agentmemory.admin import ThreadAdmin
from agentmemory.exceptions import TransientSummarizerError
from agentmemory.folding.lease import FoldState
from agentmemory.models import CallOutcome, EntryKind, MemoryEntry, SummarizerCall, Thread
from agentmemory.services import appends as appends_module
from agentmemory.services import background as background_module
from tests.conftest import SEED_COUNTS
from tests.openai_server import TEST_API_KEY, Failure, OpenAIServer, summarizer_settings

#: The tests' eager app is current in every test here, so a fold sent eagerly does not
#: depend on which app an earlier test left current; `publishing_app` swaps in a real one.
pytestmark = pytest.mark.usefixtures("eager_celery")

OFFLINE = {"BACKEND": "agentmemory.summarizers.offline.OfflineSummarizer", "MODEL": "offline-1"}


@contextmanager
def retries_recorded() -> Iterator[list[Any]]:
    """Every ``Retry`` a task raised while the block ran (Celery's task_retry signal)."""
    from celery.signals import task_retry

    retried: list[Any] = []

    def record(reason: Any = None, **_: Any) -> None:
        retried.append(reason)

    task_retry.connect(record, weak=False)
    try:
        yield retried
    finally:
        task_retry.disconnect(record)


def background(**extra: Any) -> dict[str, Any]:
    return {**SEED_COUNTS, "RECALL_MODE": "background", "SUMMARIZER": OFFLINE, **extra}


def fill(thread: Thread, count: int = 19) -> None:
    """``count`` messages: with the seeds' counts, the 20th append makes a fold due."""
    for number in range(count):
        role = "user" if number % 2 == 0 else "assistant"
        # Long enough that a summary with its label is smaller than the span.
        content = f"message {number} about order 4{number}, which has not arrived yet"
        services.append(thread, {"role": role, "content": content})


class SilentServer:
    """Accepts TCP connections and never answers: a paused or overloaded Redis."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self.port = int(self.listener.getsockname()[1])
        self.accepted: list[socket.socket] = []
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted.append(client)

    def close(self) -> None:
        self._stop.set()
        self.listener.close()
        for client in self.accepted:
            client.close()



@contextmanager
def publishing_app(broker_url: str, **conf: Any) -> Iterator[Any]:
    """A real Celery app, eager mode off, current while the block runs."""
    from celery import current_app

    from tests.celery_app import make_app

    app = make_app(f"faults-{uuid.uuid4().hex[:8]}", broker_url=broker_url,
                   result_backend=conf.pop("result_backend", broker_url),
                   task_always_eager=False, **conf)  # fmt: skip
    previous = current_app._get_current_object()
    app.set_current()
    try:
        yield app
    finally:
        previous.set_current()
        app.close()


# ---------------------------------------------------------------- item 2: bounded waits


@pytest.mark.django_db(transaction=True)  # the append enqueues on commit
def test_an_append_waits_at_most_broker_timeout_on_a_hung_broker_and_backs_off(
    settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    bound = 0.5
    settings.AGENTMEMORY = background(BROKER_TIMEOUT=bound)
    silent = SilentServer()
    thread = Thread.objects.create(title="hung broker")
    fill(thread)
    url = f"redis://127.0.0.1:{silent.port}/0"
    try:
        with publishing_app(url), caplog.at_level("WARNING", logger="agentmemory"):
            started = time.monotonic()
            services.append(thread, {"role": "user", "content": "the one that makes it due"})
            elapsed = time.monotonic() - started
            assert silent.accepted, "the send never reached the hung broker"
            assert services.fold_due(thread)
            # A hung recv waits forever; the slack is for a busy machine's database work.
            assert elapsed < bound + 5.0, f"the append waited {elapsed:.1f}s on a hung broker"
            # The back-off started on the timeout, as it does on a refusal.
            assert services.broker.is_down()
            connections_before = len(silent.accepted)
            services.append(thread, {"role": "assistant", "content": "and another"})
            assert len(silent.accepted) == connections_before, "a send was tried in back-off"
    finally:
        silent.close()
    warnings = [r.getMessage() for r in caplog.records if "could not enqueue" in r.getMessage()]
    assert len(warnings) == 1 and "BrokerTimeoutError" in warnings[0], warnings
    # Nothing is marked queued: the sweep will send it once the broker answers.
    assert Thread.objects.get(pk=thread.pk).fold_queued_until is None


@pytest.mark.django_db(transaction=True)
def test_a_hung_broker_makes_one_append_of_a_process_wait_not_every_one_in_flight(
    settings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 25, part 5: one append's send is held by a broker that never answers; nine
    more appends to due threads, started while it waits, give up their sends at once
    without reaching the broker, and every one of them is stored."""
    if connection.vendor != "postgresql":
        pytest.skip("requests in flight at once on their own connections need PostgreSQL")
    from agentmemory.broker import QUEUE_WAIT

    timeout = 5.0
    settings.AGENTMEMORY = background(BROKER_TIMEOUT=timeout)
    due = [Thread.objects.create(title=f"due {n}") for n in range(10)]
    for thread in due:
        fill(thread)  # the next append makes a fold due
    silent = SilentServer()
    finished: dict[int, float] = {}
    apps: list[Any] = []

    def request(thread: Thread) -> None:
        apps[0].set_current()  # Celery's current app is per thread
        started = time.monotonic()
        try:
            services.append(thread, {"role": "user", "content": "the one that makes it due"})
        finally:
            connections.close_all()
        finished[thread.pk] = time.monotonic() - started

    try:
        with publishing_app(f"redis://127.0.0.1:{silent.port}/0") as app, \
                caplog.at_level("WARNING", logger="agentmemory"):
            apps.append(app)
            first = threading.Thread(target=request, args=(due[0],))
            first.start()
            deadline = time.monotonic() + timeout
            while not silent.accepted and time.monotonic() < deadline:
                time.sleep(0.01)
            assert silent.accepted, "the first send never reached the hung broker"
            others = [threading.Thread(target=request, args=(t,)) for t in due[1:]]
            for other in others:
                other.start()
            for other in others:
                other.join()
            assert first.is_alive(), "the first send was no longer waiting: no overlap"
            first.join()
    finally:
        silent.close()
    assert len(silent.accepted) == 1, "a request in flight beside the first reached the broker"
    assert finished[due[0].pk] >= timeout  # the one that waited
    for thread in due[1:]:
        took = finished[thread.pk]
        assert took < timeout, f"an append beside it waited {took:.1f}s (gate {QUEUE_WAIT}s)"
    for thread in due:  # every append stored; every fold left due for the sweep
        assert MemoryEntry.objects.filter(thread=thread).count() == 20
        assert services.fold_due(thread)
    warnings = [r.getMessage() for r in caplog.records if "could not enqueue" in r.getMessage()]
    assert len(warnings) == 1, warnings  # said once, by the send that failed
    # Nothing is marked queued: the sweep sends every one once the broker answers.
    assert not Thread.objects.filter(fold_queued_until__isnull=False).exists()


@pytest.mark.django_db(transaction=True)
def test_a_sweep_whose_send_fails_leaves_a_fold_that_gave_up_to_the_sweep(
    settings: Any,
) -> None:
    """The sweep's claim clears the give-up mark only for a send that was made: with the
    broker refusing, the thread stays the sweep's to retry, not the next append's."""
    probe = socket.create_server(("127.0.0.1", 0))
    closed_port = probe.getsockname()[1]
    probe.close()  # nothing listens there: the broker refuses
    settings.AGENTMEMORY = background(BROKER_TIMEOUT=1.0)
    thread = Thread.objects.create(title="gave up", fold_cooling=True)
    with publishing_app(f"redis://127.0.0.1:{closed_port}/0"):
        assert services.request_fold(thread.pk, by_sweep=True).state == FoldState.BROKER_DOWN
        services.broker.reset()
        assert services.request_fold(thread.pk).state != FoldState.QUEUED
    assert Thread.objects.get(pk=thread.pk).fold_cooling


# ---------------------------------------------------------------- item 3: one chain per thread


@pytest.fixture
def redis_queue(redis_url: str) -> Iterator[tuple[str, Any]]:
    """A fresh queue name on the tests' Redis, and a client to count its messages."""
    import redis

    queue = f"agentmemory-faults-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(redis_url)
    try:
        yield queue, client
    finally:
        client.delete(queue)
        client.close()


@pytest.mark.django_db(transaction=True)  # each append enqueues on commit
def test_twenty_appends_to_a_due_thread_send_one_fold(
    settings: Any, redis_url: str, redis_queue: tuple[str, Any]
) -> None:
    queue, client = redis_queue
    settings.AGENTMEMORY = background(FOLD_QUEUE=queue)
    thread = Thread.objects.create(title="storm")
    fill(thread)
    with publishing_app(redis_url):
        for number in range(20):
            services.append(thread, {"role": "user", "content": f"still waiting {number}"})
        assert client.llen(queue) == 1
        assert services.request_fold(thread.pk).state == services.FoldState.ALREADY_QUEUED
        assert services.sweep() == []
        assert client.llen(queue) == 1
        # The queued task starts: its lease stands for the fold, and still no second send.
        assert services.take_fold_lease(thread.pk, "the-queued-task")
        assert services.request_fold(thread.pk).state == services.FoldState.FOLDING
        services.release_fold_lease(thread.pk, "the-queued-task")
        assert services.enqueue_fold(thread.pk)
        assert client.llen(queue) == 2


# ---------------------------------------------------------------- POST fold/


@pytest.fixture
def api_client(db: None) -> Client:
    user = get_user_model().objects.create_user("folder", password="pw")
    client = Client()
    client.force_login(user)
    client.user = user  # type: ignore[attr-defined]
    return client


def post_fold(client: Client, thread: Thread) -> Any:
    return client.post(f"/api/memory/threads/{thread.pk}/fold/", {"mode": "background"},
                       content_type="application/json")  # fmt: skip


def test_post_fold_is_deduplicated_and_throttled(
    settings: Any, api_client: Client, redis_url: str, redis_queue: tuple[str, Any]
) -> None:
    from django.core.cache import cache

    cache.clear()
    queue, client = redis_queue
    settings.AGENTMEMORY = background(FOLD_QUEUE=queue, API_THROTTLE_RATES={"fold": "3/min"})
    owner = api_client.user  # type: ignore[attr-defined]
    thread = Thread.objects.create(title="posted", owner=owner)
    with publishing_app(redis_url):
        first = post_fold(api_client, thread)
        assert first.status_code == 202, first.content
        assert first.json()["state"] == "queued" and first.json()["task_id"]
        again = post_fold(api_client, thread)
        assert again.status_code == 202
        assert again.json() == {"mode": "background", "task_id": None,
                                "state": "already-queued"}  # fmt: skip
        assert client.llen(queue) == 1
        assert post_fold(api_client, thread).status_code == 202
        throttled = post_fold(api_client, thread)
        assert throttled.status_code == 429, throttled.content
    assert client.llen(queue) == 1
    cache.clear()


def test_post_fold_answers_503_when_nothing_could_be_queued(
    settings: Any, api_client: Client
) -> None:
    probe = socket.create_server(("127.0.0.1", 0))
    closed_port = probe.getsockname()[1]
    probe.close()  # nothing listens there: the broker refuses
    settings.AGENTMEMORY = background(BROKER_TIMEOUT=1.0)
    owner = api_client.user  # type: ignore[attr-defined]
    thread = Thread.objects.create(title="refused", owner=owner)
    with publishing_app(f"redis://127.0.0.1:{closed_port}/0"):
        started = time.monotonic()
        response = post_fold(api_client, thread)
        assert time.monotonic() - started < 1.0 + 5.0  # BROKER_TIMEOUT, and a busy machine
    assert response.status_code == 503, response.content
    body = response.json()
    assert body["state"] == "broker-down" and body["task_id"] is None
    assert "No fold could be queued" in body["detail"]
    assert response["Retry-After"] == "30"
    assert Thread.objects.get(pk=thread.pk).fold_queued_until is None


def test_post_fold_of_a_parked_thread_answers_409_and_sends_nothing(
    settings: Any, api_client: Client
) -> None:
    settings.AGENTMEMORY = background(FOLD_MAX_DEATHS=1)
    owner = api_client.user  # type: ignore[attr-defined]
    thread = Thread.objects.create(title="parked", owner=owner)
    assert services.take_fold_lease(thread.pk, "dies")
    assert not services.take_fold_lease(thread.pk, "dies")  # parked
    with publishing_app("redis://127.0.0.1:1/0"):  # a send would fail: none is tried
        response = post_fold(api_client, thread)
    assert response.status_code == 409, response.content
    assert response.json()["state"] == "parked" and response.json()["task_id"] is None
    assert "FOLD_MAX_DEATHS" in response.json()["detail"]
    assert services.broker.down_until == 0.0  # no send was tried, none failed


# ---------------------------------------------------------------- deaths, parking, the lease


@pytest.mark.django_db
def test_a_fold_that_died_max_deaths_times_is_parked_out_loud_until_a_person_unparks_it(
    settings: Any, caplog: pytest.LogCaptureFixture, rf: Any
) -> None:
    """Each take of a lease nobody released is a death (what a killed worker leaves)."""
    settings.AGENTMEMORY = background(FOLD_MAX_DEATHS=2, FOLD_PARK_BACKOFF=600)
    thread = Thread.objects.create(title="poison")
    parked: list[dict[str, Any]] = []

    def receive(**kwargs: Any) -> None:
        parked.append(kwargs)

    signals.fold_parked.connect(receive)
    try:
        with caplog.at_level("WARNING", logger="agentmemory"):
            assert services.take_fold_lease(thread.pk, "task-1")  # delivery 1: dies
            assert services.take_fold_lease(thread.pk, "task-1")  # redelivered: 1 death
            assert Thread.objects.get(pk=thread.pk).fold_deaths == 1
            assert not parked
            assert not services.take_fold_lease(thread.pk, "task-1")  # 2 deaths: parked
    finally:
        signals.fold_parked.disconnect(receive)
    thread.refresh_from_db()
    assert thread.fold_deaths == 2 and thread.fold_lease_owner == ""
    assert thread.fold_parked_until is not None and thread.fold_parked_until > timezone.now()
    assert [(p["thread"].pk, p["deaths"]) for p in parked] == [(thread.pk, 2)]
    assert any("is parked" in r.getMessage() and r.levelname == "WARNING"
               for r in caplog.records)  # fmt: skip
    # Parked: no one takes the lease, appends' requests send nothing, the sweep waits.
    assert not services.take_fold_lease(thread.pk, "someone-else")
    assert services.request_fold(thread.pk).state == services.FoldState.PARKED
    admin = ThreadAdmin(Thread, None)  # type: ignore[arg-type]
    status = admin.fold_status(thread)
    assert status.startswith("parked until") and "2 deaths" in status
    # A person unparks it (the admin action calls this): deaths forgotten, sent again
    # (eagerly here: the fold runs and finds nothing to fold).
    asked = services.unpark_fold(thread)
    assert asked.state == services.FoldState.QUEUED
    thread.refresh_from_db()
    assert thread.fold_parked_until is None and thread.fold_deaths == 0
    assert admin.fold_status(thread) == "-"


def test_staff_see_a_parked_fold_in_the_admin_and_unpark_it(
    settings: Any, admin_client: Client
) -> None:
    from django.urls import reverse

    settings.AGENTMEMORY = background(FOLD_MAX_DEATHS=1)
    thread = Thread.objects.create(title="parked in the admin")
    other = Thread.objects.create(title="healthy")
    assert services.take_fold_lease(thread.pk, "dies")
    assert not services.take_fold_lease(thread.pk, "dies")  # parked
    changelist = reverse("admin:agentmemory_thread_changelist")
    listed = admin_client.get(changelist, {"fold_parked_until__isempty": "0"})
    assert listed.status_code == 200
    page = listed.content.decode()
    assert "parked until" in page and "after 1 deaths" in page
    assert "parked in the admin" in page and "healthy" not in page
    response = admin_client.post(changelist, {
        "action": "unpark_folds", "_selected_action": [thread.pk, other.pk],
    }, follow=True)  # fmt: skip
    assert "Fold enqueued for 1 thread(s)." in response.content.decode()
    thread.refresh_from_db()
    assert thread.fold_parked_until is None and thread.fold_deaths == 0
    assert "after 1 deaths" not in admin_client.get(changelist).content.decode()


@pytest.mark.django_db
def test_the_sweep_retries_a_parked_fold_only_after_its_back_off(settings: Any) -> None:
    settings.AGENTMEMORY = background(FOLD_MAX_DEATHS=1, FOLD_PARK_BACKOFF=600)
    thread = Thread.objects.create(title="parked, then swept")
    fill(thread, 20)  # eager Celery folds at once; add the next span's worth
    fill(thread, 20)
    assert services.fold_due(thread)
    assert services.take_fold_lease(thread.pk, "dies")
    assert not services.take_fold_lease(thread.pk, "dies")  # one death parks it
    assert services.sweep() == []
    Thread.objects.filter(pk=thread.pk).update(
        fold_parked_until=timezone.now() - timezone.timedelta(seconds=1)
    )
    assert services.sweep() == [thread.pk]
    thread.refresh_from_db()
    assert thread.fold_parked_until is None and thread.fold_deaths == 0
    assert not services.fold_due(thread)


@pytest.mark.django_db(transaction=True)
def test_a_dead_holders_lease_is_taken_back_after_fold_lease_while_a_live_one_is_kept(
    settings: Any,
) -> None:
    lease = 0.6
    settings.AGENTMEMORY = background(FOLD_LEASE=lease)
    thread = Thread.objects.create(title="lease")
    # A holder that died: it took the lease and no heartbeat renews it.
    assert services.take_fold_lease(thread.pk, "dead")
    assert not services.take_fold_lease(thread.pk, "successor")
    time.sleep(lease + 0.1)
    assert services.take_fold_lease(thread.pk, "successor")
    assert Thread.objects.get(pk=thread.pk).fold_deaths == 1
    services.release_fold_lease(thread.pk, "successor")
    assert Thread.objects.get(pk=thread.pk).fold_deaths == 0

    # A live holder in a long call: its heartbeat keeps the lease past FOLD_LEASE. Counted
    # in renewals seen, not in sleeps, so a busy machine's late heartbeat cannot fail it:
    # three renewals are a whole lease later, and each is checked just after it is seen.
    assert services.take_fold_lease(thread.pk, "alive")
    with services.held_lease(thread.pk, "alive"):
        seen = [Thread.objects.get(pk=thread.pk).fold_lease_until]
        deadline = time.monotonic() + 60
        while len(seen) < 4 and time.monotonic() < deadline:
            until = Thread.objects.get(pk=thread.pk).fold_lease_until
            if until != seen[-1]:
                seen.append(until)
                assert not services.take_fold_lease(thread.pk, "successor")
            time.sleep(0.01)
        assert len(seen) == 4, "the heartbeat did not renew the lease"
        assert seen[-1] - seen[0] >= timedelta(seconds=lease)  # past the first lease's end
    assert services.take_fold_lease(thread.pk, "successor")
    assert Thread.objects.get(pk=thread.pk).fold_deaths == 0


# ---------------------------------------------------------------- Retry-After, DB errors


@pytest.mark.django_db
@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_is_honoured(
    status: int, settings: Any, monkeypatch: pytest.MonkeyPatch, openai_server: OpenAIServer
) -> None:
    from agentmemory.tasks import fold_thread

    monkeypatch.setenv("OPENAI_API_KEY", TEST_API_KEY)
    summarizer = dict(summarizer_settings(openai_server.base_url, timeout=5.0)["SUMMARIZER"])
    settings.AGENTMEMORY = {**background(SUMMARIZER=summarizer), "RECALL_MODE": "inline"}
    openai_server.script(Failure(status, headers={"Retry-After": "30"}))
    thread = Thread.objects.create(title="rate limited")
    fill(thread, 20)  # inline mode while filling: nothing enqueued
    settings.AGENTMEMORY = background(SUMMARIZER=summarizer, FOLD_RETRY_BACKOFF=0.1)
    with retries_recorded() as retried:
        result = fold_thread.apply(args=(thread.pk,))  # eager: the retry runs at once
    assert [retry.when for retry in retried] == [30.0], "the retry came sooner than Retry-After"
    assert isinstance(retried[0].exc, TransientSummarizerError)
    assert retried[0].exc.retry_after == 30.0
    assert result.state == "SUCCESS" and result.result["folded"]
    assert len(openai_server.chat_requests) == 2


@pytest.mark.django_db
def test_retry_after_as_an_http_date_and_in_milliseconds() -> None:
    from email.utils import format_datetime

    from agentmemory.summarizers.openai import retry_after

    later = format_datetime(timezone.now() + timezone.timedelta(seconds=40), usegmt=True)
    assert 38 <= (retry_after({"retry-after": later}) or 0) <= 40
    assert retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({}) is None


@pytest.mark.django_db(transaction=True)
def test_a_database_error_during_write_back_retries_the_task(settings: Any) -> None:
    from agentmemory.tasks import fold_thread

    settings.AGENTMEMORY = {**background(), "RECALL_MODE": "inline"}
    thread = Thread.objects.create(title="blip")
    fill(thread, 20)
    blips: list[str] = []

    def blip_once(execute: Callable[..., Any], sql: str, *args: Any) -> Any:
        if "agentmemory_summarycoverage" in sql and sql.lstrip().upper().startswith("INSERT") \
                and not blips:
            blips.append(sql)
            raise OperationalError("server closed the connection unexpectedly")
        return execute(sql, *args)

    with connection.execute_wrapper(blip_once), retries_recorded() as retried:
        result = fold_thread.apply(args=(thread.pk,))  # eager: a retry runs at once
    assert blips, "the write-back never reached the database"
    assert [type(retry.exc) for retry in retried] == [OperationalError], (
        "a task that failed on a database error was not retried"
    )
    assert result.state == "SUCCESS" and result.result["folded"]
    assert MemoryEntry.objects.filter(thread=thread, kind=EntryKind.SUMMARY).count() == 1
    thread.refresh_from_db()
    assert thread.fold_lease_owner == "" and thread.fold_deaths == 0
    # The paid call whose write-back failed is settled with its real usage and the error;
    # the retry's call is the span's second attempt.
    failed, folded = SummarizerCall.objects.filter(thread=thread).order_by("pk")
    assert (failed.outcome, failed.error_class, failed.attempt) == (
        CallOutcome.FAILED, "OperationalError", 1)
    assert failed.prompt_tokens and failed.completion_tokens
    assert failed.prompt_tokens == folded.prompt_tokens  # the same span, the same prompt
    assert (folded.outcome, folded.attempt) == (CallOutcome.FOLDED, 2)


# ---------------------------------------------------------------- item 5: the request path


@pytest.fixture
def fold_decisions(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every `services.fold_due` call made by an append: was a transaction open then?

    Patched where append's `fold_if_due` looks it up, the module that owns it."""
    calls: list[bool] = []
    decide = background_module.fold_due

    def spy(thread: Thread, **kwargs: Any) -> bool:
        calls.append(connection.in_atomic_block)
        return decide(thread, **kwargs)

    monkeypatch.setattr(background_module, "fold_due", spy)
    return calls


@pytest.mark.django_db(transaction=True)  # on_commit runs on a real commit
def test_an_append_decides_on_a_fold_after_its_commit_outside_the_row_lock(
    settings: Any, fold_decisions: list[bool]
) -> None:
    settings.AGENTMEMORY = background()
    thread = Thread.objects.create(title="decided after commit")
    fill(thread, count=20)
    assert len(fold_decisions) >= 20  # one per append; a settling fold asks again
    assert not any(fold_decisions), "a fold decision ran inside the append's transaction"
    assert MemoryEntry.objects.filter(thread=thread, kind=EntryKind.SUMMARY).exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("on_its_way", ["queued", "leased", "parked"])
@pytest.mark.parametrize("driven", ["by counts", "by tokens"])
def test_an_append_to_a_thread_with_a_fold_on_its_way_asks_one_query_and_loads_nothing(
    settings: Any, monkeypatch: pytest.MonkeyPatch, on_its_way: str, driven: str,
    on_postgres: bool,
) -> None:
    """On SQLite the fold decision after the commit is one query, which reads the fold
    state; on PostgreSQL the append's one statement read it under the row lock, and no
    decision is asked at all."""
    settings.AGENTMEMORY = (
        background() if driven == "by counts"
        else {"RECALL_MODE": "background", "SUMMARIZER": OFFLINE, "FOLD_BUDGET": 400}
    )
    thread = Thread.objects.create(title=on_its_way)
    later = timezone.now() + timedelta(minutes=5)
    Thread.objects.filter(pk=thread.pk).update(**{
        "queued": {"fold_queued_until": later},
        "leased": {"fold_lease_owner": "another worker", "fold_lease_until": later},
        "parked": {"fold_parked_until": later},
    }[on_its_way])
    loads: list[int] = []
    requests: list[int] = []
    real_load = background_module.load_visible
    monkeypatch.setattr(background_module, "load_visible",
                        lambda thread, *args: loads.append(thread.pk) or real_load(thread, *args))
    monkeypatch.setattr(background_module, "request_fold",
                        lambda thread_id, **kwargs: requests.append(thread_id))
    decisions: list[list[str]] = []
    decide = background_module.fold_if_due

    def counted(thread: Thread) -> None:
        with CaptureQueriesContext(connection) as queries:
            decide(thread)
        decisions.append([query["sql"] for query in queries.captured_queries])

    monkeypatch.setattr(appends_module, "fold_if_due", counted)
    ruled_out: list[bool] = []
    rule = appends_module.fold_ruled_out
    monkeypatch.setattr(appends_module, "fold_ruled_out", lambda *args, **kwargs: (
        ruled_out.append(rule(*args, **kwargs)) or ruled_out[-1]))
    fill(thread, count=40)
    assert loads == [] and requests == [], "a thread with a fold on its way was decided on"
    if on_postgres:
        assert decisions == [] and ruled_out == [], "the statement's fold state was not read"
    else:
        # every append asks, but those of a young thread whose counters show no pressure
        assert len(decisions) == 40 - sum(ruled_out) and len(ruled_out) == 40
        for queries in decisions:  # one question, with the thread's fold state in it
            assert len(queries) == 1 and "fold_queued_until" in queries[0], queries
    control = Thread.objects.create(title="no fold on its way")
    fill(control, count=40)
    assert control.pk in requests, "the same appends to a free thread would request a fold"
