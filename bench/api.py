"""The REST API's request path: this tree against a baseline revision, in one run.

Each target is the example project at some revision, on PostgreSQL (a scratch database
per target, created and dropped here), served by gunicorn (2 sync workers) on
127.0.0.1, in background recall mode with a real Redis broker that no worker reads
(so a fold is requested but never run: only the request path is measured). Clients are
threads of this process, each with its own `http.client` connection: on the same two
cores the client competes with the server it measures, and the standard library's
client costs a request about a third of the CPU of a ``requests`` session (its CPU is
reported too). Before the first phase every target gets appends and recalls from 8
clients at once, so that both workers have loaded the token encoding (about 1.4 s of
CPU each, otherwise charged to the first phase). Targets:

- ``baseline``: ``--baseline`` (a git revision), as that revision's example project
  configures it;
- ``this tree``: the checkout, as its example project configures it;
- ``this tree, CONN_MAX_AGE=0``: the same, opening a database connection per request,
  to price the connection (the 8-client phases only).

The targets are served at the same time and take turns within each phase: a phase runs
in ``--rounds`` rounds (12), each giving every target an equal share of the phase's
seconds and requests, in reverse order every other round, so that a slower stretch of
the shared machine falls on every target alike (with 4 rounds of 2 s, one tree's append
ratio to the floor view was x1.79 in one run and x2.43 in the next; with 12, three runs
of later code gave x1.76 to x2.10 at 1 client: finer turns do not remove what the
machine's state does to a whole run). Phases, each bounded in requests and seconds per
target: single appends (one message a request, each client on its own thread) for 1, 8
and 32 clients; batch appends filling one thread to 10,000 entries (per target, in
turn); background-mode recalls of that thread for 1, 8 and 32 clients; an oversized
batch (150,000 items, about 2.4 MB) that must be refused.
For every phase: requests/s, p50/p95, and the CPU per request of the app (gunicorn's
processes), of the database (this database's backends, plus exited backends as the
postmaster reaps them) and of the client (this process), and database connections
opened per request.

    .venv/bin/python bench/api.py [--baseline REV] [--seconds 8] [--rounds 12]
                                  [--write docs/benchmarks.md]

``--write`` replaces the section between the API markers of that page (``bench/run.py``
keeps the section when it rewrites the page) and saves the figures in
artifacts/api.json. Needs ``pip install -e '.[bench]'`` (gunicorn), a
reachable PostgreSQL (``PG*`` variables) and Redis (``BENCH_REDIS``, default
redis://127.0.0.1:6379/9, flushed).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    machine,
    median,
    number,
    percentile,
    postgres_admin,
    table,
    write_section,
)

BATCH = 40  # ten whole turns: batches may land out of order, a tool pair never spans two
THREAD_ENTRIES = 10_000
OVERSIZED_ITEMS = 150_000
CLIENTS = (1, 8, 32)
TICK = os.sysconf("SC_CLK_TCK")
MARK_START = "<!-- bench/api.py: start -->"
MARK_END = "<!-- bench/api.py: end -->"
RAW = ROOT / "artifacts" / "api.json"
API = "/api/memory/"
FLOOR = "/bench/floor/"  # bench/floor_views.py, in this tree's gunicorn
FLOOR_LABEL = "floor views (this tree's gunicorn)"
FLOOR_CLIENTS = (1, 8)
#: The API ÷ the floor views, p50 and p95 (issue 24).
TARGET_HTTP = {"single appends": 2.0, "background recalls": 3.0}


# ---------------------------------------------------------------- CPU accounting


def _stat(pid: int) -> list[str]:
    """Fields of /proc/<pid>/stat after the command name (so index 11 is utime)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2:].split()


def _cpu(pid: int, *, children: bool = False) -> float:
    """CPU seconds of a process (and of its reaped children)."""
    try:
        fields = _stat(pid)
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    ticks = int(fields[11]) + int(fields[12])
    if children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / TICK


