"""Sending a task with a bounded wait: a hung broker or result backend costs a request
at most AGENTMEMORY['BROKER_TIMEOUT'] seconds, never an unbounded ``recv``."""

from __future__ import annotations

import threading
from typing import Any

from agentmemory.exceptions import BrokerTimeoutError


def send_within(task: Any, args: tuple[Any, ...], options: dict[str, Any], timeout: float) -> str:
    """``task.apply_async(args, **options)`` that returns its id within ``timeout`` seconds
    or raises: `BrokerTimeoutError` when no answer came, else the send's own error.

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
