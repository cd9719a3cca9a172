"""Fuzz the REST API with Schemathesis against its own OpenAPI schema.

Serves the example project with gunicorn (``--workers``, at least 2) on 127.0.0.1 over a
fresh PostgreSQL database (``<PGDATABASE>_fuzz``, dropped afterwards), migrated and
seeded with a token user whose threads hold entries, nested summaries and a folded
span, so generated ids often name real rows. Then runs the Schemathesis CLI with
**all** checks and every phase (examples, coverage, fuzzing, stateful links), with the
fixed ``--seed`` and with a random one (printed, to replay a failure) as two runs at
once, each over its own seeded threads: first every operation except DELETE, then the
DELETEs (so erasing a thread early does not turn the rest into 404s). Exits
non-zero on any failure, on a server error in gunicorn's log, or when fewer than
``--min-requests`` requests ran. Nothing leaves 127.0.0.1.

    .venv/bin/python scripts/schemathesis.py [--max-examples 25] [--seed 1] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
SCHEMATHESIS = str(Path(PYTHON).with_name("schemathesis"))
GUNICORN = str(Path(PYTHON).with_name("gunicorn"))
CHECKS = "all"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def seed(round_name: str) -> dict[str, Any]:
    """Users, a token, and threads with entries, nested summaries, a folded span and a
    recall receipt."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.db import connections
    from rest_framework.authtoken.models import Token

    from agentmemory import services
    from agentmemory.models import EntryKind, MemoryEntry, RecallReceipt, Thread

    def turns(first: int, count: int) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        for n in range(first, first + count):
            call = f"call-{n}"
            messages += [
                {"role": "user", "content": f"Where is order {n}? It has not arrived."},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": call, "name": "lookup_order", "arguments": json.dumps({"id": n})}]},
                {"role": "tool", "tool_name": "lookup_order", "tool_call_id": call,
                 "content": json.dumps({"id": n, "status": "in transit"})},
                {"role": "assistant", "content": f"Order {n} is in transit; it arrives Friday."},
            ]
        return messages

    users = get_user_model().objects
    fuzzer = users.create_user(f"fuzz-{round_name}", password="fuzz-password")
    other = users.create_user(f"other-{round_name}", password="other-password")
    token = Token.objects.create(user=fuzzer).key
    knobs = {"preserve_recent": 4, "trigger_min_entries": 8, "load_count": 40}
    threads = []
    for index, owner in enumerate([fuzzer, fuzzer, fuzzer, other]):
        thread = Thread.objects.create(owner=owner, title=f"orders {index}",
                                       client_key=f"key-{index}")
        services.append(thread, turns(1, 6))
        services.fold(thread, **knobs)
        services.append(thread, turns(7, 4))
        services.fold(thread, **knobs)
        window = [{"role": "user", "content": "Chase the late orders."}, *turns(1, 12)[1:]]
        services.compact(thread, window)
        services.recall(thread, 2000)  # a receipt (the example project records them)
        threads.append(thread.pk)
    entries = MemoryEntry.objects.filter(thread_id__in=threads)
    summaries = list(entries.filter(kind=EntryKind.SUMMARY).values_list("pk", flat=True))
    messages = list(entries.filter(kind=EntryKind.MESSAGE).values_list("pk", flat=True))
    connections.close_all()
    return {
        "token": token,
        "threads": threads,
        "entries": messages[::4] + summaries,
        "summaries": summaries,
        "receipts": list(
            RecallReceipt.objects.filter(thread_id__in=threads).values_list("pk", flat=True)
        ),
    }


def config_file(directory: Path, ids: dict[str, Any]) -> Path:
    """Path ids come from the seeded rows most of the time, and are random otherwise."""
    lines = []
    for name in ("threads", "entries", "summaries", "receipts"):
        lines += [f"[dictionaries.{name}]", f"values = {json.dumps(ids[name])}", ""]
    # The token as the schema's tokenAuth scheme: Schemathesis then knows the credentials
    # are real, and probes each scheme (a bogus session cookie, no token) on its own.
    lines += ["[auth.openapi.tokenAuth]", f'api_key = "Token {ids["token"]}"', ""]
    # NUL is refused in every string, which the schema says with patterns; keys of JSON
    # objects say it with propertyNames, which the generator does not always honour.
    lines += ["[generation]", "allow-x00 = false", ""]
    # Schemathesis' own list plus 413: a body over DATA_UPLOAD_MAX_MEMORY_SIZE (an invalid
    # `messages` array far past maxItems) is refused whole before it is parsed, and the
    # schema documents that 413 on every operation that takes a body.
    rejections = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422",
                  "428", "429", "5xx"]
    lines += ["[checks.negative_data_rejection]",
              f"expected-statuses = {json.dumps(rejections)}", ""]
    lines += [
        "[parameters]",
        '"path.thread_id" = { dictionary = "threads", probability = 0.9 }',
        '"path.entry_id" = { dictionary = "entries", probability = 0.8 }',
        '"path.summary_id" = { dictionary = "summaries", probability = 0.8 }',
        '"path.receipt_id" = { dictionary = "receipts", probability = 0.8 }',
    ]
    path = directory / f"schemathesis-{ids['token'][:8]}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def wait_for(url: str, server: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with {server.returncode} before answering")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (loopback)
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"no answer from {url} within {timeout:.0f}s")


def count_cases(report: Path) -> int:
    """Test cases (requests) the run made, from its NDJSON event stream."""
    total = 0
    for line in report.read_text().splitlines():
        event = json.loads(line)
        finished = event.get("ScenarioFinished")
        if finished:
            total += sum(1 for _ in iter_cases(finished))
    return total


