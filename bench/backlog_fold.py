"""A backlog fold's time per fold against one fold of the same span on a short thread.

    .venv/bin/python bench/run.py --parts backlog          # its section of the page
    .venv/bin/python bench/backlog_fold.py                 # both engines, Markdown out
    .venv/bin/python bench/backlog_fold.py --db sqlite --json   # one engine, JSON out

``services.fold(thread)`` on threads nothing has folded (bench/folded.py's builder, in
a transaction that is rolled back, so every round does the same work), with a
summarizer that records each call's input and answers a fixed text at once (the
library's time, no model's). Two shapes: the floor part's long plain messages, and the
seeded conversation as it is (short messages, tool rounds).

The short thread is the smallest whose fold makes exactly one call over as much text
as the backlog's first call (found by bisection on the number of entries): a fold's
work is linear in the text it folds, so a short thread whose one fold spans less text
would flatter the backlog's ratio. The backlogs, 10,000 and 100,000 entries, make
``FOLDS_PER_TASK`` calls per fold call. Rounds take the threads in turn (in reverse
every other round). Target: a backlog's time per fold (p50 of its fold call ÷ calls)
within 1.5 × the short thread's.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import Database, each_engine_apart, median, setup_django  # noqa: E402

SUMMARIZER = {"BACKEND": "agentmemory.summarizers.callable.CallableSummarizer",
              "MODEL": "bench-recording", "OPTIONS": {"FUNCTION": "bench.backlog_fold.answer"}}
ENGINES = ("sqlite", "postgres")
BACKLOGS = (10_000, 100_000)
TARGET = 1.5
ROUNDS = 3
#: Each summarizer call's input, in characters, since the last `_calls` read.
_SEEN: list[int] = []


def answer(messages: Any) -> str:
    _SEEN.append(sum(len(str(_content(message))) for message in messages))
    return "The user chased late orders; the agent looked them up and answered."


def _content(message: Any) -> Any:
    return message.get("content", "") if isinstance(message, dict) else message.content


def _calls() -> list[int]:
    # The summarizer imports this file as bench.backlog_fold, not as __main__.
    seen: list[int] = importlib.import_module("bench.backlog_fold")._SEEN
    calls = list(seen)
    seen.clear()
    return calls


def fold_once(thread: Any) -> tuple[float, list[int]]:
    """One fold call, rolled back: its milliseconds and each call's input characters."""
    from django.db import transaction

    from agentmemory import services

    _calls()
    with transaction.atomic():
        began = time.perf_counter()
        services.fold(thread)
        elapsed = (time.perf_counter() - began) * 1000
        transaction.set_rollback(True)
    return elapsed, _calls()


def backlog(size: int, messages: list[dict[str, Any]]) -> Any:
    from agentmemory.models import Thread
    from bench import floor

    thread = floor.build(size, size, messages)
    Thread.objects.filter(pk=thread.pk).update(fold_queued_until=None)  # free to fold
    return Thread.objects.get(pk=thread.pk)


def short_thread(messages: list[dict[str, Any]], span: int) -> Any:
    """The smallest thread whose fold is one call over at least ``span`` characters."""
    low, high = 2, 20 * len(messages)
    found = None
    while low < high:
        size = (low + high) // 2
        thread = backlog(size, messages)
        _, calls = fold_once(thread)
        if len(calls) == 1 and calls[0] >= span:
            found, high = thread, size
        elif calls and calls[0] >= span:  # a second call: fewer entries
            high = size
        else:
            low = size + 1
    return found if found is not None else backlog(low, messages)


def measure_shape(name: str, messages: list[dict[str, Any]], rounds: int) -> dict[str, Any]:
    from django.db import connection

    threads = {size: backlog(size, messages) for size in BACKLOGS}
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    _, first = fold_once(threads[BACKLOGS[0]])
    short = short_thread(messages, first[0])
    cases = {"short": short, **{str(size): thread for size, thread in threads.items()}}
    times: dict[str, list[float]] = {key: [] for key in cases}
    calls: dict[str, list[int]] = {}
    ordered = list(cases.items())
    for index in range(rounds):
        for key, thread in ordered if index % 2 == 0 else ordered[::-1]:
            elapsed, seen = fold_once(thread)
            times[key].append(elapsed)
            calls[key] = seen
    out: dict[str, Any] = {"shape": name, "short_entries": _size(short), "cases": {}}
    for key in cases:
        per_fold = median(times[key]) / max(1, len(calls[key]))
        out["cases"][key] = {"p50_ms": median(times[key]), "calls": len(calls[key]),
                             "input_chars": calls[key], "per_fold_ms": per_fold}
    shortest = out["cases"]["short"]["per_fold_ms"]
    for key in cases:
        out["cases"][key]["ratio"] = out["cases"][key]["per_fold_ms"] / shortest
    return out


