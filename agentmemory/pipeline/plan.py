"""Plan: which span a budget-driven fold takes next, as a pure function of what is loaded.

The context is summaries first, then the newest whole turns. A fold is due when that
would outgrow the trigger (`fold_trigger`: ``high_water`` x the room, but never less
than ``trigger_min_tokens``), or, with the seeds' count trigger, once
``trigger_min_entries`` are loaded. It then folds, oldest first, one call per fold:

1. a run of messages into a *chunk* summary, absorbing in the same call the newest
   summaries it must to keep the summaries within their room
   (`summary_area.summary_room`), and leaving a verbatim tail of about ``low_water`` x
   the room; the summaries before it keep their place, and with it the provider's
   cached prefix;
2. when summaries outgrow their room anyway (a run of expiring messages absorbs none),
   the fewest of the newest into one a level up.

Every span is made of whole blocks (`agentmemory.pipeline.blocks`), so no fold and no
budget ever splits a turn or separates a tool call from its results, and each is at most
``input_limit`` tokens: a long history (a backfill) is folded forward in bounded spans.
"""

from __future__ import annotations

from agentmemory.models import MemoryEntry
from agentmemory.pipeline.blocks import Block, Tally, blocks_of, bounded, entry_cost
from agentmemory.pipeline.config import RecallConfig
from agentmemory.pipeline.summarize import FoldPlan
from agentmemory.pipeline.summary_area import (
    MAX_SUMMARY_LEVEL,
    cache_floor,
    merge,
    summaries_left,
    summaries_over,
    summaries_over_tally,
    summary_excess,
    summary_room,
)
from agentmemory.pipeline.turns import turn_answered


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


def pressure(tally: Tally, room: int, config: RecallConfig, *, complete: bool) -> bool:
    """`fold_pressure` from the counts alone."""
    if not tally.rows:
        return False
    if not complete:
        return True
    if config.trigger_min_entries is not None and tally.rows >= config.trigger_min_entries:
        return True
    trigger = fold_trigger(room, config)
    if trigger is None:
        return False
    return tally.cost > trigger or summaries_over_tally(tally, room, config)


def fold_trigger(room: int, config: RecallConfig) -> float | None:
    """The context size, in tokens, past which a budget-driven fold is due (None: no
    token trigger). ``high_water`` x the room, but not below ``trigger_min_tokens`` and
    not above the room: folding before the room is full pays only once the context a
    fold leaves is long enough to be billed at the provider's cached price and the
    tokens between folds are many against one summarizer call (docs/benchmarks.md)."""
    if config.high_water is None:
        return None
    return min(float(room), max(room * config.high_water, float(config.trigger_min_tokens)))


#: A fold the room does not need yet waits until its run of messages holds this share
#: of the room, so the conversation is folded in at most one call per 0.35 x the room
#: (docs/concepts.md): folding smaller runs sooner was dearer on both benchmark
#: workloads (docs/benchmarks.md), and 2.9 calls per room is within the calls bound of
#: 4 x conversation / budget. A needed fold (the alternative is a gap) never waits.
MIN_CHUNK_SHARE = 0.35

#: What a summary is expected to take of the room before the thread has one to go by:
#: the label and a summary of a few sentences.
DEFAULT_SUMMARY_COST = 200


