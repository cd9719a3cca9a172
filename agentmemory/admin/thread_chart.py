"""A thread's chart over its turns: the context each turn's recorded recalls gave, the
turns whose summarizer call folded, and the tokens the summarizer spent.

A pure function of the rows `agentmemory.services.thread_picture` reads. Coordinates are
in data units (x: turns, 0 to the last; y: tokens, 0 to a round maximum, downwards as
SVG draws); the template scales them to the page with ``preserveAspectRatio="none"`` and
strokes that do not scale, and writes the labels in HTML, so the chart reads the same at
any width.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass

from agentmemory.choices import CallOutcome
from agentmemory.services.pictures import CallRow, PictureRow, ThreadPicture

#: At most this many spend bars: longer threads are binned into runs of turns.
MAX_BARS = 200
#: Up to this many recorded recalls, each is also marked by a dot with its figures.
MAX_MARKS = 60


@dataclass(frozen=True)
class Bar:
    x: float
    width: float
    y: float  # top of the bar
    height: float
    kind: str  # folded, other (declined, refused, failed, killed, reserved)
    label: str


@dataclass(frozen=True)
class Chart:
    turns: int
    context_top: int  # the context panel's y maximum (tokens)
    context_points: str  # SVG polyline points, one per turn with a recorded recall
    marks: list[tuple[float, float, str]]  # x, y and words of each recall, when few
    budget_y: float | None  # the largest budget asked for, if within the panel
    fold_turns: list[float]  # x of each turn whose summarizer call folded
    spend_top: int
    bars: list[Bar]
    recalls: int  # turns with a recorded recall
    spent: int  # tokens the summarizer reported, all calls
    calls: int
    folded: int
    history: int  # tokens of every message of the thread, verbatim
    last_context: int | None  # the largest context of the newest turn with a recall
    turns_per_bar: int = 1

    @property
    def words(self) -> str:
        """The figures the chart draws, in a sentence beside it."""
        text = (f"{self.calls:,} summarizer call{'s' * (self.calls != 1)}, {self.folded:,} of "
                f"them folded, spent {self.spent:,} tokens. The messages kept hold "
                f"{self.history:,} tokens verbatim")
        if self.last_context is not None:
            text += f"; the newest recorded recall gave a context of {self.last_context:,}"
        return text + "."

    @property
    def axis(self) -> dict[str, str]:
        """The labels of the axes' ends, with thousands separated."""
        return {"context": f"{self.context_top:,}", "spend": f"{self.spend_top:,}",
                "turns": f"{self.turns:,}"}


def round_up(value: float) -> int:
    """The smallest of 1, 2 or 5 times a power of ten that is at least ``value``."""
    if value <= 0:
        return 1
    power = 10 ** math.floor(math.log10(value))
    return next(int(step * power) for step in (1, 2, 5, 10) if step * power >= value)


def call_turns(rows: list[PictureRow], calls: list[CallRow]) -> list[int]:
    """The turn each call was made at: the newest turn among the messages written at or
    before it (a fold runs after the turn's user message is appended)."""
    written = sorted((row.created_at, row.turn) for row in rows if not row.is_summary)
    times = [created for created, _ in written]
    newest, turn = [], 0
    for _, at in written:
        turn = max(turn, at)
        newest.append(turn)
    return [
        newest[index - 1] if (index := bisect_right(times, call.created_at)) else 1
        for call in calls
    ]


def thread_chart(picture: ThreadPicture) -> Chart:
    rows = picture.rows
    turns = max([picture.last_turn, *(row.turn for row in rows),
                 *(at.turn for at in picture.recalls)], default=0)
    context_top = round_up(max([at.largest for at in picture.recalls], default=0))
    budget = max([at.budget for at in picture.recalls], default=0)
    points = " ".join(
        f"{at.turn - 0.5:g},{context_top - at.largest:g}" for at in picture.recalls
    )
    at_turn = call_turns(rows, picture.calls)
    width = max(1, math.ceil(turns / MAX_BARS))  # turns per bar
    spend: dict[int, list[CallRow]] = {}
    for call, turn in zip(picture.calls, at_turn, strict=True):
        spend.setdefault((turn - 1) // width, []).append(call)
    spend_top = round_up(max(
        [sum(call.tokens for call in calls) for calls in spend.values()], default=0
    ))
    bars = []
    for index, calls in sorted(spend.items()):
        tokens = sum(call.tokens for call in calls)
        folded = sum(1 for call in calls if call.outcome == CallOutcome.FOLDED)
        first, last = index * width + 1, min((index + 1) * width, max(turns, 1))
        where = f"turn {first}" if first == last else f"turns {first}–{last}"
        bars.append(Bar(
            x=index * width, width=last - first + 1, y=spend_top - tokens, height=tokens,
            kind="folded" if folded else "other",
            label=f"{where}: {tokens:,} tokens in {len(calls)} call{'s' * (len(calls) > 1)}, "
                  f"{folded} folded",
        ))
    return Chart(
        turns=turns, context_top=context_top, context_points=points,
        marks=[
            (at.turn - 0.5, context_top - at.largest,
             f"turn {at.turn}: {at.largest:,} tokens in the largest of {at.recalls} "
             f"recorded recall{'s' * (at.recalls > 1)}")
            for at in picture.recalls
        ] if len(picture.recalls) <= MAX_MARKS else [],
        budget_y=context_top - budget if 0 < budget <= context_top else None,
        fold_turns=[turn - 0.5 for call, turn in zip(picture.calls, at_turn, strict=True)
                    if call.outcome == CallOutcome.FOLDED],
        spend_top=spend_top, bars=bars, recalls=len(picture.recalls),
        spent=sum(call.tokens for call in picture.calls), calls=len(picture.calls),
        folded=sum(1 for call in picture.calls if call.outcome == CallOutcome.FOLDED),
        history=sum(row.tokens for row in rows if not row.is_summary),
        last_context=picture.recalls[-1].largest if picture.recalls else None,
        turns_per_bar=width,
    )
