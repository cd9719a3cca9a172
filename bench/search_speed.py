"""Search speed: ``services.search`` for an owner of 10,000 to 1,000,000 entries (issue 23).

    .venv/bin/python bench/run.py --parts search --output -       # through the suite
    .venv/bin/python bench/search_speed.py --db sqlite             # one engine, JSON out
    .venv/bin/python bench/search_speed.py --db postgres --sizes 10000,100000

One owner's threads (10,000 entries each) are written in batched inserts (COPY on
PostgreSQL, ``executemany`` on SQLite; bench/folded.py's writer) from the seeded
generator (bench/conversation.py) asked for as many turns as the entries need, so its
order numbers stay unique: a rare word stays rare as the owner grows. The index is
maintained as the app maintains it: on SQLite the initial migration's triggers index
each batch of 64 inserts, and the last batch not yet full is indexed before measuring,
as a search would; on PostgreSQL the GIN index is updated by every COPY. The owner
grows from 10,000 to 100,000 to 1,000,000 entries in one database, which is then
``ANALYZE``\\ d (PostgreSQL: ``VACUUM ANALYZE``, what autovacuum would do; it also moves
the GIN index's pending list into the index) before each size is measured. Token
counts are a rough four characters a token: search never reads them. After the largest
size, a second owner of 10,000 entries is added: the same searches for it, in a database
holding everyone's entries.

The queries are a mix, each run the same number of times round robin: rare words (an
order number of the owner's first thread: 2 to 4 messages hold it), common words (the
share of messages holding each is measured) and quoted phrases. Every call is
``services.search(owner, query, limit=10)``; p50 and p95 are over every call of the
mix. The plan of the largest size's slowest query is the database's own (EXPLAIN QUERY
PLAN; EXPLAIN ANALYZE on PostgreSQL).

The index's cost: ``services.append`` of one message a call, on a database of 100,000
entries with the index and on one where it was dropped (as the initial migration's
reverse drops it), timed in one process in blocks that take turns, beside an A/A
control (the database with the index timed again: the procedure's own noise); and the
bytes the index takes (SQLite: the FTS5 tables' pages, by ``dbstat``; PostgreSQL:
``pg_relation_size`` of the GIN index) beside the database's. Each state ran in fresh
processes of its own before: on a shared machine two copies of one database timed that
way differed by as much as the index's share itself.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import conversation as conv  # noqa: E402
from bench.common import Database, describe_engine, median, number, percentile, table  # noqa: E402

SIZES = (10_000, 100_000, 1_000_000)
ENGINES = ("sqlite", "postgres")
THREAD_ENTRIES = 10_000
LIMIT = 10
#: What services.search asks the index for at LIMIT: a few more, for expired rows it drops.
LOOKUP_LIMIT = LIMIT * 2 + 10
COMMON = ("order", "refund", "delivery", "depot")
PHRASES = ('"two working days"', '"held at customs"', '"new delivery slot"',
           '"tracking page"')
RARE = 4  # order numbers of the first thread
#: Calls per query per size: as many as fit TIME_PER_SIZE seconds, within these bounds.
REPEATS_MIN, REPEATS_MAX = 3, 30
TIME_PER_SIZE = 40.0
TARGET_P50_MS = 20.0
TARGET_GROWTH = 2.0
TARGET_APPEND_SHARE = 0.15
APPEND_ROWS = 100_000  # the database the appends are timed on
#: Appends timed a block, untimed before them, and blocks of each state.
APPEND_CALLS, APPEND_WARM, APPEND_BLOCKS = 100, 30, 24
MEMORY_DIR = "/dev/shm"

CLASSES = ("rare", "common", "phrase")


# ================================================================== building


def messages() -> Iterator[dict[str, Any]]:
    """The seeded generator's messages, as many as asked for (it is asked for plenty)."""
    for turn in conv.conversation(turns=10_000_000):
        yield from turn.messages


