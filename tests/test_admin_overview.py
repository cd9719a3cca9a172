"""The pictures of a thread's timeline: the overview strip and the chart as pure functions
of rows (positions in, segments and bars out), the runs a summary hides collapsed, and
the page built from them in the same number of queries for a short and a long thread."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from agentmemory import services
from agentmemory.admin.overview import (
    Links,
    entry_runs,
    overview,
    placed,
    recall_runs,
    summary_bars,
    window_fold_bars,
)
from agentmemory.admin.thread_chart import call_turns, round_up, thread_chart
from agentmemory.admin.timeline import PageRow, collapsed
from agentmemory.models import MemoryEntry, RecallReceipt, Thread
from agentmemory.services import CallRow, PictureRow, RecallsAt, ThreadPicture, WindowFold
from tests.helpers import turn_messages

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def message(position: int, turn: int, *, covered_by: int | None = None, expired: bool = False,
            tokens: int = 10) -> PictureRow:
    return PictureRow(id=position, position=position, turn=turn, is_summary=False,
                      covered_by=covered_by, tokens=tokens,
                      created_at=T0 + timedelta(minutes=position), expired=expired)


def summary(pk: int, position: int, turn: int, from_turn: int, *, covered_by: int | None = None,
            retired: bool = False, held: bool = False) -> PictureRow:
    return PictureRow(id=pk, position=position, turn=turn, is_summary=True,
                      covered_by=covered_by, tokens=5, created_at=T0, retired=retired,
                      held=held, from_turn=from_turn)


def thread_rows() -> list[PictureRow]:
    """Twelve positions, in thread order: 1-3 (turns 1-2) folded by #100, which #101
    folded with 4 (turn 2); 5 erased; 6-7 live (turn 3); 8 expired; 9-10 live (turn 4);
    11-12 gone (purged). #102 stood for turn 3 and was retired; #103 is held."""
    return [
        message(1, 1, covered_by=100), message(2, 1, covered_by=100),
        message(3, 2, covered_by=100), summary(100, 3, 2, 1, covered_by=101),
        message(4, 2, covered_by=101), summary(101, 4, 2, 1),
        message(6, 3), message(7, 3), summary(102, 7, 3, 3, retired=True),
        message(8, 4, expired=True), message(9, 4), message(10, 4),
        summary(103, 10, 4, 4, held=True),
    ]


def runs(segments: list[Any]) -> list[tuple[int, int, str]]:
    return [(s.start, s.end, s.kind) for s in segments]


def test_positions_become_runs_of_one_state_with_gaps_as_gone() -> None:
    rows = thread_rows()
    segments = entry_runs(rows, 12, {100: 101, 101: 101}, lambda pk: f"#{pk}")
    assert runs(segments) == [
        (1, 4, "hidden"), (5, 5, "gone"), (6, 7, "live"), (8, 8, "expired"), (9, 10, "live"),
        (11, 12, "gone"),
    ]
    hidden = segments[0]
    assert hidden.href == "#1"
    assert "4 entries, hidden by summaries: recall loads summary #101" in hidden.label
    assert "turns 1–2" in hidden.label
    assert segments[1].label == "position 5: no row (erased, or expired and purged)"
    assert segments[1].href == ""


def test_hidden_runs_split_where_recall_loads_another_summary() -> None:
    rows = [message(1, 1, covered_by=7), message(2, 1, covered_by=7),
            message(3, 2, covered_by=8), message(4, 3)]
    assert runs(entry_runs(rows, 4, {7: 7, 8: 8})) == [
        (1, 2, "hidden"), (3, 3, "hidden"), (4, 4, "live")]


def test_a_gap_of_one_between_rows_alike_and_other_edges() -> None:
    assert runs(entry_runs([message(1, 1), message(3, 1)], 3, {})) == [
        (1, 1, "live"), (2, 2, "gone"), (3, 3, "live")]
    assert runs(entry_runs([message(3, 1)], 3, {})) == [(1, 2, "gone"), (3, 3, "live")]
    assert runs(entry_runs([], 4, {})) == [(1, 4, "gone")]
    assert entry_runs([], 0, {}) == []


def test_summaries_stand_over_what_they_fold_in_the_lane_of_their_nesting() -> None:
    rows = thread_rows()
    tops = {100: 101, 101: 101, 102: 102, 103: 103}
    bars = {lane: runs(segments) for lane, segments in summary_bars(rows, tops).items()}
    # #101 stands for 1-4 through #100; #100 for 1-3. The retired #102 stood for turn 3
    # (positions 6-7); the held #103 for turn 4 (8-10).
    assert bars == {
        "top": [(1, 4, "top")],
        "nested": [(1, 3, "nested")],
        "deeper": [],
        "retired": [(6, 7, "retired"), (8, 10, "held")],
    }
    labels = {s.kind: s.label for lane in summary_bars(rows, tops).values() for s in lane}
    assert labels["nested"].endswith("folded into #101; recall loads #101")
    assert labels["held"].endswith("held for review: recall skips it until approved")


