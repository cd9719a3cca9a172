"""Recall against the floor: ``services.recall`` beside the least work its context takes.

    .venv/bin/python bench/run.py --parts floor --output /tmp/floor.md   # through the suite
    .venv/bin/python bench/floor.py                       # both engines, JSON out
    .venv/bin/python bench/floor.py --db sqlite           # one engine, JSON out

A folded thread (bench/folded.py's builder) whose visible tail fills every budget
measured: TAIL messages of about MESSAGE_TOKENS stored tokens each (the seeded
conversation's texts, joined per role), the live summary and the stale first one. On it,
at each budget, round robin within each round:

* **recall**: ``services.recall(thread, B, mode="background")``, RECEIPTS off and on
  (``override_settings``; an untimed recall after each switch, as a reload of the
  settings drops the objects built from them);
* **floor**: the first load query that recall sends at B (its SQL and parameters as
  Django hands them to the driver, captured once), run on a plain driver connection
  (``sqlite3``, ``psycopg``), then the newest rows taken while their stored
  ``token_count`` sum stays within the room, their ``content`` joined with "\\n";
* **Agents SDK** (SQLite only, when the ``agents`` extra is installed):
  ``SQLiteSession.get_items(limit=N)`` on a file holding the same messages, N the number
  of messages the recall returned at B.

A backlog: threads of BACKLOG_SIZES entries nothing has folded, recalled at 4,000.
Every thread is marked as having a fold on its way (``Thread.fold_queued_until``
ahead), as while a worker folds it, so no recall requests a fold and none runs inside
the timings. PostgreSQL is ``VACUUM ANALYZE``\\ d after building.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import conversation as conv  # noqa: E402
from bench import folded  # noqa: E402
from bench.common import (  # noqa: E402
    INSTANT_SUMMARIZER,
    Database,
    describe_engine,
    each_engine_apart,
    median,
    number,
    percentile,
    setup_django,
    table,
)

ENGINES = ("sqlite", "postgres")
BUDGETS = (1_000, 4_000, 16_000, 128_000)
#: The first shape is as long as a thread used for years; the tail recall reads is the
#: same at any length (the folded part shows it flat from 1,000 to 1,000,000).
FOLDED_MESSAGES = 1_000_000
SEEDED_MESSAGES = 10_000
TAIL = 1_000  # uncovered messages: ~150,000 tokens, more than the largest room
MESSAGE_TOKENS = 150
CYCLE = 40  # distinct messages, user and assistant in turn
#: ``BENCH_QUICK=1`` (bench/run.py's smoke run): a few rounds, to try changes quickly.
QUICK = os.environ.get("BENCH_QUICK") == "1"
ROUNDS = 5 if QUICK else 80  # timed calls per case on the folded thread
#: The second shape: the seeded conversation as it is, its messages averaging about 40
#: stored tokens, so a room takes several times the rows (and a second page).
SEEDED_CYCLE = 200
SEEDED_TAIL = 4_000  # about 160,000 tokens, more than the largest room
BACKLOG_SIZES = (100, 10_000, 100_000)
BACKLOG_BUDGET = 4_000
BACKLOG_ROUNDS = 5 if QUICK else 80
TARGET_FLOOR = 2.0  # recall ÷ floor, RECEIPTS off
TARGET_RECEIPTS = 1.25  # RECEIPTS on ÷ off
TARGET_BACKLOG = 1.3  # largest backlog ÷ smallest
SETTINGS: dict[str, Any] = {"SUMMARIZER": INSTANT_SUMMARIZER}


def seeded_messages() -> list[dict[str, Any]]:
    """The seeded conversation's first SEEDED_CYCLE messages (whole turns) as they are:
    short messages, a tool call and its results every fifth turn; each counted once as
    ``append`` counts it."""
    from agentmemory.models import MemoryEntry
    from agentmemory.tokens import count_tokens
    from agentmemory.transcript import entry_line

    messages = conv.messages()
    end = max(i for i in range(SEEDED_CYCLE + 1) if messages[i]["role"] == "user")
    out: list[dict[str, Any]] = []
    for message in messages[:end]:
        shaped = {"role": message["role"], "content": message["content"],
                  "tool_calls": message.get("tool_calls") or [],
                  "tool_name": message.get("tool_name", ""),
                  "tool_call_id": message.get("tool_call_id", "")}
        entry = MemoryEntry(**{k: v for k, v in shaped.items() if k != "tool_call_id"})
        out.append({**shaped, "tokens": count_tokens(entry_line(entry))})
    return out


def long_messages() -> list[dict[str, Any]]:
    """CYCLE plain messages of at least MESSAGE_TOKENS tokens, each counted once as
    ``append`` counts it: the seeded conversation's texts of one role, joined."""
    from agentmemory.models import MemoryEntry
    from agentmemory.tokens import count_tokens
    from agentmemory.transcript import entry_line

    texts = {role: [m["content"] for m in conv.messages() if m["role"] == role and
                    not m.get("tool_calls")] for role in ("user", "assistant")}
    out: list[dict[str, Any]] = []
    for index in range(CYCLE):
        role = ("user", "assistant")[index % 2]
        pool, taken = texts[role], []
        entry = MemoryEntry(role=role, content="", tool_calls=[], tool_name="")
        while count_tokens(entry_line(entry)) < MESSAGE_TOKENS:
            taken.append(pool[(index * 7 + len(taken)) % len(pool)])
            entry.content = " ".join(taken)
        out.append({"role": role, "content": entry.content, "tool_calls": [], "tool_name": "",
                    "tool_call_id": "", "tokens": count_tokens(entry_line(entry))})
    return out


