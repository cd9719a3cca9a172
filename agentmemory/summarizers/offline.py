"""A deterministic summarizer that needs no network: the embedded default."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentmemory.summarizers.base import BaseSummarizer, SummaryResult, build_prompt
from agentmemory.tokens import count_tokens
from agentmemory.transcript import MessageLike, fact_text, render_message, summary_body
from agentmemory.trust.facts import Fact, check_facts, extract_facts
from agentmemory.trust.quarantine import strip_invisible
from agentmemory.window.frame import looks_like_frame

_TOOL_NAME = re.compile(r"[\w.-]+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_ASK = "- the user asked: "
_TOOLS = "- tools called: "
_FACTS = "- facts: "
_MORE_ASKS = re.compile(r"^- and (?P<count>\d+) (?:earlier|more) requests$")
_MORE_FACTS = re.compile(r"^- and (?P<count>\d+) more facts$")
_NOTHING = "- nothing of substance was said"


class OfflineSummarizer(BaseSummarizer):
    """Keeps the user's requests, the tools called and the specifics of the span.

    The summary is a few lines: ``- the user asked: ...`` (the first sentence of each
    request, newest kept), ``- and N earlier requests``, ``- tools called: ...``, and
    ``- facts: A; B; C``, every fact the fact gate extracts (ids, amounts, dates,
    e-mails, URLs, paths, quoted strings, numbers) that the lines above do not already
    mention. Facts come before requests: the newest request is always listed, the facts
    take the room after it, and older requests fill what is left. The summary is kept
    within ``MAX_SHARE`` of the span's tokens and within ``MAX_TOKENS``; when the facts
    alone would not fit, the newest are kept and ``- and N more facts`` says how many
    were left out.

    Options: ``MAX_WORDS`` (24: words kept of each request), ``MAX_LINES`` (8: requests
    listed at most), ``MAX_SHARE`` (0.6: the summary's size, in tokens, at most this
    share of the span's, counted as the fold stores it, each line indented; the fold
    adds its label of about 40 tokens, and refuses a
    summary that is not smaller than the span), ``MAX_TOKENS`` (600: at most this many
    tokens whatever the span, so that a summary folded again and again over a long
    thread still fits a recall budget; None for no cap).

    It reads the span's messages, not the transcript a model would read: a request is a
    user message, a tool is the name of a call (a plain name: letters, digits, ``_``,
    ``.``, ``-``), an earlier summary is a stored summary entry, whatever any text in
    them looks like. Structure is read only from an earlier summary's own lines: its
    requests, tools and counts are carried forward. A window's frame message is not a
    request. Facts are read from every message as the fact gate reads them, nested
    summaries included. No line of the summary holds a line break of any kind.

    Extractive and deterministic: the same span always gives the same text, which is
    what makes it usable in demos, tests and benchmarks. Token usage is counted with
    the project's counter, so the ledger shows what a real call would have read.
    """

    option_names = frozenset({"MAX_WORDS", "MAX_LINES", "MAX_SHARE", "MAX_TOKENS"})
    temperature = 0.0  # deterministic by construction

    @property
    def completion_cap(self) -> int | None:
        cap = self.options.get("MAX_TOKENS", 600)
        return int(cap) if cap is not None else None

    def summarize(self, messages: Sequence[MessageLike], *, instruction: str) -> SummaryResult:
        prompt = build_prompt(messages, instruction)
        span = read_span(messages, max_words=int(self.options.get("MAX_WORDS", 24)))
        budget = int(float(self.options.get("MAX_SHARE", 0.6)) * span.tokens)
        cap = self.options.get("MAX_TOKENS", 600)
        if cap is not None:
            budget = min(budget, int(cap))
        text = _fit(span, budget, max_lines=int(self.options.get("MAX_LINES", 8)))
        return SummaryResult(
            text=text,
            prompt_tokens=sum(count_tokens(message["content"]) for message in prompt),
            completion_tokens=count_tokens(text),
        )


@dataclass
class Reading:
    """What the summarizer read of a span's messages."""

    tokens: int = 0
    #: The requests, oldest first, each already cut to its first sentence.
    asks: list[str] = field(default_factory=list)
    #: Requests and facts an earlier summary in the span already left out.
    asks_left_out: int = 0
    facts_left_out: int = 0
    tools: list[str] = field(default_factory=list)
    #: What the fact gate reads of each message, in order.
    fact_texts: list[str] = field(default_factory=list)
    #: The same texts in the order their facts were said, for "newest" (see `_recency`).
    recency_texts: list[str] = field(default_factory=list)

    def read(self, text: str, recency: str | None = None) -> None:
        self.fact_texts.append(text)
        self.recency_texts.append(text if recency is None else recency)


def read_span(messages: Sequence[MessageLike], *, max_words: int) -> Reading:
    """What the summarizer takes from the messages themselves, never from their rendered
    text: a role, a tool call or an earlier summary is known from the message, so no
    content, tool name or argument can pass for one."""
    span = Reading(tokens=count_tokens("\n".join(map(render_message, messages))))
    for message in messages:
        if getattr(message, "is_summary", False):
            text = fact_text(message, is_summary=True)
            span.read(text, _read_earlier_summary(span, text))
        elif message.role == "user" and looks_like_frame(message.content):
            # A window's summary message is role user too, but it is no request, and its
            # frame's numbers are ours, not facts of the conversation.
            span.read(fact_text(message, is_summary=True))
        elif message.role == "user":
            words = strip_invisible(message.content).split()
            first = _SENTENCE_END.split(" ".join(words), maxsplit=1)[0]
            if first:
                span.asks.append(" ".join(first.split()[:max_words]))
            span.read(fact_text(message, is_summary=False))
        else:
            span.tools.extend(
                name for name in _tool_names(message.tool_calls) if name not in span.tools
            )
            span.read(fact_text(message, is_summary=False))
    return span


