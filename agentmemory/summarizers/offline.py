"""A deterministic summarizer that needs no network: the embedded default."""

from __future__ import annotations

import re

from agentmemory.summarizers.base import BaseSummarizer, ChatMessage, SummaryResult
from agentmemory.tokens import count_tokens
from agentmemory.transcript import TRANSCRIPT_CLOSE, TRANSCRIPT_OPEN

_CALLS = re.compile(r"^assistant \(calls: (?P<calls>.*)\): ")
_CALL_NAME = re.compile(r"(?:^|, )(?P<name>[\w.-]+)\(")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


class OfflineSummarizer(BaseSummarizer):
    """Keeps the first sentence of each user request and the names of the tools called.

    Extractive and deterministic: the same span always gives the same text, which is
    what makes it usable in demos, tests and benchmarks. Token usage is counted with
    the project's counter, so the ledger shows what a real call would have read.
    """

    option_names = frozenset({"MAX_WORDS", "MAX_LINES"})

    def complete(self, prompt: list[ChatMessage]) -> SummaryResult:
        transcript = prompt[-1]["content"]
        max_words = int(self.options.get("MAX_WORDS", 24))
        max_lines = int(self.options.get("MAX_LINES", 8))
        asks: list[str] = []
        tools: list[str] = []
        for line in transcript.splitlines():
            if line in (TRANSCRIPT_OPEN, TRANSCRIPT_CLOSE):
                continue
            if line.startswith("user: "):
                first = _SENTENCE_END.split(line.removeprefix("user: ").strip(), maxsplit=1)[0]
                asks.append(" ".join(first.split()[:max_words]))
            elif match := _CALLS.match(line):
                for name in _CALL_NAME.findall(match["calls"]):
                    if name not in tools:
                        tools.append(name)
        lines = [f"- the user asked: {ask}" for ask in asks[:max_lines]]
        if len(asks) > max_lines:
            lines.append(f"- and {len(asks) - max_lines} more requests")
        if tools:
            lines.append(f"- tools called: {', '.join(tools)}")
        text = "\n".join(lines) or "- nothing of substance was said"
        return SummaryResult(
            text=text,
            prompt_tokens=sum(count_tokens(message["content"]) for message in prompt),
            completion_tokens=count_tokens(text),
        )
