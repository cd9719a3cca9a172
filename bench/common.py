"""What the benchmarks share: Django on a scratch database, timing, Markdown, the machine.

A script in ``bench/`` does ``sys.path.insert(0, <repo>)`` and then
``from bench.common import ...``. Django is configured from ``tests.settings``;
PostgreSQL is reached with the usual ``PG*`` variables (host, port, user, password),
and a benchmark's database is created and dropped by the benchmark itself. SQLite
uses a file in a temporary directory, removed afterwards.
"""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: The peer libraries' interpreter (``make bench-peers``), never the project's.
PEERS_PYTHON = Path(os.environ.get("BENCH_PEERS_PYTHON", ROOT / ".venv-peers" / "bin" / "python"))

#: A summarizer that answers at once with a fixed text: the library's time, no model's.
INSTANT_SUMMARIZER: dict[str, Any] = {
    "BACKEND": "agentmemory.summarizers.callable.CallableSummarizer",
    "MODEL": "bench-instant",
    "OPTIONS": {"FUNCTION": "bench.common.instant_summary"},
}
INSTANT_TEXT = "The user chased late orders; the agent looked them up and answered."


def instant_summary(messages: Any) -> str:
    del messages
    return INSTANT_TEXT


# ------------------------------------------------------------------ database


@dataclass
class Database:
    """A scratch database: ``engine`` is ``sqlite`` or ``postgres``, ``name`` its
    PostgreSQL name or SQLite file."""

    engine: str
    name: str
    scratch_dir: str = ""

    @classmethod
    def create(cls, engine: str, pg_name: str = "agentmemory_bench") -> Database:
        if engine == "postgres":
            with postgres_admin() as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{pg_name}"')
                admin.execute(f'CREATE DATABASE "{pg_name}"')
            return cls(engine, pg_name)
        scratch = tempfile.mkdtemp(prefix="agentmemory-bench-")
        return cls(engine, os.path.join(scratch, "bench.sqlite3"), scratch)

    def drop(self) -> None:
        from django.db import connections

        connections.close_all()
        if self.engine == "postgres":
            with postgres_admin() as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{self.name}"')
        else:
            shutil.rmtree(self.scratch_dir, ignore_errors=True)


def postgres_admin() -> Any:
    """An autocommit connection to the ``postgres`` database, for CREATE/DROP DATABASE."""
    import psycopg

    return psycopg.connect(
        host=os.environ.get("PGHOST", "127.0.0.1"),
        port=os.environ.get("PGPORT", "5432"),
        user=os.environ.get("PGUSER", "postgres"),
        password=os.environ.get("PGPASSWORD") or None,
        dbname="postgres",
        autocommit=True,
    )


def setup_django(
    engine: str, name: str, agentmemory: dict[str, Any] | None = None, *, migrate: bool = False
) -> None:
    """Configure Django from tests.settings on database ``name``; optionally migrate it."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    os.environ["AGENTMEMORY_TEST_DB"] = engine

    import django
    from django.conf import settings

    settings.DATABASES["default"]["NAME"] = name
    settings.AGENTMEMORY = dict(agentmemory or {})
    django.setup()
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)


def describe_engine() -> str:
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            return f"PostgreSQL {cursor.fetchone()[0].split()[0]}"
    import sqlite3

    return f"SQLite {sqlite3.sqlite_version} (file)"


# ------------------------------------------------------------------ statistics


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` 0.95 for p95)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


# ------------------------------------------------------------------ Markdown


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], align: str = "") -> str:
    """A Markdown table. ``align`` has one letter a column, ``l`` or ``r`` (default: the
    first column left, the others right)."""
    align = align or "l" + "r" * (len(headers) - 1)
    rule = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(rule) + " |"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def write_section(page: Path, block: str, start: str, end: str) -> None:
    """Put ``block`` (opening with the marker ``start``, closing with ``end``) in ``page``:
    in place of the block between those markers, or at the page's end."""
    text = page.read_text()
    if start in text:
        before, rest = text.split(start, 1)
        text = before + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    page.write_text(text)


#: Where the page's charts go, beside the page (docs/img/ for docs/benchmarks.md).
IMAGES = "img"


def image(name: str, alt: str) -> str:
    """A Markdown image of the chart ``name`` (bench/charts.py writes it to IMAGES/)."""
    return f"![{alt}]({IMAGES}/{name})"


def number(value: float | None, digits: int = 0) -> str:
    """``1,234`` or ``1,234.5``; an em dash for None."""
    if value is None:
        return "—"
    return f"{value:,.{digits}f}"


# ------------------------------------------------------------------ the machine


