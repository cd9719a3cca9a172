"""Recall's load reads a folded thread through the partial index on uncovered entries.

A folded thread is mostly covered rows. Read through any other index, the load walks
past every one of them (a million-entry thread: half a second on SQLite); through the
partial index it reads only what is visible. SQLite chooses between indexes on its
defaults until ANALYZE has run, so the check is made on a fresh database, and again
after ANALYZE. The SQL checked is the load's own, captured from ``pipeline.load``: both
orders (newest first for recall, oldest first for backfills), with and without a tier
filter.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agentmemory.models import EntryKind, MemoryEntry, Role, Thread
from agentmemory.pipeline.config import RecallConfig
from agentmemory.pipeline.load import count_unloaded, load_context, load_oldest, load_visible
from tests.helpers import make_thread

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
MESSAGES = 3_000
TAIL = 40  # the newest messages, left uncovered
CHUNK = 200  # messages per summary
VISIBLE_INDEX = "agentmemory_entry_visible"
TABLE = "agentmemory_memoryentry"


def folded_thread() -> Thread:
    """All but the newest TAIL messages covered. The summaries roll (each folds the one
    before it) and the first is left uncovered, a stale summary at the far end."""
    thread = make_thread()
    MemoryEntry.objects.bulk_create(
        MemoryEntry(thread=thread, role=Role.USER if n % 2 else Role.ASSISTANT,
                    content=f"message {n}", turn=(n + 1) // 2, position=n, token_count=3,
                    created_at=NOW - timedelta(hours=1), expires_at=NOW + timedelta(days=1))
        for n in range(1, MESSAGES + 1)
    )  # fmt: skip
    previous = None
    for low in range(1, MESSAGES - TAIL + 1, CHUNK):
        high = min(low + CHUNK - 1, MESSAGES - TAIL)
        summary = MemoryEntry.objects.create(
            thread=thread, kind=EntryKind.SUMMARY, role=Role.SYSTEM, content="summary",
            turn=(high + 1) // 2, position=high, tier="cold", token_count=2,
            summary_key=f"msg-summary-{low}-{high}", created_at=NOW - timedelta(hours=1),
        )  # fmt: skip
        spanned = MemoryEntry.objects.filter(
            thread=thread, kind=EntryKind.MESSAGE, position__range=(low, high)
        )
        spanned.update(covered_by=summary)
        if previous is not None and previous.position > CHUNK:
            MemoryEntry.objects.filter(pk=previous.pk).update(covered_by=summary)
        previous = summary
    visible = MemoryEntry.objects.filter(thread=thread, covered_by__isnull=True).count()
    assert visible == TAIL + 2, visible  # the tail, the stale summary, the live one
    return thread


def load_sql(call: Callable[[], Any]) -> str:
    with CaptureQueriesContext(connection) as captured:
        call()
    selects = [q["sql"] for q in captured.captured_queries if f'FROM "{TABLE}"' in q["sql"]]
    assert len(selects) == 1, selects
    return selects[0]


LOADS: dict[str, Callable[[Thread, RecallConfig], Any]] = {
    "newest first": lambda thread, config: load_visible(thread, config, NOW, 4_000),
    "oldest first": lambda thread, config: load_oldest(thread, config, NOW, 200),
}
TIERS = {"all tiers": None, "tier filter": ("hot", "cold")}


def plan_lines(sql: str) -> list[str]:
    """SQLite's EXPLAIN QUERY PLAN, one step a line."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
        return [row[-1] for row in cursor.fetchall()]


