"""Blocks: the units no fold and no budget ever parts. A block is a whole turn, or a
tool call with all its results; tool messages that cannot go to a model as they are
(a result without its call, a call missing a result) are set apart as unpaired. A
`Tally` is what the fold trigger needs of loaded entries, counted without reading them."""

from __future__ import annotations

from dataclasses import dataclass

from agentmemory.models import MemoryEntry, Role
from agentmemory.pipeline.turns import turn_starts


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
        drop = {entry.id for entry in unpaired}
        blocks = [
            Block(kept)
            for block in blocks
            if (kept := tuple(e for e in block.entries if e.id not in drop))
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
            unpaired[entry.id] = entry
            for answer in (r for i in ids for r in results.get(i, [])):
                unpaired[answer.id] = answer
    for call_id, answers in results.items():
        if call_id not in called:
            unpaired.update((answer.id, answer) for answer in answers)
    return sorted(unpaired.values(), key=lambda e: (e.position, e.id))


@dataclass(frozen=True)
class Tally:
    """What `pressure` needs of the loaded entries: rows and their cost, of all and of
    the summaries (`pipeline.load.tally_visible` counts them in the database)."""

    rows: int
    cost: int
    summaries: int
    summary_cost: int


def bounded(run: list[Block], limit: int) -> list[Block]:
    """The leading blocks of ``run`` within ``limit`` tokens (at least one)."""
    taken: list[Block] = []
    used = 0
    for block in run:
        if taken and used + block.tokens > limit:
            break
        taken.append(block)
        used += block.tokens
    return taken