def build(size: int, tail: int, messages: list[dict[str, Any]]) -> Any:
    from django.utils import timezone

    from agentmemory.models import Thread

    start = timezone.now() - timedelta(hours=1)
    thread = Thread.objects.create(title=f"floor {size}")
    folded.build_folded(thread.pk, size, tail=tail, messages=messages, start=start,
                        expires_at=start + timedelta(days=30))
    # A fold on its way: a recall that leaves history out says fold-pending, asks for none.
    Thread.objects.filter(pk=thread.pk).update(fold_queued_until=start + timedelta(days=1))
    return Thread.objects.get(pk=thread.pk)


def load_statements(call: Callable[[], Any]) -> list[tuple[str, Any]]:
    """The load queries ``call`` sends to the entry table (its first page, any later
    page, the count of visible rows it left unread): SQL and parameters as Django hands
    them to the driver."""
    from django.db import connection

    sent: list[tuple[str, Any]] = []

    def spy(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        sent.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(spy):
        call()
    return [(sql, params) for sql, params in sent if sql.startswith("SELECT")
            and 'FROM "agentmemory_memoryentry"' in sql and "DESC" in sql]


class Floor:
    """The load query on a plain driver connection, and the least work after it."""

    def __init__(self, database: Database) -> None:
        if database.engine == "sqlite":
            import sqlite3

            self.connection: Any = sqlite3.connect(database.name)
        else:
            import psycopg
            from django.db import connection

            given = connection.settings_dict
            self.connection = psycopg.connect(
                host=given["HOST"], port=given["PORT"], user=given["USER"],
                password=given["PASSWORD"] or None, dbname=given["NAME"], autocommit=True)
        self.qmark = database.engine == "sqlite"

    def reader(self, statements: list[tuple[str, Any]], room: int
               ) -> Callable[[], tuple[str, int]]:
        if self.qmark:  # what Django's SQLite cursor does to the SQL before the driver
            statements = [(sql % {name: f":{name}" for name in params}
                           if isinstance(params, dict)
                           else re.sub(r"(?<!%)%s", "?", sql).replace("%%", "%"), params)
                          for sql, params in statements]
        cursor = self.connection.cursor()
        return lambda: newest_within(cursor, statements, room)


def newest_within(cursor: Any, statements: list[tuple[str, Any]], room: int
                  ) -> tuple[str, int]:
    """The least work after the load: ``statements`` run on ``cursor``, the newest rows
    taken while their stored token counts stay within ``room``, their text joined; the
    text and how many rows it holds."""
    found: list[tuple[Any, Any]] = []  # (token_count, content), newest first
    for sql, params in statements:
        cursor.execute(sql, params)
        names = [column[0] for column in cursor.description]
        rows = cursor.fetchall()
        if "token_count" in names:  # a page (the count of visible rows is not)
            at = names.index("token_count"), names.index("content")
            found.extend((row[at[0]], row[at[1]]) for row in rows)
    lines, held = [], 0
    for tokens, content in found:  # after the summaries, newest first
        held += tokens
        if held > room:
            break
        lines.append(content)
    lines.reverse()
    return "\n".join(lines), len(lines)


def agents_session(path: str, messages: list[dict[str, Any]]) -> Any:
    """The Agents SDK's session on a file, holding ``messages``; None without the SDK."""
    try:
        from agents.memory import SQLiteSession
    except ImportError:
        return None
    session = SQLiteSession("bench-floor", path)
    items = [{"role": m["role"], "content": m["content"]} for m in messages]
    asyncio.run(session.add_items(items))
    return session


def timed_round_robin(cases: dict[str, Callable[[], Any]], rounds: int,
                      between: Callable[[str], None] = lambda name: None) -> dict[str, Any]:
    """Each case once a round, ``rounds`` times, in order and in reverse order by turns,
    so no case always follows the same one; p50 and p95 in ms."""
    samples: dict[str, list[float]] = {name: [] for name in cases}
    forward = list(cases.items())
    for index in range(rounds):
        for name, call in forward if index % 2 == 0 else forward[::-1]:
            between(name)
            began = time.perf_counter()
            call()
            samples[name].append((time.perf_counter() - began) * 1000)
    return {name: {"p50_ms": median(values), "p95_ms": percentile(values, 0.95)}
            for name, values in samples.items()}


def measure_engine(engine: str, pg_name: str) -> dict[str, Any]:
    database = Database.create(engine, pg_name)
    setup_django(database.engine, database.name, SETTINGS, migrate=True)
    try:
        return _measure(database)
    finally:
        database.drop()


def _measure(database: Database) -> dict[str, Any]:
    from django.db import connection
    from django.test import override_settings
    from django.test.utils import CaptureQueriesContext

    from agentmemory import services
    from agentmemory.conf import memory_settings
    from agentmemory.pipeline.budget import context_room
    from agentmemory.pipeline.config import RecallConfig

    engine = describe_engine()
    if database.engine == "sqlite":
        # As the example project opens it (agentmemory.W004 warns of a journal synced at
        # every commit when receipts are on); `_journals` measures the rollback journal too.
        with connection.cursor() as cursor:
            for pragma in JOURNALS["wal"].split("; "):
                cursor.execute(pragma)
        engine = engine.replace("(file)", "(file, WAL)")
    messages = long_messages()
    began = time.perf_counter()
    thread = build(FOLDED_MESSAGES, TAIL, messages)
    seeded = seeded_messages()
    second = build(SEEDED_MESSAGES, SEEDED_TAIL, seeded)
    backlog = {size: build(size, size, messages) for size in BACKLOG_SIZES}
    out: dict[str, Any] = {"engine": engine, "messages": FOLDED_MESSAGES,
                           "reserve": memory_settings.RESERVE_TOKENS,
                           "tail": TAIL, "message_tokens": [m["tokens"] for m in messages],
                           "build_s": time.perf_counter() - began, "budgets": {},
                           "seeded": {"tail": SEEDED_TAIL, "budgets": {},
                                      "messages": SEEDED_MESSAGES,
                                      "message_tokens": [m["tokens"] for m in seeded]}}
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    receipts = {flag: override_settings(AGENTMEMORY={**SETTINGS, "RECEIPTS": flag})
                for flag in (False, True)}
    floor = Floor(database)
    session = None
    if database.engine == "sqlite":
        session = agents_session(os.path.join(database.scratch_dir, "agents.sqlite3"),
                                 [messages[i % CYCLE] for i in range(FOLDED_MESSAGES)])
    out["agents_sdk"] = session is not None
    loop = asyncio.new_event_loop()
    cases: dict[str, Callable[[], Any]] = {}
    contexts: dict[str, list[dict[str, Any]]] = {}  # what each budget recalled, for LangGraph
    for budget in BUDGETS:
        def recall(budget: int = budget) -> Any:
            return services.recall(thread, budget, mode="background")

        room = context_room(budget, RecallConfig.build())
        row: dict[str, Any] = {"room": room}
        for flag, label in ((False, "off"), (True, "on")):
            with receipts[flag]:
                recall()  # warm-up; the first also records the thread's recall budget
                with CaptureQueriesContext(connection) as captured:
                    result = recall()
                row[f"queries_{label}"] = len(captured.captured_queries)
        contexts[str(budget)] = [peer_message(message) for message in result.messages]
        row.update(messages=len(result.messages), tokens=result.tokens,
                   summaries=len(result.summaries_used), omitted=result.omitted,
                   omitted_reason=result.omitted_reason)
        with receipts[False]:
            recall()
            tracemalloc.start()
            recall()
            row["traced_peak_kib"] = tracemalloc.get_traced_memory()[1] / 1024
            tracemalloc.stop()
        with receipts[False]:
            read = floor.reader(load_statements(recall), room)
        text, lines = read()
        row.update(floor_rows=lines, floor_chars=len(text))
        out["budgets"][str(budget)] = row
        cases[f"floor {budget}"] = read
        cases[f"off {budget}"] = recall
        cases[f"on {budget}"] = recall
        def recall_seeded(budget: int = budget) -> Any:
            return services.recall(second, budget, mode="background")

        with receipts[False]:
            recall_seeded()
            with CaptureQueriesContext(connection) as captured:
                result = recall_seeded()
            read_seeded = floor.reader(load_statements(recall_seeded), room)
        text, lines = read_seeded()
        out["seeded"]["budgets"][str(budget)] = {
            "room": room, "messages": len(result.messages), "tokens": result.tokens,
            "summaries": len(result.summaries_used), "queries_off": len(captured.captured_queries),
            "floor_rows": lines, "floor_chars": len(text)}
        cases[f"floor {budget} seeded"] = read_seeded
        cases[f"off {budget} seeded"] = recall_seeded
        cases[f"on {budget} seeded"] = recall_seeded
        if session is not None:
            def items(n: int = row["messages"]) -> Any:
                return loop.run_until_complete(session.get_items(limit=n))

            items()
            cases[f"sdk {budget}"] = items
    state: dict[str, Any] = {"on": None}

    def switch(name: str) -> None:
        """RECEIPTS as the case needs; after a switch, one untimed recall."""
        flag = name.startswith("on ")
        if name.split()[0] in ("on", "off") and state["on"] is not flag:
            if state["on"] is not None:
                receipts[state["on"]].disable()
            receipts[flag].enable()
            state["on"] = flag
            services.recall(thread, BUDGETS[0], mode="background")

    # Receipts on together (first or last in a round), so a round switches twice, not at
    # every case.
    ordered = {name: cases[name] for name in sorted(cases, key=lambda n: n.startswith("on "))}
    timings = timed_round_robin(ordered, ROUNDS, switch)
    receipts[state["on"]].disable()
    for budget in BUDGETS:
        row = out["budgets"][str(budget)]
        for label in ("floor", "off", "on", "sdk"):
            if f"{label} {budget}" in timings:
                row[label] = timings[f"{label} {budget}"]
        for label in ("floor", "off", "on"):
            out["seeded"]["budgets"][str(budget)][label] = timings[f"{label} {budget} seeded"]
    out["backlog"] = _backlog(backlog)
    out["rounds"], out["backlog_rounds"] = ROUNDS, BACKLOG_ROUNDS
    floor.connection.close()  # a change of journal mode out of WAL waits for no reader
    if database.engine == "sqlite":
        out["journals"] = _journals(database, receipts, thread)
        out["langgraph"] = langgraph_reads(contexts, database.scratch_dir)
    return out


def peer_message(message: Any) -> dict[str, Any]:
    """A recalled message as bench/peers/lc.py takes it; a summary as a user message, as
    ``SummarizationMiddleware`` puts its own summary into the state."""
    return {"role": "user" if message.kind == "summary" else message.role,
            "content": message.content, "tool_calls": message.tool_calls,
            "tool_call_id": message.tool_call_id, "tool_name": message.tool_name}


def langgraph_reads(contexts: dict[str, list[dict[str, Any]]], scratch: str) -> dict[str, Any]:
    """bench/peers/langgraph_saver.py in the peers' interpreter: each budget's recalled
    context as a checkpointed state, read back by ``SqliteSaver`` and checked by
    ``SummarizationMiddleware``; its JSON, or ``{"error": why}``."""
    from bench.common import PEERS_PYTHON

    if not PEERS_PYTHON.exists():
        return {"error": f"{PEERS_PYTHON} is missing; run `make bench-peers`"}
    request = {"path": os.path.join(scratch, "langgraph.sqlite3"), "rounds": ROUNDS,
               "budgets": contexts}
    env = {**os.environ, "LANGSMITH_TRACING": "false", "OPENAI_API_KEY": "sk-bench-unused"}
    done = subprocess.run([str(PEERS_PYTHON), str(ROOT / "bench" / "peers" / "langgraph_saver.py")],
                          input=json.dumps(request), capture_output=True, text=True, env=env,
                          cwd=ROOT, check=False, timeout=600)
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1])


