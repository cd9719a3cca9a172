"""Plan: which span a budget-driven fold takes next, as a pure function of what is loaded.

The context is summaries first, then the newest whole turns. A fold is due when that
would outgrow ``high_water`` x the room (or, with the seeds' count trigger, once
``trigger_min_entries`` are loaded). It then folds, oldest first:

1. a run of messages into a *chunk* summary (level 1: it stands for messages only),
   leaving a verbatim tail of about ``low_water`` x the room, so folds are far apart;
2. once summaries hold more than ``summary_share`` x the room, adjacent summaries of the
   lowest level into one a level up, so nesting grows with the log of the history.

Every span is made of whole blocks (`blocks_of`), so no fold and no budget ever splits
a turn or separates a tool call from its results, and each is at most ``input_limit``
tokens: a long history (a backfill) is folded forward in bounded spans.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentmemory.models import MemoryEntry, Role
from agentmemory.pipeline.config import RecallConfig
from agentmemory.pipeline.summarize import FoldPlan
from agentmemory.pipeline.turns import turn_starts

#: How deep summaries nest. A merge over a summary at this level takes over what that
#: summary covers instead of covering it, so expanding any summary is at most this many
#: reads, however long the thread (a small room can hold only one summary, and would
#: otherwise nest one level deeper with every fold).
MAX_SUMMARY_LEVEL = 4


def entry_cost(entry: MemoryEntry) -> int:
    """What an entry takes of the room: its text and the line break before it."""
    return entry.token_count + 1


@dataclass(frozen=True)
class Block:
    """Entries that go into a context, or into a fold, together or not at all: a
    summary alone, or whole turns, widened until every tool call has its results."""

    entries: tuple[MemoryEntry, ...]

    @property
    def tokens(self) -> int:
        return sum(entry_cost(entry) for entry in self.entries)

    @property
    def is_summary(self) -> bool:
        return self.entries[0].is_summary


@dataclass(frozen=True)
class Blocks:
    """``blocks`` in thread order; ``unpaired``: tool messages whose partner is not
    visible (erased, expired, or never stored), which no context may carry."""

    blocks: list[Block]
    unpaired: list[MemoryEntry]


def blocks_of(entries: list[MemoryEntry]) -> Blocks:
    groups: list[list[MemoryEntry]] = []
    call_group: dict[str, int] = {}
    for entry, starts in zip(entries, turn_starts(entries), strict=True):
        if entry.is_summary:
            groups.append([entry])
            continue
        if groups and not starts:
            groups[-1].append(entry)
        else:
            groups.append([entry])
        if entry.role == Role.TOOL and entry.tool_call_id in call_group:
            first = call_group[entry.tool_call_id]
            # The result answers a call in an earlier group: one block from call to result,
            # unless a summary stands between them (then the pair is already broken).
            if first < len(groups) - 1 and not any(g[0].is_summary for g in groups[first:]):
                merged = [e for group in groups[first:] for e in group]
                del groups[first:]
                groups.append(merged)
                call_group = {k: min(v, first) for k, v in call_group.items()}
        for call in entry.tool_calls or []:
            call_group[str(call.get("id", ""))] = len(groups) - 1
    blocks = [Block(tuple(group)) for group in groups]
    unpaired = _unpaired(entries)
    if unpaired:
        drop = {entry.pk for entry in unpaired}
        blocks = [
            Block(kept)
            for block in blocks
            if (kept := tuple(e for e in block.entries if e.pk not in drop))
        ]
    return Blocks(blocks=blocks, unpaired=unpaired)


def _unpaired(entries: list[MemoryEntry]) -> list[MemoryEntry]:
    """Tool messages that cannot go to a model as they are: a result whose call is not
    visible, and a call any of whose results is missing, with the results it has.

    Calls in the newest turn may still be waiting for their results: they stay.
    """
    messages = [entry for entry in entries if not entry.is_summary]
    results: dict[str, list[MemoryEntry]] = {}
    for entry in messages:
        if entry.role == Role.TOOL:
            results.setdefault(entry.tool_call_id, []).append(entry)
    newest_turn = entries[-1].turn if entries else 0
    unpaired: dict[int, MemoryEntry] = {}
    called: set[str] = set()
    for entry in messages:
        ids = [str(call.get("id", "")) for call in entry.tool_calls or []]
        called.update(ids)
        if ids and entry.turn != newest_turn and not all(i in results for i in ids):
            unpaired[entry.pk] = entry
            for answer in (r for i in ids for r in results.get(i, [])):
                unpaired[answer.pk] = answer
    for call_id, answers in results.items():
        if call_id not in called:
            unpaired.update((answer.pk, answer) for answer in answers)
    return sorted(unpaired.values(), key=lambda e: (e.position, e.pk))


def fold_pressure(
    entries: list[MemoryEntry], room: int, config: RecallConfig, *, complete: bool
) -> bool:
    """Whether a fold is due: more history than was loaded, the room outgrown, or the
    count trigger reached."""
    summaries = [entry for entry in entries if entry.is_summary]
    return pressure(
        Tally(len(entries), sum(map(entry_cost, entries)), len(summaries),
              sum(map(entry_cost, summaries))),
        room, config, complete=complete,
    )


@dataclass(frozen=True)
class Tally:
    """What `pressure` needs of the loaded entries: rows and their cost, of all and of
    the summaries (`pipeline.load.tally_visible` counts them in the database)."""

    rows: int
    cost: int
    summaries: int
    summary_cost: int


def pressure(tally: Tally, room: int, config: RecallConfig, *, complete: bool) -> bool:
    """`fold_pressure` from the counts alone."""
    if not tally.rows:
        return False
    if not complete:
        return True
    if config.trigger_min_entries is not None and tally.rows >= config.trigger_min_entries:
        return True
    if config.high_water is None:
        return False
    return tally.cost > room * config.high_water or _summaries_over_tally(tally, room, config)


def _summaries_over(entries: list[MemoryEntry], room: int, config: RecallConfig) -> bool:
    summaries = [entry for entry in entries if entry.is_summary]
    tally = Tally(len(entries), 0, len(summaries), sum(map(entry_cost, summaries)))
    return _summaries_over_tally(tally, room, config)


def _summaries_over_tally(tally: Tally, room: int, config: RecallConfig) -> bool:
    return tally.summaries > 1 and tally.summary_cost > room * config.summary_share


def next_fold(
    entries: list[MemoryEntry], room: int, config: RecallConfig, *, complete: bool
) -> FoldPlan | None:
    """The next span to fold, or None when no fold is due or possible.

    In order: the newest run of messages (a backfill's slice: its oldest run); then a
    merge of summaries; then an older run of messages. An older run is what an expired
    or unfolded summary left verbatim: while the room holds it, it is left to expire
    rather than paid for again, and merging is tried first.
    """
    if not fold_pressure(entries, room, config, complete=complete):
        return None
    blocks = blocks_of(entries).blocks
    total = sum(block.tokens for block in blocks)
    over = not complete or (config.high_water is not None and total > room * config.high_water)
    counted = (
        config.trigger_min_entries is not None and len(entries) >= config.trigger_min_entries
    )
    runs: list[list[Block]] = []
    if over or counted:
        tail = _tail_start(blocks, room, config, complete=complete, by_tokens=over)
        runs = _message_runs(blocks[:tail])
        if complete:
            runs.reverse()
            if tail and blocks[tail - 1].is_summary:
                runs.insert(0, [])  # no run of the newest turns to fold: older runs wait
        chunk = _chunk(runs[:1], config)
        if chunk is not None:
            return chunk
    if over or _summaries_over(entries, room, config):
        # A merge reads at most half the room, so (being smaller than what it reads) the
        # summary it writes fits beside the newest turns.
        merge = _merge(blocks, min(config.input_limit, room // 2))
        if merge is not None:
            return merge
    if over:
        return _chunk(runs[1:], config) or _merge(blocks, config.input_limit)
    return None


def _tail_start(
    blocks: list[Block], room: int, config: RecallConfig, *, complete: bool, by_tokens: bool
) -> int:
    """Index of the first block kept verbatim: the newest whole turn always, then older
    message blocks up to ``low_water`` x the room (token trigger) and at least
    ``preserve_recent`` entries. A slice of a backfill keeps only its last block, which
    the slice's edge may have cut."""
    if not complete:
        return max(len(blocks) - 1, 0)
    start = len(blocks) - 1
    kept_tokens, kept_entries = blocks[-1].tokens, len(blocks[-1].entries)
    limit = room * config.low_water if by_tokens else 0
    while start > 0 and not blocks[start - 1].is_summary:
        block = blocks[start - 1]
        if kept_entries >= config.preserve_recent and kept_tokens + block.tokens > limit:
            break
        start -= 1
        kept_tokens += block.tokens
        kept_entries += len(block.entries)
    return start


def _message_runs(blocks: list[Block]) -> list[list[Block]]:
    """The runs of message blocks between summaries, oldest first."""
    runs: list[list[Block]] = [[]]
    for block in blocks:
        if block.is_summary:
            runs.append([])
        else:
            runs[-1].append(block)
    return [run for run in runs if run]


def _chunk(runs: list[list[Block]], config: RecallConfig) -> FoldPlan | None:
    """The first run worth a call, from its oldest block, cut at ``input_limit`` tokens."""
    for run in runs:
        span = _bounded(run, config.input_limit)
        if sum(len(b.entries) for b in span) >= config.effective_min_fold:
            return FoldPlan.over([e for b in span for e in b.entries])
    return None


def _merge(blocks: list[Block], limit: int) -> FoldPlan | None:
    """Adjacent summaries of the lowest level that has two side by side, so merges build
    a balanced tree: a summary of level n stands for about 2^(n-1) chunks or more."""
    summaries = [(i, b.entries[0]) for i, b in enumerate(blocks) if b.is_summary]
    levels = sorted({entry.coverage.level for _, entry in summaries})
    for level in levels:
        run: list[Block] = []
        for index, block in enumerate([*blocks, None]):
            fits = (
                block is not None and block.is_summary
                and block.entries[0].coverage.level <= level
            )
            if fits:
                run.append(blocks[index])
                continue
            span = _bounded(run, limit)
            if len(span) >= 2:
                merged = [b.entries[0] for b in span]
                capped = tuple(e.pk for e in merged if e.coverage.level >= MAX_SUMMARY_LEVEL)
                return FoldPlan.over(merged, absorbed=capped)
            run = []
    return None


def _bounded(run: list[Block], limit: int) -> list[Block]:
    """The leading blocks of ``run`` within ``limit`` tokens (at least one)."""
    taken: list[Block] = []
    used = 0
    for block in run:
        if taken and used + block.tokens > limit:
            break
        taken.append(block)
        used += block.tokens
    return taken
