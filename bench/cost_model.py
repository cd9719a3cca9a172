"""What an agent pays for its contexts: one model call a turn, at a provider's cached price.

Plain Python with no Django, so the peer libraries' runs (in their own virtualenv) price
their contexts with the very same rule. A context is a list of messages in the append
shape (:func:`from_chat` converts Chat Completions messages to it), each counted as
``bench.conversation.render`` shows it, with o200k_base: the same rule for every library.

* **shared prefix**: the tokens a context has in common with the previous turn's,
  message by message: identical leading messages count whole, and inside the first
  message that differs, the common leading tokens of the two encodings;
* **cached tokens**, OpenAI's rule: nothing below a shared prefix of 1,024 tokens, then
  1,024 and steps of 128, never more than the context;
* **turn cost** = uncached tokens + 0.1 × cached tokens (the cached price).

A conversation's cost adds the summarizer: its input tokens, and 4 × its output tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from bench import conversation as conv

CACHE_MIN = 1_024  # the shortest prefix a provider caches
CACHE_STEP = 128  # cache hits grow in steps of this many tokens
CACHED_PRICE = 0.1  # a cached input token, in uncached input tokens
OUTPUT_PRICE = 4.0  # an output token, in uncached input tokens

Encode = Callable[[str], Sequence[int]]


def common_tokens(first: Sequence[int], second: Sequence[int]) -> int:
    """How many leading tokens two encodings share."""
    shared = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        shared += 1
    return shared


def shared_prefix(previous: Sequence[str], current: Sequence[str], encode: Encode) -> int:
    """Tokens ``current`` shares with ``previous`` from the start (both: rendered messages).

    Identical leading messages count whole; inside the first that differs, the common
    leading tokens of the two encodings; nothing after it.
    """
    shared = 0
    for before, now in zip(previous, current, strict=False):
        if before == now:
            shared += len(encode(now))
            continue
        return shared + common_tokens(encode(before), encode(now))
    return shared


def cached_tokens(shared: int, context: int) -> int:
    """The tokens a provider bills at the cached price: 0 below CACHE_MIN, then
    CACHE_MIN + CACHE_STEP × floor((shared − CACHE_MIN) ÷ CACHE_STEP), at most ``context``."""
    if shared < CACHE_MIN:
        return 0
    return min(context, CACHE_MIN + CACHE_STEP * ((shared - CACHE_MIN) // CACHE_STEP))


def turn_cost(context: int, cached: int) -> float:
    """One model call's input, in uncached input tokens."""
    return (context - cached) + CACHED_PRICE * cached


def summarizer_cost(input_tokens: int, output_tokens: int) -> float:
    return input_tokens + OUTPUT_PRICE * output_tokens


def from_chat(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat Completions messages in the append shape ``render`` reads; a tool result is
    named by its call in the same context (the Chat Completions shape does not name it)."""
    names = {call["id"]: call["function"]["name"]
             for message in messages for call in message.get("tool_calls") or []}
    shaped = []
    for message in messages:
        calls = [{"id": call["id"], "name": call["function"]["name"],
                  "arguments": call["function"]["arguments"]}
                 for call in message.get("tool_calls") or []]
        shaped.append({
            "role": message["role"], "content": message.get("content") or "",
            "tool_calls": calls, "tool_call_id": message.get("tool_call_id", ""),
            "tool_name": names.get(message.get("tool_call_id", ""), ""),
        })
    return shaped


class Meter:
    """Every turn's context priced against the previous turn's: the figures per turn."""

    def __init__(self, encode: Encode) -> None:
        self.encode = encode
        self.previous: list[str] = []
        self.context: list[int] = []
        self.shared: list[int] = []
        self.cached: list[int] = []
        self.cost: list[float] = []

    def turn(self, context: Sequence[dict[str, Any]]) -> None:
        rendered = [conv.render(message) for message in context]
        tokens = sum(len(self.encode(text)) for text in rendered)
        shared = shared_prefix(self.previous, rendered, self.encode)
        cached = cached_tokens(shared, tokens)
        self.context.append(tokens)
        self.shared.append(shared)
        self.cached.append(cached)
        self.cost.append(turn_cost(tokens, cached))
        self.previous = rendered

    @property
    def breaks(self) -> int:
        """Turns whose context does not begin with the whole previous context."""
        return sum(1 for i in range(1, len(self.context)) if self.shared[i] < self.context[i - 1])

    def as_dict(self, per_turn: bool = False) -> dict[str, Any]:
        turns = max(1, len(self.context))
        figures: dict[str, Any] = {
            "turns": len(self.context),
            "context_mean": sum(self.context) / turns,
            "shared_mean": sum(self.shared) / turns,
            "cached_mean": sum(self.cached) / turns,
            "context_max": max(self.context, default=0),
            "breaks": self.breaks,
            "contexts_cost": sum(self.cost),
            "cached_cost": CACHED_PRICE * sum(self.cached),
        }
        if per_turn:
            figures.update(context=self.context, shared=self.shared, cached=self.cached)
        return figures