def machine() -> dict[str, str]:
    """What the figures were measured on: cores, memory, CPU model, OS, Python."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    except OSError:
        pass
    return {
        "nproc": str(len(os.sched_getaffinity(0))),
        "memory": memory,
        "cpu": cpu,
        "os": f"{platform.system()} {platform.release()} {platform.machine()}",
        "python": platform.python_version(),
    }


def each_engine_apart(script: Path, engines: Sequence[str], pg_name: str, label: str,
                      *extra: str) -> dict[str, Any]:
    """``script --db ENGINE --pg-name PG_NAME --out FILE [extra]`` for each engine, one
    after the other, each in a fresh interpreter (a Django of its own); the JSON each
    wrote, by engine, and the seconds it all took."""
    began = time.perf_counter()
    results: dict[str, Any] = {}
    for engine in engines:
        print(f"[bench] {label} on {engine}", file=sys.stderr, flush=True)
        handle, out = tempfile.mkstemp(suffix=".json")
        os.close(handle)
        try:
            subprocess.run([sys.executable, str(script), "--db", engine, "--pg-name", pg_name,
                            "--out", out, *extra], check=True, cwd=ROOT)
            results[engine] = json.loads(Path(out).read_text())
        finally:
            os.unlink(out)
    return {"engines": results, "elapsed_s": time.perf_counter() - began}


def timed(call: Callable[[], Any]) -> float:
    """Seconds one call took (wall clock)."""
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


# ------------------------------------------------------------------ the loopback summarizer


def loopback_server(summary: str | None = None) -> Any:
    """The test suite's OpenAI-compatible server on 127.0.0.1, answering every chat
    completion with ``summary`` (default :data:`bench.conversation.STUB_SUMMARY`).

    Usage is reported as a provider would: the prompt counted exactly (o200k_base, the
    text of every message sent) and the completion's fixed count. ``totals()`` gives the
    calls and the prompt tokens received since the last ``reset()``. Use it as a context
    manager.
    """
    import threading

    from bench.conversation import STUB_SUMMARY, count_tokens
    from tests.openai_server import OpenAIServer, Reply

    answer = STUB_SUMMARY if summary is None else summary
    completion_tokens = count_tokens(answer)

    def text_of(content: Any) -> str:
        if isinstance(content, list):  # content parts
            return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
        return str(content or "")

    class CountingServer(OpenAIServer):
        def __init__(self) -> None:
            super().__init__()
            self._counted: list[int] = []
            self._counted_lock = threading.Lock()

        def _completion(self, reply: Any, body: Any) -> dict[str, Any]:
            messages = body.get("messages", []) if isinstance(body, dict) else []
            prompt = sum(count_tokens(text_of(message.get("content"))) for message in messages)
            with self._counted_lock:
                self._counted.append(prompt)
            fixed = Reply(answer, prompt_tokens=prompt, completion_tokens=completion_tokens)
            return super()._completion(fixed, body)

        def reset(self) -> None:
            super().reset()
            with self._counted_lock:
                self._counted.clear()

        def totals(self) -> dict[str, int]:
            with self._counted_lock:
                counted = list(self._counted)
            return {
                "calls": len(counted),
                "prompt_tokens": sum(counted),
                "completion_tokens": completion_tokens * len(counted),
                "requests": len(self.requests),
            }

    return CountingServer()


# ------------------------------------------------------------------ the peer libraries


def run_peer(library: str, base_url: str, room: int, *extra: str) -> dict[str, Any]:
    """``bench/peers/run.py`` for one library in ``.venv-peers`` at ``room``, aimed at the
    loopback server at ``base_url``; its JSON, or ``{"error": why}``. ``extra``: more of
    that script's options (``--workload``, ``--keep-tokens``)."""
    if not PEERS_PYTHON.exists():
        return {"error": f"{PEERS_PYTHON} is missing; run `make bench-peers`"}
    command = [str(PEERS_PYTHON), str(ROOT / "bench" / "peers" / "run.py"), "--library", library,
               "--base-url", base_url, "--budget", str(room), *extra]
    env = {**os.environ, "OPENAI_API_KEY": "sk-agentmemory-bench-loopback",
           "LANGSMITH_TRACING": "false", "LANGCHAIN_TRACING_V2": "false"}
    began = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT,
                              check=False, timeout=600)
    except subprocess.TimeoutExpired:
        return {"error": "did not finish in 600 s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        reason = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {done.returncode}: {reason}"}
    # The process's wall time: the library's imports and the server's counting on top.
    return {**json.loads(lines[-1]), "wall_s": time.perf_counter() - began}
