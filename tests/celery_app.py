"""The Celery app of the real-worker tests (``tests/test_worker.py``) and the benchmark.

Configured from the Django settings namespace ``CELERY`` (``tests/settings.py``: broker
and result backend on Redis DB 14; a worker subprocess gets eager mode off from its
environment). A worker runs it with::

    celery -A tests.celery_app worker --pool=prefork --concurrency=2 -Q <queue> \
        --without-gossip --without-mingle --without-heartbeat

It is not made the current app on import, so importing it changes nothing for other
tests: the worker makes it current itself. A test process publishes through an app of
its own from :func:`make_app` (``services.enqueue_fold`` sends the shared task through
the current app), made current with ``set_current()`` for as long as it needs it.
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")


def make_app(main: str = "agentmemory_tests", **conf: Any) -> Celery:
    """An app configured from Django settings (namespace ``CELERY``), then from ``conf``."""
    new = Celery(main, set_as_current=False)
    new.config_from_object("django.conf:settings", namespace="CELERY")
    if conf:
        new.conf.update(conf)
    new.autodiscover_tasks()
    return new


app = make_app()
