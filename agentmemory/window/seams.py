"""Window seams: which messages ride into the next model call and which are folded.

``select`` must be a pure function of its arguments: a resumed run re-selects over the
same messages and must reach the same split (law 10). Anything that calls a model or
reads a clock belongs to the fold, never to the selection.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from agentmemory.conf import memory_settings
from agentmemory.exceptions import AgentMemoryConfigurationError, InvalidMessageError
from agentmemory.tokens import count_tokens
from agentmemory.transcript import render_message
from agentmemory.window.frame import looks_like_frame


@dataclass(frozen=True)
class WindowMessage:
    """One message of an in-flight window, in the shape the transcript renders."""

    role: str
    content: str
    tool_calls: tuple[dict[str, Any], ...] = ()
    tool_name: str = ""
    tool_call_id: str = ""

    @classmethod
    def of(cls, message: dict[str, Any]) -> WindowMessage:
        return cls(
            role=message["role"],
            content=message["content"],
            tool_calls=tuple(message.get("tool_calls") or ()),
            tool_name=message.get("tool_name") or "",
            tool_call_id=message.get("tool_call_id") or "",
        )

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [dict(call) for call in self.tool_calls]
        if self.role == "tool":
            data["tool_call_id"] = self.tool_call_id
            if self.tool_name:
                data["tool_name"] = self.tool_name
        return data


@dataclass(frozen=True)
class Selection:
    """``head``: pinned (system prompts and the run's current request); ``drop``: folded."""

    head: list[WindowMessage]
    drop: list[WindowMessage]
    keep: list[WindowMessage]


@runtime_checkable
class WindowSeam(Protocol):
    def select(self, messages: Sequence[WindowMessage], *, budget_tokens: int | None) -> Selection:
        """Split the window; pure, and the newest message is always kept."""
        ...


def pinned_head(messages: Sequence[WindowMessage]) -> int:
    """How many leading messages are pinned: up to and including the first user message.

    That user message is the run's current request; it is never folded (law 9).
    """
    for index, message in enumerate(messages):
        if message.role == "user":
            return index + 1
    return 0


def align_cut(body: Sequence[WindowMessage], cut: int) -> int:
    """Move the cut (the first kept index of ``body``) to where it splits no turn and no
    tool call from its results.

    A turn whose user message is in the body folds whole or stays whole (an earlier
    fold's summary message starts no turn). The messages
    before the body's first user message continue the pinned request's turn: its request
    is never folded (law 9), so they fold by whole tool rounds, oldest first. The cut
    moves forward to the nearest such place unless that would fold the newest message;
    then back (0, folding nothing, always qualifies).
    """
    # An earlier fold's summary message is sent as a user message, but stands for folded
    # messages: like a summary, it starts no turn.
    starts = [m.role == "user" and not looks_like_frame(m.content) for m in body]
    first_user = next((index for index, start in enumerate(starts) if start), len(body))
    # Where each tool call id is first and last seen: a cut in between separates them.
    span: dict[str, tuple[int, int]] = {}
    for index, message in enumerate(body):
        ids = [str(call.get("id", "")) for call in message.tool_calls]
        for call_id in ids + ([message.tool_call_id] if message.role == "tool" else []):
            first, _ = span.get(call_id, (index, index))
            span[call_id] = (first, index)
    crossed = [0] * (len(body) + 2)
    for first, last in span.values():
        if first < last:
            crossed[first + 1] += 1
            crossed[last + 1] -= 1
    clean, depth = [], 0
    for at in range(len(body)):
        depth += crossed[at]
        # after the first user message, only a user message starts a turn
        clean.append(depth == 0 and (at <= first_user or starts[at]))
    cut = max(0, min(cut, len(body)))
    for at in range(cut, len(body)):
        if clean[at]:
            return at
    return next((at for at in range(min(cut, len(body) - 1), 0, -1) if clean[at]), 0)


def _split(
    messages: Sequence[WindowMessage], keep_from: int, head_size: int
) -> Selection:
    body = list(messages[head_size:])
    cut = align_cut(body, max(0, min(keep_from, len(body) - 1)))
    return Selection(head=list(messages[:head_size]), drop=body[:cut], keep=body[cut:])


class SlidingWindow:
    """Send at most ``max_messages`` messages, the pinned head and the summary message
    included, whenever a cut allows it; else the fewest a cut allows.

    A cut never folds the pinned head (the leading system messages and the run's current
    request, law 9), never parts a tool call from its results, and never splits a turn
    after the request (`align_cut`). So the newest messages that cannot be parted stay
    together: the newest message alone; its whole tool round when it is a tool result
    (the assistant message that made the calls and every result); the whole newest turn
    when the window holds a user message after the request. A window of more than
    ``max_messages`` keeps the most messages that fit beside the head and one summary
    message. When the head, the summary message and those newest messages are already
    more than ``max_messages`` (a head of 6 at a cap of 6; a system prompt, the request
    and a tool result with its call at a cap of 3 or 4), no cut fits: everything older
    than them is folded and the window sends exactly the head, the summary and them.
    With nothing older to fold, it is sent as it is.
    """

    def __init__(self, max_messages: int = 40) -> None:
        if not isinstance(max_messages, int) or max_messages < 3:
            raise AgentMemoryConfigurationError(
                "SlidingWindow needs MAX_MESSAGES >= 3 (request, summary, newest message); "
                f"got {max_messages!r}."
            )
        self.max_messages = max_messages

    def select(self, messages: Sequence[WindowMessage], *, budget_tokens: int | None) -> Selection:
        head = pinned_head(messages)
        body_size = len(messages) - head
        room = self.max_messages - head - 1  # one place for the summary message
        if body_size <= self.max_messages - head:
            return Selection(head=list(messages[:head]), drop=[], keep=list(messages[head:]))
        return _split(messages, body_size - max(room, 1), head)


class TokenBudgetWindow:
    """Keep the newest messages that fit ``budget_tokens`` minus room for the summary."""

    def __init__(self, summary_reserve: int = 300) -> None:
        if not isinstance(summary_reserve, int) or isinstance(summary_reserve, bool) or (
            summary_reserve < 0
        ):
            raise AgentMemoryConfigurationError(
                "TokenBudgetWindow needs SUMMARY_RESERVE, a non-negative number of tokens; "
                f"got {summary_reserve!r}."
            )
        self.summary_reserve = summary_reserve

    def select(self, messages: Sequence[WindowMessage], *, budget_tokens: int | None) -> Selection:
        head = pinned_head(messages)
        if budget_tokens is None:
            raise InvalidMessageError(
                "TokenBudgetWindow needs budget_tokens: the window's budget in tokens.",
                field="budget_tokens",
            )
        # Counted from the newest back, and only until the budget is known to be spent:
        # a long run's window costs the messages near the budget, not its whole history.
        total = sum(_cost(message) for message in messages[:head])
        available = budget_tokens - total - self.summary_reserve
        keep_from, used, growing = len(messages), 0, True
        for index in range(len(messages) - 1, head - 1, -1):
            cost = _cost(messages[index])
            total += cost
            # the newest message is always kept; older ones while they fit, contiguously
            growing = growing and (index == len(messages) - 1 or used + cost <= available)
            if growing:
                keep_from, used = index, used + cost
            elif total > budget_tokens:
                break
        if total <= budget_tokens:
            return Selection(head=list(messages[:head]), drop=[], keep=list(messages[head:]))
        return _split(messages, keep_from - head, head)


def _cost(message: WindowMessage) -> int:
    return count_tokens(render_message(message))


def get_window() -> WindowSeam:
    """The seam ``AGENTMEMORY['WINDOW']`` names, built once and kept until the setting
    changes (``memory_settings.reload``); a seam is pure, so one instance serves all."""
    config = memory_settings.WINDOW
    if not isinstance(config, dict) or not isinstance(config.get("CLASS"), str):
        raise AgentMemoryConfigurationError(
            "AGENTMEMORY['WINDOW'] must be a dict with CLASS (a dotted path) and OPTIONS."
        )
    raw_options = config.get("OPTIONS") or {}
    if not isinstance(raw_options, dict) or not all(isinstance(k, str) for k in raw_options):
        raise AgentMemoryConfigurationError(
            f"AGENTMEMORY['WINDOW']['OPTIONS'] must be a dict of named options, got "
            f"{raw_options!r}."
        )
    options = {key.lower(): value for key, value in raw_options.items()}
    return memory_settings.plugin("WINDOW", lambda seam_class: _build(seam_class, options))


def _build(seam_class: Any, options: dict[str, Any]) -> WindowSeam:
    path = memory_settings.WINDOW["CLASS"]
    try:
        seam = seam_class(**options)
    except TypeError as exc:
        raise AgentMemoryConfigurationError(
            f"AGENTMEMORY['WINDOW']['OPTIONS'] do not fit {path}: {exc}"
        ) from exc
    if not isinstance(seam, WindowSeam):
        raise AgentMemoryConfigurationError(
            f"AGENTMEMORY['WINDOW']['CLASS'] = {path!r} has no select(messages, "
            "*, budget_tokens) method."
        )
    return seam
