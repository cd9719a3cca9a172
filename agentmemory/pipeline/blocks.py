"""Blocks: the units no fold and no budget ever parts. A block is a whole turn, or a
tool call with all its results; tool messages that cannot go to a model as they are
(a result without its call, a call missing a result) are set apart as unpaired. A
`Tally` is what the fold trigger needs of loaded entries, counted without reading them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, NamedTuple

from agentmemory.models import Role
from agentmemory.pipeline.entries import ContextEntry, Entry
from agentmemory.pipeline.turns import turn_starts


def entry_cost(entry: ContextEntry) -> int:
    """What an entry takes of the room: its text and the line break before it."""
    return entry.token_count + 1


class Block(NamedTuple, Generic[Entry]):
    """Entries that go into a context, or into a fold, together or not at all: a
    summary alone, or whole turns, widened until every tool call has its results.
    ``tokens``: what they take of a room (`entry_cost`, summed once: the budget and the
    fold planner ask it of every block, several times). A tuple: built for every turn of
    every recall."""

    entries: tuple[Entry, ...]
    tokens: int

    @classmethod
    def of(cls, entries: Sequence[Entry]) -> Block[Entry]:
        return cls(tuple(entries), sum(map(entry_cost, entries)))

    @property
    def is_summary(self) -> bool:
        return self.entries[0].is_summary


@dataclass(frozen=True)
class Blocks(Generic[Entry]):
    """``blocks`` in thread order; ``unpaired``: tool messages whose partner is not
    visible (erased, expired, or never stored), which no context may carry."""

    blocks: list[Block[Entry]]
    unpaired: list[Entry]


def blocks_of(entries: Sequence[Entry]) -> Blocks[Entry]:
    groups: list[list[Entry]] = []
    call_group: dict[str, int] = {}
    tool_messages = False
    for entry, starts in zip(entries, turn_starts(entries), strict=True):
        if entry.is_summary:
            groups.append([entry])
            continue
        if groups and not starts:
            groups[-1].append(entry)
        else:
            groups.append([entry])
        if entry.role == Role.TOOL:
            tool_messages = True
            if entry.tool_call_id in call_group:
                first = call_group[entry.tool_call_id]
                # The result answers a call in an earlier group: one block from call to
                # result, unless a summary stands between them (then the pair is already
                # broken).
                if first < len(groups) - 1 and not any(g[0].is_summary for g in groups[first:]):
                    merged = [e for group in groups[first:] for e in group]
                    del groups[first:]
                    groups.append(merged)
                    call_group = {k: min(v, first) for k, v in call_group.items()}
        if entry.tool_calls:
            tool_messages = True
            for call in entry.tool_calls:
                call_group[str(call.get("id", ""))] = len(groups) - 1
    blocks = [Block.of(group) for group in groups]
    # Only tool messages can be unpaired: most contexts have none to look for.
    unpaired = _unpaired(entries) if tool_messages else []
    if unpaired:
        drop = {entry.id for entry in unpaired}
        blocks = [
            Block.of(kept)
            for block in blocks
            if (kept := [e for e in block.entries if e.id not in drop])
        ]
    return Blocks(blocks=blocks, unpaired=unpaired)


def _unpaired(entries: Sequence[Entry]) -> list[Entry]:
    """Tool messages that cannot go to a model as they are: a result whose call is not
    visible, and a call any of whose results is missing, with the results it has.

    Calls in the newest turn may still be waiting for their results: they stay.
    """
    messages = [entry for entry in entries if not entry.is_summary]
    results: dict[str, list[Entry]] = {}
    for entry in messages:
        if entry.role == Role.TOOL:
            results.setdefault(entry.tool_call_id, []).append(entry)
    newest_turn = entries[-1].turn if entries else 0
    unpaired: dict[int, Entry] = {}
    called: set[str] = set()
    for entry in messages:
        if not entry.tool_calls:
            continue
        ids = [str(call.get("id", "")) for call in entry.tool_calls]
        called.update(ids)
        if entry.turn != newest_turn and not all(i in results for i in ids):
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


def bounded(run: list[Block[Entry]], limit: int) -> list[Block[Entry]]:
    """The leading blocks of ``run`` within ``limit`` tokens (at least one)."""
    taken: list[Block[Entry]] = []
    used = 0
    for block in run:
        if taken and used + block.tokens > limit:
            break
        taken.append(block)
        used += block.tokens
    return taken
