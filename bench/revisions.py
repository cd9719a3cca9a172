"""Recall ÷ floor of two revisions, in processes that take turns on one SQLite file.

    .venv/bin/python bench/revisions.py c1df3f7             # that commit against this checkout
    .venv/bin/python bench/revisions.py c1df3f7 --turns 5 --budgets 1000,128000

The machine the benchmarks run on is a virtual one whose speed moves between phases:
the same code's recall took up to half again as long from one phase to the next, and
Python-heavy recall and the driver-bound floor do not slow down alike, so one run of
`make bench` can move recall ÷ floor more than a small change does. This compares two
revisions as closely as the machine allows: ``BASE`` (checked out with ``git worktree``
into a scratch directory) and this checkout run in separate processes, one after the
other, ``--turns`` times each, on the same file, built once by this checkout with
bench/floor.py's folded thread (``--size`` messages). Each process measures recall
(``mode="background"``, receipts off) and the floor interleaved, as bench/floor.py does,
and reports recall ÷ floor per budget. Both revisions must read the same schema.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def child(root: str, path: str, budgets: list[int], rounds: int, size: int) -> dict[str, Any]:
    """In a process of its own, the code of ``root``: recall ÷ floor at each budget (or,
    when ``path`` does not exist yet, build the thread there)."""
    sys.path.insert(0, root)
    os.chdir(root)
    from bench import floor
    from bench.common import Database, setup_django

    build = not os.path.exists(path)
    setup_django("sqlite", path, floor.SETTINGS, migrate=build)
    from agentmemory import services
    from agentmemory.models import Thread
    from agentmemory.pipeline.budget import context_room
    from agentmemory.pipeline.config import RecallConfig

    if build:
        floor.build(size, floor.TAIL, floor.long_messages())
        return {}
    thread = Thread.objects.get()
    reader = floor.Floor(Database("sqlite", path))
    ratios = {}
    for budget in budgets:
        def recall(budget: int = budget) -> Any:
            return services.recall(thread, budget, mode="background")

        recall()
        read = reader.reader(floor.load_statements(recall), context_room(budget,
                                                                         RecallConfig.build()))
        times = floor.timed_round_robin({"recall": recall, "floor": read}, rounds)
        ratios[str(budget)] = times["recall"]["p50_ms"] / times["floor"]["p50_ms"]
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", help="the revision to compare this checkout with")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--budgets", default="1000,16000,128000")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--child", nargs=2, metavar=("ROOT", "FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    if args.child:
        print(json.dumps(child(*args.child, budgets, args.rounds, args.size)))
        return
    scratch = tempfile.mkdtemp(prefix="agentmemory-revisions-")
    base, path = os.path.join(scratch, "base"), os.path.join(scratch, "thread.sqlite3")
    subprocess.run(["git", "worktree", "add", "--detach", base, args.base], cwd=ROOT,
                   check=True, capture_output=True)

    def run(root: str) -> dict[str, float]:
        command = [sys.executable, str(ROOT / "bench" / "revisions.py"), args.base,
                   "--budgets", args.budgets, "--rounds", str(args.rounds),
                   "--size", str(args.size), "--child", root, path]
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        return json.loads(out.strip().splitlines()[-1])

    try:
        began = time.perf_counter()
        run(str(ROOT))  # builds the file
        found: dict[str, list[dict[str, float]]] = {"base": [], "this checkout": []}
        for _ in range(args.turns):
            found["base"].append(run(base))
            found["this checkout"].append(run(str(ROOT)))
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", base], cwd=ROOT, check=False)
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"recall ÷ floor, {args.base} against this checkout, {args.turns} processes each,"
          f" taking turns ({time.perf_counter() - began:.0f} s):")
    for budget in budgets:
        cells = {name: [turn[str(budget)] for turn in turns] for name, turns in found.items()}
        print(f"  {budget:>7,}: " + "; ".join(
            f"{name} " + " / ".join(f"x{r:.2f}" for r in ratios)
            + f" (median x{statistics.median(ratios):.2f})" for name, ratios in cells.items()))


if __name__ == "__main__":
    main()