class Owner:
    """An owner's threads, written THREAD_ENTRIES entries at a time from one stream."""

    def __init__(self, name: str, stream: Iterator[dict[str, Any]]) -> None:
        from django.contrib.auth import get_user_model

        self.user = get_user_model().objects.create_user(name)
        self.stream = stream
        self.entries = 0
        self.first_thread_orders: list[str] = []

    def grow(self, size: int) -> float:
        """Write threads until the owner has ``size`` entries; the seconds it took."""
        began = time.perf_counter()
        while self.entries < size:
            self._thread()
        return time.perf_counter() - began

    def _thread(self) -> None:
        from django.db import connection, transaction
        from django.utils import timezone

        from agentmemory.models import MemoryEntry, Thread
        from bench.folded import ENTRY_COLUMNS, _write

        thread = Thread.objects.create(owner=self.user, title=f"search {self.entries}")
        first = (MemoryEntry.objects.order_by("-id").values_list("id", flat=True).first() or 0) + 1
        start = connection.ops.adapt_datetimefield_value(timezone.now() - timedelta(days=1))
        taken = [next(self.stream) for _ in range(THREAD_ENTRIES)]
        if not self.first_thread_orders:
            self.first_thread_orders = _orders(taken)
        turns = []
        turn = 0
        for message in taken:
            turn += 1 if message["role"] == "user" or turn == 0 else 0
            turns.append(turn)

        def rows() -> Iterator[tuple[Any, ...]]:
            for index, message in enumerate(taken):
                calls = [{"id": c["id"], "name": c["name"], "arguments": c["arguments"]}
                         for c in message.get("tool_calls") or []]
                yield (first + index, thread.pk, "message", message["role"], message["content"],
                       json.dumps(calls), message.get("tool_name", ""),
                       message.get("tool_call_id", ""), turns[index], index + 1, "hot",
                       len(message["content"]) // 4 + 4, start, None, "{}", None, None)

        with transaction.atomic():
            _write("agentmemory_memoryentry", ENTRY_COLUMNS, rows())
            Thread.objects.filter(pk=thread.pk).update(last_position=THREAD_ENTRIES,
                                                       last_turn=turn)
            if connection.vendor == "postgresql":  # the ids were given, not drawn
                with connection.cursor() as cursor:
                    cursor.execute("SELECT setval(pg_get_serial_sequence("
                                   "'agentmemory_memoryentry', 'id'), %s)",
                                   [first + THREAD_ENTRIES])
        self.entries += THREAD_ENTRIES


def _orders(taken: list[dict[str, Any]]) -> list[str]:
    """RARE order numbers of the thread, spread over it (each held by 2 to 4 messages)."""
    import re

    found = list(dict.fromkeys(
        match for m in taken if m["role"] == "user"
        for match in re.findall(r"#(\d{5})", m["content"])))
    step = max(1, len(found) // RARE)
    return found[step // 2::step][:RARE]


def caught_up() -> None:
    """The SQLite index takes the last batch of inserts not yet full, as the first search
    would."""
    from django.db import connection

    from agentmemory.search.schema import catch_up

    catch_up(connection)


def analyze() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")


# ================================================================== measuring


def queries(owner: Owner) -> dict[str, str]:
    """``{query: class}``, the mix every size is measured with."""
    mix = {number: "rare" for number in owner.first_thread_orders}
    mix.update({word: "common" for word in COMMON})
    mix.update({phrase: "phrase" for phrase in PHRASES})
    return mix


def matches(query: str, owner: Any) -> int:
    """How many of the owner's entries the query matches (the engine's own count)."""
    from django.db import connection

    from agentmemory.conf import memory_settings
    from agentmemory.search.index import FTS_TABLE
    from agentmemory.search.query import parse_query

    terms = parse_query(query).terms
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            language = memory_settings.SEARCH_LANGUAGE
            tsquery = " && ".join(f"phraseto_tsquery('{language}'::regconfig, %s)"
                                  for _ in terms)
            cursor.execute(
                "SELECT count(*) FROM agentmemory_memoryentry e JOIN agentmemory_thread t "
                "ON t.id = e.thread_id WHERE e.search_vector @@ "
                f"({tsquery}) AND t.owner_id = %s",
                [" ".join(term) for term in terms] + [owner.pk])
        else:
            match = " ".join('"' + " ".join(term) + '"' for term in terms)
            cursor.execute(
                f"SELECT count(*) FROM {FTS_TABLE} JOIN agentmemory_memoryentry e ON "
                f"e.id = {FTS_TABLE}.rowid JOIN agentmemory_thread t ON t.id = e.thread_id "
                f"WHERE {FTS_TABLE} MATCH %s AND t.owner_id = %s", [match, owner.pk])
        return int(cursor.fetchone()[0])


def time_searches(owner: Owner, mix: dict[str, str]) -> dict[str, Any]:
    """Every query of the mix the same number of times, round robin."""
    from agentmemory import services

    def once(query: str) -> float:
        began = time.perf_counter()
        services.search(owner.user, query, limit=LIMIT)
        return (time.perf_counter() - began) * 1000

    warm = {query: once(query) for query in mix}  # warm-up, and the repeats to afford
    repeats = int(max(REPEATS_MIN, min(REPEATS_MAX, TIME_PER_SIZE * 1000 / sum(warm.values()))))
    samples: dict[str, list[float]] = {query: [] for query in mix}
    for _ in range(repeats):
        for query in mix:
            samples[query].append(once(query))
    every = [value for values in samples.values() for value in values]
    by_class = {name: [v for q, values in samples.items() if mix[q] == name for v in values]
                for name in CLASSES}
    return {
        "repeats": repeats,
        "p50_ms": median(every), "p95_ms": percentile(every, 0.95),
        "classes": {name: {"p50_ms": median(values), "p95_ms": percentile(values, 0.95)}
                    for name, values in by_class.items()},
        "queries": {query: {"class": mix[query], "p50_ms": median(values),
                            "max_ms": max(values), "matches": matches(query, owner.user)}
                    for query, values in samples.items()},
    }


def plan(owner: Owner, query: str) -> dict[str, Any]:
    """The SQL ``services.search`` sent for ``query`` and the database's plan of it."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from agentmemory import services

    with CaptureQueriesContext(connection) as captured:
        services.search(owner.user, query, limit=LIMIT)
    sql = next(q["sql"] for q in captured.captured_queries
               if " MATCH " in q["sql"] or " @@ " in q["sql"])
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {sql}")
        else:
            cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
        lines = [str(row[0] if connection.vendor == "postgresql" else row[-1])
                 for row in cursor.fetchall()]
    return {"query": query, "sql": sql, "plan": lines}


def anatomy(owner: Owner, query: str, repeats: int = 3) -> list[dict[str, Any]]:
    """Where the time of ``query`` goes, step by step, each step timed (median of
    ``repeats``) and its rows counted: on SQLite the lookup's own steps
    (`_fts5_anatomy`); on PostgreSQL its SQL (the shape of ``agentmemory.search.index``,
    written out here) taken apart, every match ranked as before the bound."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return _fts5_anatomy(owner, query, repeats)

    from agentmemory.conf import memory_settings
    from agentmemory.search.index import indexed_row, pg_text
    from agentmemory.search.query import parse_query

    terms = parse_query(query).terms
    join = "JOIN agentmemory_thread t ON t.id = e.thread_id"
    language = memory_settings.SEARCH_LANGUAGE
    vector = "e.search_vector"  # migration 0012's stored vector
    tsquery = " && ".join(f"phraseto_tsquery('{language}'::regconfig, %s)" for _ in terms)
    words = [" ".join(term) for term in terms]
    match = f"{vector} @@ ({tsquery}) AND {indexed_row('e')}"
    rank = f"ts_rank_cd({vector}, {tsquery})"
    headline = (f"ts_headline('{language}'::regconfig, {pg_text('e.content')}, {tsquery}, "
                "'MaxFragments=2, MaxWords=24, MinWords=8')")
    steps = [
        ("the GIN index: matching rows counted",
         f"SELECT count(*) FROM agentmemory_memoryentry e WHERE {match}", words),
        ("+ the owner's threads joined",
         f"SELECT count(*) FROM agentmemory_memoryentry e {join} WHERE {match} "
         "AND t.owner_id = %s", [*words, owner.user.pk]),
        ("+ every match ranked (ts_rank_cd), the best 30 kept",
         f"SELECT e.id FROM agentmemory_memoryentry e {join} WHERE {match} AND "
         f"t.owner_id = %s ORDER BY {rank} DESC, e.id LIMIT {LOOKUP_LIMIT}",
         [*words, owner.user.pk, *words]),
        ("+ their snippets (ts_headline): the lookup",
         f"SELECT e.id, {headline} FROM agentmemory_memoryentry e {join} WHERE {match} "
         f"AND t.owner_id = %s ORDER BY {rank} DESC, e.id LIMIT {LOOKUP_LIMIT}",
         [*words, *words, owner.user.pk, *words]),
    ]
    out = []
    with connection.cursor() as cursor:
        for label, sql, params in steps:
            times, rows = [], 0
            for _ in range(repeats):
                began = time.perf_counter()
                cursor.execute(sql, params)
                fetched = cursor.fetchall()
                times.append((time.perf_counter() - began) * 1000)
                rows = int(fetched[0][0]) if sql.startswith("SELECT count") else len(fetched)
            out.append({"step": label, "ms": median(times), "rows": rows})
    return out


def _fts5_anatomy(owner: Owner, query: str, repeats: int) -> list[dict[str, Any]]:
    """The SQLite lookup's steps (`agentmemory.search.index.Fts5Lookup`), each timed
    alone (median of ``repeats``), beside what ranking the same pool with FTS5's bm25()
    costs (the lookup before `agentmemory.search.rank`)."""
    from django.db import connection

    from agentmemory.search import rank
    from agentmemory.search.index import FTS_TABLE, RANKED_MATCHES, Fts5Lookup, Scope
    from agentmemory.search.query import parse_query

    parsed = parse_query(query)
    scope = Scope(None, owner.user.pk, None, None, None)
    match = " ".join('"' + " ".join(term) + '"' for term in parsed.terms)
    lookup = Fts5Lookup()
    texts = lookup.pool(parsed, scope)
    window, holding = lookup.rarity(parsed)
    scores = rank.bm25(parsed, list(texts.values()), window, holding)
    ranked = [pk for _, pk in sorted(zip((-score for score in scores), texts, strict=True))]
    shown = rank.distinct_first(ranked, texts.__getitem__, LIMIT)[:LOOKUP_LIMIT]
    lowest = min(texts, default=0)

    def bm25() -> list[Any]:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s AND "
                           f"rowid >= %s ORDER BY bm25({FTS_TABLE}) LIMIT %s",
                           [match, lowest, LOOKUP_LIMIT])
            return cursor.fetchall()

    steps: list[tuple[str, Any]] = [
        (f"FTS5: the newest {RANKED_MATCHES:,} matches in scope, with their text",
         lambda: lookup.pool(parsed, scope)),
        (f"FTS5: each term's rows among the index's newest {rank.IDF_WINDOW:,} (its IDF)",
         lambda: lookup.rarity(parsed)),
        ("Python: BM25 of the pool (`rank.bm25`)",
         lambda: rank.bm25(parsed, list(texts.values()), window, holding)),
        (f"Python: {LIMIT} distinct hits first (`rank.distinct_first`)",
         lambda: rank.distinct_first(ranked, texts.__getitem__, LIMIT)),
        (f"FTS5: snippets of the {len(shown)} hits kept", lambda: lookup.snippets(parsed, shown)),
        ("not in the lookup: FTS5's bm25() ranking the same matches (it counts every "
         "match of each term in the whole index)", bm25),
    ]
    out = []
    for label, call in steps:
        times, rows = [], 0
        for _ in range(repeats):
            began = time.perf_counter()
            result = call()
            times.append((time.perf_counter() - began) * 1000)
            rows = sum(result[1]) if isinstance(result, tuple) else len(result)
        out.append({"step": label, "ms": median(times), "rows": rows})
    return out


def sizes_on_disk() -> dict[str, int]:
    """The database's bytes and the search index's."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_database_size(current_database()), "
                           "coalesce(pg_relation_size("
                           "to_regclass('agentmemory_entry_search_vector')), 0), "
                           "pg_total_relation_size('agentmemory_memoryentry')")
            database, index, table_ = cursor.fetchone()
        else:
            cursor.execute("SELECT page_count * page_size FROM pragma_page_count(), "
                           "pragma_page_size()")
            (database,) = cursor.fetchone()
            cursor.execute("SELECT coalesce(sum(pgsize), 0) FROM dbstat "
                           "WHERE name LIKE 'agentmemory_entry_fts%'")
            (index,) = cursor.fetchone()
            cursor.execute("SELECT coalesce(sum(d.pgsize), 0) FROM dbstat d JOIN sqlite_master m "
                           "ON m.name = d.name WHERE m.tbl_name = 'agentmemory_memoryentry'")
            (table_,) = cursor.fetchone()
    return {"database": int(database), "index": int(index), "entry_table": int(table_)}


def measure_search(engine: str, pg_name: str, sizes: tuple[int, ...]) -> dict[str, Any]:
    from bench.common import setup_django

    if engine == "sqlite" and os.path.isdir(MEMORY_DIR):
        tempfile.tempdir = MEMORY_DIR
    database = Database.create(engine, pg_name)
    setup_django(database.engine, database.name, {}, migrate=True)
    try:
        out: dict[str, Any] = {"engine": describe_engine(),
                               "memory_backed": database.name.startswith(MEMORY_DIR),
                               "sizes": {}}
        stream = messages()
        owner = Owner("search-owner", stream)
        mix: dict[str, str] = {}
        for size in sizes:
            print(f"[bench] search on {engine}: {size:,} entries", file=sys.stderr, flush=True)
            built = owner.grow(size)
            caught_up()
            began = time.perf_counter()
            analyze()
            analyzed = time.perf_counter() - began
            mix = mix or queries(owner)
            out["sizes"][str(size)] = {"build_s": built, "analyze_s": analyzed,
                                       **time_searches(owner, mix), **sizes_on_disk()}
        largest = out["sizes"][str(sizes[-1])]
        slowest = max(largest["queries"], key=lambda q: largest["queries"][q]["p50_ms"])
        fastest = next(q for q in mix if mix[q] == "rare")
        out["plans"] = [plan(owner, slowest), plan(owner, fastest)]
        out["anatomy"] = {"query": slowest, "steps": anatomy(owner, slowest)}
        other = Owner("search-neighbour", stream)
        other.grow(THREAD_ENTRIES)
        caught_up()
        analyze()
        other.first_thread_orders = owner.first_thread_orders  # not theirs: 0 matches
        out["neighbour"] = {"entries": THREAD_ENTRIES, "database_entries": sizes[-1]
                            + THREAD_ENTRIES, **time_searches(other, queries(other))}
        return out
    finally:
        database.drop()


# ------------------------------------------------------------------ the append's cost


def build_append_database(engine: str, name: str, indexed: bool, rows: int) -> dict[str, Any]:
    """A database of ``rows`` entries (the index maintained on every insert), then, unless
    ``indexed``, the index dropped as the migration's reverse drops it
    (`agentmemory.search.schema.drop_statements`: the FTS5 table and its triggers, or
    the stored vectors and their GIN index); SQLite's file then VACUUMed either way."""
    from django.db import connection

    from agentmemory.search.schema import drop_statements
    from bench.common import setup_django

    setup_django(engine, name, {}, migrate=True)
    owner = Owner("append-owner", messages())
    began = time.perf_counter()
    owner.grow(rows)
    caught_up()
    built = time.perf_counter() - began
    if not indexed:
        with connection.cursor() as cursor:
            for statement in drop_statements(connection.vendor):
                cursor.execute(statement)
    if connection.vendor == "sqlite":  # both files compacted alike, for their sizes
        with connection.cursor() as cursor:
            cursor.execute("VACUUM")
    analyze()
    return {"build_s": built, **sizes_on_disk()}


#: The states timed, one block of appends each in turn: the database with the index, the
#: one without it, and the one with it again (an A/A control: the same database timed
#: twice, whose difference is the procedure's own noise).
APPEND_STATES = ("with", "without", "with, again")


def time_appends(engine: str, names: dict[str, str]) -> dict[str, Any]:
    """APPEND_BLOCKS blocks of each state of APPEND_STATES, in turn in one process (the
    order rotated every block): per block, a connection to that state's database,
    APPEND_WARM untimed appends (statement caches, the pages they touch), then
    APPEND_CALLS single appends on a new thread, timed. The same messages in every block."""
    from bench.common import setup_django

    setup_django(engine, names["with"], {})
    from django.contrib.auth import get_user_model
    from django.db import connection

    from agentmemory import services
    from agentmemory.models import Thread

    sample = conv.messages()[:APPEND_CALLS]
    out: dict[str, Any] = {state: {"wall_ms": [], "cpu_ms": []} for state in APPEND_STATES}
    for block in range(APPEND_BLOCKS):
        turn = block % len(APPEND_STATES)
        for state in APPEND_STATES[turn:] + APPEND_STATES[:turn]:
            connection.close()
            connection.settings_dict["NAME"] = names[state.split(",")[0]]
            owner = get_user_model().objects.get(username="append-owner")
            warm = Thread.objects.create(owner=owner, title="appends warm-up")
            for message in sample[:APPEND_WARM]:
                services.append(warm, message)
            thread = Thread.objects.create(owner=owner, title="appends")
            wall, cpu = time.perf_counter(), time.process_time()
            for message in sample:
                services.append(thread, message)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            out[state]["wall_ms"].append(wall / APPEND_CALLS * 1000)
            out[state]["cpu_ms"].append(cpu / APPEND_CALLS * 1000)
    connection.close()
    return {**out, "engine": describe_engine()}


def measure_appends(engine: str, pg_name: str, memory: bool = True) -> dict[str, Any]:
    """Single appends on a database with the index and on one without (each built in a
    fresh process), timed in turn in one process (`time_appends`). SQLite's files on
    MEMORY_DIR when ``memory`` (and there is one), else in the system's temporary
    directory."""
    if engine == "sqlite" and memory and os.path.isdir(MEMORY_DIR):
        tempfile.tempdir = MEMORY_DIR
    databases = {state: Database.create(engine, f"{pg_name}_appends_{state}")
                 for state in ("with", "without")}
    out: dict[str, Any] = {"rows": APPEND_ROWS, "calls": APPEND_CALLS, "warm": APPEND_WARM,
                           "blocks": APPEND_BLOCKS,
                           "memory_backed": databases["with"].name.startswith(MEMORY_DIR)}
    try:
        for state, database in databases.items():
            out[state] = {"database": _child("build", engine, database.name, state)}
        timed = _child("time", engine, databases["with"].name, "with",
                       "--other", databases["without"].name)
        out["engine"] = timed.pop("engine")
        for state in APPEND_STATES:
            out.setdefault(state, {}).update(timed[state])
        return out
    finally:
        for database in databases.values():
            if engine == "postgres":
                from bench.common import postgres_admin

                with postgres_admin() as admin:
                    admin.execute(f'DROP DATABASE IF EXISTS "{database.name}"')
            else:
                import shutil

                shutil.rmtree(database.scratch_dir, ignore_errors=True)


def _child(kind: str, engine: str, name: str, state: str, *extra: str) -> dict[str, Any]:
    """One step of measure_appends in a fresh interpreter (a fresh Django on ``name``)."""
    done = subprocess.run(
        [sys.executable, str(Path(__file__)), "--db", engine, "--kind", f"append-{kind}",
         "--name", name, "--state", state, *extra],
        capture_output=True, text=True, cwd=ROOT, check=False)
    if done.returncode:
        raise SystemExit(f"search append-{kind} on {engine} failed:\n{done.stderr}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def measure(engines: list[str], pg_name: str) -> dict[str, Any]:
    """Every engine: the search in a subprocess of its own (a fresh Django on its own
    database), then the appends (SQLite: on a memory-backed file and on the disk), one
    at a time."""
    began = time.perf_counter()
    results: dict[str, Any] = {}
    for engine in engines:
        kinds = ("search", "appends", "appends-disk") if engine == "sqlite" else (
            "search", "appends")
        run: dict[str, Any] = {}
        for kind in kinds:
            print(f"[bench] search: {kind} on {engine}", file=sys.stderr, flush=True)
            handle, out = tempfile.mkstemp(suffix=".json")
            os.close(handle)
            started = time.perf_counter()
            try:
                subprocess.run([sys.executable, str(Path(__file__)), "--db", engine,
                                "--pg-name", f"{pg_name}_search", "--kind", kind,
                                "--out", out], check=True, cwd=ROOT)
                run[kind] = {**json.loads(Path(out).read_text()),
                             "wall_s": time.perf_counter() - started}
            finally:
                os.unlink(out)
        results[engine] = {**run["search"], "appends": [run[kind] for kind in kinds[1:]]}
    return {"engines": results, "elapsed_s": time.perf_counter() - began}


# ================================================================== the page


def _verdict(ok: bool) -> str:
    return "pass" if ok else "**fail**"


def section(results: dict[str, Any]) -> str:
    measured = results.get("search")
    if not measured or not measured.get("engines"):
        return ""
    engines = measured["engines"]
    first = next(iter(engines.values()))
    sizes = list(first["sizes"])
    mix = first["sizes"][sizes[0]]["queries"]
    rare = [q for q, row in mix.items() if row["class"] == "rare"]
    parts = [f"""## Search: `services.search` for an owner of {int(sizes[0]):,} to {
        int(sizes[-1]):,} entries

One owner's threads ({THREAD_ENTRIES:,} entries each) are written in batched inserts
(COPY on PostgreSQL) from the seeded generator asked for as many turns as the entries
need, so order numbers stay unique and a rare word stays rare; the index is maintained
as the app maintains it (SQLite: the initial migration's triggers fire on every insert;
PostgreSQL: the GIN index is updated by every COPY). The owner grows from
{int(sizes[0]):,} to {int(sizes[-1]):,} entries in one database, analyzed before each size
(PostgreSQL: `VACUUM ANALYZE`) {"(SQLite on a memory-backed file)" if first.get(
        "memory_backed") else ""}. `bench/search_speed.py`.

Every call is `services.search(owner, query, limit={LIMIT})` in process; the mix is
{len(rare)} rare words (order numbers of the owner's first thread: {", ".join(
        f"`{q}`" for q in rare)}), {len(COMMON)} common words ({", ".join(
        f"`{q}`" for q in COMMON)}) and {len(PHRASES)} quoted phrases ({", ".join(
        f"`{q}`" for q in PHRASES)}), each query the same number of times, round robin; p50
and p95 are over every call. Targets: p50 within {TARGET_GROWTH:.0f}× from the smallest
size to the largest, and under {TARGET_P50_MS:.0f} ms at the largest. The last row of each
table is another owner of {THREAD_ENTRIES:,} entries, added after the largest size: the
same mix for them, in a database that holds everyone's entries (the rare words are the
first owner's, so they match nothing of theirs)."""]
    for run in engines.values():
        rows = []
        for size in sizes:
            row = run["sizes"][size]
            c = row["classes"]
            rows.append([
                f"{int(size):,}", number(row["p50_ms"], 1), number(row["p95_ms"], 1),
                *(f"{number(c[name]['p50_ms'], 1)} / {number(c[name]['p95_ms'], 1)}"
                  for name in CLASSES),
                str(row["repeats"]), number(row["build_s"], 0),
                f"{row['database'] / 2**20:,.0f}", f"{row['index'] / 2**20:,.0f}",
            ])
        neighbour = run.get("neighbour")
        if neighbour:
            c = neighbour["classes"]
            rows.append([
                f"{neighbour['entries']:,} (another owner, in a database of "
                f"{neighbour['database_entries']:,})", number(neighbour["p50_ms"], 1),
                number(neighbour["p95_ms"], 1),
                *(f"{number(c[name]['p50_ms'], 1)} / {number(c[name]['p95_ms'], 1)}"
                  for name in CLASSES),
                str(neighbour["repeats"]), "—", "—", "—",
            ])
        small, large = run["sizes"][sizes[0]], run["sizes"][sizes[-1]]
        growth = large["p50_ms"] / small["p50_ms"]
        per_query = [[f"`{query}`", q["class"], *(
            f"{number(run['sizes'][size]['queries'][query]['p50_ms'], 1)} "
            f"({run['sizes'][size]['queries'][query]['matches']:,})" for size in sizes)]
            for query, q in large["queries"].items()]
        build = sum(run["sizes"][size]["build_s"] for size in sizes)
        parts.append(f"### {run['engine']}\n\n" + table(
            ["entries", "p50 ms", "p95 ms", "rare p50 / p95", "common p50 / p95",
             "phrase p50 / p95", "calls per query", "built in s", "database MiB",
             "index MiB"], rows, "lrrrrrrrrr",
        ) + f"""

* p50 from {int(sizes[0]):,} to {int(sizes[-1]):,} entries: ×{growth:.2f} (target ≤
  {TARGET_GROWTH:.0f}: {_verdict(growth <= TARGET_GROWTH)}); p50 at {int(sizes[-1]):,}:
  {large["p50_ms"]:,.1f} ms (target < {TARGET_P50_MS:.0f}: {
      _verdict(large["p50_ms"] < TARGET_P50_MS)}).
* Writing the {int(sizes[-1]):,} entries took {build:,.0f} s in all, the index maintained
  on every insert.

Each query's p50 ms, and in brackets the entries it matches:

""" + table(["query", "class", *(f"{int(size):,}" for size in sizes)], per_query,
            "ll" + "r" * len(sizes)))
        parts.append(_plans(run))
    parts.append(_appends_table(engines))
    parts.append("\n".join(f"* {finding}" for finding in findings(engines)))
    minutes = measured["elapsed_s"] / 60
    spent = ", ".join(
        f"{run['engine']}'s searches {run['wall_s'] / 60:.1f} (of which building "
        f"{sum(row['build_s'] for row in run['sizes'].values()) / 60:.1f}), its appends "
        f"{sum(a['wall_s'] for a in run.get('appends') or []) / 60:.1f}"
        for run in engines.values() if "wall_s" in run)
    parts.append(f"The part took {minutes:.1f} minutes"
                 + (", more than the whole suite's budget of about 10 minutes" if minutes > 10
                    else "") + (f" ({spent})" if spent else "")
                 + f", at the source measured, {results.get('source', 'unknown')}.")
    return "\n\n".join(part for part in parts if part)


def _plans(run: dict[str, Any]) -> str:
    blocks = []
    anatomy_ = run.get("anatomy")
    if anatomy_:
        largest = list(run["sizes"])[-1]
        how = ("the lookup's steps (`agentmemory/search/index.py`, `Fts5Lookup`) and, beside "
               "them, FTS5's own bm25() ranking the same matches, each timed alone"
               if run["engine"].startswith("SQLite") else
               "the lookup's SQL (`agentmemory/search/index.py`) rebuilt one step at a time, "
               "every match ranked as before the bound, each step timed alone")
        blocks.append(
            f"Where the time of `{anatomy_['query']}` goes at {int(largest):,} entries: "
            f"{how} (median of 3):\n\n" + table(
                ["step", "ms", "rows"],
                [[step["step"], number(step["ms"], 1), f"{step['rows']:,}"]
                 for step in anatomy_["steps"]], "lrr"))
    for entry in run.get("plans", []):
        blocks.append(f"`{entry['query']}` at the largest size:\n\n```text\n"
                      + "\n".join(entry["plan"]) + "\n```")
    return "\n\n".join(blocks)


def _shares(a: dict[str, Any], figure: str) -> tuple[float, float, float, float]:
    """With, without, the index's share and the A/A control's, of ``figure``: medians
    over the blocks."""
    with_, without, again = (median(a[state][figure]) for state in APPEND_STATES)
    return with_, without, (with_ - without) / with_, (with_ - again) / with_


def _appends_table(engines: dict[str, Any]) -> str:
    rows = []
    for run in engines.values():
        for a in run.get("appends") or []:
            if "blocks" not in a:  # measured by the earlier procedure
                continue
            with_, without, share, control = _shares(a, "wall_ms")
            cpu_with, cpu_without, cpu_share, cpu_control = _shares(a, "cpu_ms")
            where = (" (memory-backed file)" if a["memory_backed"] else " (file on disk)"
                     if a["engine"].startswith("SQLite") else "")
            sizes = {state: a[state]["database"] for state in ("with", "without")}
            rows.append([
                a["engine"].replace(" (file)", "") + where,
                f"{number(with_, 3)} / {number(without, 3)}",
                f"{share:.1%}: {_verdict(share <= TARGET_APPEND_SHARE)}", f"{control:+.1%}",
                f"{number(cpu_with, 3)} / {number(cpu_without, 3)}",
                f"{cpu_share:.1%} ({cpu_control:+.1%})",
                f"{sizes['with']['database'] / 2**20:,.1f} / "
                f"{sizes['without']['database'] / 2**20:,.1f}",
                f"{sizes['with']['index'] / 2**20:,.1f}", number(a["wall_s"], 0),
            ])
    if not rows:
        return ""
    from agentmemory.search.schema import INDEX_BATCH

    first = next(a for run in engines.values() for a in run.get("appends") or []
                 if "blocks" in a)
    return f"""### The index's cost: appends and bytes

`services.append(thread, message)`, one message a call, on two databases of
{first["rows"]:,} entries built alike (each in a fresh process): one with the index,
maintained as the app maintains it; one where the index was then dropped as the initial
migration's reverse drops it (the FTS5 table and its triggers, or the stored vectors and
their GIN index). SQLite's files are VACUUMed after building, both alike, so their sizes
compare. The appends are timed in one process, in blocks that take turns: the database
with the index, the one without, and the one with the index again (an A/A control: the
same database timed twice, whose difference is the procedure's own noise), {first[
        "blocks"]} blocks each, the order rotated every block; a block connects to its database,
makes {first["warm"]} untimed appends and {first["calls"]} timed ones on a new thread,
the same messages in every block. Medians over the blocks; the share is (with − without)
÷ with, the A/A column (with − with again) ÷ with. On SQLite the index takes appends in
batches of {INDEX_BATCH} (agentmemory/search/schema.py): the append that fills a batch
indexes it, so the timed appends pay for the batches they fill (one in {INDEX_BATCH}),
and the entries of the batch not yet full are indexed by the next search, before it
reads, with the statement a batch runs (`schema.catch_up`; not timed here).

{table(["database", "wall ms / append, with / without", "index share (target ≤ "
        f"{TARGET_APPEND_SHARE:.0%})", "A/A control", "CPU ms / append, with / without",
        "index share of the CPU (A/A)", "database MiB, with / without", "index MiB",
        "part s"], rows, "lrlrrlrrr")}"""


def findings(engines: dict[str, Any]) -> list[str]:
    """Sentences written from the figures; one whose premise fails is left out."""
    from agentmemory.search.index import RANKED_MATCHES

    found = []
    for run in engines.values():
        sizes = list(run["sizes"])
        large = run["sizes"][sizes[-1]]
        slow = sorted(large["queries"].items(), key=lambda item: -item[1]["p50_ms"])[:2]
        if large["p50_ms"] >= TARGET_P50_MS or (
                large["p50_ms"] / run["sizes"][sizes[0]]["p50_ms"] > TARGET_GROWTH):
            found.append(
                f"{run['engine']}: the time follows the matches, not the owner's size alone: "
                f"at {int(sizes[-1]):,} entries " + ", ".join(
                    f"`{query}` matches {q['matches']:,} entries and takes "
                    f"{q['p50_ms']:,.0f} ms" for query, q in slow)
                + ". The lookup ranks only the newest "
                f"{RANKED_MATCHES:,} matches in scope (`search.index.RANKED_MATCHES`)"
                + ("; the steps above show where the rest of the time goes."
                   if run["engine"].startswith("SQLite") else
                   "; the steps above rank every match, as the lookup did before that "
                   "bound, to show what it saves."))
        database = large["database"]
        found.append(f"{run['engine']}: at {int(sizes[-1]):,} entries the index takes "
                     f"{large['index'] / 2**20:,.0f} MiB of the database's "
                     f"{database / 2**20:,.0f} MiB ({large['index'] / database:.0%}).")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=ENGINES, default="sqlite")
    parser.add_argument("--pg-name", default="agentmemory_bench_search")
    parser.add_argument("--kind", default="search",
                        choices=("search", "appends", "appends-disk", "append-build",
                                 "append-time"))
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--name", default="", help="append-*: the database")
    parser.add_argument("--other", default="", help="append-time: the one without the index")
    parser.add_argument("--state", choices=("with", "without"), default="with")
    parser.add_argument("--out", default="", help="JSON file (default: print)")
    args = parser.parse_args()
    sizes = tuple(int(size) for size in args.sizes.split(","))
    result: dict[str, Any]
    if args.kind == "search":
        result = measure_search(args.db, args.pg_name, sizes)
    elif args.kind in ("appends", "appends-disk"):
        result = measure_appends(args.db, args.pg_name, memory=args.kind == "appends")
    elif args.kind == "append-build":
        result = build_append_database(args.db, args.name, args.state == "with", APPEND_ROWS)
    else:
        result = time_appends(args.db, {"with": args.name, "without": args.other})
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    else:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
