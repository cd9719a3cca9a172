"""The overview strip at the top of a thread's timeline: the whole thread on one line.

A pure function of the rows `agentmemory.services.thread_picture` reads: positions
become segments, each a share of the strip's width (``left`` and ``width`` in percent),
in lanes: the entries (live, hidden by a summary, expired, or gone), the summaries recall
loads, those folded into them and deeper, retired or held ones, window folds, and the
turns with recorded recalls. The template (``_overview.html``) only draws them.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from agentmemory.querysets import loaded_in_place
from agentmemory.services.pictures import PictureRow, RecallsAt, ThreadPicture, WindowFold


@dataclass(frozen=True)
class Segment:
    start: int  # first position
    end: int  # last position, inclusive
    kind: str  # live, hidden, expired, gone, top, nested, deeper, retired, held, window, recalls
    label: str  # what it is, in words (the segment's title)
    href: str = ""
    left: float = 0.0  # percent of the strip
    width: float = 0.0


@dataclass(frozen=True)
class Lane:
    key: str
    caption: str
    segments: list[Segment] = field(default_factory=list)


@dataclass(frozen=True)
class Overview:
    positions: int
    lanes: list[Lane]


def _page_link(page: int, pk: int) -> str:
    return f"?page={page}#am-entry-{pk}"


@dataclass(frozen=True)
class Links:
    """Where the strip's segments link: ``page`` (a timeline page and a row on it), and,
    only when the user may open them, the recorded recalls of turns ``first`` to
    ``last`` and a window fold's page (None: no link)."""

    page: Callable[[int, int], str] = _page_link
    recalls: Callable[[int, int], str] | None = None
    window_fold: Callable[[int], str] | None = None