def _pids() -> Iterator[tuple[int, int, str]]:
    """(pid, parent pid, command line) of every process."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int(_stat(int(entry.name))[1])
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        yield int(entry.name), parent, command


@dataclass
class CpuMeter:
    """CPU seconds used so far by the app server and by one database."""

    server_pid: int
    database: str
    postmaster: int = 0

    def __post_init__(self) -> None:
        for pid, _parent, command in _pids():
            if "postgres" in command and " -D " in command:
                self.postmaster = pid

    def read(self) -> tuple[float, float]:
        app = _cpu(self.server_pid, children=True)
        db = _cpu(self.postmaster, children=True) if self.postmaster else 0.0
        for pid, parent, command in _pids():
            if parent == self.server_pid:
                app += _cpu(pid)
            elif parent == self.postmaster and f" {self.database} " in command:
                db += _cpu(pid)
        return app, db


def sessions(database: str) -> int:
    """Connections ever opened to a database (pg_stat_database.sessions)."""
    with postgres_admin() as admin:
        row = admin.execute("SELECT sessions FROM pg_stat_database WHERE datname = %s",
                            [database]).fetchone()
    return int(row[0]) if row else 0


# ---------------------------------------------------------------- load


class Http:
    """One HTTP/1.1 connection of the standard library's client (it reconnects when the
    server closes, as gunicorn's sync workers do after every response)."""

    def __init__(self, port: int, headers: dict[str, str]) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.headers = {**headers, "Content-Type": "application/json"}

    def request(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None
                ) -> tuple[int, bytes]:
        payload = raw if raw is not None else (
            json.dumps(body).encode() if body is not None else None)
        try:
            self.connection.request(method, path, body=payload, headers=self.headers)
            response = self.connection.getresponse()
            return response.status, response.read()
        except (ConnectionError, http.client.HTTPException):
            self.connection.close()  # the next request opens a new connection
            raise

    def json(self, method: str, path: str, body: Any = None) -> Any:
        status, data = self.request(method, path, body)
        if status >= 400:
            raise SystemExit(f"{method} {path} answered {status}: {data[:300]!r}")
        return json.loads(data)


@dataclass
class Phase:
    name: str
    clients: int
    requests: int = 0
    entries: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    app_cpu: float = 0.0
    db_cpu: float = 0.0
    client_cpu: float = 0.0
    connections: int = 0

    @property
    def rate(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def ms(self, fraction: float) -> float:
        values = [latency * 1000 for latency in self.latencies]
        return median(values) if fraction == 0.5 else percentile(values, fraction)

    def per_request(self, value: float) -> float:
        return value / self.requests if self.requests else 0.0


def drive(
    phase: Phase, work: Callable[[Http, int, int], tuple[int, int]], *, limit: int,
    seconds: float, meter: CpuMeter, connect: Callable[[], Http],
) -> Phase:
    """Run ``work(client, number, n)`` for n = 0.. on ``phase.clients`` threads until
    ``limit`` calls or ``seconds`` have passed; ``work`` returns (status, entries). The
    figures add to what ``phase`` holds (a phase is driven in several rounds)."""
    lock = threading.Lock()
    next_call = [0]
    deadline = time.monotonic() + seconds

    def client(number: int) -> None:
        http_client = connect()
        while time.monotonic() < deadline:
            with lock:
                n = next_call[0]
                if n >= limit:
                    return
                next_call[0] += 1
            started = time.perf_counter()
            status, written = work(http_client, number, n)
            elapsed = time.perf_counter() - started
            with lock:
                phase.requests += 1
                phase.latencies.append(elapsed)
                phase.statuses[status] += 1
                if 200 <= status < 300:
                    phase.entries += written

    app_before, db_before = meter.read()
    client_before = time.process_time()
    connections_before = sessions(meter.database)
    started = time.perf_counter()
    pool = [threading.Thread(target=client, args=(n,)) for n in range(phase.clients)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    phase.seconds += time.perf_counter() - started
    app_after, db_after = meter.read()
    phase.client_cpu += time.process_time() - client_before
    phase.app_cpu += app_after - app_before
    phase.db_cpu += db_after - db_before
    phase.connections += sessions(meter.database) - connections_before
    return phase


def turn(n: int) -> list[dict[str, Any]]:
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


def chat(n: int) -> dict[str, Any]:
    """A single plain message (no tool call to pair across requests)."""
    role = "user" if n % 2 == 0 else "assistant"
    return {"role": role, "content": f"Message {n}: where is order {n}? It was placed "
            "last week and the parcel never arrived; please check the carrier as well."}


# ---------------------------------------------------------------- one target


@dataclass
class Target:
    label: str
    root: Path
    database: str
    env: dict[str, str] = field(default_factory=dict)
    clients: tuple[int, ...] = CLIENTS
    fill: bool = True  # False: served from the previous target's database as it is
    #: Not served on its own: bench/floor_views.py in the previous target's gunicorn.
    floor: bool = False


def manage(root: Path, env: dict[str, str], *args: str) -> str:
    """The last line a management command printed (``shell`` prints a banner first)."""
    result = subprocess.run([sys.executable, "manage.py", *args], cwd=root, env=env,
                            check=True, capture_output=True, text=True)
    lines = result.stdout.strip().splitlines()
    return lines[-1] if lines else ""


def target_env(target: Target, broker: str) -> dict[str, str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "example_project.settings",
        "AGENTMEMORY_DB": "postgres",
        "PGDATABASE": target.database,
        "DJANGO_DEBUG": "0",
        "CELERY_BROKER_URL": broker,
        "AGENTMEMORY_RECALL_MODE": "background",
        "PYTHONPATH": str(target.root),
        **target.env,
    }
    env.pop("AGENTMEMORY_OPENAI_MODEL", None)  # the offline summarizer: no network
    return env


@contextmanager
def served(target: Target, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("gunicorn")), "example_project.wsgi:application",
         "--bind", f"127.0.0.1:{port}", "--workers", "2", "--worker-class", "sync",
         "--timeout", "60", "--backlog", "256", "--log-level", "warning"],
        cwd=target.root, env=env, start_new_session=True,
    )
    server.port = port  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)


