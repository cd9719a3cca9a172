"""The in-process append (and a recall beside it): this tree against a baseline revision,
interleaved in one run, with a raw-driver floor.

    .venv/bin/python bench/append.py [--baseline main] [--db sqlite,postgres]
                                     [--rounds 20] [--calls 20] [--pg-name agentmemory_bench]

Each target (``baseline``: the revision, unpacked by ``git archive``; ``this tree``) runs
in a worker process of its own, importing that tree's ``agentmemory``, on a database of
its own (migrated by that tree). The parent asks the workers for a batch of every case in
turn, in reverse order every other round, so a slower stretch of the shared machine falls
on both alike. A batch is ``--calls`` timed calls after one untimed call (and after its
settings are switched). Cases:

* **append, inline**: ``services.append(thread, message)``, one message, RECALL_MODE
  inline, on a young thread (a new one every batch);
* **append, background, young**: the same in background mode, where the append may ask
  the fold decision;
* **append, background, folded**: background mode on a thread that folds have
  summarized (its fold marked as on its way, so none is requested: the decision's one
  query runs and answers);
* **recall 4,000**: ``services.recall(thread, 4000, mode="background")`` on a second
  folded thread, RECEIPTS off;
* **floor**: one INSERT of a message row on a plain driver connection, autocommit.

Prints a Markdown table (p50 and p95, ms; this tree ÷ baseline; each ÷ its own floor)
and writes the samples' summary as JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CASES = ("append, inline", "append, background, young", "append, background, folded",
         "recall 4,000", "floor")
FOLDED_TURNS = 200  # turns of the folded threads, an inline fold every ten


# ----------------------------------------------------------------------- the worker


def worker(engine: str, name: str) -> None:
    """Serve batches on stdin/stdout: one JSON line in (a case and a count), one out."""
    from bench.common import INSTANT_SUMMARIZER, setup_django

    setup_django(engine, name, {"SUMMARIZER": INSTANT_SUMMARIZER}, migrate=True)
    from django.db import connection
    from django.test import override_settings
    from django.utils import timezone

    import agentmemory
    from agentmemory import services
    from agentmemory.models import Thread

    target = Path(os.environ["BENCH_TARGET"]).resolve()
    assert Path(agentmemory.__file__).resolve().is_relative_to(target), agentmemory.__file__
    modes = {mode: override_settings(AGENTMEMORY={"SUMMARIZER": INSTANT_SUMMARIZER,
                                                  "RECALL_MODE": mode})
             for mode in ("inline", "background")}
    ahead = timezone.now() + timedelta(days=30)

    def folded(title: str) -> Any:
        thread = Thread.objects.create(title=title)
        for turn in range(FOLDED_TURNS):
            services.append(thread, message(turn, "user"))
            services.append(thread, message(turn, "assistant"))
            if turn % 10 == 9:
                services.recall(thread, 4_000, mode="inline")
        Thread.objects.filter(pk=thread.pk).update(fold_queued_until=ahead)
        return Thread.objects.get(pk=thread.pk)

    threads = {"folded": folded("appended to"), "recalled": folded("recalled")}
    floor = Floor(engine, connection.settings_dict, Thread.objects.create(title="floor").pk)
    count = 0

    def call(case: str) -> None:
        nonlocal count
        count += 1
        if case == "floor":
            floor.insert()
        elif case == "recall 4,000":
            services.recall(threads["recalled"], 4_000, mode="background")
        else:
            thread = threads["young"] if "folded" not in case else threads["folded"]
            services.append(thread, message(count, "user" if count % 2 else "assistant"))

    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        asked = json.loads(line)
        case, calls = asked["case"], asked["calls"]
        mode = "inline" if case == "append, inline" else "background"
        samples, cpu = [], []
        with modes[mode]:
            threads["young"] = Thread.objects.create(title="young")
            call(case)  # untimed, after the switch
            for _ in range(calls):
                began, used = time.perf_counter(), time.process_time()
                call(case)
                samples.append((time.perf_counter() - began) * 1000)
                cpu.append((time.process_time() - used) * 1000)
        print(json.dumps({"samples": samples, "cpu": cpu}), flush=True)


def message(number: int, role: str) -> dict[str, Any]:
    text = {"user": f"Where is order {number}? The tracking page has not moved since Monday.",
            "assistant": f"Order {number} left the depot this morning; it arrives Friday."}
    return {"role": role, "content": text[role]}


class Floor:
    """One INSERT of a message row on a plain driver connection, autocommit."""

    def __init__(self, engine: str, settings: dict[str, Any], thread_id: int) -> None:
        columns = ("thread_id, kind, role, content, tool_calls, tool_name, tool_call_id, turn,"
                   " position, tier, token_count, created_at, metadata")
        if engine == "sqlite":
            import sqlite3

            self.connection: Any = sqlite3.connect(settings["NAME"], isolation_level=None)
            marks = ", ".join(["?"] * 13)
        else:
            import psycopg

            self.connection = psycopg.connect(
                host=settings["HOST"], port=settings["PORT"], user=settings["USER"],
                password=settings["PASSWORD"] or None, dbname=settings["NAME"], autocommit=True)
            marks = ", ".join(["%s"] * 13)
        self.sql = f"INSERT INTO agentmemory_memoryentry ({columns}) VALUES ({marks})"
        self.thread_id = thread_id
        self.position = 10_000_000

    def insert(self) -> None:
        from datetime import UTC, datetime

        self.position += 1
        self.connection.execute(self.sql, (
            self.thread_id, "message", "user", "Where is my parcel?", "[]", "", "", 1,
            self.position, "hot", 8, datetime.now(UTC).isoformat(), "{}"))


# ----------------------------------------------------------------------- the parent


class Worker:
    def __init__(self, label: str, tree: Path, engine: str, name: str) -> None:
        env = {**os.environ, "BENCH_TARGET": str(tree)}
        self.label = label
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", engine, name],
            cwd=str(tree), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert json.loads(self.read())["ready"]

    def read(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.label}: the worker exited ({self.process.wait()})")
        return line

    def batch(self, case: str, calls: int) -> dict[str, list[float]]:
        """Wall and CPU milliseconds of each call."""
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"case": case, "calls": calls}) + "\n")
        self.process.stdin.flush()
        found = json.loads(self.read())
        return {"wall": found["samples"], "cpu": found["cpu"]}

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


def measure(engine: str, trees: dict[str, Path], args: argparse.Namespace) -> dict[str, Any]:
    from bench.common import Database

    databases = {label: Database.create(engine, f"{args.pg_name}_{number}")
                 for number, label in enumerate(trees)}
    workers = [Worker(label, tree, engine, databases[label].name)
               for label, tree in trees.items()]
    samples: dict[str, dict[str, dict[str, list[float]]]] = {
        w.label: {c: {"wall": [], "cpu": []} for c in CASES} for w in workers}
    try:
        for index in range(args.rounds):
            for case in CASES:
                for found in (workers if index % 2 == 0 else workers[::-1]):
                    for kind, values in found.batch(case, args.calls).items():
                        samples[found.label][case][kind] += values
            print(f"[bench/append] {engine} round {index + 1}/{args.rounds}", file=sys.stderr,
                  flush=True)
    finally:
        for found in workers:
            found.close()
        for database in databases.values():
            drop(database)
    return samples


def drop(database: Any) -> None:
    """`Database.drop` without Django, which only the workers configure."""
    import shutil

    from bench.common import postgres_admin

    if database.engine == "postgres":
        with postgres_admin() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{database.name}"')
    else:
        shutil.rmtree(database.scratch_dir, ignore_errors=True)


def report(engine: str, samples: dict[str, dict[str, dict[str, list[float]]]]) -> str:
    from bench.common import median, percentile, table

    baseline, head = list(samples)
    rows = []
    for case in CASES:
        old, new = samples[baseline][case]["wall"], samples[head][case]["wall"]
        old_cpu, new_cpu = (median(samples[label][case]["cpu"]) for label in (baseline, head))
        old_floor, new_floor = (median(samples[label]["floor"]["wall"])
                                for label in (baseline, head))
        rows.append([
            case, f"{median(old):.3f} / {percentile(old, 0.95):.3f}",
            f"{median(new):.3f} / {percentile(new, 0.95):.3f}",
            f"×{median(new) / median(old):.2f}",
            f"{old_cpu:.3f} → {new_cpu:.3f} (×{new_cpu / old_cpu:.2f})",
            f"×{median(old) / old_floor:.2f} → ×{median(new) / new_floor:.2f}",
        ])
    return f"### {engine}\n\n" + table(
        ["case", f"{baseline}: p50 / p95 ms", f"{head}: p50 / p95 ms", "p50 ratio",
         "CPU ms p50", "÷ floor (p50)"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="main")
    parser.add_argument("--db", default="sqlite,postgres")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--pg-name", default="agentmemory_bench")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--worker", nargs=2, metavar=("ENGINE", "NAME"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:  # the target's tree first: its agentmemory, its bench.common
        sys.path.insert(0, os.environ["BENCH_TARGET"])
        worker(*args.worker)
        return
    sys.path.insert(0, str(ROOT))
    from bench.api import checkout, revision

    results: dict[str, Any] = {}
    with checkout(args.baseline) as old_tree:
        trees = {f"baseline {revision(args.baseline)}": old_tree,
                 f"this tree ({revision('HEAD')})": ROOT}
        for engine in args.db.split(","):
            results[engine] = measure(engine, trees, args)
            print(report(engine, results[engine]), flush=True)
    print(f"{args.rounds} rounds of {args.calls} calls per case and target; load average "
          f"{os.getloadavg()[0]:.2f} at the end.")
    if args.json:
        args.json.write_text(json.dumps(results))


if __name__ == "__main__":
    main()