def iter_cases(finished: dict[str, Any]) -> Any:
    recorder = finished.get("recorder") or {}
    for interaction in (recorder.get("interactions") or {}).values():
        if interaction.get("response") is not None:
            yield interaction


def fuzz(schema: str, config: Path, report: Path, args: argparse.Namespace,
         seed_value: int, methods: list[str]) -> subprocess.Popen[bytes]:
    """Start one Schemathesis run; its output goes to ``report`` with a .log suffix.

    One thread per run: Hypothesis' generation is not thread-safe on Python 3.11 (it
    crashed with ``AST constructor recursion depth mismatch`` under ``--workers 2``), so
    concurrency comes from running the two seeds' rounds as two processes at once.
    """
    command = [
        SCHEMATHESIS, "--config-file", str(config), "run", schema,
        "--checks", CHECKS,
        "--max-examples", str(args.max_examples),
        "--seed", str(seed_value),
        "--workers", "1",
        "--phases", "examples,coverage,fuzzing,stateful",
        "--generation-database", "none",
        "--request-timeout", "30",
        "--suppress-health-check", "all",
        "--report", "ndjson", "--report-ndjson-path", str(report),
        "--no-color",
        *methods,
    ]
    print("$", " ".join(command[:1] + ["..."] + command[4:5]), f"--seed {seed_value}",
          " ".join(methods), flush=True)
    output = report.with_suffix(".log").open("wb")
    return subprocess.Popen(command, cwd=report.parent, stdout=output,
                            stderr=subprocess.STDOUT)


def recreate_database(name: str, *, drop_only: bool = False) -> None:
    import psycopg

    with psycopg.connect(dbname="postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if not drop_only:
            connection.execute(f'CREATE DATABASE "{name}"')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-examples", type=int, default=25,
                        help="test cases per operation and phase (default 25)")
    parser.add_argument("--seed", type=int, default=20261130, help="the fixed seed")
    parser.add_argument("--random-seed", type=int, default=None,
                        help="the second round's seed (default: drawn at random, printed)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (>= 2)")
    parser.add_argument("--min-requests", type=int, default=3000)
    parser.add_argument("--keep", action="store_true", help="keep the temp dir for a look")
    args = parser.parse_args()
    if args.workers < 2:
        parser.error("--workers must be at least 2: the run exercises concurrent workers")
    seeds = [args.seed, args.random_seed if args.random_seed is not None
             else random.SystemRandom().randrange(2**31)]

    # A terminated run still stops its server and drops its database (the finally below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # Loopback only: no proxy may stand between the client and the server.
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"
    for key, default in (("PGHOST", "127.0.0.1"), ("PGPORT", "5432"), ("PGUSER", "postgres")):
        os.environ.setdefault(key, default)
    database = f"{os.environ.get('PGDATABASE') or 'agentmemory'}_fuzz"
    work = Path(tempfile.mkdtemp(prefix="agentmemory-fuzz-"))
    env = {
        **os.environ,
        "AGENTMEMORY_FUZZ_DB": database,
        "DJANGO_SETTINGS_MODULE": "schemathesis_settings",
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "scripts")]),
        "PYTHONUNBUFFERED": "1",
    }
    server: subprocess.Popen[bytes] | None = None
    log = (work / "server.log").open("wb")
    try:
        recreate_database(database)
        subprocess.run([PYTHON, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT,
                       env=env, check=True)
        os.environ.update({k: env[k] for k in ("AGENTMEMORY_FUZZ_DB", "DJANGO_SETTINGS_MODULE")})
        sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]
        port = free_port()
        # No request-line limit: a search's q (500 characters of up to 4 bytes each,
        # percent-encoded) and the fuzz's longer invalid ones would otherwise meet
        # gunicorn's 4,094-byte limit and its 414 before the API could answer its 400.
        server = subprocess.Popen(
            [GUNICORN, "example_project.wsgi:application", "--bind", f"127.0.0.1:{port}",
             "--workers", str(args.workers), "--timeout", "60", "--error-logfile", "-",
             "--limit-request-line", "0"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        schema = f"http://127.0.0.1:{port}/api/memory/schema/"
        wait_for(schema, server)
        started = time.monotonic()
        codes, reports = [], []
        configs = [config_file(work, seed(f"round{number}")) for number in (1, 2)]
        for part, methods in ((1, ["--exclude-method", "DELETE"]),
                              (2, ["--include-method", "DELETE"])):
            runs = []
            for number, (seed_value, config) in enumerate(zip(seeds, configs, strict=True), 1):
                report = work / f"report-{number}-{part}.ndjson"
                runs.append(fuzz(schema, config, report, args, seed_value, methods))
                reports.append(report)
            for run, report in zip(runs, reports[-2:], strict=True):
                codes.append(run.wait())
                print(report.with_suffix(".log").read_text(errors="replace"), flush=True)
        cases = sum(count_cases(report) for report in reports if report.exists())
        errors = [line for line in (work / "server.log").read_text(errors="replace").splitlines()
                  if "Internal Server Error" in line or "Traceback" in line]
        print(f"\nschemathesis: {cases} requests in {time.monotonic() - started:.0f}s over "
              f"{args.workers} gunicorn workers on PostgreSQL; seeds {seeds}; exit codes "
              f"{codes}; server errors logged: {len(errors)}")
        if errors:
            print((work / "server.log").read_text(errors="replace")[-5000:])
        if cases < args.min_requests:
            print(f"schemathesis: fewer than {args.min_requests} requests ran")
            return 1
        return 0 if not any(codes) and not errors else 1
    finally:
        if server is not None and server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
        log.close()
        if args.keep:
            print(f"kept {work} (database {database})")
        else:
            shutil.rmtree(work, ignore_errors=True)
            recreate_database(database, drop_only=True)


if __name__ == "__main__":
    sys.exit(main())
