"""Benchmark: live-window compaction overhead without the model, and the span lookup.

    .venv/bin/python bench/window.py                 # SQLite (a temporary file)
    .venv/bin/python bench/window.py --db postgres   # its own database, dropped after

What it measures, all in microseconds:

* ``select()``: the pure split of a window of 50, 500 and 5,000 messages, for the
  sliding seam and the token-budget seam;
* ``compact()``: the whole compaction (validation, selection, the journal lookup,
  a summarizer that answers instantly with a fixed text, the not-smaller check, the
  FoldedSpan and ledger writes), and a replay of it (law 12: read from the journal);
* ``folded_span_for()``: the lookup by fingerprint with 100,000 FoldedSpan rows
  stored, for recorded summary messages (hits) and forged ones (misses).

The model call is left out on purpose: it is the provider's time, not ours. The
figures are medians over repeats (and the 95th percentile for the lookup). Django is
configured from ``tests.settings``; PostgreSQL is reached with the usual PG*
variables (host, port, user, password) and the database named by ``--pg-name`` is
created and dropped by this script.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import Database, describe_engine, setup_django  # noqa: E402

SIZES = (50, 500, 5_000)
BENCH_SETTINGS: dict[str, Any] = {
    "SUMMARIZER": {
        "BACKEND": "agentmemory.summarizers.callable.CallableSummarizer",
        "MODEL": "bench-instant",
        "OPTIONS": {"FUNCTION": "tests.helpers.instant"},
    },
    "WINDOW": {"CLASS": "agentmemory.window.seams.SlidingWindow", "OPTIONS": {"MAX_MESSAGES": 40}},
}


# ------------------------------------------------------------------ database


def configure(db: str, pg_name: str) -> Callable[[], str]:
    """Set Django up on a fresh database; return the teardown (it reports the engine)."""
    database = Database.create(db, pg_name)
    setup_django(database.engine, database.name, BENCH_SETTINGS, migrate=True)

    def teardown() -> str:
        engine = describe_engine()
        database.drop()
        return engine

    return teardown


# ------------------------------------------------------------------ windows


def agent_window(size: int, *, salt: str = "") -> list[dict[str, Any]]:
    """A system prompt, the request, then tool turns (call, result, answer, follow-up)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are the order desk agent of a parcel shop."},
        {"role": "user", "content": f"Find out why my orders are late and what to do.{salt}"},
    ]
    number = 0
    while len(messages) < size:
        number += 1
        call_id = f"call-{number}"
        messages += [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": call_id, "name": "lookup_order",
                                "arguments": json.dumps({"id": number})}],
            },
            {
                "role": "tool",
                "tool_call_id": call_id,
                "tool_name": "lookup_order",
                "content": json.dumps({"id": number, "status": "in transit", "carrier": "DHL",
                                       "eta": "2026-12-03"}),
            },
            {"role": "assistant",
             "content": f"Order {number} is in transit with DHL and should arrive on 3 December."},
            {"role": "user", "content": f"Thanks. Now order {number + 1}, please: same checks."},
        ]
    return messages[:size]


# ------------------------------------------------------------------ timing


@dataclass(frozen=True)
class Figure:
    name: str
    size: int
    wall_us: float  # median wall-clock time, database round trips and commits included
    cpu_us: float  # median CPU time of this process (the database server's is not in it)
    repeats: int


def sample(call: Callable[[Any], Any], argument: Any) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    call(argument)
    return (time.perf_counter() - wall) * 1e6, (time.process_time() - cpu) * 1e6


def measure(
    name: str,
    size: int,
    call: Callable[[Any], Any],
    prepare: Callable[[], Any] = lambda: None,
    *,
    budget_s: float = 1.0,
    low: int = 5,
    high: int = 2001,
) -> Figure:
    """Median over as many repeats as fit ``budget_s`` (between ``low`` and ``high``).

    ``prepare`` runs before each repeat, outside the timing; its result is the argument.
    """
    sample(call, prepare())  # warm-up: imports, the tokenizer, the statement cache
    once = max(sample(call, prepare())[0], 1.0) / 1e6
    count = max(low, min(high, int(budget_s / once)))
    samples = [sample(call, prepare()) for _ in range(count)]
    return Figure(
        name,
        size,
        statistics.median(wall for wall, _ in samples),
        statistics.median(cpu for _, cpu in samples),
        count,
    )


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


# ------------------------------------------------------------------ the measurements


def bench_select(size: int) -> list[Figure]:
    from agentmemory.window.seams import SlidingWindow, TokenBudgetWindow, WindowMessage

    messages = [WindowMessage.of(m) for m in agent_window(size)]
    sliding, budgeted = SlidingWindow(40), TokenBudgetWindow(300)
    assert sliding.select(messages, budget_tokens=None).drop
    assert budgeted.select(messages, budget_tokens=4_000).drop or size < 100
    return [
        measure("select(), SlidingWindow(40)", size,
                lambda _: sliding.select(messages, budget_tokens=None)),
        measure("select(), TokenBudgetWindow, budget 4,000 tokens", size,
                lambda _: budgeted.select(messages, budget_tokens=4_000), budget_s=1.5, low=3),
    ]