def overview(picture: ThreadPicture, page_size: int, links: Links | None = None) -> Overview:
    """The strip of ``picture``'s thread; links to rows go to the timeline page that shows
    them, ``page_size`` rows a page."""
    links = links or Links()
    rows = picture.rows
    positions = max([picture.last_position, *(row.position for row in rows)], default=0)
    pages = {row.id: index // page_size + 1 for index, row in enumerate(rows)}

    def row_link(pk: int) -> str:
        return links.page(pages[pk], pk)

    tops = loaded_in_place({row.id: row.covered_by for row in rows if row.is_summary})
    bars = summary_bars(rows, tops, row_link)
    lanes = [
        Lane("entries", "entries", entry_runs(rows, positions, tops, row_link)),
        Lane("top", "summaries recall loads", bars["top"]),
        Lane("nested", "folded into those", bars["nested"]),
        Lane("deeper", "folded deeper", bars["deeper"]),
        Lane("retired", "retired or held", bars["retired"]),
        Lane("window", "window folds", window_fold_bars(picture.window_folds, links)),
        Lane("recalls", "recorded recalls", recall_runs(picture.recalls, rows, links)),
    ]
    return Overview(positions, [
        Lane(lane.key, lane.caption, placed(lane.segments, positions)) for lane in lanes
    ])


def placed(segments: Iterable[Segment], positions: int) -> list[Segment]:
    """``segments`` with their share of a strip of ``positions`` positions."""
    return [
        Segment(s.start, s.end, s.kind, s.label, s.href,
                left=round(100 * (s.start - 1) / positions, 3),
                width=round(100 * (s.end - s.start + 1) / positions, 3))
        for s in segments
    ] if positions else []


RowLink = Callable[[int], str]


def _no_link(pk: int) -> str:
    return ""


def _span(start: int, end: int) -> str:
    return f"{start}" if start == end else f"{start}–{end}"


@dataclass
class _Run:
    state: str
    top: int | None
    start: int
    end: int
    first_turn: int
    last_turn: int
    href: str
    count: int = 1

    def segment(self) -> Segment:
        turns = _span(self.first_turn, self.last_turn)
        them = "it" if self.count == 1 else "them"
        said = {
            "live": f"recall may load {them}",
            "expired": "expired: invisible to recall, purged by the next purge",
            "hidden": f"hidden by summaries: recall loads summary #{self.top} in their place",
        }[self.state]
        return Segment(
            self.start, self.end, self.state,
            f"positions {_span(self.start, self.end)}, turn{'s' if '–' in turns else ''} "
            f"{turns}: {self.count} entr{'y' if self.count == 1 else 'ies'}, {said}",
            self.href,
        )


def entry_runs(
    rows: list[PictureRow], positions: int, tops: dict[int, int], link: RowLink = _no_link
) -> list[Segment]:
    """Positions 1 to ``positions`` as runs of one state: ``live`` (recall may load
    them), ``hidden`` (covered; one run per summary recall loads in their place),
    ``expired`` (invisible to recall, not purged yet) or ``gone`` (no row: erased, or
    expired and purged)."""
    segments: list[Segment] = []
    run: _Run | None = None
    expected = 1  # the next position, were none missing
    for row in rows:
        if row.is_summary:
            continue
        if row.expired:
            state, top = "expired", None
        elif row.covered_by is not None:
            state, top = "hidden", tops.get(row.covered_by, row.covered_by)
        else:
            state, top = "live", None
        if row.position > expected or (run and (run.state, run.top) != (state, top)):
            if run:
                segments.append(run.segment())
                run = None
            if row.position > expected:
                segments.append(_gone(expected, row.position - 1))
        if run:
            run.end, run.last_turn, run.count = row.position, row.turn, run.count + 1
        else:
            run = _Run(state, top, row.position, row.position, row.turn, row.turn,
                       link(row.id))
        expected = row.position + 1
    if run:
        segments.append(run.segment())
    if expected <= positions:
        segments.append(_gone(expected, positions))
    return segments


def _gone(start: int, end: int) -> Segment:
    plural = "s" if end > start else ""
    return Segment(start, end, "gone",
                   f"position{plural} {_span(start, end)}: no row (erased, or expired and "
                   "purged)")


def summary_bars(
    rows: list[PictureRow], tops: dict[int, int], link: RowLink = _no_link
) -> dict[str, list[Segment]]:
    """Each summary as a bar over the positions it stands for (through the summaries it
    folded in), in the lane of its place: ``top`` (recall loads it), ``nested`` (folded
    into one of those), ``deeper``, or ``retired`` (retired or held: it covers nothing;
    placed by its first turn)."""
    starts: dict[int, int] = {}
    for row in rows:  # thread order: what a summary covers comes before it
        if row.covered_by is not None:
            start = starts.get(row.id, row.position) if row.is_summary else row.position
            starts[row.covered_by] = min(starts.get(row.covered_by, start), start)
    messages = [row for row in rows if not row.is_summary]
    turns = [row.turn for row in messages]
    depth: dict[int, int] = {}
    for row in reversed(rows):  # a covering summary comes after what it covers
        if row.is_summary:
            depth[row.id] = 0 if row.covered_by is None else depth.get(row.covered_by, 0) + 1
    lanes: dict[str, list[Segment]] = {"top": [], "nested": [], "deeper": [], "retired": []}
    for row in (row for row in rows if row.is_summary):
        covered = starts.get(row.id)
        if covered is None:  # covers nothing now: placed by the turns it stood for
            first = bisect_right(turns, (row.from_turn or row.turn) - 1)
            covered = messages[first].position if first < len(messages) else row.position
        start = min(covered, row.position)
        if row.retired:
            lane, kind, said = "retired", "retired", "retired: kept as history, never recalled"
        elif row.held:
            lane, kind, said = "retired", "held", "held for review: recall skips it until approved"
        elif row.covered_by is None:
            lane, kind, said = "top", "top", "recall loads it"
        else:
            lane = kind = "nested" if depth[row.id] == 1 else "deeper"
            said = f"folded into #{row.covered_by}; recall loads #{tops.get(row.id, '?')}"
        lanes[lane].append(Segment(
            start, row.position, kind,
            f"summary #{row.id}, positions {_span(start, row.position)} (turns "
            f"{_span(row.from_turn or row.turn, row.turn)}): {said}"
            + ("; expired" if row.expired else ""),
            link(row.id),
        ))
    return lanes


def window_fold_bars(folds: list[WindowFold], links: Links) -> list[Segment]:
    """Window folds placed by the stored entries they folded; a fold of messages the
    thread never stored has no place on the strip."""
    return [
        Segment(fold.first, fold.last, "window",
                f"window fold #{fold.id}: {fold.messages} messages, positions "
                f"{_span(fold.first, fold.last)}",
                links.window_fold(fold.id) if links.window_fold else "")
        for fold in folds if fold.first is not None and fold.last is not None
    ]


def recall_runs(recalls: list[RecallsAt], rows: list[PictureRow], links: Links) -> list[Segment]:
    """Runs of consecutive turns with recorded recalls, placed over those turns' entries."""
    messages = [row for row in rows if not row.is_summary]
    turns = [row.turn for row in messages]
    if not messages:
        return []

    def first_position(turn: int) -> int:
        index = bisect_right(turns, turn - 1)
        return messages[min(index, len(messages) - 1)].position

    def last_position(turn: int) -> int:
        return messages[max(bisect_right(turns, turn) - 1, 0)].position

    runs: list[list[RecallsAt]] = []
    for at in recalls:
        if runs and at.turn == runs[-1][-1].turn + 1:
            runs[-1].append(at)
        else:
            runs.append([at])
    segments = []
    for run in runs:
        first, last = run[0].turn, run[-1].turn
        count = sum(at.recalls for at in run)
        largest = max(at.largest for at in run)
        start = first_position(first)
        segments.append(Segment(
            start, max(start, last_position(last)), "recalls",
            f"turn{'s' if first != last else ''} {_span(first, last)}: {count} recorded "
            f"recall{'s' if count != 1 else ''}, the largest context {largest:,} tokens",
            links.recalls(first, last) if links.recalls else "",
        ))
    return segments
