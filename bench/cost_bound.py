"""The cheapest fold schedule any policy could follow at a room no prefix of is cached.

Below the provider's cache minimum every turn pays its whole context, so a
conversation's cost is the sum of its contexts plus the summarizer. With one summary
standing for everything older (a room that holds only one), a schedule is the set of
turns at which the history before the user's new message is folded: a fold costs the
summarizer call's fixed part (instruction, the summary it absorbs, four times its
answer), every original is sent once whatever the schedule, and each turn's context is
the summary, the turns since the last fold and the new message. `cheapest` finds the
least-cost schedule over the whole conversation, known in advance (no policy can know
it), by dynamic programming over the turn of the last fold: a floor under what the
policy that folds as it goes can reach, with the summary's size and a call's fixed part
as a run measured them.
"""

from __future__ import annotations

from bench import conversation as conv
from bench.cost_model import CACHE_MIN


def cheapest(workload: str, room: int, summary_message: float, call_fixed: float) -> float:
    """The least cost of the contexts plus the calls' fixed parts, over every schedule of
    folds that keeps each context within ``room`` (the originals sent once come on top)."""
    if room >= CACHE_MIN:
        raise ValueError(f"a room of {room} can be cached: the bound prices no cache")
    turns = [(conv.message_tokens(turn.user),
              conv.message_tokens(turn.user) + sum(map(conv.message_tokens, turn.replies)))
             for turn in conv.conversation(workload=workload)]
    return cheapest_of(turns, room, summary_message, call_fixed)


def cheapest_of(
    turns: list[tuple[int, int]], room: int, summary_message: float, call_fixed: float
) -> float:
    """`cheapest` over ``turns``: each its user message's tokens and its whole tokens."""
    since = [0]  # tokens of whole turns before each turn
    for _, whole in turns:
        since.append(since[-1] + whole)
    # best[f]: the least cost so far with the last fold before turn f (-1: none yet).
    best: dict[int, float] = {-1: 0.0}
    for i, (user, _) in enumerate(turns):
        kept: dict[int, float] = {}
        for fold, cost in best.items():
            context = (summary_message if fold >= 0 else 0) + since[i] - since[max(fold, 0)]
            if context + user <= room:
                kept[fold] = cost + context + user
        if best and summary_message + user <= room:
            kept[i] = min(best.values()) + call_fixed + summary_message + user
        best = kept
    return min(best.values(), default=float("inf"))
