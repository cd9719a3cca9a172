"""Sending a task with a bounded wait: a hung broker or result backend costs one request
of a process at most AGENTMEMORY['BROKER_TIMEOUT'] seconds, never an unbounded ``recv``,
and the others in flight beside it at most `QUEUE_WAIT`."""

from __future__ import annotations

import threading
import time
from typing import Any

from agentmemory.exceptions import (
    AgentMemoryConfigurationError,
    BrokerBusyError,
    BrokerTimeoutError,
)

#: The name the background fold task is registered under (`agentmemory.tasks`). Senders
#: find the task by it, so nothing below the tasks imports them.
FOLD_TASK = "agentmemory.fold_thread"

# A broker outage costs one request its BROKER_TIMEOUT, not every request.
BROKER_BACKOFF_SECONDS = 30.0
#: How long a send waits for the one before it in this process: many times what a
#: reachable broker takes, so only an unanswered send makes the others give up.
QUEUE_WAIT = 0.25


class BrokerBackoff:
    """This process's sends: one at a time (`gate`), and none for BROKER_BACKOFF_SECONDS
    after the broker failed to answer."""

    def __init__(self) -> None:
        self.down_until = 0.0
        self.gate = threading.Lock()

    def is_down(self) -> bool:
        return time.monotonic() < self.down_until

    def failed(self) -> None:
        self.down_until = time.monotonic() + BROKER_BACKOFF_SECONDS

    def reset(self) -> None:
        self.down_until = 0.0


broker = BrokerBackoff()


def registered_task(name: str) -> Any:
    """The task ``name`` of the current Celery app. agentmemory's app config imports
    `agentmemory.tasks` wherever Celery is installed, so its tasks are registered with
    every app; a project whose Celery app is not the current one gets a clear error."""
    from celery import current_app

    try:
        return current_app.tasks[name]
    except KeyError:
        raise AgentMemoryConfigurationError(
            f"The Celery app {current_app.main!r} has no task {name!r}: make the project's "
            "Celery app the current one (Celery(...) in the project's celery.py, imported "
            "by its __init__.py) before agentmemory sends background folds."
        ) from None


def send_within(
    task: Any, args: tuple[Any, ...], options: dict[str, Any], timeout: float,
    *, probe: bool = False,
) -> str:
    """``task.apply_async(args, **options)`` that returns its id within ``timeout`` seconds
    or raises: `BrokerTimeoutError` when no answer came, else the send's own error.

    One send at a time per process: a send waits at most `QUEUE_WAIT` for the one
    before it, and raises `BrokerTimeoutError` when that one is still unanswered, or
    failed meanwhile and opened the back-off (unless ``probe``: the sweep always tries).
    So a hung broker makes one request wait ``timeout``, not every request in flight. A
    failure opens `broker`'s back-off before the next send may start; a success ends it.

    The send runs on its own broker connection with that connect and socket timeout, in
    a daemon thread the caller stops waiting for at the deadline; what the thread still
    waits on afterwards (a result backend's subscription) is bounded by Celery's own
    settings (``redis_socket_timeout``). An eager app runs the task here, in this thread.
    """
    # The sending thread has no current app of its own: resolve the task here.
    task = task._get_current_object() if hasattr(task, "_get_current_object") else task
    app = task.app
    if app.conf.task_always_eager:
        return str(task.apply_async(args, **options).id)
    if not broker.gate.acquire(timeout=min(QUEUE_WAIT, timeout)):
        raise BrokerBusyError(
            f"another send of this process has waited on the broker for over {QUEUE_WAIT} s."
        )
    try:
        if broker.is_down() and not probe:
            raise BrokerBusyError("the broker failed to answer moments ago (backing off).")
        try:
            task_id = _send(app, task, args, options, timeout)
        except BaseException:
            broker.failed()  # before the gate opens: the next in line backs off
            raise
    finally:
        broker.gate.release()
    broker.reset()
    return task_id


def _send(app: Any, task: Any, args: tuple[Any, ...], options: dict[str, Any],
          timeout: float) -> str:
    outcome: dict[str, Any] = {}
    transport = {"socket_timeout": timeout, "socket_connect_timeout": timeout,
                 "max_retries": 0}  # fmt: skip

    def send() -> None:
        try:
            with app.connection_for_write(
                connect_timeout=timeout, transport_options=transport
            ) as connection:
                outcome["id"] = str(task.apply_async(args, connection=connection, **options).id)
        except BaseException as exc:  # handed to the caller, who decides
            outcome["error"] = exc

    sender = threading.Thread(target=send, name="agentmemory-enqueue", daemon=True)
    sender.start()
    sender.join(timeout)
    if sender.is_alive():
        raise BrokerTimeoutError(
            f"the broker did not answer within {timeout} s "
            "(AGENTMEMORY['BROKER_TIMEOUT'])."
        )
    if "error" in outcome:
        raise outcome["error"]
    return str(outcome["id"])
