"""A deterministic summarizer that needs no network: the embedded default."""

from __future__ import annotations

import re

from agentmemory.summarizers.base import BaseSummarizer, ChatMessage, SummaryResult
from agentmemory.tokens import count_tokens
from agentmemory.transcript import TRANSCRIPT_CLOSE, TRANSCRIPT_OPEN
from agentmemory.window.frame import WINDOW_FRAME_PREFIX

_CALLS_HEAD = "assistant (calls: "
_CALL_START = re.compile(r"(?P<name>[\w.-]+)\(")
_OPENERS, _CLOSERS = "([{", ")]}"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_WINDOW_FRAME = f"user: {WINDOW_FRAME_PREFIX}"
_CARRIED_ASK = "  - the user asked: "
_CARRIED_TOOLS = "  - tools called: "
_CARRIED_MORE = re.compile(r"^  - and (?P<count>\d+) (?:earlier|more) requests$")


class OfflineSummarizer(BaseSummarizer):
    """Keeps the first sentence of each user request and the names of the tools called.

    Extractive and deterministic: the same span always gives the same text, which is
    what makes it usable in demos, tests and benchmarks. Token usage is counted with
    the project's counter, so the ledger shows what a real call would have read.
    """

    option_names = frozenset({"MAX_WORDS", "MAX_LINES"})
    temperature = 0.0  # deterministic by construction

    def complete(self, prompt: list[ChatMessage]) -> SummaryResult:
        transcript = prompt[-1]["content"]
        max_words = int(self.options.get("MAX_WORDS", 24))
        max_lines = int(self.options.get("MAX_LINES", 8))
        asks: list[str] = []
        tools: list[str] = []
        more = 0
        for line in transcript.splitlines():
            if line in (TRANSCRIPT_OPEN, TRANSCRIPT_CLOSE):
                continue
            # An earlier summary in the span: carry its lines forward, not just its label.
            if line.startswith(_CARRIED_ASK):
                asks.append(line.removeprefix(_CARRIED_ASK))
            elif line.startswith(_CARRIED_TOOLS):
                tools.extend(t for t in line.removeprefix(_CARRIED_TOOLS).split(", ")
                             if t not in tools)
            elif match := _CARRIED_MORE.match(line):
                more += int(match["count"])
            elif line.startswith("user: ") and not line.startswith(_WINDOW_FRAME):
                # (A window's summary message is role user too, but it is no request.)
                first = _SENTENCE_END.split(line.removeprefix("user: ").strip(), maxsplit=1)[0]
                asks.append(" ".join(first.split()[:max_words]))
            elif line.startswith(_CALLS_HEAD):
                for name in called_tools(line):
                    if name not in tools:
                        tools.append(name)
        # The newest requests matter most to an agent that goes on working.
        shown = asks[-max_lines:]
        more += len(asks) - len(shown)
        lines = [f"- the user asked: {ask}" for ask in shown]
        if more:
            lines.append(f"- and {more} earlier requests")
        if tools:
            lines.append(f"- tools called: {', '.join(tools)}")
        text = "\n".join(lines) or "- nothing of substance was said"
        return SummaryResult(
            text=text,
            prompt_tokens=sum(count_tokens(message["content"]) for message in prompt),
            completion_tokens=count_tokens(text),
        )


def called_tools(line: str) -> list[str]:
    """The tool names in a rendered ``assistant (calls: name(args), ...): content`` line.

    Scanned, not pattern-matched: arguments are JSON whose strings may hold commas,
    brackets and parentheses, so a name is read only where a call begins, after the
    previous call's parenthesis closed at depth zero outside any string.
    """
    names: list[str] = []
    index = len(_CALLS_HEAD)
    while match := _CALL_START.match(line, index):
        names.append(match["name"])
        end = _call_end(line, match.end())
        if end is None or not line.startswith(", ", end):
            break
        index = end + 2
    return names


def _call_end(line: str, start: int) -> int | None:
    """The index just past the parenthesis that closes a call's arguments, or None."""
    depth, in_string, escaped = 1, False, False
    for index in range(start, len(line)):
        char = line[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in _OPENERS:
            depth += 1
        elif char in _CLOSERS:
            depth -= 1
            if depth == 0:
                return index + 1 if char == ")" else None
    return None