def _size(thread: Any) -> int:
    from agentmemory.models import MemoryEntry

    return MemoryEntry.objects.filter(thread=thread).count()


def measure_engine(engine: str, pg_name: str, rounds: int = ROUNDS) -> dict[str, Any]:
    database = Database.create(engine, pg_name)
    setup_django(database.engine, database.name, {"SUMMARIZER": SUMMARIZER}, migrate=True)
    try:
        from bench import floor
        from bench.common import describe_engine

        return {"engine": describe_engine(), "rounds": rounds, "shapes": [
            measure_shape("long", floor.long_messages(), rounds),
            measure_shape("seeded", floor.seeded_messages(), rounds)]}
    finally:
        database.drop()


def measure(engines: list[str], pg_name: str) -> dict[str, Any]:
    """Every engine in a fresh interpreter of its own, one after the other."""
    return each_engine_apart(Path(__file__), engines, f"{pg_name}_backlog", "backlog fold",
                             "--json")


def table(run: dict[str, Any]) -> str:
    lines = ["| shape | thread | fold call p50 ms | calls | characters a call | ms a fold |"
             f" ÷ short (≤ {TARGET}) |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for shape in run["shapes"]:
        for key, case in shape["cases"].items():
            thread = (f"short ({shape['short_entries']:,} entries)" if key == "short"
                      else f"{int(key):,} entries")
            chars = case["input_chars"]
            verdict = "" if key == "short" else (
                f"×{case['ratio']:.2f}: " + ("pass" if case["ratio"] <= TARGET else "**fail**"))
            lines.append(f"| {shape['shape']} | {thread} | {case['p50_ms']:,.0f} | "
                         f"{case['calls']} | {min(chars):,}–{max(chars):,} | "
                         f"{case['per_fold_ms']:,.0f} | {verdict or '—'} |")
    return "\n".join(lines)


def section(results: dict[str, Any]) -> str:
    """The page's section, from `measure`'s figures; empty when the part did not run."""
    runs = results.get("backlog", {}).get("engines", {})
    if not runs:
        return ""
    rounds = next(iter(runs.values()))["rounds"]
    parts = [f"""## A backlog fold, per fold

`services.fold(thread)` on threads nothing has folded, per fold, against one fold of the
same text on a short thread (`bench/backlog_fold.py`): {rounds} rounds taking the threads
in turn, each fold call in a transaction that is rolled back, with a summarizer that
records each call's input and answers a fixed text at once (the library's time, not a
model's). Two shapes: the floor part's long plain messages and the seeded conversation
as it is. The short thread is the smallest whose fold is one call over as much text as
the backlog's first call (found by bisection on its length): a fold's work follows the
text it folds, so a shorter span would flatter the ratio (the per-call fold figures
above set one small fold against ten full ones). A backlog makes up to `FOLDS_PER_TASK`
(10) calls a fold call; it stops sooner when its room is reached. Target: a backlog's
time per fold within {TARGET} × the short thread's."""]
    for run in runs.values():
        parts.append(f"### {run['engine']}\n\n" + table(run))
    return "\n\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=ENGINES, help="one engine, here (default: each, "
                        "in a subprocess of its own)")
    parser.add_argument("--pg-name", default="agentmemory_bench_backlog_fold")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--json", action="store_true", help="JSON, not Markdown")
    parser.add_argument("--out", default="", help="a file (default: print)")
    args = parser.parse_args()
    if args.db:
        run: dict[str, Any] = measure_engine(args.db, args.pg_name, args.rounds)
        text = json.dumps(run, indent=1) if args.json else f"### {run['engine']}\n\n" + table(run)
    else:
        results = {"backlog": measure(list(ENGINES), args.pg_name)}
        text = json.dumps(results, indent=1) if args.json else section(results)
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