def _tool_names(calls: Any) -> list[str]:
    """The names of the calls that are plain names: anything else (a line break, ", ")
    could not be listed on the tools line and read back from it as the same names."""
    names = (strip_invisible(call.get("name") or "") for call in calls or ())
    return [name for name in names if _TOOL_NAME.fullmatch(name)]


def _read_earlier_summary(span: Reading, text: str) -> str:
    """Carry an earlier summary's requests, tools and counts forward (its facts are read
    with everyone else's), and return its lines in the order their facts were said: the
    requests it lists are its newest, newer than most of its facts line."""
    requests: list[str] = []
    others: list[str] = []
    for line in text.split("\n"):
        if line.startswith(_ASK):
            requests.append(line)
            span.asks.append(line.removeprefix(_ASK))
            continue
        others.append(line)
        if line.startswith(_TOOLS):
            span.tools.extend(
                name for name in line.removeprefix(_TOOLS).split(", ") if name not in span.tools
            )
        elif match := _MORE_ASKS.match(line):
            span.asks_left_out += int(match["count"])
        elif match := _MORE_FACTS.match(line):
            span.facts_left_out += int(match["count"])
    return "\n".join([*others, *requests])


def _fit(span: Reading, budget: int, *, max_lines: int) -> str:
    """The summary within ``budget`` tokens, if its newest request and tools allow.

    The newest request and the tools are always shown; the facts they do not mention
    come next, newest first; then as many older requests as still leave every fact in.
    """
    order = _recency(span)
    tried: dict[int, tuple[str, bool]] = {}

    def attempt(asks: int) -> tuple[str, bool]:
        if asks not in tried:
            tried[asks] = _with_facts(span, order, span.asks[len(span.asks) - asks:], budget)
        return tried[asks]

    most = min(max_lines, len(span.asks))
    if attempt(most)[1] or most <= 1:
        return attempt(most)[0]
    # Fewer requests leave more room: search for the most that keep every fact (one
    # extraction per attempt, so a long span is not read once per request).
    low, high, best = 1, most - 1, 1
    while low <= high:
        middle = (low + high) // 2
        if attempt(middle)[1]:
            best, low = middle, middle + 1
        else:
            high = middle - 1
    return attempt(best)[0]


def _recency(span: Reading) -> dict[Fact, tuple[int, int]]:
    """Where each fact first appears: its message, then its place in the message (the
    extractor lists a message's facts by kind), so "newest" means said last.

    Read message by message as the gate reads the span, so each of the gate's facts is
    found here as it is spelled there (the first spelling of it in the span)."""
    order: dict[Fact, tuple[int, int]] = {}
    for index, (text, said) in enumerate(zip(span.fact_texts, span.recency_texts, strict=True)):
        for fact in extract_facts([text]):
            place = said.find(fact.text)
            order.setdefault(fact, (index, place if place >= 0 else len(said)))
    return order


def _with_facts(
    span: Reading, order: dict[Fact, tuple[int, int]], asks: list[str], budget: int
) -> tuple[str, bool]:
    """The summary showing ``asks``, and as many of the newest unmentioned facts as fit;
    True when none had to be left out."""
    # What the request and tool lines say, as the gate reads them. Not the counts: a
    # count that happens to equal a number of the span does not keep that number.
    said = "\n".join([*_request_lines(asks), *_tools_lines(span.tools)])
    unmentioned = check_facts(span.fact_texts, said).missing
    listed = [_shown(fact) for fact in sorted(unmentioned, key=lambda fact: order[fact])]

    def render(keep: int) -> str:
        return _render(span, asks, listed[len(listed) - keep:] if keep else [],
                       len(listed) - keep)

    def fits(keep: int) -> bool:  # counted as the fold stores it (`summary_body`)
        return count_tokens(summary_body(render(keep))) <= budget

    if fits(len(listed)):
        return render(len(listed)), True
    # Binary search for the most facts that fit: the text only grows with each one kept.
    low, high = 0, len(listed) - 1
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return render(low), False


def _render(span: Reading, asks: list[str], facts: list[str], facts_cut: int) -> str:
    lines = _request_lines(asks)
    if asks_left_out := span.asks_left_out + len(span.asks) - len(asks):
        lines.append(f"- and {asks_left_out} earlier requests")
    lines += _tools_lines(span.tools)
    if facts:
        lines.append(f"{_FACTS}{'; '.join(facts)}")
    if facts_left_out := span.facts_left_out + facts_cut:
        lines.append(f"- and {facts_left_out} more facts")
    return "\n".join(lines) or _NOTHING


def _request_lines(asks: list[str]) -> list[str]:
    return [f"{_ASK}{ask}" for ask in asks]


def _tools_lines(tools: list[str]) -> list[str]:
    return [f"{_TOOLS}{', '.join(tools)}"] if tools else []


def _shown(fact: Fact) -> str:
    if fact.kind == "quoted":
        # Quoted again, so a later fold of this summary reads the same fact back out of it.
        return f'"{fact.text}"'
    # An amount may hold a line break ("$\n5"): on one line it is the same number.
    return " ".join(fact.text.split())