#: SQLite's journal as Django leaves it (a rollback journal, ``synchronous=FULL``), then
#: as production guides for Django on SQLite set it (``init_command``).
JOURNALS = {"delete": "PRAGMA journal_mode=DELETE; PRAGMA synchronous=FULL",
            "wal": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL"}
JOURNAL_NAMES = {"delete": "rollback (DELETE), FULL", "wal": "WAL, NORMAL"}


def _journals(database: Database, receipts: dict[bool, Any], thread: Any) -> dict[str, Any]:
    """Receipts on and off in each journal mode, beside the raw driver's durable write
    on the same disk (BEGIN, one INSERT, COMMIT): a receipt is at least one commit."""
    import sqlite3

    from django.db import connection

    from agentmemory import services

    out: dict[str, Any] = {}
    scratch = os.path.join(database.scratch_dir, "commit.sqlite3")
    for mode, pragmas in JOURNALS.items():
        with connection.cursor() as cursor:
            for pragma in pragmas.split("; "):
                cursor.execute(pragma)
        raw = sqlite3.connect(scratch, isolation_level=None)
        raw.executescript(pragmas + "; CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY,"
                          " v INTEGER)")

        def commit(raw: Any = raw) -> None:
            raw.execute("BEGIN")
            raw.execute("INSERT INTO t (v) VALUES (1)")
            raw.execute("COMMIT")

        cases: dict[str, Callable[[], Any]] = {"commit": commit}
        for label in ("off", "on"):  # receipts on together: a round switches twice
            for budget in BUDGETS:
                cases[f"{label} {budget}"] = (
                    lambda budget=budget: services.recall(thread, budget, mode="background"))
        state: dict[str, Any] = {"on": None}

        def switch(name: str, state: dict[str, Any] = state) -> None:
            flag = name.startswith("on ")
            if name != "commit" and state["on"] is not flag:
                if state["on"] is not None:
                    receipts[state["on"]].disable()
                receipts[flag].enable()
                state["on"] = flag
                services.recall(thread, BUDGETS[0], mode="background")

        out[mode] = timed_round_robin(cases, max(5, ROUNDS // 2), switch)
        receipts[state["on"]].disable()
        raw.close()
    return out


def _backlog(threads: dict[int, Any]) -> dict[str, Any]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from agentmemory import services

    calls = {str(size): (lambda t=thread: services.recall(t, BACKLOG_BUDGET, mode="background"))
             for size, thread in threads.items()}
    out: dict[str, Any] = {}
    for size, call in calls.items():
        call()
        with CaptureQueriesContext(connection) as captured:
            result = call()
        slowest = max(captured.captured_queries, key=lambda query: float(query["time"]))
        out[size] = {"queries": len(captured.captured_queries), "messages": len(result.messages),
                     "omitted": result.omitted, "slowest_ms": float(slowest["time"]) * 1000,
                     "slowest_sql": slowest["sql"][:120],
                     "slowest_counts": "COUNT(" in slowest["sql"][:40]}
    for size, figures in timed_round_robin(calls, BACKLOG_ROUNDS).items():
        out[size].update(figures)
    return out


def measure(engines: list[str], pg_name: str) -> dict[str, Any]:
    """Every engine in a fresh interpreter of its own, one after the other."""
    return each_engine_apart(Path(__file__), engines, f"{pg_name}_floor", "floor")


# ================================================================== the page


def _verdict(ok: bool) -> str:
    return "pass" if ok else "**fail**"


def _ms(figures: dict[str, float]) -> str:
    return f"{number(figures['p50_ms'], 2)} / {number(figures['p95_ms'], 2)}"


def section(results: dict[str, Any]) -> str:
    measured = results.get("floor")
    if not measured or not measured.get("engines"):
        return ""
    engines = measured["engines"]
    first = next(iter(engines.values()))
    tokens = first["message_tokens"]
    parts = [f"""## Recall against the floor

The least work a recall's context takes, measured beside `services.recall` in the same
process, round robin over every case ({first["rounds"]} rounds, every other one in
reverse order; the receipts-on cases together), so a shared machine's
noise falls on all alike (`bench/floor.py`). A folded thread of {first["messages"]:,}
messages (bench/folded.py's builder) keeps its newest {first["tail"]:,} uncovered:
{len(tokens)} distinct plain messages of {min(tokens)} to {max(tokens)} stored tokens
(the seeded conversation's texts, joined per role), repeated, so the visible tail holds
more than the largest room; the live summary and the stale first one are visible too.
Every thread is marked as having a fold on its way (`Thread.fold_queued_until` ahead,
as while a worker folds it), so a recall that leaves history out says `fold-pending`
and no fold runs in the timings. PostgreSQL is `VACUUM ANALYZE`d after building.
SQLite's file is in WAL mode with `synchronous=NORMAL`, as the example project opens it
(`agentmemory.W004` warns when receipts meet a journal synced at every commit); the
journal table after it has receipts in the rollback journal too.

* **recall**: `services.recall(thread, B, mode="background")` with `RECEIPTS` off, and
  on (`override_settings`; one untimed recall after each switch).
* **floor**: the load queries that recall sends at B (their SQL and parameters, as
  Django hands them to the driver, captured once) run on a plain `sqlite3` or `psycopg`
  connection, then the newest rows taken while their stored `token_count` sum stays
  within the room (B less the {first["reserve"]}-token reserve and the header), their `content`
  joined with `"\\n"`. The first query is recall's one round trip for its load
  (`agentmemory/pipeline/rows.py`): every visible summary with its coverage row and its
  sources, and the first page of the newest messages; the floor runs a later page and
  the count of the visible rows for `omitted` too, when the recall sent them. The
  recall also builds the entries, picks whole turns, renders each message with its
  role, and checks signatures.
* **queries**: Django's `CaptureQueriesContext` around one recall (BEGIN, SAVEPOINT and
  COMMIT included). **traced peak**: `tracemalloc`'s peak of Python allocations during
  one recall, receipts off (the interpreter's own memory and the database's excluded).
* Targets: recall ≤ {TARGET_FLOOR:g} × the floor (receipts off), receipts on ≤
  {TARGET_RECEIPTS:g} × off; times are p50 / p95 ms."""]
    for run in engines.values():
        rows = []
        for budget, row in run["budgets"].items():
            floor_ratio = row["off"]["p50_ms"] / row["floor"]["p50_ms"]
            receipts = row["on"]["p50_ms"] / row["off"]["p50_ms"]
            rows.append([
                f"{int(budget):,}", f"{row['room']:,}", f"{row['messages']} ({row['summaries']})",
                str(row["floor_rows"]), _ms(row["off"]), _ms(row["on"]), _ms(row["floor"]),
                f"×{floor_ratio:.1f}: {_verdict(floor_ratio <= TARGET_FLOOR)}",
                f"×{receipts:.2f}: {_verdict(receipts <= TARGET_RECEIPTS)}",
                f"{row['queries_off']} / {row['queries_on']}",
                number(row.get("traced_peak_kib", 0), 0),
            ])
        parts.append(f"### {run['engine']}\n\n" + table(
            ["budget", "room", "messages recalled (summaries)", "floor rows",
             "recall, receipts off", "recall, receipts on", "floor",
             f"recall ÷ floor (≤ {TARGET_FLOOR:g})", f"on ÷ off (≤ {TARGET_RECEIPTS:g})",
             "queries off / on", "traced peak KiB"], rows))
        parts.append(_journals_table(run))
        parts.append(_seeded(run))
    parts.append(_sdk(engines))
    parts.append(_backlog_table(engines))
    parts.append("\n".join(f"* {finding}" for finding in findings(engines)))
    parts.append(f"The part took {measured['elapsed_s'] / 60:.1f} minutes (building "
                 + ", ".join(f"{run['engine']} {run['build_s']:.0f} s" for run in engines.values())
                 + f"), at the source measured, {results.get('source', 'unknown')}.")
    return "\n\n".join(part for part in parts if part)


def _journals_table(run: dict[str, Any]) -> str:
    """SQLite's receipts in each journal mode, beside the raw driver's commit."""
    journals = run.get("journals")
    if not journals:
        return ""
    rows = []
    for mode, timings in journals.items():
        for budget in BUDGETS:
            off, on = timings[f"off {budget}"], timings[f"on {budget}"]
            ratio = on["p50_ms"] / off["p50_ms"]
            rows.append([JOURNAL_NAMES[mode], f"{budget:,}", _ms(off), _ms(on),
                         f"{on['p50_ms'] - off['p50_ms']:.2f}", _ms(timings["commit"]),
                         f"×{ratio:.2f}: {_verdict(ratio <= TARGET_RECEIPTS)}"])
    return ("A receipt on SQLite is one write statement a recall, and its commit is "
            "the disk's (`agentmemory.W004` warns of a journal synced at every commit): "
            "the same thread and budgets, receipts off and on, round robin, "
            "first with the journal as Django leaves it, then in WAL mode with "
            "`synchronous=NORMAL` (what production guides for Django on SQLite set "
            "through `OPTIONS[\"init_command\"]`), beside the raw driver's durable write "
            "on the same disk (BEGIN, one INSERT, COMMIT on a scratch file in the same "
            "journal mode).\n\n" + table(
                ["journal, synchronous", "budget", "receipts off", "receipts on", "on − off ms",
                 "raw commit", f"on ÷ off (≤ {TARGET_RECEIPTS:g})"], rows))


def _seeded(run: dict[str, Any]) -> str:
    """The second shape's table: the seeded conversation as it is."""
    seeded = run.get("seeded")
    if not seeded:
        return ""
    tokens = seeded["message_tokens"]
    rows = []
    for budget, row in seeded["budgets"].items():
        ratio = row["off"]["p50_ms"] / row["floor"]["p50_ms"]
        receipts = row["on"]["p50_ms"] / row["off"]["p50_ms"]
        rows.append([f"{int(budget):,}", f"{row['messages']} ({row['summaries']})",
                     str(row["floor_rows"]), _ms(row["off"]), _ms(row["on"]), _ms(row["floor"]),
                     f"×{ratio:.1f}: {_verdict(ratio <= TARGET_FLOOR)}",
                     f"×{receipts:.2f}: {_verdict(receipts <= TARGET_RECEIPTS)}",
                     str(row["queries_off"])])
    return (f"The same on a second shape, {run['engine']}: a folded thread of "
            f"{seeded['messages']:,} messages, the seeded "
            f"conversation's first {len(tokens)} as they are ({min(tokens)} to "
            f"{max(tokens)} stored tokens, {sum(tokens) / len(tokens):.0f} on average; a tool "
            f"call and its results every fifth turn), repeated, its newest "
            f"{seeded['tail']:,} uncovered. The floor runs every load query the recall sent "
            f"(a room of short messages takes a second page).\n\n" + table(
                ["budget", "messages recalled (summaries)", "floor rows",
                 "recall, receipts off", "recall, receipts on", "floor",
                 f"recall ÷ floor (≤ {TARGET_FLOOR:g})",
                 f"on ÷ off (≤ {TARGET_RECEIPTS:g})", "queries off"], rows))


def _sdk(engines: dict[str, Any]) -> str:
    run = next((run for run in engines.values() if run.get("agents_sdk")), None)
    if run is None:
        return ("The Agents SDK's `SQLiteSession` was not measured: the `agents` extra is "
                "not installed in this interpreter.")
    graph = run.get("langgraph") or {"error": "not run"}
    reads = graph.get("budgets", {})
    rows = []
    for budget, row in run["budgets"].items():
        read = reads.get(budget)
        rows.append([
            f"{int(budget):,}", str(row["messages"]), _ms(row["sdk"]),
            _ms(read) if read else "—", _ms(row["off"]),
            f"×{row['off']['p50_ms'] / row['sdk']['p50_ms']:.1f}",
            f"×{row['off']['p50_ms'] / read['p50_ms']:.1f}" if read else "—"])
    if "error" in graph:
        langgraph = f"LangGraph's `SqliteSaver` was not measured: {graph['error']}."
    else:
        versions = ", ".join(f"{name} {v}" for name, v in graph["versions"].items())
        langgraph = (
            f"LangGraph's `SqliteSaver` ({versions}; `bench/peers/langgraph_saver.py`, in "
            "the peers' interpreter after the round robin) holds, for each budget, the "
            "state `SummarizationMiddleware` leaves at that room: the recalled context "
            "itself (its summary as a user message, then the newest messages), "
            "checkpointed by a one-node graph. A turn's read is `get_tuple` of the "
            "thread's latest checkpoint and the middleware's `before_model` on its "
            "messages (its default token counter; under the trigger, no model call).")
    return f"""### The same messages through the Agents SDK and LangGraph

`agents.memory.SQLiteSession` (the project's `agents` extra, so in the same interpreter
and the same round robin as the {run["engine"]} rows above) on a file of its own holding
the folded thread's {run["messages"]:,} messages as items, read with
`get_items(limit=N)`, N the messages the recall returned at that budget (summaries
included), through one event loop (`run_until_complete`). The session keeps items and
reads the newest N: no budget, no summary, no rendering. {langgraph}

{table(["budget", "N", "get_items p50 / p95 ms", "LangGraph read p50 / p95 ms",
        "recall p50 / p95 ms (receipts off)", "recall ÷ get_items (p50)",
        "recall ÷ LangGraph read (p50)"], rows)}"""


def _backlog_table(engines: dict[str, Any]) -> str:
    sizes = list(next(iter(engines.values()))["backlog"])
    rows = []
    for size in sizes:
        cells = [f"{int(size):,}"]
        for run in engines.values():
            row = run["backlog"][size]
            cells += [_ms(row), str(row["queries"])]
        rows.append(cells)
    growth = []
    for run in engines.values():
        ratio = run["backlog"][sizes[-1]]["p50_ms"] / run["backlog"][sizes[0]]["p50_ms"]
        growth.append(f"{run['engine']} ×{ratio:.2f} ({_verdict(ratio <= TARGET_BACKLOG)})")
    headers = ["entries"] + [f"{run['engine']}: {what}" for run in engines.values()
                             for what in ("p50 / p95 ms", "queries")]
    return f"""### A backlog nothing has folded

Threads of {", ".join(f"{int(size):,}" for size in sizes)} entries of the same messages,
no summaries, `services.recall(thread, {BACKLOG_BUDGET:,}, mode="background")`, receipts
off, round robin over the sizes. Target: p50 at the largest ≤ {TARGET_BACKLOG:g} × the
smallest.

{table(headers, rows)}

Largest ÷ smallest, p50: {"; ".join(growth)}."""


def findings(engines: dict[str, Any]) -> list[str]:
    """Sentences written from the figures."""
    found = []
    for run in engines.values():
        budgets = run["budgets"]
        ratios = {b: row["off"]["p50_ms"] / row["floor"]["p50_ms"] for b, row in budgets.items()}
        receipts = {b: row["on"]["p50_ms"] / row["off"]["p50_ms"] for b, row in budgets.items()}
        met = [f"{int(b):,}" for b, ratio in ratios.items() if ratio <= TARGET_FLOOR]
        found.append(
            f"{run['engine']}: recall takes ×{min(ratios.values()):.1f} to "
            f"×{max(ratios.values()):.1f} the floor's time (the largest at "
            f"{int(max(ratios, key=ratios.__getitem__)):,}); within ×{TARGET_FLOOR:g} at "
            f"{', '.join(met) if met else f'none of the {len(ratios)} budgets'}. Receipts "
            f"on ÷ off: ×{min(receipts.values()):.2f} to ×{max(receipts.values()):.2f}.")
        if run.get("seeded"):
            second = {b: row["off"]["p50_ms"] / row["floor"]["p50_ms"]
                      for b, row in run["seeded"]["budgets"].items()}
            filed = {b: row["on"]["p50_ms"] / row["off"]["p50_ms"]
                     for b, row in run["seeded"]["budgets"].items()}
            found.append(
                f"{run['engine']}, the seeded conversation's shape: ×{min(second.values()):.1f}"
                f" to ×{max(second.values()):.1f} the floor's time; receipts on ÷ off "
                f"×{min(filed.values()):.2f} to ×{max(filed.values()):.2f}.")
        backlog = run["backlog"]
        sizes = sorted(backlog, key=int)
        small, large = backlog[sizes[0]], backlog[sizes[-1]]
        if large["p50_ms"] / small["p50_ms"] > TARGET_BACKLOG:
            what = ("a count of the visible rows" if large["slowest_counts"]
                    else f"`{large['slowest_sql'][:60]}...`")
            # Past the thread the first page reads whole, the growth that is left.
            middle = backlog[sizes[1]] if len(sizes) > 2 else small
            grown = large["p50_ms"] / small["p50_ms"]
            found.append(
                f"{run['engine']}: the backlog's recall is ×{grown:.2f} "
                f"from {int(sizes[0]):,} to {int(sizes[-1]):,} entries and "
                f"×{large['p50_ms'] / middle['p50_ms']:.2f} from {int(sizes[1]):,}: the "
                f"smallest thread is read whole by the first page ({small['queries']} queries), "
                f"a longer one takes {large['queries']}, the slowest of them {what} "
                f"({large['slowest_ms']:,.1f} ms of a p50 of {large['p50_ms']:,.1f} ms).")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=ENGINES, help="one engine, here (default: each, "
                        "in a subprocess of its own)")
    parser.add_argument("--pg-name", default="agentmemory_bench_floor")
    parser.add_argument("--out", default="", help="JSON file (default: print)")
    args = parser.parse_args()
    result = (measure_engine(args.db, args.pg_name) if args.db
              else measure(list(ENGINES), args.pg_name))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    else:
        print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