def bench_compact(size: int) -> list[Figure]:
    from agentmemory.models import Thread
    from agentmemory.window.compact import compact

    messages = agent_window(size)
    budget = 3.0 if size >= 5_000 else 1.5

    def first_fold(thread: Thread) -> None:
        result = compact(thread, messages, iteration=1)
        assert result.span is not None and not result.reused, result.refusal

    def new_thread() -> Thread:  # a new thread: the fold is not in its journal yet
        return Thread.objects.create(title=f"bench {size}")

    folded = new_thread()
    first_fold(folded)

    def replay(_: None) -> None:
        assert compact(folded, messages, iteration=1).reused

    return [
        measure("compact(), first fold (journal and ledger written)", size, first_fold,
                new_thread, budget_s=budget, high=301),
        measure("compact(), replay (read from the journal)", size, replay, budget_s=budget),
    ]


def bench_lookup(rows_wanted: int, samples: int) -> list[tuple[str, float, float, int]]:
    from agentmemory.models import FoldedSpan, Thread
    from agentmemory.trust.signing import sign_span
    from agentmemory.window.frame import (
        frame_label,
        span_fingerprint,
        summary_fingerprint,
        summary_message_content,
    )
    from agentmemory.window.lookup import folded_span_for
    from agentmemory.window.seams import WindowMessage

    per_thread = 100
    threads = Thread.objects.bulk_create(
        [Thread(title=f"lookup {n}") for n in range(rows_wanted // per_thread)], batch_size=1000
    )
    if threads[0].pk is None:  # backends that do not return ids from bulk_create
        threads = list(Thread.objects.filter(title__startswith="lookup ").order_by("id"))
    original = [{"role": "user", "content": "Where is order 4417?"},
                {"role": "assistant", "content": "In transit with DHL, due on 3 December."}]
    batch: list[FoldedSpan] = []
    probes: list[tuple[Thread, str]] = []
    rng = random.Random(7)
    for index in range(rows_wanted):
        thread = threads[index // per_thread]
        label = frame_label(message_count=2, iteration=index % per_thread, model="bench-model",
                            retain="conversation")
        content = summary_message_content(label, f"Summary number {index}: order 4417 is late.")
        span = FoldedSpan(
            thread=thread,
            fingerprint=summary_fingerprint(content),
            span_fingerprint=span_fingerprint(
                [WindowMessage("user", f"span {index}"), WindowMessage("assistant", "ok")]
            ),
            content=content, message_count=2, iteration=index % per_thread,
            model="bench-model", retain="conversation", messages=original,
        )
        span.signature = sign_span(span)  # an unsigned span reads as tampered
        batch.append(span)
        if rng.random() < samples / rows_wanted * 1.2:
            probes.append((thread, content))
        if len(batch) == 5000:
            FoldedSpan.objects.bulk_create(batch)
            batch.clear()
    FoldedSpan.objects.bulk_create(batch)
    assert FoldedSpan.objects.count() >= rows_wanted
    probes = probes[:samples]

    hits = []
    for thread, content in probes:
        message = {"role": "user", "content": content}
        started = time.perf_counter()
        span = folded_span_for(thread, message)
        hits.append((time.perf_counter() - started) * 1e6)
        assert span is not None and span.messages == original
    misses = []
    for thread, content in probes:
        forged = {"role": "user", "content": content + " "}  # one character more
        started = time.perf_counter()
        span = folded_span_for(thread, forged)
        misses.append((time.perf_counter() - started) * 1e6)
        assert span is None
    return [
        ("folded_span_for, recorded message (hit)", statistics.median(hits),
         percentile(hits, 0.95), len(hits)),
        ("folded_span_for, forged message (miss)", statistics.median(misses),
         percentile(misses, 0.95), len(misses)),
    ]


# ------------------------------------------------------------------ report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--pg-name", default="agentmemory_bench_window",
                        help="the PostgreSQL database to create and drop")
    parser.add_argument("--spans", type=int, default=100_000,
                        help="FoldedSpan rows stored for the lookup")
    parser.add_argument("--samples", type=int, default=2_000, help="lookups measured")
    args = parser.parse_args()

    started = time.perf_counter()
    teardown = configure(args.db, args.pg_name)
    import django

    from agentmemory.tokens import get_counter

    try:
        figures = [figure for size in SIZES for figure in bench_select(size)]
        figures += [figure for size in SIZES for figure in bench_compact(size)]
        stored = time.perf_counter()
        lookup_rows = bench_lookup(args.spans, args.samples)
        load_s = time.perf_counter() - stored
        counter = get_counter().name
    finally:
        engine = teardown()

    print(f"## Window compaction overhead ({engine})\n")
    print(f"Machine: {os.cpu_count()} CPUs (nproc), {platform.machine()}, "
          f"{platform.system()} {platform.release()}; Python {platform.python_version()}, "
          f"Django {django.get_version()}; token counter {counter}. "
          "The summarizer is a callable that returns a fixed text at once: no model time. "
          "Wall time includes the database's commits; CPU time is this process only.\n")
    print("| operation | messages in window | median µs (wall) | median µs (CPU) | repeats |")
    print("|---|---:|---:|---:|---:|")
    for f in figures:
        print(f"| {f.name} | {f.size:,} | {f.wall_us:,.0f} | {f.cpu_us:,.0f} | {f.repeats} |")
    print(f"\n{args.spans:,} FoldedSpan rows stored ({args.spans // 100:,} threads of 100, "
          f"bulk_create plus the lookup samples in {load_s:.1f} s).\n")
    print("| lookup | median µs | p95 µs | samples |")
    print("|---|---:|---:|---:|")
    for name, median, p95, count in lookup_rows:
        print(f"| {name} | {median:,.0f} | {p95:,.0f} | {count} |")
    print(f"\nTotal run time: {time.perf_counter() - started:.0f} s.")


if __name__ == "__main__":
    main()
