"""Folded threads: a fast builder, and the plan and time of recall's load query on them.

    .venv/bin/python bench/folded.py                          # SQLite, 1,000 to 1,000,000
    .venv/bin/python bench/folded.py --db postgres --sizes 1000,100000
    .venv/bin/python bench/folded.py --analyze                # the same after ANALYZE

A folded thread is what long use leaves: every entry but the newest ``tail`` is covered
by a summary. The summaries roll (each covers its span and the summary before it), so
one is live at the end; the first is left uncovered too, as a stale summary of the
earliest turns, which puts a visible row at the far end of the thread. Rows are written
in batched inserts (COPY on PostgreSQL), a million in under a minute, on a fresh
database: no ANALYZE unless asked, as on a user's first day.

The load query is written here in the shape of ``agentmemory.pipeline.load`` (the test,
tests/test_query_plan.py, checks the SQL the load itself sends); the plan printed is
the database's own (EXPLAIN QUERY PLAN, EXPLAIN ANALYZE).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import Database, describe_engine, median, setup_django  # noqa: E402

TAIL = 40  # uncovered messages at the end of a folded thread
CHUNK = 100  # messages per summary
LIMIT = 200  # the load's row cap: more than the visible rows, as budget-driven loads ask
SUMMARY_TEXT = "The user chased late orders; the agent looked them up and answered."
_PLAIN: tuple[dict[str, Any], ...] = (
    {"role": "user", "content": "Where is my parcel?", "tool_calls": [], "tool_name": "",
     "tool_call_id": "", "tokens": 8},
    {"role": "assistant", "content": "It left the depot this morning.", "tool_calls": [],
     "tool_name": "", "tool_call_id": "", "tokens": 10},
)

ENTRY_COLUMNS = (
    "id", "thread_id", "kind", "role", "content", "tool_calls", "tool_name", "tool_call_id",
    "turn", "position", "tier", "token_count", "created_at", "expires_at", "metadata",
    "summary_key", "covered_by_id",
)
COVERAGE_COLUMNS = (
    "summary_id", "from_turn", "to_turn", "entry_count", "span_tokens", "model",
    "summarized_at", "original_tokens", "version", "prompt_hash", "library_version",
    "signature", "missing_facts", "injection_flags", "level", "message_count",
)


def build_folded(
    thread_id: int,
    size: int,
    *,
    tail: int = TAIL,
    chunk: int = CHUNK,
    messages: Sequence[dict[str, Any]] = _PLAIN,
    start: datetime,
    expires_at: datetime | None = None,
) -> int:
    """Write a folded thread of ``size`` messages (plus its summaries); return the rows.

    ``messages`` are repeated: dicts with role, content, tool_calls, tool_name,
    tool_call_id and tokens (the stored count). A user message starts a turn.
    """
    from django.db import connection, transaction

    from agentmemory.models import MemoryEntry, SummaryCoverage, Thread
    from agentmemory.trust.signing import sign_summary

    covered = max(0, size - tail)
    spans = [(low, min(low + chunk - 1, covered)) for low in range(1, covered + 1, chunk)]
    first = (MemoryEntry.objects.order_by("-id").values_list("id", flat=True).first() or 0) + 1
    summary_ids = [first + size + index for index in range(len(spans))]
    # Adapted once for the database, not once a row.
    created, expires = (connection.ops.adapt_datetimefield_value(value)
                        for value in (start, expires_at))
    turns: list[int] = []
    turn = 0
    for position in range(1, size + 1):
        message = messages[(position - 1) % len(messages)]
        turn += 1 if message["role"] == "user" or turn == 0 else 0
        turns.append(turn)

    def entry_rows() -> Any:
        for position in range(1, size + 1):
            lap, index = divmod(position - 1, len(messages))
            message = messages[index]
            calls = [{**call, "id": f"{call['id']}-{lap}"} for call in message["tool_calls"]]
            call_id = f"{message['tool_call_id']}-{lap}" if message["tool_call_id"] else ""
            cover = summary_ids[(position - 1) // chunk] if position <= covered else None
            yield (first + position - 1, thread_id, "message", message["role"],
                   message["content"], json.dumps(calls), message["tool_name"], call_id,
                   turns[position - 1], position, "hot", message["tokens"], created, expires,
                   "{}", None, cover)  # fmt: skip
        for index, (low, high) in enumerate(spans):
            # Each summary folds the one before it; the first stays uncovered (stale).
            cover = summary_ids[index + 1] if 0 < index < len(spans) - 1 else None
            yield (summary_ids[index], thread_id, "summary", "system", SUMMARY_TEXT, "[]", "",
                   "", turns[high - 1], high, "hot", 14, created, expires, "{}",
                   f"msg-summary-{turns[low - 1]}-{turns[high - 1]}", cover)  # fmt: skip

    def coverage_rows() -> Any:
        for index, (low, high) in enumerate(spans):
            yield (summary_ids[index], turns[low - 1], turns[high - 1], high - low + 1,
                   0, "bench-instant", created, 0, 1, "", "bench", "", "[]", "[]",
                   max(1, index), high - low + 1)  # fmt: skip

    with transaction.atomic():
        _write("agentmemory_memoryentry", ENTRY_COLUMNS, entry_rows())
        _write("agentmemory_summarycoverage", COVERAGE_COLUMNS, coverage_rows())
        Thread.objects.filter(pk=thread_id).update(last_position=size, last_turn=turn)
        # Signed as a fold signs them, or recall would find them edited and retire them.
        # Only the uncovered ones: recall never reads the others.
        for summary in MemoryEntry.objects.filter(
            thread_id=thread_id, kind="summary", covered_by__isnull=True
        ).select_related("coverage"):
            SummaryCoverage.objects.filter(pk=summary.pk).update(
                signature=sign_summary(summary, summary.coverage)
            )
        if connection.vendor == "postgresql":  # the ids were given, not drawn
            with connection.cursor() as cursor:
                cursor.execute("SELECT setval(pg_get_serial_sequence("
                               "'agentmemory_memoryentry', 'id'), %s)", [first + size + len(spans)])
    return size + len(spans)


def _write(table: str, columns: Sequence[str], rows: Any, batch: int = 5_000) -> None:
    from django.db import connection

    names = ", ".join(columns)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            with cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        return
    sql = f"INSERT INTO {table} ({names}) VALUES ({', '.join(['%s'] * len(columns))})"
    pending: list[tuple[Any, ...]] = []
    with connection.cursor() as cursor:
        for row in rows:
            pending.append(row)
            if len(pending) == batch:
                cursor.executemany(sql, pending)
                pending.clear()
        cursor.executemany(sql, pending)


# ------------------------------------------------------------------ the load query


def load_queries(thread_id: int, now: datetime, tiers: Sequence[str] | None = None,
                 limit: int = LIMIT) -> dict[str, Any]:
    """Recall's load, newest first and (for backfills) oldest first, in the shape of
    ``agentmemory.pipeline.load``."""
    from django.db.models import Q

    from agentmemory.models import MemoryEntry

    rows = MemoryEntry.objects.filter(thread_id=thread_id).filter(
        covered_by__isnull=True, retired_at__isnull=True, held_at__isnull=True
    ).filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now) | Q(kind="summary"))
    if tiers is not None:
        rows = rows.filter(tier__in=list(tiers))
    rows = rows.select_related("coverage")
    return {
        "newest": rows.order_by("-position", "-id")[:limit],
        "oldest": rows.order_by("position", "id")[:limit],
    }


def explain(queryset: Any, analyze: bool = False) -> list[str]:
    """The database's plan for ``queryset``, one line a step."""
    sql, params = queryset.query.sql_with_params()
    return explain_sql(sql, params, analyze)