@dataclass
class Running:
    """A target's server, meter and the ids its phases use."""

    target: Target
    port: int
    meter: CpuMeter
    state: dict[str, Any]
    phases: dict[tuple[str, int], Phase] = field(default_factory=dict)

    def connect(self) -> Http:
        return Http(self.port, {"Authorization": f"Token {self.state['token']}"})

    def phase(self, name: str, clients: int) -> Phase:
        return self.phases.setdefault((name, clients), Phase(name, clients))


def prepare(target: Target, env: dict[str, str], state: dict[str, Any]) -> None:
    """A new database for the target: migrated, with a user and its token."""
    with postgres_admin() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{target.database}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{target.database}"')
    manage(target.root, env, "migrate", "--noinput", "-v", "0")
    state["token"] = manage(target.root, env, "shell", "-c", (
        "from django.contrib.auth import get_user_model\n"
        "from rest_framework.authtoken.models import Token\n"
        "user = get_user_model().objects.create_user('bench')\n"
        "print(Token.objects.create(user=user).key)\n"
    )).strip()


def setup(running: Running) -> None:
    """The threads of a filled target, then a warm-up of every target (not reported):
    imports, the token encoding and connections in both workers."""
    state = running.state
    client = running.connect()
    if "own" not in state:
        def create(title: str) -> int:
            return int(client.json("POST", API + "threads/", {"title": title})["id"])

        state["own"] = [create(f"client {n}") for n in range(max(CLIENTS))]
        state["big"] = create("10,000 entries")
        state["warm"] = create("warm-up")
        state["sent"] = Counter()
    if running.target.floor and "floor_own" not in state:
        state["floor_own"] = [
            int(client.json("POST", API + "threads/", {"title": f"floor {n}"})["id"])
            for n in range(max(CLIENTS))]
    warm, counter = state["warm"], state["sent"]

    def warm_up(http_client: Http, number: int, n: int) -> tuple[int, int]:
        counter[warm] += 1
        if n % 2:
            return http_client.request("POST", API + f"threads/{warm}/recall/",
                                       {"budget_tokens": 4000, "mode": "background"})[0], 0
        return http_client.request("POST", API + f"threads/{warm}/entries/",
                                   chat(counter[warm]))[0], 1

    drive(Phase("warm-up", 8), warm_up, limit=80, seconds=120, meter=running.meter,
          connect=running.connect)


