"""Benchmark: purge_expired over 100,000 expired entries, summaries among them.

    .venv/bin/python bench/purge.py                 # SQLite (a temporary file)
    .venv/bin/python bench/purge.py --db postgres   # its own database, dropped after

Each run stores ``--rows`` expired MemoryEntry rows (default 100,000) with
``bulk_create``, untimed, then times one ``services.purge_expired()`` call that
deletes them all, in batches of ``PURGE_BATCH_SIZE`` (or ``--batch-size``). The
figure is the median over ``--runs`` runs (default 3).

Two shapes of data:

* ``flat`` (default): threads of 200 rows, as inline folding leaves a short thread:
  196 originals and 4 summaries (three over 20 originals each, the fourth over the
  third and 10 more), with their coverage and source rows; plus 2 expired FoldedSpan
  rows a thread.
* ``chain``: one long thread, as inline folding leaves a long one: every summary
  covers the previous summary and 20 more originals, so one summary is the root of
  the whole thread. It shows how large one batch becomes when a batch is counted in
  roots (see the report: a batch should be bounded in rows).

The rows are built in a forked child process, so the RSS figures are those of the
process that purges: its peak resident set (``getrusage``) and how much that peak
rose during the purge (the purge's own memory, over Django's).
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    Database,
    describe_engine,
    machine,
    median,
    number,
    setup_django,
    table,
)

THREAD_ROWS = 200
FLAT_SPAN = 20  # originals under each flat summary
NESTED_EXTRA = 10  # originals the nested summary adds to the summary it covers
CHAIN_STEP = 20  # originals each link of the chain adds
SPANS_PER_THREAD = 2
INSERT_BATCH = 5_000


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


# ------------------------------------------------------------------ building the data


class Builder:
    """Expired rows, written the way folds write them: summaries with coverage and
    sources, originals pointing at their summary through ``covered_by``."""

    def __init__(self, now: datetime) -> None:
        self.expired = now - timedelta(hours=1)
        self.written = now - timedelta(hours=2)

    def entry(self, thread: Any, position: int, **fields: Any) -> Any:
        from agentmemory.models import MemoryEntry

        defaults = {
            "role": "user" if position % 2 else "assistant",
            "content": f"message {position} of an old conversation about a late parcel",
            "turn": (position + 1) // 2,
            "token_count": 12,
            "created_at": self.written,
            "expires_at": self.expired,
        }
        return MemoryEntry(thread=thread, position=position, **{**defaults, **fields})

    def summary(self, thread: Any, position: int, first: int, last: int) -> Any:
        return self.entry(
            thread,
            position,
            kind="summary",
            role="system",
            content=f"[summary of earlier turns {first}-{last}] the user chased a parcel",
            turn=last,
            summary_key=f"msg-summary-{first}-{last}",
            tier="cold",
        )

    def cover(self, summaries: list[tuple[Any, list[Any]]]) -> None:
        """Coverage and source rows for ``(summary, covered entries)`` pairs."""
        from agentmemory.models import SummaryCoverage, SummarySource

        SummaryCoverage.objects.bulk_create(
            (
                SummaryCoverage(
                    summary=summary,
                    from_turn=int(summary.summary_key.split("-")[2]),
                    to_turn=summary.turn,
                    entry_count=len(covered),
                    span_tokens=12 * len(covered),
                    model="bench-offline",
                )
                for summary, covered in summaries
            ),
            batch_size=INSERT_BATCH,
        )
        SummarySource.objects.bulk_create(
            (SummarySource(summary=s, entry=e) for s, covered in summaries for e in covered),
            batch_size=INSERT_BATCH,
        )

    def flat(self, rows: int) -> tuple[int, int]:
        """Threads of 200 rows; returns (entries, spans) stored."""
        from agentmemory.models import FoldedSpan, MemoryEntry, Thread

        threads = Thread.objects.bulk_create(
            Thread(ttl=timedelta(hours=1), title=f"bench {n}")
            for n in range(rows // THREAD_ROWS)
        )
        originals = THREAD_ROWS - 4
        # Positions: s1 over 1-20, s2 over 21-40, s3 over 41-60, s4 over s3 and 61-70.
        tops, nested = [], []
        for thread in threads:
            tops += [
                self.summary(thread, 20, 1, 10),
                self.summary(thread, 40, 11, 20),
                self.summary(thread, 70, 21, 35),
            ]
        MemoryEntry.objects.bulk_create(tops, batch_size=INSERT_BATCH)
        for index, thread in enumerate(threads):
            nested.append(self.summary(thread, 60, 21, 30))
            nested[-1].covered_by = tops[3 * index + 2]
        MemoryEntry.objects.bulk_create(nested, batch_size=INSERT_BATCH)

        entries, covered_by = [], {}
        for index, thread in enumerate(threads):
            s1, s2, s4 = tops[3 * index : 3 * index + 3]
            s3 = nested[index]
            for position in range(1, originals + 1):
                over = (
                    s1 if position <= 20 else s2 if position <= 40 else s3 if position <= 60
                    else s4 if position <= 70 else None
                )
                entry = self.entry(thread, position, covered_by=over)
                entries.append(entry)
                if over is not None:
                    covered_by.setdefault(over.pk, []).append(entry)
        MemoryEntry.objects.bulk_create(entries, batch_size=INSERT_BATCH)
        for index in range(len(threads)):
            covered_by[tops[3 * index + 2].pk].insert(0, nested[index])
        summaries = [*tops, *nested]
        self.cover([(s, covered_by[s.pk]) for s in summaries])

        FoldedSpan.objects.bulk_create(
            (
                FoldedSpan(
                    thread=thread,
                    fingerprint=f"{thread.pk}-{n}",
                    span_fingerprint=f"{thread.pk}-{n}",
                    content="[summary of earlier messages] a parcel was late",
                    message_count=8,
                    model="bench-offline",
                    retain="conversation",
                    created_at=self.written,
                    expires_at=self.expired,
                )
                for thread in threads
                for n in range(SPANS_PER_THREAD)
            ),
            batch_size=INSERT_BATCH,
        )
        return len(entries) + len(summaries), len(threads) * SPANS_PER_THREAD

    def chain(self, rows: int) -> tuple[int, int]:
        """One thread whose summaries nest all the way down; returns (entries, 0)."""
        from agentmemory.models import MemoryEntry, Thread

        thread = Thread.objects.create(ttl=timedelta(hours=1), title="bench chain")
        links = rows // (CHAIN_STEP + 1)
        summaries = MemoryEntry.objects.bulk_create(
            (self.summary(thread, (k + 1) * CHAIN_STEP, 1, (k + 1) * CHAIN_STEP // 2)
             for k in range(links)),
            batch_size=INSERT_BATCH,
        )
        for lower, upper in zip(summaries, summaries[1:], strict=False):
            lower.covered_by = upper
        MemoryEntry.objects.bulk_update(summaries[:-1], ["covered_by"], batch_size=1_000)
        entries = [
            self.entry(thread, position, covered_by=summaries[(position - 1) // CHAIN_STEP])
            for position in range(1, links * CHAIN_STEP + 1)
        ]
        MemoryEntry.objects.bulk_create(entries, batch_size=INSERT_BATCH)
        pairs = []
        for k, summary in enumerate(summaries):
            covered = entries[k * CHAIN_STEP : (k + 1) * CHAIN_STEP]
            pairs.append((summary, ([summaries[k - 1]] if k else []) + covered))
        self.cover(pairs)
        return len(entries) + len(summaries), 0


# ------------------------------------------------------------------ one run


def build(shape: str, rows: int, now: datetime) -> tuple[int, int, float]:
    """Store the expired rows; returns (entries, spans, seconds)."""
    from django.db import connections

    builder = Builder(now)
    started = time.perf_counter()
    entries, spans = builder.chain(rows) if shape == "chain" else builder.flat(rows)
    connections.close_all()
    return entries, spans, time.perf_counter() - started


def run(shape: str, rows: int, batch_size: int | None) -> dict[str, Any]:
    from django.db import connection, connections
    from django.utils import timezone

    from agentmemory import services
    from agentmemory.models import FoldedSpan, MemoryEntry, SummaryCoverage, SummarySource

    now = timezone.now()
    # The build runs in a forked child, so this process's peak RSS is Django's plus
    # the purge's own, not the 100,000 model instances bulk_create needed.
    connections.close_all()
    with multiprocessing.get_context("fork").Pool(1) as pool:
        entries, spans, build_s = pool.apply(build, (shape, rows, now))
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    rss_before = peak_rss_mib()
    started = time.perf_counter()
    result = services.purge_expired(now=now, batch_size=batch_size)
    purge_s = time.perf_counter() - started
    rss_after = peak_rss_mib()

    left = (
        MemoryEntry.objects.count(),
        FoldedSpan.objects.count(),
        SummaryCoverage.objects.count(),
        SummarySource.objects.count(),
    )
    if (result.entries, result.spans) != (entries, spans) or any(left):
        raise SystemExit(
            f"purge left rows behind: deleted {result.entries} of {entries} entries and "
            f"{result.spans} of {spans} spans; left (entries, spans, coverage, sources) {left}"
        )
    from agentmemory.models import Thread

    Thread.objects.all().delete()
    return {
        "entries": entries,
        "spans": spans,
        "batches": result.batches,
        "build_s": build_s,
        "purge_s": purge_s,
        "rss_peak": rss_after,
        "rss_growth": max(0.0, rss_after - rss_before),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--shape", choices=("flat", "chain"), default="flat")
    parser.add_argument("--rows", type=int, default=100_000, help="expired entries a run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=None,
                        help="default: AGENTMEMORY['PURGE_BATCH_SIZE']")
    parser.add_argument("--pg-name", default="agentmemory_bench_purge",
                        help="the PostgreSQL database to create and drop")
    args = parser.parse_args()

    started = time.perf_counter()
    database = Database.create(args.db, args.pg_name)
    setup_django(database.engine, database.name, migrate=True)
    import django

    from agentmemory.conf import memory_settings

    batch_size = args.batch_size or memory_settings.PURGE_BATCH_SIZE
    try:
        runs = [run(args.shape, args.rows, args.batch_size) for _ in range(args.runs)]
        engine = describe_engine()
    finally:
        database.drop()

    first = runs[0]
    purge_s = median([r["purge_s"] for r in runs])
    rows_deleted = first["entries"] + first["spans"]
    host = machine()
    print(f"## purge_expired, {args.shape} data ({engine})\n")
    print(
        f"Machine: {host['nproc']} CPUs (nproc), {host['memory']}, {host['cpu']}; "
        f"{host['os']}; Python {host['python']}, Django {django.get_version()}, {engine}. "
        f"The database runs on the same machine.\n"
    )
    print(table(
        ["entries", "spans", "batch size", "batches", "median purge s", "rows/s",
         "entries/batch", "build s", "RSS peak MiB", "RSS growth in purge MiB"],
        [[
            number(first["entries"]),
            number(first["spans"]),
            number(batch_size),
            number(first["batches"]),
            number(purge_s, 2),
            number(rows_deleted / purge_s),
            number(first["entries"] / max(first["batches"], 1)),
            number(median([r["build_s"] for r in runs]), 1),
            number(max(r["rss_peak"] for r in runs), 0),
            number(max(r["rss_growth"] for r in runs), 0),
        ]],
    ))
    print(
        "\nrows/s counts entries and spans; each entry's coverage and source rows are "
        "deleted with it and not counted. Runs: "
        + ", ".join(f"{r['purge_s']:.2f} s" for r in runs)
        + f". Total run time: {time.perf_counter() - started:.0f} s."
    )


if __name__ == "__main__":
    main()
