"""Where a backlog fold's time goes: ``services.fold`` on a never-folded thread, profiled.

    .venv/bin/python bench/fold_profile.py [--db sqlite|postgres] [--entries 10000]

A thread of ``--entries`` messages nothing has folded (bench/folded.py's builder, the
floor part's long messages, or with ``--shape seeded`` the seeded conversation's), the
instant summarizer (a fixed text at once: only the
library's time), one ``services.fold(thread)`` in a transaction that is rolled back
(so every run sees the same rows): its wall time and folds, its queries and their
database time, then the same fold under ``cProfile``, grouped by where the time is
spent (the share of the profiled time under each of the fold's stages, and the
functions that spend the most themselves).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import INSTANT_SUMMARIZER, Database, setup_django  # noqa: E402

#: The fold's stages, by the file and function that does each (cumulative time under it).
STAGES = {
    "load the newest rows": "load.py:load_visible",
    "load the oldest slice (plain SQL, rows.read_oldest)": "load.py:load_oldest",
    "estimate the call's tokens": "base.py:estimate_tokens",
    "scan the span for injections": "quarantine.py:message_flags",
    "plan the next fold": "plan.py:next_fold",
    "render the transcript": "transcript.py:render_transcript",
    "write back": "summaries.py:store_summary",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--shape", choices=("long", "seeded"), default="long",
                        help="the floor part's long plain messages, or the seeded "
                        "conversation as it is (short messages, tool rounds)")
    args = parser.parse_args()
    database = Database.create(args.db, "agentmemory_bench_fold_profile")
    setup_django(database.engine, database.name, {"SUMMARIZER": INSTANT_SUMMARIZER},
                 migrate=True)
    try:
        profile(args.entries, args.shape)
    finally:
        database.drop()


def profile(entries: int, shape: str) -> None:
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from agentmemory import services
    from agentmemory.models import MemoryEntry, Thread
    from bench import floor

    messages = floor.long_messages() if shape == "long" else floor.seeded_messages()
    thread = floor.build(entries, entries, messages)
    Thread.objects.filter(pk=thread.pk).update(fold_queued_until=None)
    thread = Thread.objects.get(pk=thread.pk)
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")

    def fold() -> int:
        """One fold call, rolled back; how many summaries it wrote."""
        with transaction.atomic():
            services.fold(thread)
            written = MemoryEntry.objects.filter(thread=thread).summaries().count()
            transaction.set_rollback(True)
        return written

    fold()  # warm: imports, the token encoding
    began = time.perf_counter()
    folds = fold()
    wall = time.perf_counter() - began
    with CaptureQueriesContext(connection) as captured:
        fold()
    database_ms = sum(float(query["time"]) for query in captured.captured_queries) * 1000
    profiler = cProfile.Profile()
    profiler.enable()
    fold()
    profiler.disable()
    stats = pstats.Stats(profiler)
    total = max(stats.total_tt, 1e-9)  # type: ignore[attr-defined]
    print(f"{connection.vendor}, {shape} shape, {entries:,} entries: one fold call "
          f"{wall * 1000:.0f} ms for "
          f"{folds} folds ({wall * 1000 / max(folds, 1):.0f} ms a fold), "
          f"{len(captured.captured_queries)} queries, {database_ms:.0f} ms of them in the "
          "database")
    print(f"profiled: {total * 1000:.0f} ms; the share under each stage:")
    by_name = {f"{Path(file).name}:{name}": values
               for (file, _, name), values in stats.stats.items()}  # type: ignore[attr-defined]
    for stage, key in STAGES.items():
        values = by_name.get(key)
        share = values[3] / total if values else 0.0
        print(f"  {stage}: {share:.0%}")
    slowest = sorted(captured.captured_queries, key=lambda query: -float(query["time"]))[:5]
    print("the slowest queries:")
    for query in slowest:
        sql = query["sql"]
        print(f"  {float(query['time']) * 1000:.1f} ms  {sql[:60]} ... {sql[-150:]}")
    print("the functions that spend the most themselves:")
    stats.sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
