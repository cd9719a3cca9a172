"""A timeline page's rows, and the runs of them a summary hides, collapsed under one line
until opened: a pure function of the rows, drawn by ``thread_timeline.html``."""

from __future__ import annotations

from dataclasses import dataclass

from agentmemory.models import MemoryEntry


@dataclass(frozen=True)
class PageRow:
    """One row of a timeline page: the entry, its summary's label and text apart (for a
    summary), the summary recall loads in its place when it is hidden, and whether it
    has expired (by the queryset's rule, read with the page's rows)."""

    entry: MemoryEntry
    label_text: tuple[str, str, str] | None = None
    loaded_instead: int | None = None
    expired: bool = False

    @property
    def hidden(self) -> bool:
        return self.entry.covered_by_id is not None


@dataclass
class Group:
    """Rows of a timeline page shown together: one row standing alone, or a run of rows
    hidden in place of the same summary (``top``), collapsed until opened."""

    rows: list[PageRow]
    top: int | None = None

    @property
    def first_turn(self) -> int:
        return min(row.entry.turn for row in self.rows)

    @property
    def last_turn(self) -> int:
        return max(row.entry.turn for row in self.rows)

    @property
    def summaries(self) -> int:
        return sum(1 for row in self.rows if row.entry.is_summary)

    @property
    def entries(self) -> int:
        return len(self.rows) - self.summaries


def collapsed(rows: list[PageRow]) -> list[Group]:
    """A timeline page's ``rows`` (in order) grouped: each run of hidden rows that recall
    replaces by the same summary is one group, shown collapsed; any other row stands
    alone."""
    groups: list[Group] = []
    for row in rows:
        top = row.loaded_instead if row.hidden else None
        if top is not None and groups and groups[-1].top == top:
            groups[-1].rows.append(row)
        else:
            groups.append(Group([row], top))
    return groups
