"""The summaries at the head of a context: how much of the room they may hold, and which
of them a merge takes. They keep their place through the folds after them, so the
provider's cached prefix keeps its worth; a fold rewrites as few of the newest as it can."""

from __future__ import annotations

from agentmemory.models import MemoryEntry
from agentmemory.pipeline.blocks import Block, Tally, bounded, entry_cost
from agentmemory.pipeline.config import RecallConfig
from agentmemory.pipeline.summarize import FoldPlan

#: How deep summaries nest. A merge over a summary at this level takes over what that
#: summary covers instead of covering it, so expanding any summary is at most this many
#: reads, however long the thread (a small room can hold only one summary, and would
#: otherwise nest one level deeper with every fold).
MAX_SUMMARY_LEVEL = 4


def summaries_over(entries: list[MemoryEntry], room: int, config: RecallConfig) -> bool:
    summaries = [entry for entry in entries if entry.is_summary]
    tally = Tally(len(entries), 0, len(summaries), sum(map(entry_cost, summaries)))
    return summaries_over_tally(tally, room, config)


def summaries_over_tally(tally: Tally, room: int, config: RecallConfig) -> bool:
    if tally.summaries <= 1:
        return False
    estimate = tally.summary_cost // tally.summaries
    return tally.summary_cost > summary_room(room, config, estimate)


def cache_floor(room: int, config: RecallConfig) -> int:
    """The shortest context worth leaving after a fold (0: none): a provider bills a
    shorter prefix in full, so where the room holds three times its cache minimum, the
    summaries a fold keeps in front and the context it leaves reach that minimum."""
    return config.cache_min_tokens if room >= 3 * config.cache_min_tokens else 0


def summary_room(room: int, config: RecallConfig, estimate: int) -> float:
    """The tokens summaries may hold before a fold absorbs or merges the newest ones:
    ``summary_share`` x the room, and, where the room caches (`cache_floor`), enough for
    the summaries left in front of a rolling one to reach the cache minimum. Those keep
    their place through every fold, so the fold turn reads them at the cached price
    instead of paying the whole context again."""
    floor = cache_floor(room, config)
    return max(room * config.summary_share, floor + 2 * estimate if floor else 0)


def summaries_left(blocks: list[Block], room: int, config: RecallConfig, estimate: int) -> int:
    """The summaries' tokens once a chunk fold has written its own (of about ``estimate``)
    and absorbed the newest ones it must to stay within `summary_room` (`plan`'s chunk)."""
    sizes = [block.tokens for block in blocks if block.is_summary]
    while sizes and sum(sizes) + estimate > summary_room(room, config, estimate):
        sizes.pop()
    return sum(sizes) + estimate


def merge(blocks: list[Block], limit: int, *, excess: int | None = None) -> FoldPlan | None:
    """The newest run of two or more adjacent summaries, from its newest within ``limit``
    tokens: the summaries before it keep their place in the context (and the provider's
    cached prefix its worth). With ``excess``, only as many of the newest as take that
    many tokens more than the summary they become out of the context. Summaries at
    MAX_SUMMARY_LEVEL are absorbed, so nesting never grows past it."""
    runs: list[list[Block]] = [[]]
    for block in blocks:
        if block.is_summary:
            runs[-1].append(block)
        elif runs[-1]:
            runs.append([])
    for run in reversed(runs):
        span = list(reversed(bounded(list(reversed(run)), limit)))
        if excess is not None:
            span = _fewest_newest(span, excess)
        if len(span) >= 2:
            merged = [b.entries[0] for b in span]
            capped = tuple(e.pk for e in merged if e.coverage.level >= MAX_SUMMARY_LEVEL)
            return FoldPlan.over(merged, absorbed=capped)
    return None


def _fewest_newest(span: list[Block], excess: int) -> list[Block]:
    """The newest two or more of ``span`` whose tokens exceed ``excess``."""
    taken = 2
    while taken < len(span) and sum(b.tokens for b in span[-taken:]) <= excess:
        taken += 1
    return span[-taken:]


def summary_excess(blocks: list[Block], room: int, config: RecallConfig, estimate: int) -> int:
    """By how many tokens the summaries, and a merged one of ``estimate``, outgrow their room."""
    held = sum(block.tokens for block in blocks if block.is_summary)
    return max(0, int(held + estimate - summary_room(room, config, estimate)))