def test_a_summary_two_folds_down_is_deeper() -> None:
    rows = [message(1, 1, covered_by=10), summary(10, 1, 1, 1, covered_by=11),
            message(2, 2, covered_by=11), summary(11, 2, 2, 1, covered_by=12),
            message(3, 3, covered_by=12), summary(12, 3, 3, 1)]
    bars = summary_bars(rows, {10: 12, 11: 12, 12: 12})
    assert [(lane, runs(segments)) for lane, segments in bars.items() if segments] == [
        ("top", [(1, 3, "top")]), ("nested", [(1, 2, "nested")]),
        ("deeper", [(1, 1, "deeper")]),
    ]
    assert bars["deeper"][0].label.endswith("folded into #11; recall loads #12")


def test_recorded_recalls_of_consecutive_turns_are_one_run() -> None:
    rows = thread_rows()
    recalls = [RecallsAt(1, 1, 100, 1000), RecallsAt(2, 2, 150, 1000),
               RecallsAt(4, 1, 90, 1000)]
    segments = recall_runs(recalls, rows, Links(recalls=lambda a, b: f"/r/{a}-{b}"))
    assert runs(segments) == [(1, 4, "recalls"), (8, 10, "recalls")]
    assert segments[0].label == (
        "turns 1–2: 3 recorded recalls, the largest context 150 tokens")
    assert [s.href for s in segments] == ["/r/1-2", "/r/4-4"]
    assert recall_runs(recalls, [], Links()) == []


def test_window_folds_are_placed_by_their_stored_entries() -> None:
    folds = [WindowFold(1, 2, 5, 4), WindowFold(2, None, None, 6)]
    segments = window_fold_bars(folds, Links(window_fold=lambda pk: f"/w/{pk}"))
    assert runs(segments) == [(2, 5, "window")]
    assert segments[0].href == "/w/1"


def test_segments_take_their_share_of_the_strip() -> None:
    rows = thread_rows()
    picture = ThreadPicture(thread_id=1, last_position=12, last_turn=4, now=T0, rows=rows,
                            recalls=[], window_folds=[], calls=[])
    strip = overview(picture, page_size=5)
    lanes = {lane.key: lane for lane in strip.lanes}
    entries = lanes["entries"].segments
    # The entries lane covers every position once, end to end.
    assert sum(s.width for s in entries) == pytest.approx(100, abs=0.01)
    assert all(a.left + a.width == pytest.approx(b.left, abs=0.002)
               for a, b in zip(entries, entries[1:], strict=False))
    assert (entries[0].left, entries[0].width) == (0, pytest.approx(100 * 4 / 12, abs=1e-3))
    # A row's link names the page that shows it (5 rows a page, in thread order).
    assert entries[2].href == "?page=2#am-entry-6"  # position 6 is the 7th row
    assert lanes["top"].segments[0].href == "?page=2#am-entry-101"
    assert placed(entries, 0) == []


def test_a_page_collapses_each_run_a_summary_hides() -> None:
    def row(pk: int, turn: int, covered_by: int | None, top: int | None,
            kind: str = "message") -> PageRow:
        entry = MemoryEntry(pk=pk, turn=turn, kind=kind, covered_by_id=covered_by)
        return PageRow(entry=entry, loaded_instead=top)

    rows = [row(1, 1, 5, 6), row(2, 1, 5, 6), row(5, 1, 6, 6, "summary"), row(3, 2, 6, 6),
            row(6, 2, None, 6, "summary"), row(4, 3, None, None), row(7, 3, 8, 8)]
    groups = collapsed(rows)
    assert [(g.top, [r.entry.pk for r in g.rows]) for g in groups] == [
        (6, [1, 2, 5, 3]), (None, [6]), (None, [4]), (8, [7])]
    first = groups[0]
    assert (first.entries, first.summaries, first.first_turn, first.last_turn) == (3, 1, 1, 2)


def test_round_maxima_and_the_turn_of_each_call() -> None:
    assert [round_up(v) for v in (0, 1, 7, 10, 11, 260, 5_000, 5_001)] == [
        1, 1, 10, 10, 20, 500, 5_000, 10_000]
    rows = thread_rows()  # message n written at T0 + n minutes
    calls = [CallRow(T0, "folded", 1), CallRow(T0 + timedelta(minutes=3, seconds=1), "folded", 1),
             CallRow(T0 + timedelta(minutes=20), "failed", 0)]
    assert call_turns(rows, calls) == [1, 2, 4]