def single(running: Running) -> Callable[[Http, int, int], tuple[int, int]]:
    floor = running.target.floor
    own, counter = running.state["floor_own" if floor else "own"], running.state["sent"]
    base = FLOOR if floor else API

    def work(client: Http, number: int, n: int) -> tuple[int, int]:
        thread = own[number]
        counter[thread] += 1
        return client.request("POST", base + f"threads/{thread}/entries/",
                              chat(counter[thread]))[0], 1

    return work


def recall(running: Running) -> Callable[[Http, int, int], tuple[int, int]]:
    big = running.state["big"]
    base = FLOOR if running.target.floor else API

    def work(client: Http, number: int, n: int) -> tuple[int, int]:
        return client.request("POST", base + f"threads/{big}/recall/",
                              {"budget_tokens": 4000, "mode": "background"})[0], 0

    return work


def interleaved(
    targets: list[Running], name: str, clients: int,
    work: Callable[[Running], Callable[[Http, int, int], tuple[int, int]]],
    *, limit: int, args: argparse.Namespace,
) -> None:
    """One phase for every target that runs it, in ``args.rounds`` rounds of an equal
    share of its time and requests, the targets taking turns (in reverse order every
    other round): a slower stretch of a shared machine falls on all of them alike."""
    taking = [running for running in targets if clients in running.target.clients]
    for turn_number in range(args.rounds):
        for running in taking if turn_number % 2 == 0 else reversed(taking):
            drive(running.phase(name, clients), work(running),
                  limit=max(1, limit // args.rounds), seconds=args.seconds / args.rounds,
                  meter=running.meter, connect=running.connect)


def fill(running: Running) -> None:
    """The recall thread: 10,000 entries in batches of whole turns, from 8 clients."""
    big = running.state["big"]
    turns = [m for n in range(1, THREAD_ENTRIES // 4 + 1) for m in turn(n)]
    batches = [turns[at:at + BATCH] for at in range(0, THREAD_ENTRIES, BATCH)]

    def batch(client: Http, number: int, n: int) -> tuple[int, int]:
        return client.request("POST", API + f"threads/{big}/entries/",
                              {"entries": batches[n]})[0], len(batches[n])

    drive(running.phase(f"batch appends ({BATCH} a request)", 8), batch, limit=len(batches),
          seconds=300, meter=running.meter, connect=running.connect)
    stored = running.connect().json("GET", API + f"threads/{big}/entries/?page_size=1")["count"]
    if stored != THREAD_ENTRIES:
        raise SystemExit(f"the recall thread holds {stored} entries, not {THREAD_ENTRIES}")


def refuse_oversized(running: Running) -> None:
    body = json.dumps({"entries": [{"role": "user"}] * OVERSIZED_ITEMS}).encode()
    thread = running.state["own"][0]

    def oversized(client: Http, number: int, n: int) -> tuple[int, int]:
        return client.request("POST", API + f"threads/{thread}/entries/", raw=body)[0], 0

    drive(running.phase(f"oversized batch ({len(body) / 1e6:.1f} MB, refused)", 1), oversized,
          limit=5, seconds=60, meter=running.meter, connect=running.connect)


def measure(targets: list[Target], args: argparse.Namespace) -> dict[str, list[Phase]]:
    """Every target served at once, each phase interleaved between them."""
    states: dict[str, dict[str, Any]] = {}
    with ExitStack() as stack:
        running: list[Running] = []
        for target in targets:
            state = states.setdefault(target.database, {})
            if target.floor:  # the previous target's server, its floor views
                served_by = running[-1]
                running.append(Running(target, served_by.port, served_by.meter, state))
                continue
            env = target_env(target, args.broker)
            if target.fill:
                prepare(target, env, state)
            server = stack.enter_context(served(target, env))
            port = server.port  # type: ignore[attr-defined]
            wait_until_up(port, {"Authorization": f"Token {state['token']}"}, server)
            running.append(Running(target, port, CpuMeter(server.pid, target.database), state))
        for each in running:
            print(f"[bench/api] warm-up: {each.target.label}", file=sys.stderr, flush=True)
            setup(each)
        for clients in CLIENTS:
            print(f"[bench/api] single appends x{clients}", file=sys.stderr, flush=True)
            interleaved(running, "single appends", clients, single, limit=args.singles,
                        args=args)
        for each in running:
            if each.target.fill:
                print(f"[bench/api] fill: {each.target.label}", file=sys.stderr, flush=True)
                fill(each)
        for clients in CLIENTS:
            print(f"[bench/api] recalls x{clients}", file=sys.stderr, flush=True)
            interleaved(running, "background recalls (10,000 entries)", clients, recall,
                        limit=args.recalls, args=args)
        for each in running:
            if each.target.fill:
                refuse_oversized(each)
    return {each.target.label: list(each.phases.values()) for each in running}


def wait_until_up(port: int, headers: dict[str, str], server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"gunicorn exited with {server.returncode}")
        try:
            if Http(port, headers).request("GET", "/api/memory/threads/")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise SystemExit("gunicorn did not answer within 60s")


@contextmanager
def checkout(revision: str) -> Iterator[Path]:
    """The tree at a git revision, unpacked in a temporary directory."""
    with tempfile.TemporaryDirectory(prefix="agentmemory-baseline-") as scratch:
        archive = Path(scratch) / "tree.tar"
        subprocess.run(["git", "archive", "--format=tar", "-o", str(archive), revision],
                       cwd=ROOT, check=True)
        with tarfile.open(archive) as tar:
            tar.extractall(scratch, filter="data")
        yield Path(scratch)


def revision(ref: str) -> str:
    return subprocess.run(["git", "rev-parse", "--short", ref], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout.strip()


# ---------------------------------------------------------------- report


def results(args: argparse.Namespace) -> dict[str, Any]:
    import redis

    load_before = os.getloadavg()[0]
    redis.Redis.from_url(args.broker).flushdb()
    base_rev, head_rev = revision(args.baseline), revision("HEAD")
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    runs: dict[str, list[dict[str, Any]]] = {}
    with checkout(args.baseline) as old:
        targets = [
            Target(f"baseline {base_rev}", old, f"{args.pg_name}_base"),
            Target(f"this tree ({head_rev}{'+' if dirty else ''})", ROOT, args.pg_name,
                   env={"DJANGO_SETTINGS_MODULE": "bench.floor_settings"}),
            Target(FLOOR_LABEL, ROOT, args.pg_name, clients=FLOOR_CLIENTS,
                   fill=False, floor=True),
            Target("this tree, CONN_MAX_AGE=0", ROOT, args.pg_name,
                   env={"DJANGO_CONN_MAX_AGE": "0"}, clients=(8,), fill=False),
        ]
        try:
            for label, phases in measure(targets, args).items():
                runs[label] = [
                    {**{k: v for k, v in asdict(p).items() if k not in ("latencies", "statuses")},
                     "statuses": {str(k): v for k, v in p.statuses.items()},
                     "rate": p.rate, "p50_ms": p.ms(0.5), "p95_ms": p.ms(0.95)}
                    for p in phases
                ]
        finally:
            with postgres_admin() as admin:
                for target in targets:
                    admin.execute(f'DROP DATABASE IF EXISTS "{target.database}" WITH (FORCE)')
    return {"machine": machine(), "runs": runs, "baseline": base_rev, "head": head_rev,
            "load_before": load_before, "load_after": os.getloadavg()[0],
            "seconds": args.seconds, "rounds": args.rounds}


def find(run: list[dict[str, Any]], name: str, clients: int) -> dict[str, Any] | None:
    return next((p for p in run if p["name"].startswith(name) and p["clients"] == clients),
                None)


def section(data: dict[str, Any]) -> str:
    runs = data["runs"]
    labels = list(runs)
    base, head = labels[0], labels[1]
    no_pool = next((label for label in labels if "CONN_MAX_AGE=0" in label), None)
    m = data["machine"]
    rows = []
    for label in labels:
        for p in runs[label]:
            def per(seconds: float, p: dict[str, Any] = p) -> float:
                return seconds / p["requests"] * 1000 if p["requests"] else 0.0

            rows.append([
                label, p["name"], str(p["clients"]), number(p["requests"]),
                number(p["rate"], 1), number(p["p50_ms"], 1), number(p["p95_ms"], 1),
                number(per(p["app_cpu"]), 2), number(per(p["db_cpu"]), 2),
                number(per(p.get("client_cpu", 0.0)), 2),
                number(p["connections"] / p["requests"] if p["requests"] else 0, 2),
            ])
    ratios = []
    for name in ("single appends", "background recalls"):
        for clients in CLIENTS:
            old, new = find(runs[base], name, clients), find(runs[head], name, clients)
            if old and new and old["rate"]:
                ratios.append([name, str(clients), f"{new['rate'] / old['rate']:.2f}x",
                               f"{old['p50_ms'] / new['p50_ms']:.2f}x" if new["p50_ms"] else "—",
                               f"{old['p95_ms'] / new['p95_ms']:.2f}x" if new["p95_ms"] else "—"])
    lines = [
        MARK_START,
        "## The REST API's request path",
        "",
        "`bench/api.py`: the example project on PostgreSQL under gunicorn (2 sync workers), "
        "background recall mode with a Redis broker no worker reads (a fold is requested, "
        "never run), token authentication, receipts on; clients are threads of the "
        "benchmark with a standard-library `http.client` connection each, on the same "
        "machine, after a warm-up that loads the token encoding in both workers. "
        f"Baseline: revision {data['baseline']}, run in the same session as this tree. "
        f"Machine: {m['nproc']} CPUs, {m['cpu']}, {m['memory']}. Load average "
        f"before: {data['load_before']:.2f}, after: {data['load_after']:.2f}. Each phase "
        f"is bounded at {data['seconds']:.0f} s per target; the targets are served at "
        f"once and take turns in {data.get('rounds', 1)} rounds of each phase (in reverse "
        "order every other round), so that a slower stretch of the machine falls on all "
        "of them.",
        "",
        "This tree against the baseline (ratios of the same run; above 1 is better):",
        "",
        table(["phase", "clients", "requests/s", "p50", "p95"], ratios),
        "",
        *floor_lines(runs, head),
        "Every phase: CPU per request is the app's (gunicorn's processes), the "
        "database's (this database's backends, and exited ones as the postmaster reaps "
        "them) and the client's (the benchmark's process), in milliseconds; connections "
        "are database sessions opened per request.",
        "",
        table(["target", "phase", "clients", "requests", "requests/s", "p50 ms", "p95 ms",
               "app CPU ms", "db CPU ms", "client CPU ms", "connections"], rows),
    ]
    if no_pool:
        pooled = find(runs[head], "single appends", 8), find(runs[head], "background", 8)
        fresh = find(runs[no_pool], "single appends", 8), find(runs[no_pool], "background", 8)
        parts = []
        for name, with_pool, without in zip(("an append", "a recall"), pooled, fresh,
                                            strict=True):
            if with_pool and without and with_pool["requests"] and without["requests"]:
                app = (without["app_cpu"] / without["requests"]
                       - with_pool["app_cpu"] / with_pool["requests"]) * 1000
                db = (without["db_cpu"] / without["requests"]
                      - with_pool["db_cpu"] / with_pool["requests"]) * 1000
                parts.append(f"{name} {app:.2f} ms of app CPU and {db:.2f} ms of database "
                             f"CPU ({with_pool['rate'] / without['rate']:.2f}x the requests/s)")
        lines += [
            "",
            "The connection's share (this tree with `CONN_MAX_AGE=0` against the example "
            "project's `CONN_MAX_AGE=60`, 8 clients): opening a connection per request "
            "costs " + "; ".join(parts) + ".",
        ]
    failed = {label: {p["name"] + f" x{p['clients']}": p["statuses"] for p in run
                      if set(p["statuses"]) - {"200", "201", "413"}}
              for label, run in runs.items()}
    failed = {label: phases for label, phases in failed.items() if phases}
    refused = [(label, find(run, "oversized", 1), find(run, "single appends", 1))
               for label, run in runs.items()]
    for label, big, small in refused:
        if big and small and small["p50_ms"]:
            lines += ["", f"{label}: the oversized batch was answered "
                      f"{', '.join(sorted(big['statuses']))} in {big['p50_ms']:.1f} ms (median), "
                      f"{big['p50_ms'] / small['p50_ms']:.1f}x a single append's median."]
    if failed:
        lines += ["", f"Unexpected answers: {failed}"]
    lines.append(MARK_END)
    return "\n".join(lines)


def floor_lines(runs: dict[str, list[dict[str, Any]]], head: str) -> list[str]:
    """This tree's API against the floor views served by its own gunicorn."""
    if FLOOR_LABEL not in runs:
        return []
    rows = []
    for name, target in TARGET_HTTP.items():
        for clients in FLOOR_CLIENTS:
            api, floor = find(runs[head], name, clients), find(runs[FLOOR_LABEL], name, clients)
            if not (api and floor and floor["p50_ms"] and floor["p95_ms"]):
                continue
            p50, p95 = api["p50_ms"] / floor["p50_ms"], api["p95_ms"] / floor["p95_ms"]
            verdict = "pass" if max(p50, p95) <= target else "**fail**"
            rows.append([name, str(clients),
                         f"{api['p50_ms']:.1f} / {api['p95_ms']:.1f}",
                         f"{floor['p50_ms']:.1f} / {floor['p95_ms']:.1f}",
                         f"×{p50:.2f} / ×{p95:.2f}", f"≤ {target:g}: {verdict}"])
    return [
        "This tree's API against the floor views (`bench/floor_views.py`, served by the "
        "same gunicorn under the example project's middleware): a recall floor runs the "
        "load statements a background recall of the same thread sends, sums the newest "
        "rows' stored token counts up to the room and joins their text; an append floor "
        "is one INSERT of a message row. Neither authenticates, validates, writes a "
        "receipt or decides on a fold. Milliseconds, p50 / p95:",
        "",
        table(["phase", "clients", "API", "floor", "API ÷ floor", "target"], rows),
        "",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="83c5202",
                        help="git revision to compare with (default: main before the "
                             "request-path work)")
    parser.add_argument("--seconds", type=float, default=8.0,
                        help="bound of each phase, per target")
    parser.add_argument("--rounds", type=int, default=12,
                        help="turns the targets take in each phase")
    parser.add_argument("--singles", type=int, default=4000, help="single appends at most")
    parser.add_argument("--recalls", type=int, default=2000, help="recalls at most")
    parser.add_argument("--broker", default=os.environ.get("BENCH_REDIS",
                                                           "redis://127.0.0.1:6379/9"))
    parser.add_argument("--pg-name", default="agentmemory_bench_api",
                        help="the scratch databases' name (the baseline's ends in _base)")
    parser.add_argument("--write", metavar="PAGE", help="replace the API section of PAGE")
    parser.add_argument("--render-only", action="store_true",
                        help=f"render from {RAW.relative_to(ROOT)}, measure nothing")
    args = parser.parse_args()
    try:
        import gunicorn  # noqa: F401
    except ImportError as exc:
        raise SystemExit(f"{exc.name} is missing: pip install -e '.[bench]'") from exc
    if args.render_only:
        data = json.loads(RAW.read_text())
    else:
        data = results(args)
        RAW.parent.mkdir(exist_ok=True)
        RAW.write_text(json.dumps(data, indent=1))
    block = section(data)
    if args.write:
        write_section(Path(args.write), block, MARK_START, MARK_END)
        print(f"[bench/api] wrote {args.write}", file=sys.stderr)
    else:
        print(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