def plan_nodes(sql: str) -> list[dict[str, Any]]:
    """PostgreSQL's plan, flattened: every node, outermost first.

    On a few thousand rows PostgreSQL rightly sorts the 42 uncovered ones it finds
    through the covered_by index; with sorts and sequential scans priced out, the plan
    shows which ordered read it takes, the one it takes on a large table.
    """
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}")
        document = cursor.fetchone()[0]
    plan = (json.loads(document) if isinstance(document, str) else document)[0]["Plan"]

    def walk(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
        yield node
        for child in node.get("Plans", []):
            yield from walk(child)

    return list(walk(plan))


def assert_reads_visible_index(sql: str) -> None:
    if connection.vendor == "postgresql":
        nodes = plan_nodes(sql)
        entry_reads = [node for node in nodes if node.get("Relation Name") == TABLE]
        summary = [(n["Node Type"], n.get("Index Name")) for n in nodes]
        assert [(n["Node Type"], n.get("Index Name")) for n in entry_reads] == [
            ("Index Scan", VISIBLE_INDEX)
        ], summary
        assert not [n for n in nodes if n["Node Type"] in ("Sort", "Incremental Sort")], summary
        return
    lines = plan_lines(sql)
    entry_reads = [line for line in lines if f" {TABLE} " in f"{line} "]
    assert len(entry_reads) == 1, lines
    assert entry_reads[0].startswith(f"SEARCH {TABLE} USING INDEX {VISIBLE_INDEX} "), lines
    assert not [line for line in lines if "TEMP B-TREE" in line], lines


@pytest.mark.parametrize("analyzed", [False, True], ids=["fresh", "analyzed"])
@pytest.mark.parametrize("tiers", TIERS.values(), ids=TIERS.keys())
@pytest.mark.parametrize("order", LOADS.keys())
def test_the_load_reads_a_folded_thread_through_the_partial_index(
    order: str, tiers: tuple[str, ...] | None, analyzed: bool
) -> None:
    thread = folded_thread()
    if analyzed:
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {TABLE}")
    config = RecallConfig.build(tiers=tiers)
    sql = load_sql(lambda: LOADS[order](thread, config))

    assert_reads_visible_index(sql)
    assert len(LOADS[order](thread, config).entries) == TAIL + 2


def unfolded_thread(messages: int, token_counts: list[int]) -> Thread:
    thread = make_thread()
    MemoryEntry.objects.bulk_create(
        MemoryEntry(thread=thread, role=Role.USER if n % 2 else Role.ASSISTANT,
                    content=f"message {n}", turn=(n + 1) // 2, position=n,
                    token_count=token_counts[n % len(token_counts)],
                    created_at=NOW - timedelta(hours=1), expires_at=NOW + timedelta(days=1))
        for n in range(1, messages + 1)
    )  # fmt: skip
    return thread


@pytest.mark.parametrize("analyzed", [False, True], ids=["fresh", "analyzed"])
def test_every_page_of_a_backfill_reads_the_partial_index(analyzed: bool) -> None:
    """A backfill's oldest rows come in pages; each page is a read of the partial index,
    not a walk over the covered rows before the backlog (here 2,000 of them)."""
    thread = unfolded_thread(3_000, [3])
    summary = MemoryEntry.objects.create(
        thread=thread, kind=EntryKind.SUMMARY, role=Role.SYSTEM, content="summary",
        turn=1_000, position=2_000, token_count=3, summary_key="msg-summary-1-2000",
        created_at=NOW - timedelta(hours=1),
    )  # fmt: skip
    MemoryEntry.objects.filter(
        thread=thread, kind=EntryKind.MESSAGE, position__lte=2_000
    ).update(covered_by=summary)
    if analyzed:
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {TABLE}")
    with CaptureQueriesContext(connection) as captured:
        loaded = load_oldest(thread, RecallConfig.build(), NOW, 200)
    selects = [q["sql"] for q in captured.captured_queries if f'FROM "{TABLE}"' in q["sql"]]
    # 64 rows of 4 tokens, then what the rest takes by their average (at least a page
    # of 64 again): past 2 x 200
    assert len(selects) == 2, selects
    assert len(loaded.entries) == 128 and not loaded.complete
    assert loaded.entries[0] == summary
    for sql in selects:
        assert_reads_visible_index(sql)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    messages=st.integers(0, 400),
    token_counts=st.lists(st.integers(0, 90), min_size=1, max_size=7),
    tokens=st.integers(1, 3_000),
)
# A thread exactly one page long, read whole: complete (it was reported incomplete).
@example(messages=64, token_counts=[1], tokens=1)
def test_a_backfill_slice_is_the_oldest_rows_up_to_twice_the_input_limit(
    messages: int, token_counts: list[int], tokens: int
) -> None:
    thread = unfolded_thread(messages, token_counts)
    everything = list(
        MemoryEntry.objects.filter(thread=thread).order_by("position", "id")
    )
    loaded = load_oldest(thread, RecallConfig.build(), NOW, tokens)
    ids = [entry.pk for entry in loaded.entries]
    assert ids == [entry.pk for entry in everything[: len(ids)]]  # a prefix, in order
    held = sum(entry.token_count + 1 for entry in loaded.entries)
    if loaded.complete:
        assert len(ids) == len(everything)
    else:
        assert len(ids) < len(everything) and held >= 2 * tokens


@pytest.mark.parametrize("analyzed", [False, True], ids=["fresh", "analyzed"])
def test_the_omitted_count_reads_a_folded_thread_through_the_partial_index(
    analyzed: bool,
) -> None:
    """The count behind ``omitted`` skips the rows the load read by their number: with a
    bound on the position instead, SQLite took the order index through every covered row
    (600 ms a recall on a million-entry thread)."""
    thread = folded_thread()
    if analyzed:
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {TABLE}")
    config = RecallConfig.build()
    loaded = load_context(thread, config, NOW, 60)  # a room of 16 of the 40 newest
    assert not loaded.complete
    read = len([entry for entry in loaded.entries if not entry.is_summary])
    with CaptureQueriesContext(connection) as captured:
        unloaded = count_unloaded(thread, loaded, config, NOW, limit=500)
    [sql] = [q["sql"] for q in captured.captured_queries]
    assert_reads_visible_index(sql)
    assert unloaded == TAIL - read
