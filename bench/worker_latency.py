"""Background-fold latency with a real Celery worker, Redis and PostgreSQL.

Measures, for each run, the time from the start of the ``services.append`` that makes
a fold due (RECALL_MODE "background": the append enqueues ``fold_thread`` on commit) to
the summary row being visible to another connection, and prints a Markdown table.

    .venv/bin/python bench/worker_latency.py [--runs 20]

Needs PostgreSQL (``PGHOST``/``PGPORT``/``PGUSER``/``PGPASSWORD``; a scratch database
``test_<PGDATABASE>``, default ``test_agentmemory_bench``, is created, migrated and
dropped) and Redis (Redis DB 13 by default, flushed before and after;
``AGENTMEMORY_BENCH_BROKER`` names another). One worker runs
``celery -A tests.celery_app worker --pool=prefork --concurrency=2`` on its own queue.
Two summarizers are timed: the offline one (no network), and the OpenAI backend
against the loopback OpenAI-compatible test server (``tests/openai_server.py``), which
answers at once: the figures are the library's and the queue's overhead, not a model's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
QUEUE = f"agentmemory-bench-{os.getpid()}"
BROKER = os.environ.get("AGENTMEMORY_BENCH_BROKER", "redis://127.0.0.1:6379/13")
POLL_SECONDS = 0.002
WARMUP_RUNS = 2


def configure(memory: dict[str, Any]) -> None:
    """The environment tests/settings.py reads, for this process and the worker alike."""
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "tests.settings",
            "AGENTMEMORY_TEST_DB": "postgres",
            "AGENTMEMORY_TEST_CELERY": "worker",
            "AGENTMEMORY_TEST_BROKER": BROKER,
            "AGENTMEMORY_TEST_SETTINGS": json.dumps(memory),
        }
    )
    os.environ.setdefault("PGDATABASE", "agentmemory_bench")


def memory_settings(summarizer: dict[str, Any]) -> dict[str, Any]:
    return {"RECALL_MODE": "background", "FOLD_QUEUE": QUEUE, "SUMMARIZER": summarizer}


def message(number: int) -> dict[str, str]:
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


@contextmanager
def worker(database: str, log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """One worker on ``QUEUE``, in its own process group, stopped (then killed) after."""
    env = {**os.environ, "PGDATABASE": database, "PYTHONPATH": str(REPO)}
    command = [
        sys.executable, "-m", "celery", "-A", "tests.celery_app", "worker",
        "--pool=prefork", "--concurrency=2", "-Q", QUEUE, "-n", f"bench-{os.getpid()}@%h",
        "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "info",
    ]  # fmt: skip
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while "ready." not in log_path.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the worker did not start; see {log_path}")
            time.sleep(0.05)
        yield process
    finally:
        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            try:
                os.killpg(process.pid, sig)
                process.wait(timeout=wait)
                break
            except ProcessLookupError:
                break
            except subprocess.TimeoutExpired:
                continue


def measure(runs: int) -> dict[str, list[float]]:
    """``runs`` threads, each folded once; the due append and its fold, in seconds."""
    from agentmemory import services
    from agentmemory.models import EntryKind, MemoryEntry, Thread

    timings: dict[str, list[float]] = {"append": [], "visible": []}
    for run in range(WARMUP_RUNS + runs):
        thread = Thread.objects.create(title=f"bench {run}")
        for number in range(1, 20):
            services.append(thread, message(number))
        summaries = MemoryEntry.objects.filter(thread=thread, kind=EntryKind.SUMMARY)
        started = time.perf_counter()
        services.append(thread, message(20))
        appended = time.perf_counter()
        deadline = appended + 60
        while not summaries.exists():
            if time.perf_counter() > deadline:
                raise SystemExit(f"run {run}: no summary within 60 s of the due append")
            time.sleep(POLL_SECONDS)
        visible = time.perf_counter()
        if run >= WARMUP_RUNS:
            timings["append"].append(appended - started)
            timings["visible"].append(visible - started)
    return timings


def p95(values: list[float]) -> float:
    """Nearest-rank 95th percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]


def row(label: str, values: list[float]) -> str:
    ms = [value * 1000 for value in values]
    cells = [statistics.median(ms), p95(ms), min(ms), max(ms)]
    return f"| {label} | " + " | ".join(f"{cell:.1f}" for cell in cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))

    from tests.openai_server import TEST_API_KEY, OpenAIServer, summarizer_settings

    server = OpenAIServer().start()
    os.environ["OPENAI_API_KEY"] = TEST_API_KEY
    summarizers = {
        "offline": {
            "BACKEND": "agentmemory.summarizers.offline.OfflineSummarizer",
            "MODEL": "offline-extractive-1",
        },
        "openai, loopback server": summarizer_settings(server.base_url)["SUMMARIZER"],
    }
    configure(memory_settings(summarizers["offline"]))

    import celery
    import django
    import redis

    django.setup()
    from django.db import connection
    from django.test import override_settings

    from tests.celery_app import app

    client = redis.Redis.from_url(BROKER)
    client.flushdb()
    app.set_current()
    original_name = connection.settings_dict["NAME"]
    database = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    results: dict[str, dict[str, list[float]]] = {}
    try:
        for label, summarizer in summarizers.items():
            memory = memory_settings(summarizer)
            os.environ["AGENTMEMORY_TEST_SETTINGS"] = json.dumps(memory)  # the worker's
            log_path = Path(tempfile.gettempdir()) / f"{QUEUE}.log"
            with override_settings(AGENTMEMORY=memory), worker(database, log_path):
                results[label] = measure(args.runs)
        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            postgres = cursor.fetchone()[0]
        redis_version = client.info("server")["redis_version"]
    finally:
        connection.creation.destroy_test_db(original_name, verbosity=0)
        client.flushdb()
        server.stop()

    print(
        f"Background fold latency: {args.runs} runs per summarizer ({WARMUP_RUNS} warm-up "
        "runs not counted), one worker (prefork, 2 processes), milliseconds.\n"
    )
    print("| measure | median | p95 | min | max |")
    print("|---|---:|---:|---:|---:|")
    for label, timings in results.items():
        print(row(f"{label}: the due append returns", timings["append"]))
        print(row(f"{label}: due append to summary visible", timings["visible"]))
    print(
        f"\nMachine: {os.cpu_count()} CPUs (nproc {len(os.sched_getaffinity(0))}), "
        f"{platform.system()} {platform.machine()}; Python {platform.python_version()}, "
        f"Django {django.get_version()}, Celery {celery.__version__}, "
        f"PostgreSQL {postgres}, Redis {redis_version}. Polled every "
        f"{POLL_SECONDS * 1000:.0f} ms; p95 is nearest-rank."
    )


if __name__ == "__main__":
    main()
