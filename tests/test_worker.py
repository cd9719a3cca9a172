"""Background folding with a real Celery worker, real Redis and PostgreSQL (issue 3).

Each test that needs a worker starts ``celery -A tests.celery_app worker`` (prefork,
two processes) as a subprocess in its own process group, pointed at the test database
pytest-django created, and kills the group when the test ends. Nothing runs eagerly.

The test process reaches Redis through :class:`BrokerLink`, a loopback relay that a
test can cut to play a broker outage; the worker talks to Redis directly. Redis DB 14
(``CELERY_BROKER_URL`` in ``tests/settings.py``) is flushed before and after each test.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

import pytest
from django.conf import settings
from django.db import connections

from agentmemory import services
from agentmemory.folding import DeclineReason
from agentmemory.models import CallOutcome, EntryKind, MemoryEntry, SummarizerCall, Thread
from agentmemory.transcript import SUMMARY_LABEL_PREFIX
from tests.conftest import SEED_COUNTS, require_service
from tests.helpers import subprocess_database_env
from tests.openai_server import TEST_API_KEY, Delay, Failure, OpenAIServer, summarizer_settings

pytestmark = [
    pytest.mark.skipif(
        not settings.DATABASES["default"]["ENGINE"].endswith("postgresql"),
        reason="needs PostgreSQL: a worker subprocess and concurrent connections cannot "
        "share the in-memory SQLite test database (run with AGENTMEMORY_TEST_DB=postgres)",
    ),
    pytest.mark.postgres_only,
    pytest.mark.django_db(transaction=True),
]

REPO = Path(__file__).resolve().parent.parent
#: One queue per test run, so a worker never takes another run's tasks.
QUEUE = f"agentmemory-test-worker-{os.getpid()}"
OFFLINE = {"BACKEND": "agentmemory.summarizers.offline.OfflineSummarizer", "MODEL": "offline-1"}

T = TypeVar("T")


def memory_settings(summarizer: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """``AGENTMEMORY`` shared by the test process and its worker."""
    return {
        "RECALL_MODE": "background",
        "FOLD_QUEUE": QUEUE,
        "FOLD_RETRY_BACKOFF": 0.2,
        "SUMMARIZER": summarizer,
        **extra,
    }


def openai_summarizer(server: OpenAIServer, *, timeout: float) -> dict[str, Any]:
    return dict(summarizer_settings(server.base_url, timeout=timeout)["SUMMARIZER"])


def message(number: int) -> dict[str, str]:
    """Message ``number`` (1-based) of a support conversation: user asks, agent answers."""
    turn = (number + 1) // 2
    if number % 2:
        return {
            "role": "user",
            "content": f"Turn {turn}: where is order #{4000 + turn}? It was due in Lisbon "
            f"on day {turn} and the tracking page still shows nothing at all.",
        }
    return {
        "role": "assistant",
        "content": f"Order #{4000 + turn} left the Porto depot on day {turn}; the courier "
        "delivers it tomorrow and the tracking number follows by email.",
    }


def append_messages(thread: Thread, numbers: range) -> None:
    """One ``services.append`` per message, as an agent writes them."""
    for number in numbers:
        services.append(thread, message(number))


def summaries(thread: Thread) -> list[MemoryEntry]:
    return list(MemoryEntry.objects.filter(thread=thread, kind=EntryKind.SUMMARY))


# ---------------------------------------------------------------- the worker


@dataclass
class Worker:
    """``celery worker`` in its own process group; its log goes to ``log_path``."""

    name: str
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> Worker:
        command = [
            sys.executable, "-m", "celery", "-A", "tests.celery_app", "worker",
            "--pool=prefork", "--concurrency=2", "-Q", QUEUE, "-n", f"{self.name}@%h",
            "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "info",
        ]  # fmt: skip
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                command, cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_until(self._ready, timeout, f"worker {self.name} to report ready", self)
        return self

    def _ready(self) -> bool:
        return any(f"{self.name}@" in line and "ready." in line for line in self.log().splitlines())

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole process group (main process and pool), as a crash would."""
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=10)
        self.process = None

    def kill_pool(self) -> None:
        """SIGKILL the pool processes only; the main process lives on."""
        assert self.process is not None
        pid = self.process.pid
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        assert children, f"worker {self.name} has no pool processes"
        for child in children:
            os.kill(int(child), signal.SIGKILL)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log().splitlines()[-lines:])