def explain_sql(sql: str, params: Sequence[Any] = (), analyze: bool = False) -> list[str]:
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            options = "ANALYZE, BUFFERS, COSTS OFF, TIMING OFF" if analyze else "COSTS OFF"
            cursor.execute(f"EXPLAIN ({options}) {sql}", params or None)
            return [row[0] for row in cursor.fetchall()]
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params or None)
        return [row[-1] for row in cursor.fetchall()]


def time_loads(querysets: dict[int, Any], repeats: int) -> dict[int, float]:
    """Median ms of evaluating each queryset (a fresh clone each time: no result cache),
    round robin over them, so whatever else the machine does falls on all alike."""
    samples: dict[int, list[float]] = {key: [] for key in querysets}
    for queryset in querysets.values():
        list(queryset.all())
    for _ in range(repeats):
        for key, queryset in querysets.items():
            began = time.perf_counter()
            list(queryset.all())
            samples[key].append((time.perf_counter() - began) * 1000)
    return {key: median(values) for key, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--pg-name", default="agentmemory_bench_folded")
    parser.add_argument("--sizes", default="1000,100000,1000000")
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--limit", type=int, default=LIMIT)
    parser.add_argument("--analyze", action="store_true", help="run ANALYZE after building")
    args = parser.parse_args()

    database = Database.create(args.db, args.pg_name)
    setup_django(database.engine, database.name, migrate=True)
    try:
        _run(args)
    finally:
        database.drop()


def _run(args: argparse.Namespace) -> None:
    from django.db import connection
    from django.utils import timezone

    from agentmemory.models import Thread

    now = timezone.now()
    print(describe_engine())
    threads = {}
    for size in (int(text) for text in args.sizes.split(",")):
        thread = Thread.objects.create(title=f"folded {size}")
        began = time.perf_counter()
        rows = build_folded(thread.pk, size, start=now - timedelta(hours=1))
        print(f"built {size:,} messages ({rows:,} rows) in {time.perf_counter() - began:.1f} s")
        threads[size] = thread.pk
    if args.analyze:
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        print("ANALYZE done")
    sizes = list(threads)
    print(f"\nms per load (median of {args.repeats}), {args.limit} rows asked:")
    print(f"{'query':<26}" + "".join(f"{size:>12,}" for size in sizes) + "   largest ÷ smallest")
    plans: dict[str, list[str]] = {}
    for tiers in (None, ["hot", "warm"]):
        for order in ("newest", "oldest"):
            label = f"{order} first, {'tier filter' if tiers else 'all tiers'}"
            querysets = {size: load_queries(thread_id, now, tiers, args.limit)[order]
                         for size, thread_id in threads.items()}
            ms = time_loads(querysets, args.repeats)
            rows = {len(list(queryset.all())) for queryset in querysets.values()}
            print(f"{label:<26}" + "".join(f"{ms[size]:12.2f}" for size in sizes)
                  + f"   ×{ms[sizes[-1]] / ms[sizes[0]]:.2f}   ({'/'.join(map(str, rows))} rows)")
            plans[label] = explain(querysets[sizes[-1]], analyze=True)
    for label, lines in plans.items():
        print(f"\nplan at {sizes[-1]:,}, {label}:")
        print("\n".join(f"    {line}" for line in lines))


if __name__ == "__main__":
    main()
