"""A beat schedule for the periodic tasks. Merge it into ``CELERY_BEAT_SCHEDULE``.

    from agentmemory.schedules import beat_schedule
    CELERY_BEAT_SCHEDULE = {**beat_schedule(queue="maintenance")}

``purge_expired`` hourly keeps expired rows from piling up (they are already
invisible to recall); ``sweep`` every five minutes re-enqueues folds that a broker
outage or a killed worker lost.
"""

from __future__ import annotations

from typing import Any


def beat_schedule(
    *, purge_every: float = 3600.0, sweep_every: float = 300.0, queue: str | None = None
) -> dict[str, dict[str, Any]]:
    options = {"queue": queue} if queue else {}
    return {
        "agentmemory-purge-expired": {
            "task": "agentmemory.purge_expired",
            "schedule": purge_every,
            "options": options,
        },
        "agentmemory-sweep": {
            "task": "agentmemory.sweep",
            "schedule": sweep_every,
            "options": options,
        },
    }