def next_fold(
    entries: list[MemoryEntry], room: int, config: RecallConfig, *, complete: bool,
    patient: bool = True,
) -> FoldPlan | None:
    """The next span to fold, or None when no fold is due or possible.

    In order: the newest run of messages (a backfill's slice: its oldest run), with the
    newest summaries it must absorb so the summaries stay within `summary_room`: one
    call, and the summaries before them untouched (their place in the context, and so
    the provider's cached prefix, does not move); then, when the summaries outgrow their
    room, a merge of as few of the newest as bring them back; then an older run of
    messages. An older run is what an expired or unfolded summary left verbatim: while
    the room holds it, it is left to expire rather than paid for again.

    A token trigger folds by tokens only: a run is worth a call when it outweighs the
    summary it becomes, whatever its count of entries (the count floor is the count
    trigger's). When the room cannot hold what is visible (``needed``: the alternative is
    a context that leaves history out), any run of whole blocks is folded, widened into
    the verbatim tail (never its newest turn) until it outweighs the summary it will
    become, and a merge may take every summary within half the room. Otherwise a run
    waits until it holds `MIN_CHUNK_SHARE` of the room (``patient=False``: it does not).
    """
    if not fold_pressure(entries, room, config, complete=complete):
        return None
    blocks = blocks_of(entries).blocks
    total = sum(block.tokens for block in blocks)
    needed = not complete or total > room
    trigger = fold_trigger(room, config)
    over = needed or (trigger is not None and total > trigger)
    counted = (
        config.trigger_min_entries is not None and len(entries) >= config.trigger_min_entries
    )
    estimate = max((b.tokens for b in blocks if b.is_summary), default=DEFAULT_SUMMARY_COST)
    answered = config.mode == "background" and turn_answered(entries)
    runs: list[tuple[int, int]] = []
    # A needed run no larger than the summary it becomes frees no room: a merge goes
    # first, and the run only if nothing else is left (the summarizer then decides).
    last_resort: FoldPlan | None = None
    if over or counted:
        tail = _tail_start(blocks, room, config, estimate, complete=complete, by_tokens=over,
                           answered=answered)
        runs = _message_run_bounds(blocks[:tail])
        if complete:
            runs.reverse()
            if tail and blocks[tail - 1].is_summary:
                runs.insert(0, (tail, tail))  # nothing between the summaries and the tail
        if runs:
            first, last = runs[0]
            if complete and last == tail and needed:
                # The newest run may borrow from the tail, never its newest turn.
                last = _widen(blocks, first, last, estimate)
            chunk = _chunk(blocks, first, last, room, config, estimate, needed=needed,
                           by_count=counted, patient=patient)
            if chunk is not None and needed and chunk.span_tokens <= estimate:
                last_resort, chunk = chunk, None
            if chunk is not None:
                return chunk
    if needed or summaries_over(entries, room, config):
        # A merge reads at most half the room, so (being smaller than what it reads) the
        # summary it writes fits beside the newest turns.
        excess = None if needed else summary_excess(blocks, room, config, estimate)
        merged = merge(blocks, min(config.input_limit, room // 2), excess=excess)
        if merged is not None:
            return merged
    if needed:
        # An older run is what an expired summary left verbatim: it is folded again only
        # when the room cannot hold it, else left to expire (a summary of it would die
        # with its next original to expire, and bring the rest back once more).
        for first, last in runs[1:]:
            chunk = _chunk(blocks, first, last, room, config, estimate, needed=needed,
                           by_count=False, patient=patient)
            if chunk is not None:
                return chunk
        return last_resort or merge(blocks, config.input_limit)
    return None


def _tail_start(
    blocks: list[Block], room: int, config: RecallConfig, estimate: int,
    *, complete: bool, by_tokens: bool, answered: bool = False,
) -> int:
    """Index of the first block kept verbatim: the newest whole turn (unless
    ``answered``: a background fold plans for the next recall, whose newest turn is a
    user message still to come, so a turn that has its answer is kept like any older
    one, within the token floor), then older
    message blocks up to ``low_water`` x the room (token trigger: the floor follows the
    room, in tokens) or up to ``preserve_recent`` entries (count trigger, the seeds'
    floor). Where the room holds three times ``cache_min_tokens``, the tail grows past
    ``low_water`` (up to half the room) until the context the fold leaves, its summaries
    and the one of about ``estimate`` tokens it writes included, reaches that: a shorter
    one is billed in full by the provider on every turn until it grows past its cache
    minimum. A slice of a backfill keeps only its last block, which the slice's edge may
    have cut."""
    if not complete:
        return max(len(blocks) - 1, 0)
    start = len(blocks) - 1
    kept_tokens, kept_entries = blocks[-1].tokens, len(blocks[-1].entries)
    if answered and by_tokens:
        start, kept_tokens, kept_entries = len(blocks), 0, 0
    limit = room * config.low_water
    summaries = summaries_left(blocks, room, config, estimate)
    floor = cache_floor(room, config)
    while start > 0 and not blocks[start - 1].is_summary:
        block = blocks[start - 1]
        under_cache = summaries + kept_tokens < floor
        if by_tokens and kept_tokens + block.tokens > limit and not (
            under_cache and kept_tokens + block.tokens <= room / 2
        ):
            break
        if not by_tokens and kept_entries >= config.preserve_recent:
            break
        start -= 1
        kept_tokens += block.tokens
        kept_entries += len(block.entries)
    return start


def _widen(blocks: list[Block], first: int, last: int, estimate: int) -> int:
    """Move the end of the run ``blocks[first:last]`` into the verbatim tail until the run
    outweighs the summary it becomes (or only the newest block is left)."""
    while last < len(blocks) - 1 and sum(b.tokens for b in blocks[first:last]) <= estimate:
        last += 1
    return last


def _message_run_bounds(blocks: list[Block]) -> list[tuple[int, int]]:
    """The runs of message blocks between summaries, oldest first, as (first, end) indexes."""
    runs: list[tuple[int, int]] = []
    start: int | None = None
    for index, block in enumerate([*blocks, None]):
        if block is not None and not block.is_summary:
            start = index if start is None else start
            continue
        if start is not None:
            runs.append((start, index))
            start = None
    return runs


def _chunk(
    blocks: list[Block], first: int, last: int, room: int, config: RecallConfig, estimate: int,
    *, needed: bool, by_count: bool, patient: bool = True,
) -> FoldPlan | None:
    """The run ``blocks[first:last]`` from its oldest block, cut at ``input_limit`` tokens,
    with the summaries right before it that the new summary must absorb to keep the
    summaries within `summary_room`: None when not worth a call (``by_count``, the count
    trigger's fold: fewer entries than the smallest fold; else a run, with what it
    absorbs, no larger than the summary it becomes; ``patient``, the token trigger's: a
    run under `MIN_CHUNK_SHARE` of the room), unless ``needed``: then only the
    summarizer's answer can decline it."""
    summaries = [b for b in blocks if b.is_summary]
    share = summary_room(room, config, estimate)
    summary_tokens = sum(b.tokens for b in summaries)
    absorb: list[Block] = []
    index = first - 1
    absorbs = not expiring(blocks[first:last])
    while (
        absorbs and index >= 0 and blocks[index].is_summary
        and summary_tokens + estimate > share
        and sum(b.tokens for b in absorb) + blocks[index].tokens <= config.input_limit // 2
    ):
        absorb.insert(0, blocks[index])
        summary_tokens -= blocks[index].tokens
        index -= 1
    absorbed_tokens = sum(b.tokens for b in absorb)
    span = bounded(blocks[first:last], config.input_limit - absorbed_tokens)
    if not span:
        return None
    if not needed and by_count:
        if sum(len(b.entries) for b in span) < config.effective_min_fold:
            return None
    elif not needed and sum(b.tokens for b in span) + absorbed_tokens <= estimate:
        return None  # likely no smaller than its span: not worth a call unless needed
    elif not needed and patient and sum(b.tokens for b in span) < room * MIN_CHUNK_SHARE:
        return None  # not yet: the conversation grows into it
    merged = [b.entries[0] for b in absorb]
    capped = tuple(e.pk for e in merged if e.coverage.level >= MAX_SUMMARY_LEVEL)
    return FoldPlan.over([*merged, *(e for b in span for e in b.entries)], absorbed=capped)


def expiring(run: list[Block]) -> bool:
    """Whether the run's messages expire. A summary expires with the earliest original it
    stands for, so a chunk that absorbed older summaries would die with them and bring
    its own, newer originals back verbatim, to be folded again (and a rolling summary
    every chunk since the one it began with): such a chunk absorbs nothing, and the
    summaries are merged instead (a merged summary's newer children come back as
    summaries, not as originals)."""
    return any(
        entry.expires_at is not None for block in run for entry in block.entries
    )


