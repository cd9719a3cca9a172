"""The REST API under load: appends per second and recall latency, over real HTTP.

The example project on PostgreSQL (database ``agentmemory_bench_api``, created and
dropped here), served by gunicorn with 2 sync workers on 127.0.0.1; a thread pool of
``requests`` sessions on the same machine drives it, every phase bounded in requests
and in seconds. Phases:

1. single appends: one message a request, each client writing its own thread;
2. batch appends: 50 messages a request into ONE thread, until it holds 10,000
   entries (appends to one thread queue on its row lock, by design);
3. recall on that thread, background mode (load, budget, format: the read path);
4. recall on that thread, inline mode (the summarize stage runs: each call may fold).

Prints a Markdown table with the machine and the versions. Needs ``pip install
-e '.[bench]'`` (gunicorn, requests) and a reachable PostgreSQL (``PG*`` variables)::

    .venv/bin/python bench/api.py [--clients 8] [--seconds 25]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import machine, median, number, percentile, postgres_admin, table  # noqa: E402

DATABASE = "agentmemory_bench_api"
BATCH = 50
THREAD_ENTRIES = 10_000


@dataclass
class Phase:
    name: str
    requests: int = 0
    entries: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)

    def row(self, clients: int) -> list[str]:
        ms = [latency * 1000 for latency in self.latencies]
        return [
            self.name,
            str(clients),
            number(self.requests),
            number(self.entries) if self.entries else "—",
            number(self.seconds, 1),
            number(self.requests / self.seconds, 1),
            number(self.entries / self.seconds) if self.entries else "—",
            number(median(ms), 1),
            number(percentile(ms, 0.95), 1),
        ]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def drive(
    phase: Phase,
    work: Callable[[Any, int], tuple[int, int]],
    *,
    clients: int,
    limit: int,
    seconds: float,
) -> Phase:
    """Run ``work(session, n)`` for n = 0.. on ``clients`` threads until ``limit`` calls
    or ``seconds`` have passed; ``work`` returns (status, entries written)."""
    import requests

    lock = threading.Lock()
    next_call = [0]
    deadline = time.monotonic() + seconds

    def client() -> None:
        session = requests.Session()
        session.trust_env = False  # loopback only: no proxy from the environment
        while time.monotonic() < deadline:
            with lock:
                n = next_call[0]
                if n >= limit:
                    return
                next_call[0] += 1
            started = time.perf_counter()
            status, written = work(session, n)
            elapsed = time.perf_counter() - started
            with lock:
                phase.requests += 1
                phase.latencies.append(elapsed)
                phase.statuses[status] += 1
                if 200 <= status < 300:
                    phase.entries += written

    started = time.perf_counter()
    pool = [threading.Thread(target=client) for _ in range(clients)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    phase.seconds = time.perf_counter() - started
    return phase


def message(n: int) -> list[dict[str, Any]]:
    """Turn ``n`` as four messages: the ask, a tool call, its result, the answer."""
    call = f"call-{n}"
    return [
        {"role": "user", "content": f"Where is order {n}? It was placed last week and the "
         "parcel never arrived; please check the carrier as well."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": call, "name": "lookup_order", "arguments": json.dumps({"id": n})}]},
        {"role": "tool", "tool_name": "lookup_order", "tool_call_id": call,
         "content": json.dumps({"id": n, "status": "in transit", "carrier": "DHL"})},
        {"role": "assistant", "content": f"Order {n} is in transit with DHL and should "
         "arrive on Friday."},
    ]


def manage(env: dict[str, str], *args: str) -> str:
    """The last line a management command printed (``shell`` prints a banner first)."""
    result = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env,
                            check=True, capture_output=True, text=True)
    lines = result.stdout.strip().splitlines()
    return lines[-1] if lines else ""


def versions(env: dict[str, str]) -> dict[str, str]:
    code = (
        "import django, rest_framework, psycopg, gunicorn, requests, agentmemory\n"
        "from django.db import connection\n"
        "with connection.cursor() as c:\n"
        "    c.execute('SHOW server_version'); pg = c.fetchone()[0].split()[0]\n"
        "import json\n"
        "print(json.dumps({'agentmemory': agentmemory.__version__, 'Django': django.__version__,\n"
        "       'DRF': rest_framework.VERSION, 'psycopg': psycopg.__version__,\n"
        "       'gunicorn': gunicorn.__version__, 'requests': requests.__version__,\n"
        "       'PostgreSQL': pg}))\n"
    )
    return dict(json.loads(manage(env, "shell", "-c", code)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8, help="client threads (default 8)")
    parser.add_argument("--seconds", type=float, default=25.0,
                        help="time bound of each phase (default 25)")
    parser.add_argument("--singles", type=int, default=3000, help="single appends at most")
    parser.add_argument("--recalls", type=int, default=600, help="recalls per mode at most")
    args = parser.parse_args()
    try:
        import gunicorn  # noqa: F401
        import requests  # noqa: F401
    except ImportError as exc:
        raise SystemExit(f"{exc.name} is missing: pip install -e '.[bench]'") from exc

    load_before = os.getloadavg()[0]
    with postgres_admin() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{DATABASE}"')
        admin.execute(f'CREATE DATABASE "{DATABASE}"')
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "example_project.settings",
        "AGENTMEMORY_DB": "postgres",
        "PGDATABASE": DATABASE,
        "DJANGO_DEBUG": "0",
        "CELERY_BROKER_URL": "",
        "AGENTMEMORY_RECALL_MODE": "inline",
        "PYTHONPATH": str(ROOT),
    }
    env.pop("AGENTMEMORY_OPENAI_MODEL", None)  # the offline summarizer: no network
    server: subprocess.Popen[bytes] | None = None
    try:
        manage(env, "migrate", "--noinput", "-v", "0")
        token = manage(env, "shell", "-c", (
            "from django.contrib.auth import get_user_model\n"
            "from rest_framework.authtoken.models import Token\n"
            "user = get_user_model().objects.create_user('bench')\n"
            "print(Token.objects.create(user=user).key)\n"
        )).strip()
        stack = versions(env)
        port = free_port()
        server = subprocess.Popen(
            [str(Path(sys.executable).with_name("gunicorn")), "example_project.wsgi:application",
             "--bind", f"127.0.0.1:{port}", "--workers", "2", "--worker-class", "sync",
             "--timeout", "60", "--log-level", "warning"],
            cwd=ROOT, env=env, start_new_session=True,
        )
        base = f"http://127.0.0.1:{port}/api/memory/"
        headers = {"Authorization": f"Token {token}"}
        wait_until_up(base, headers, server)

        def post(session: Any, path: str, body: Any) -> Any:
            return session.post(base + path, json=body, headers=headers, timeout=60)

        def create_thread(session: Any, title: str) -> int:
            response = post(session, "threads/", {"title": title})
            response.raise_for_status()
            return int(response.json()["id"])

        import requests

        setup = requests.Session()
        setup.trust_env = False
        for _ in range(10):  # warm both workers: imports, the token counter, connections
            setup.get(base + "threads/", headers=headers, timeout=30).raise_for_status()
        own = [create_thread(setup, f"client {n}") for n in range(args.clients)]
        big = create_thread(setup, "10,000 entries")
        singles: list[dict[str, Any]] = [m for n in range(1, 101) for m in message(n)]
        assigned: dict[int, int] = {}
        assigning = threading.Lock()

        def single(session: Any, n: int) -> tuple[int, int]:
            with assigning:  # each client writes its own conversation
                thread = assigned.setdefault(id(session), own[len(assigned) % len(own)])
            response = post(session, f"threads/{thread}/entries/", singles[n % len(singles)])
            return response.status_code, 1

        batches: list[list[dict[str, Any]]] = []
        turns = [m for n in range(1, THREAD_ENTRIES // 4 + 1) for m in message(n)]
        for start in range(0, THREAD_ENTRIES, BATCH):
            batches.append(turns[start:start + BATCH])

        def batch(session: Any, n: int) -> tuple[int, int]:
            response = post(session, f"threads/{big}/entries/", {"entries": batches[n]})
            return response.status_code, len(batches[n])

        def recall(mode: str) -> Callable[[Any, int], tuple[int, int]]:
            def call(session: Any, n: int) -> tuple[int, int]:
                response = post(session, f"threads/{big}/recall/",
                                {"budget_tokens": 4000, "mode": mode})
                return response.status_code, 0
            return call

        phases = [
            drive(Phase("append, 1 message per request (a thread per client)"), single,
                  clients=args.clients, limit=args.singles, seconds=args.seconds),
            drive(Phase(f"append, batches of {BATCH} (one thread, to 10,000 entries)"), batch,
                  clients=args.clients, limit=len(batches), seconds=max(args.seconds, 90)),
        ]
        stored = setup.get(base + f"threads/{big}/entries/?page_size=1", headers=headers,
                           timeout=30).json()["count"]
        phases += [
            drive(Phase(f"recall, background mode ({stored:,}-entry thread)"),
                  recall("background"), clients=2, limit=args.recalls, seconds=args.seconds),
            drive(Phase(f"recall, inline mode: may fold ({stored:,}-entry thread)"),
                  recall("inline"), clients=2, limit=args.recalls, seconds=args.seconds),
        ]
    finally:
        if server is not None and server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
        with postgres_admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{DATABASE}" WITH (FORCE)')

    host = machine()
    print("## REST API throughput and latency\n")
    print(f"Machine: {host['nproc']} CPUs (nproc), {host['cpu']}, {host['memory']}, "
          f"{host['os']}, Python {host['python']}.  ")
    print("Versions: " + ", ".join(f"{name} {version}" for name, version in stack.items())
          + ".  ")
    print("Server: example project, gunicorn 2 sync workers, DEBUG off, offline summarizer, "
          "token auth; client: requests on the same machine (loopback). Load average "
          f"(1 min) before the run: {load_before:.2f}; after: {os.getloadavg()[0]:.2f}.\n")
    print(table(
        ["phase", "clients", "requests", "entries", "seconds", "requests/s", "entries/s",
         "p50 ms", "p95 ms"],
        [phase.row(2 if phase.name.startswith("recall") else args.clients)
         for phase in phases],
    ))
    failed = {phase.name: dict(phase.statuses) for phase in phases
              if set(phase.statuses) - {200, 201}}
    if failed:
        print(f"\nnon-2xx answers: {failed}")
        return 1
    if stored != THREAD_ENTRIES:
        print(f"\nthe recall thread holds {stored} entries, not {THREAD_ENTRIES}: raise "
              "--seconds so the batch phase can finish")
        return 1
    return 0


def wait_until_up(base: str, headers: dict[str, str], server: subprocess.Popen[bytes]) -> None:
    import requests

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"gunicorn exited with {server.returncode}")
        try:
            requests.get(base + "threads/", headers=headers, timeout=2,
                         proxies={"http": "", "https": ""}).raise_for_status()
            return
        except requests.RequestException:
            time.sleep(0.3)
    raise SystemExit("gunicorn did not answer within 60s")


if __name__ == "__main__":
    sys.exit(main())