def test_the_chart_draws_the_figures_it_is_given() -> None:
    rows = thread_rows()
    picture = ThreadPicture(
        thread_id=1, last_position=12, last_turn=4, now=T0, rows=rows,
        recalls=[RecallsAt(2, 1, 120, 200), RecallsAt(4, 2, 80, 200)], window_folds=[],
        calls=[CallRow(T0 + timedelta(minutes=3, seconds=1), "folded", 300),
               CallRow(T0 + timedelta(minutes=3, seconds=2), "declined", 0),
               CallRow(T0 + timedelta(minutes=9, seconds=1), "failed", 40)],
    )
    chart = thread_chart(picture)
    assert (chart.turns, chart.context_top, chart.spend_top) == (4, 200, 500)
    # One point per recorded turn, in the middle of its turn, measured down from the top.
    assert chart.context_points == "1.5,80 3.5,120"
    assert chart.budget_y == 0
    assert chart.fold_turns == [1.5]
    assert [(b.x, b.width, b.height, b.y, b.kind) for b in chart.bars] == [
        (1, 1, 300, 200, "folded"), (3, 1, 40, 460, "other")]
    assert chart.bars[0].label == "turn 2: 300 tokens in 2 calls, 1 folded"
    assert chart.words == ("3 summarizer calls, 1 of them folded, spent 340 tokens. The "
                           "messages kept hold 90 tokens verbatim; the newest recorded "
                           "recall gave a context of 80.")


def test_a_long_thread_is_binned_into_at_most_200_bars() -> None:
    rows = [message(n, n) for n in range(1, 1001)]
    calls = [CallRow(T0 + timedelta(minutes=n, seconds=1), "folded", n) for n in range(1, 1001)]
    picture = ThreadPicture(thread_id=1, last_position=1000, last_turn=1000, now=T0, rows=rows,
                            recalls=[], window_folds=[], calls=calls)
    chart = thread_chart(picture)
    assert chart.turns_per_bar == 5 and len(chart.bars) == 200
    assert chart.bars[0].height == 1 + 2 + 3 + 4 + 5
    assert sum(bar.height for bar in chart.bars) == chart.spent == sum(range(1, 1001))
    assert chart.context_points == "" and chart.recalls == 0


# ---------------------------------------------------------------- on a real database


SMALL_WINDOW = {
    "RECEIPTS": True,
    "WINDOW": {"CLASS": "agentmemory.window.seams.SlidingWindow", "OPTIONS": {"MAX_MESSAGES": 6}},
}


def build(turns: int) -> Thread:
    """A thread of ``turns`` turns, recalled (receipts on) and folded as it grows, and one
    more; its stored messages compacted by a window fold, one live message erased and
    one expired."""
    thread = Thread.objects.create(title=f"{turns} turns")
    with override_settings(AGENTMEMORY=SMALL_WINDOW):
        for n in range(1, turns + 1):
            services.append(thread, turn_messages(n, with_tools=False))
            services.recall(thread, 100_000, preserve_recent=2, trigger_min_entries=4,
                            load_count=8)
        services.append(thread, turn_messages(turns + 1, with_tools=False))
        window = [{"role": m.role, "content": m.content} for m in
                  MemoryEntry.objects.filter(thread=thread).messages().order_by("position")]
        assert services.compact(thread, window, retain="conversation").span
    live = list(MemoryEntry.objects.filter(thread=thread).uncovered().messages()
                .order_by("position"))
    services.erase_entry(live[0])
    MemoryEntry.objects.filter(pk=live[1].pk).update(expires_at=timezone.now() - timedelta(1))
    return thread


@pytest.mark.django_db
def test_the_picture_read_from_the_database_places_every_kind_of_row() -> None:
    thread = build(6)
    picture = services.thread_picture(thread)
    strip = {lane.key: lane.segments for lane in overview(picture, 200).lanes}
    kinds = [s.kind for s in strip["entries"]]
    assert kinds.count("gone") == 1 and kinds.count("expired") == 1
    assert {"hidden", "live"} <= set(kinds)
    loads = MemoryEntry.objects.filter(thread=thread).summaries().uncovered()
    assert [s.label.split(",")[0] for s in strip["top"]] == [f"summary #{s.pk}" for s in loads]
    assert strip["nested"], "the rolling summary folded an earlier one in"
    assert len(strip["window"]) == 1 and strip["window"][0].end > strip["window"][0].start
    # Turn 6's receipt showed the erased message, and went with it (law 7).
    assert RecallReceipt.objects.filter(thread=thread).count() == 5
    assert [s.label for s in strip["recalls"]] == [
        f"turns 1–5: 5 recorded recalls, the largest context "
        f"{max(r.tokens for r in RecallReceipt.objects.filter(thread=thread)):,} tokens"]
    chart = thread_chart(picture)
    assert chart.recalls == 5 and chart.calls == len(picture.calls) >= 3
    assert len(chart.fold_turns) == chart.folded


@pytest.mark.django_db
def test_the_timeline_makes_the_same_queries_for_a_short_and_a_long_thread(
    root: Client,
) -> None:
    counts = []
    for turns in (4, 40):
        thread = build(turns)
        with CaptureQueriesContext(connection) as captured:
            response = root.get(reverse("admin:agentmemory_thread_timeline", args=[thread.pk]))
        assert response.status_code == 200
        body = response.content.decode()
        assert 'id="am-overview"' in body and 'id="am-chart-context"' in body
        assert body.count('class="am-span"') >= 1
        counts.append([query["sql"] for query in captured])
    assert len(counts[0]) == len(counts[1]), counts