def settled(broker: Broker, worker: Worker) -> None:
    """Wait until nothing is queued or unacknowledged: no fold can arrive late."""
    wait_until(
        lambda: broker.redis.llen(QUEUE) == 0 and broker.redis.hlen("unacked") == 0,
        10,
        "the queue to drain and every message to be acknowledged",
        worker,
    )


def wait_until(
    predicate: Callable[[], T], timeout: float, what: str, worker: Worker | None = None
) -> T:
    """Poll ``predicate`` every 50 ms until it is truthy; fail naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        died = worker is not None and worker.process is not None and not worker.alive
        if died or time.monotonic() > deadline:
            reason = "the worker died" if died else f"timed out after {timeout:.0f}s"
            log = f"\n--- worker log (tail) ---\n{worker.log_tail()}" if worker else ""
            raise AssertionError(f"{reason} waiting for {what}{log}")
        time.sleep(0.05)


# ---------------------------------------------------------------- the broker


class BrokerLink:
    """A loopback TCP relay to Redis: the test process's road to the broker, cut at will.

    :meth:`cut` closes the listening socket and every relayed connection, as a Redis
    outage does to a web process; :meth:`restore` listens again on the same port, so the
    same broker URL (and the same connection pool) works again.
    """

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._listener: socket.socket | None = None
        probe = socket.create_server(("127.0.0.1", 0))
        self.port = int(probe.getsockname()[1])
        probe.close()

    def url(self, path: str) -> str:
        return f"redis://127.0.0.1:{self.port}{path}"

    def restore(self) -> None:
        self._stop.clear()
        self._listener = socket.create_server(("127.0.0.1", self.port), reuse_port=False)
        self._listener.settimeout(0.05)
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()

    def cut(self) -> None:
        self._stop.set()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        with self._lock:
            for sock in self._sockets:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
            self._sockets.clear()

    def _accept(self, listener: socket.socket) -> None:
        while not self._stop.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.upstream, timeout=2)
            except OSError:
                client.close()
                continue
            client.settimeout(None)
            upstream.settimeout(None)
            with self._lock:
                self._sockets |= {client, upstream}
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@dataclass
class Broker:
    link: BrokerLink
    redis: Any
    app: Any
    #: Ids of the ``fold_thread`` tasks this process published, in order.
    published: list[str] = field(default_factory=list)

    def result(self, task_id: str, timeout: float) -> Any:
        return self.app.AsyncResult(task_id).get(timeout=timeout)


@pytest.fixture
def broker() -> Iterator[Broker]:
    """The broker's Redis DB (14 unless ``AGENTMEMORY_TEST_BROKER`` names another), flushed,
    and this process publishing to it through a BrokerLink.

    The publishing app is new for each test (built like the worker's, from the
    ``CELERY`` settings, with eager mode off and the link as broker) and current while
    the test runs: that is the app ``services.enqueue_fold`` sends through.
    """
    import redis
    from celery import current_app
    from celery.signals import after_task_publish

    from tests.celery_app import make_app

    parsed = urlparse(settings.CELERY_BROKER_URL)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 6379
    require_service("Redis", host, port)
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.flushdb()
    link = BrokerLink((host, port))
    link.restore()
    publisher = make_app(
        "agentmemory_tests_publisher", broker_url=link.url(parsed.path), task_always_eager=False
    )
    state = Broker(link=link, redis=client, app=publisher)

    def record(sender: str | None = None, headers: dict[str, Any] | None = None, **_: Any) -> None:
        if sender == "agentmemory.fold_thread" and headers:
            state.published.append(headers["id"])

    previous_app = current_app._get_current_object()
    publisher.set_current()
    after_task_publish.connect(record, weak=False)
    try:
        yield state
    finally:
        after_task_publish.disconnect(record)
        previous_app.set_current()
        link.cut()
        publisher.amqp.producer_pool.force_close_all()
        publisher.close()
        client.flushdb()
        client.close()


@pytest.fixture
def start_worker(
    broker: Broker, tmp_path: Path, transactional_db: None
) -> Iterator[Callable[..., Worker]]:
    """Start workers on the test database; every one of them is killed at teardown."""
    started: list[Worker] = []

    def start(memory: dict[str, Any], *, transport_options: dict[str, Any] | None = None) -> Worker:
        env = {
            **os.environ,
            **subprocess_database_env(),
            "AGENTMEMORY_TEST_CELERY": "worker",
            "AGENTMEMORY_TEST_BROKER": settings.CELERY_BROKER_URL,
            # The worker's defaults are the test process's: the count-driven ones.
            "AGENTMEMORY_TEST_SETTINGS": json.dumps({**SEED_COUNTS, **memory}),
            "AGENTMEMORY_TEST_BROKER_OPTIONS": json.dumps(transport_options or {}),
            "OPENAI_API_KEY": TEST_API_KEY,
            "PYTHONPATH": str(REPO),
            "PYTHONUNBUFFERED": "1",
        }
        name = f"w{len(started)}-{os.getpid()}"
        worker = Worker(name, env, tmp_path / f"{name}.log")
        started.append(worker)
        return worker.start()

    try:
        yield start
    finally:
        for worker in started:
            worker.kill()


@pytest.fixture
def use_memory_settings(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    def use(memory: dict[str, Any]) -> None:
        monkeypatch.setenv("OPENAI_API_KEY", TEST_API_KEY)
        settings.AGENTMEMORY = memory

    return use


# ---------------------------------------------------------------- 1. the worker folds


def test_worker_writes_the_summary_while_recall_stays_verbatim(
    start_worker: Callable[..., Worker],
    broker: Broker,
    openai_server: OpenAIServer,
    use_memory_settings: Callable[..., None],
) -> None:
    memory = memory_settings(openai_summarizer(openai_server, timeout=10.0))
    use_memory_settings(memory)
    # The first fold's summarizer call hangs for a while: the recall made meanwhile
    # must neither wait for it nor show anything of it.
    openai_server.delay(6.0)
    worker = start_worker(memory)
    thread = Thread.objects.create(title="background")

    append_messages(thread, range(1, 20))
    assert broker.published == [], "a fold was enqueued before one was due"
    append_messages(thread, range(20, 21))
    assert len(broker.published) == 1, "the append that made a fold due enqueued no fold"
    openai_server.wait_for_requests(1, timeout=30)  # the worker is inside the call

    verbatim = services.recall(thread, 4000, mode="background")
    # It did not wait: the call it would have waited for is still in flight (a ledger
    # row, not a clock, so a busy machine cannot fail it; the call takes seconds).
    in_flight = SummarizerCall.objects.filter(thread=thread, outcome=CallOutcome.RESERVED)
    assert in_flight.exists(), "the recall returned only after the fold's call"
    assert verbatim.summaries_used == []
    assert verbatim.folded_summary_id is None
    assert [m.kind for m in verbatim.messages] == [EntryKind.MESSAGE] * 20
    assert summaries(thread) == []

    append_messages(thread, range(21, 81))  # 40 turns in all
    wait_until(lambda: summaries(thread), 60, "the worker to write a summary", worker)

    def recall_with_summary() -> services.RecallResult | None:
        result = services.recall(thread, 4000, mode="background")
        return result if result.summaries_used else None

    result = wait_until(recall_with_summary, 60, "a recall that uses a summary", worker)
    stored = {entry.pk: entry for entry in summaries(thread)}
    assert set(result.summaries_used) <= set(stored)
    first = result.messages[0]
    # Entries older than the first fold's span may stand before the summary.
    used = next(m for m in result.messages if m.id == result.summaries_used[0])
    assert used.kind == EntryKind.SUMMARY and first.turn <= used.turn
    assert used.content.startswith(SUMMARY_LABEL_PREFIX)
    # Law 1: folding deleted nothing; law 2: one summary per key.
    originals = MemoryEntry.objects.filter(thread=thread, kind=EntryKind.MESSAGE)
    assert originals.count() == 80
    keys = [entry.summary_key for entry in stored.values()]
    assert len(keys) == len(set(keys))
    settled(broker, worker)
    ledger = SummarizerCall.objects.filter(thread=thread)
    assert ledger.filter(outcome=CallOutcome.FOLDED).count() == len(summaries(thread))
    # The held-up first call lost its span to folds made meanwhile: declined, not failed.
    assert set(ledger.values_list("outcome", flat=True)) <= {
        CallOutcome.FOLDED,
        CallOutcome.DECLINED,
    }


def test_a_background_recall_below_the_fold_budget_folds_for_its_own_room(
    start_worker: Callable[..., Worker],
    broker: Broker,
    use_memory_settings: Callable[..., None],
) -> None:
    """Budget-driven defaults (no count trigger): 80 messages stay below FOLD_BUDGET, so
    appends queue nothing; a recall at 600 records its room, queues one fold for it and
    says ``fold-pending``; once the worker has run, the same recall leaves nothing out."""
    budget_driven = {"LOAD_COUNT": None, "TRIGGER_MIN_ENTRIES": None, "FOLD_HIGH_WATER": 1.0}
    # Summaries that fit a room of 332 tokens beside the newest turn (the offline
    # default's cap of 600 tokens would not: that gap is the summarizer's, not the plan's).
    memory = memory_settings({**OFFLINE, "OPTIONS": {"MAX_TOKENS": 120}}, **budget_driven)
    use_memory_settings(memory)
    worker = start_worker(memory)
    thread = Thread.objects.create(title="a small room")
    append_messages(thread, range(1, 81))
    assert broker.published == [], "below FOLD_BUDGET no append queues a fold"

    pending = services.recall(thread, 600)
    assert pending.omitted > 0 and pending.omitted_reason == "fold-pending"
    assert Thread.objects.get(pk=thread.pk).recall_budget == 600
    assert len(broker.published) == 1
    again = services.recall(thread, 600)  # before the worker is done: no second task
    assert again.omitted_reason in ("fold-pending", None) and len(broker.published) <= 2

    def gapless() -> services.RecallResult | None:
        result = services.recall(thread, 600)
        return result if result.omitted == 0 and result.summaries_used else None

    result = wait_until(gapless, 60, "a recall at 600 with nothing left out", worker)
    assert result.tokens <= 600 - 256
    settled(broker, worker)
    # A pinned fold budget is not moved by recalls: the gap is the budget's, said so.
    pinned = Thread.objects.create(title="pinned", fold_budget=4000)
    append_messages(pinned, range(1, 81))
    kept = services.recall(pinned, 600)
    assert kept.omitted > 0 and kept.omitted_reason == "over-budget"
    assert Thread.objects.get(pk=pinned.pk).recall_budget is None


# ---------------------------------------------------------------- 2. two folds at once



#: Set by a racer that was turned away; the racer inside the call waits for it, so the
#: second arrives while the first calls, whatever the machine's speed.
turned_away = threading.Event()
overlapped: list[bool] = []


def slow_summary(messages: list[dict[str, str]]) -> str:
    """A summarizer that answers once the other racer has been turned away (or 10 s)."""
    overlapped.append(turned_away.wait(timeout=10))
    return "Orders 4001 to 4007 were late; each left Porto and is delivered tomorrow."


def race_folds(thread_id: int) -> tuple[list[Any], list[BaseException]]:
    """``fold_until_settled`` twice at once, each in its own thread and connection."""
    start = threading.Barrier(2)
    outcomes: list[Any] = []
    errors: list[BaseException] = []

    def fold() -> None:
        try:
            start.wait(timeout=10)
            folded = services.fold_until_settled(thread_id)
            if not folded:
                turned_away.set()
            outcomes.extend(folded)
        except BaseException as exc:  # noqa: B036 - any error is reported by the test
            errors.append(exc)
        finally:
            connections.close_all()

    racers = [threading.Thread(target=fold) for _ in range(2)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(timeout=30)
    if any(racer.is_alive() for racer in racers):
        raise AssertionError(f"a fold of thread {thread_id} hung for 30s")
    return outcomes, errors


def test_two_folds_of_one_span_at_once_leave_one_summary(settings: Any) -> None:
    settings.AGENTMEMORY = {
        "SUMMARIZER": {
            "BACKEND": "agentmemory.summarizers.callable.CallableSummarizer",
            "MODEL": "race-1",
            "OPTIONS": {"FUNCTION": f"{__name__}.slow_summary"},
        }
    }
    for round_ in range(5):
        thread = Thread.objects.create(title=f"race {round_}")
        services.append(thread, [message(number) for number in range(1, 21)])
        turned_away.clear()
        overlapped.clear()

        outcomes, errors = race_folds(thread.pk)

        assert errors == [], f"round {round_}: a fold raised {errors!r}"
        assert overlapped == [True], f"round {round_}: the racers did not overlap"
        # The thread's fold lease lets one fold in; the other stands aside without a
        # call, so the span is paid for once (the unique key stays the last line of
        # defence, tested in test_fold_laws with two writers past the lease).
        assert [(o.folded, o.decline) for o in outcomes] == [(True, None)], f"round {round_}"
        rows = summaries(thread)
        assert [row.pk for row in rows] == [outcomes[0].summary.pk]
        assert rows[0].summary_key == "msg-summary-1-7"
        ledger = SummarizerCall.objects.filter(thread=thread)
        assert list(ledger.values_list("outcome", "error_class")) == [
            (CallOutcome.FOLDED, ""),
        ], f"round {round_}"
        assert Thread.objects.get(pk=thread.pk).fold_lease_until is None


# ---------------------------------------------------------------- 3. broker outage


def test_append_survives_a_broker_outage_and_sweep_recovers(
    start_worker: Callable[..., Worker],
    broker: Broker,
    use_memory_settings: Callable[..., None],
    caplog: pytest.LogCaptureFixture,
) -> None:
    memory = memory_settings(OFFLINE)
    use_memory_settings(memory)
    worker = start_worker(memory)
    thread = Thread.objects.create(title="outage")
    # A process that was publishing before Redis went away: its pooled connection dies.
    first = services.enqueue_fold(thread.pk)
    assert first and len(broker.published) == 1
    # Done before the outage: a task still queued would keep the appends below from
    # sending (one chain per thread), and the outage would then go unseen.
    broker.result(first, timeout=30)
    assert Thread.objects.get(pk=thread.pk).fold_queued_until is None

    broker.link.cut()
    # Once the pooled connection is gone, kombu retries connecting for
    # broker_connection_timeout (4 s) plus its 2 s retry interval: an append that
    # enqueues during an outage waits that long (retry=False covers only the publish).
    bound = broker.app.conf.broker_connection_timeout + 4
    with caplog.at_level("WARNING", logger="agentmemory"):
        for number in range(1, 22):
            started = time.monotonic()
            services.append(thread, message(number))
            elapsed = time.monotonic() - started
            assert elapsed < bound, f"append {number} took {elapsed:.1f}s with the broker down"
    assert MemoryEntry.objects.filter(thread=thread).count() == 21
    assert len(broker.published) == 1
    lost = [
        record for record in caplog.records
        if f"could not enqueue the fold of thread {thread.pk}" in record.getMessage()
    ]  # fmt: skip
    # Two appends made a fold due; after the first failure this process stops trying
    # for a while (one warning), so the second append does not wait on the broker too.
    assert [record.levelname for record in lost] == ["WARNING"], lost
    assert services.fold_due(thread)
    assert summaries(thread) == []

    broker.link.restore()
    assert services.sweep() == [thread.pk]
    assert len(broker.published) == 2
    wait_until(lambda: summaries(thread), 30, "the swept fold to be done", worker)
    assert not services.fold_due(thread)
    assert services.sweep() == []


# ---------------------------------------------------------------- 4. a worker killed mid-fold


def kill_a_fold_in_flight(
    start_worker: Callable[..., Worker],
    openai_server: OpenAIServer,
    use_memory_settings: Callable[..., None],
    kill: Callable[[Worker], None],
    *,
    title: str,
    transport_options: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], Worker, Thread]:
    """Start a worker whose summarizer's first call hangs, append the 20 messages that
    make a fold due, and ``kill`` the worker (or a part of it) once it is inside that call.

    Asserts what the killed attempt leaves: no summary, and the call's reservation in the
    ledger (the call was made, so it stays counted at its estimate). Returns the settings,
    the worker and the thread (titled ``title``)."""
    memory = memory_settings(openai_summarizer(openai_server, timeout=10.0))
    use_memory_settings(memory)
    openai_server.delay(30.0)  # the first call is in flight until the kill
    worker = start_worker(memory, transport_options=transport_options)
    thread = Thread.objects.create(title=title)

    append_messages(thread, range(1, 21))
    openai_server.wait_for_requests(1, timeout=30)
    kill(worker)

    assert summaries(thread) == []
    outcomes = SummarizerCall.objects.filter(thread=thread).values_list("outcome", flat=True)
    assert list(outcomes) == [CallOutcome.RESERVED]
    return memory, worker, thread


def test_a_worker_killed_mid_fold_leaves_nothing_and_the_fold_is_redelivered(
    start_worker: Callable[..., Worker],
    broker: Broker,
    openai_server: OpenAIServer,
    use_memory_settings: Callable[..., None],
) -> None:
    # A message unacked for 3 s is redelivered; workers look every second. (The kill
    # comes well within those 3 s, so the first worker never redelivers to itself.)
    transport = {"visibility_timeout": 3, "unacked_restore_interval": 1,
                 "unacked_restore_throttle": 1}  # fmt: skip
    memory, _, thread = kill_a_fold_in_flight(
        start_worker, openai_server, use_memory_settings, Worker.kill,
        title="killed", transport_options=transport,
    )
    assert len(broker.published) == 1
    assert not MemoryEntry.objects.filter(thread=thread, covered_by__isnull=False).exists()
    assert broker.redis.hlen("unacked") == 1, "acks_late: the killed fold stays unacknowledged"

    worker = start_worker(memory, transport_options=transport)
    wait_until(lambda: summaries(thread), 30, "the redelivered fold", worker)
    assert len(openai_server.chat_requests) == 2
    assert services.sweep() == [], "a fold is still due after the redelivered fold"
    settled(broker, worker)
    assert len(summaries(thread)) == 1
    # The redelivery that took the lease over settled the killed call: its estimate kept
    # as its cost, the reason said; it numbered its own call the span's second attempt.
    killed, folded = SummarizerCall.objects.filter(thread=thread).order_by("pk")
    assert (killed.outcome, killed.attempt, killed.error_class) == (
        CallOutcome.KILLED, 1, "AttemptDied")
    assert "took the lease over" in killed.error_message
    assert killed.prompt_tokens is None and killed.estimated_tokens
    assert (folded.outcome, folded.attempt) == (CallOutcome.FOLDED, 2)
    charged = SummarizerCall.objects.filter(pk=killed.pk).charged_tokens()
    assert charged == killed.estimated_tokens, "the killed call is not counted at its estimate"


@pytest.mark.skipif(
    not Path("/proc/self/task").exists(), reason="finds the pool processes in /proc (Linux)"
)
def test_a_pool_process_killed_mid_fold_is_requeued_by_its_worker(
    start_worker: Callable[..., Worker],
    broker: Broker,
    openai_server: OpenAIServer,
    use_memory_settings: Callable[..., None],
) -> None:
    """reject_on_worker_lost: the surviving main process requeues what its child ran."""
    # The default visibility timeout (an hour): no redelivery but the worker's requeue.
    _, worker, thread = kill_a_fold_in_flight(
        start_worker, openai_server, use_memory_settings, Worker.kill_pool, title="pool killed"
    )

    wait_until(lambda: summaries(thread), 30, "the requeued fold", worker)
    assert len(openai_server.chat_requests) == 2
    settled(broker, worker)
    assert len(summaries(thread)) == 1
    assert "WorkerLostError" in worker.log()
    ledger = SummarizerCall.objects.filter(thread=thread).order_by("pk")
    assert list(ledger.values_list("outcome", "attempt")) == [
        (CallOutcome.KILLED, 1), (CallOutcome.FOLDED, 2)
    ]


# ---------------------------------------------------------------- 5. a failing summarizer

RETRY_MAX = 2


@pytest.mark.parametrize(
    "failure",
    [Failure(500), Failure(429), "timeout"],
    ids=["http-500", "http-429", "timeout"],
)
def test_a_failing_summarizer_retries_boundedly_then_declines(
    failure: Failure | str,
    start_worker: Callable[..., Worker],
    broker: Broker,
    openai_server: OpenAIServer,
    use_memory_settings: Callable[..., None],
) -> None:
    memory = memory_settings(openai_summarizer(openai_server, timeout=1.0),
                             FOLD_RETRY_MAX=RETRY_MAX)  # fmt: skip
    use_memory_settings(memory)
    attempts = RETRY_MAX + 1
    for _ in range(attempts):
        if isinstance(failure, Failure):
            openai_server.script(failure)
        else:
            openai_server.delay(3.0)  # longer than the client's 1 s timeout
    # A further call would get the default reply and fold: the bound is asserted by
    # there being no summary at the end.
    worker = start_worker(memory)
    thread = Thread.objects.create(title=f"failing {failure}")

    append_messages(thread, range(1, 21))
    assert len(broker.published) == 1
    result = broker.result(broker.published[0], timeout=60)
    assert result == {"thread_id": thread.pk, "folded": [],
                      "declined": [DeclineReason.SUMMARIZER_FAILED]}

    ledger = SummarizerCall.objects.filter(thread=thread).order_by("attempt")
    assert list(ledger.values_list("attempt", "outcome", "error_class")) == [
        (attempt, CallOutcome.FAILED, "TransientSummarizerError")
        for attempt in range(1, attempts + 1)
    ]
    assert len(openai_server.chat_requests) == attempts
    assert summaries(thread) == []
    recalled = services.recall(thread, 4000)
    assert recalled.summaries_used == []
    assert [m.kind for m in recalled.messages] == [EntryKind.MESSAGE] * 20
    # Law 4(b): said out loud, once, by the worker that gave up.
    assert worker.log().count("failed during a recall-fold") == 1, worker.log_tail()
    if isinstance(failure, Failure):
        # Celery's retry lines name the redacted error, never the provider's text.
        assert failure.body()["error"]["message"] not in worker.log()
        assert worker.log().count(f"HTTP {failure.status}") >= RETRY_MAX + 1, worker.log_tail()


# ---------------------------------------------------------------- 6. a poison fold (issue 13)


def test_a_fold_that_kills_its_worker_is_parked_after_max_deaths(
    start_worker: Callable[..., Worker],
    broker: Broker,
    use_memory_settings: Callable[..., None],
) -> None:
    """Each delivery dies in the call; its redelivery (same task id) finds the lease it
    left and counts a death; the FOLD_MAX_DEATHS-th is parked and acknowledged."""
    poison = {"BACKEND": "agentmemory.summarizers.callable.CallableSummarizer",
              "MODEL": "poison", "OPTIONS": {"FUNCTION": "tests.helpers.kills_its_process"}}
    memory = memory_settings(poison, FOLD_MAX_DEATHS=2, FOLD_PARK_BACKOFF=600)
    use_memory_settings(memory)
    worker = start_worker(memory)
    thread = Thread.objects.create(title="poison")

    append_messages(thread, range(1, 21))
    assert len(broker.published) == 1
    wait_until(
        lambda: Thread.objects.get(pk=thread.pk).fold_parked_until, 60,
        "the poison fold to be parked", worker,
    )
    settled(broker, worker)  # acknowledged: no more redeliveries
    thread.refresh_from_db()
    assert thread.fold_deaths == 2 and thread.fold_lease_owner == ""
    # Every killed attempt is settled as killed (the first by the delivery that took its
    # lease over, the second by the one that parked the fold), numbered, at its estimate.
    ledger = SummarizerCall.objects.filter(thread=thread).order_by("pk")
    assert list(ledger.values_list("outcome", "attempt", "error_class")) == [
        (CallOutcome.KILLED, 1, "AttemptDied"), (CallOutcome.KILLED, 2, "AttemptDied")
    ]
    assert all(call.estimated_tokens and call.prompt_tokens is None for call in ledger)
    # The delivery that parked it says so.
    assert broker.result(broker.published[0], timeout=30) == {
        "thread_id": thread.pk, "folded": [], "declined": ["fold-parked"]}
    assert worker.log().count("WorkerLostError") >= 2, worker.log_tail()
    assert "is parked until" in worker.log(), worker.log_tail()
    # Parked: appends send nothing and the sweep waits out the back-off.
    services.append(thread, message(21))
    assert len(broker.published) == 1
    assert services.sweep() == []
    assert summaries(thread) == []


# ---------------------------------------------------------------- 7. retry storms (issue 13)


def test_appends_during_a_provider_outage_start_one_retry_chain(
    start_worker: Callable[..., Worker],
    broker: Broker,
    openai_server: OpenAIServer,
    use_memory_settings: Callable[..., None],
) -> None:
    memory = memory_settings(openai_summarizer(openai_server, timeout=5.0),
                             FOLD_RETRY_MAX=RETRY_MAX)  # fmt: skip
    use_memory_settings(memory)
    attempts = RETRY_MAX + 1
    # Each failing call takes a second, so the appends below land inside the chain.
    openai_server.script(*[Delay(1.0, Failure(500)) for _ in range(attempts)])
    start_worker(memory)
    thread = Thread.objects.create(title="storm")

    append_messages(thread, range(1, 21))
    openai_server.wait_for_requests(1, timeout=30)
    for number in range(21, 41):  # every one of these finds a fold due
        services.append(thread, message(number))
        assert services.fold_due(thread)
    assert len(openai_server.chat_requests) < attempts, "the chain ended before the appends"
    result = broker.result(broker.published[0], timeout=60)
    assert result["declined"] == [DeclineReason.SUMMARIZER_FAILED]
    assert len(broker.published) == 1, "an append started a second retry chain"
    assert len(openai_server.chat_requests) == attempts


def test_a_rate_limited_fold_retries_no_sooner_than_retry_after(
    start_worker: Callable[..., Worker],
    broker: Broker,
    openai_server: OpenAIServer,
    use_memory_settings: Callable[..., None],
) -> None:
    wait = 2.0
    memory = memory_settings(openai_summarizer(openai_server, timeout=5.0))  # backoff 0.2 s
    use_memory_settings(memory)
    openai_server.script(Failure(429, headers={"Retry-After": str(int(wait))}))
    worker = start_worker(memory)
    thread = Thread.objects.create(title="rate limited")

    append_messages(thread, range(1, 21))
    openai_server.wait_for_requests(1, timeout=30)
    refused_at = time.monotonic()
    openai_server.wait_for_requests(2, timeout=30)
    retried_after = time.monotonic() - refused_at
    assert retried_after >= wait - 0.1, f"retried after {retried_after:.2f}s"
    wait_until(lambda: summaries(thread), 30, "the retried fold", worker)
    assert len(openai_server.chat_requests) == 2
