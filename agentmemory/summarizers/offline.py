"""A deterministic summarizer that needs no network: the embedded default."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from agentmemory.facts import Fact, check_facts, extract_facts
from agentmemory.summarizers.base import BaseSummarizer, ChatMessage, SummaryResult
from agentmemory.tokens import count_tokens
from agentmemory.transcript import TRANSCRIPT_CLOSE, TRANSCRIPT_OPEN
from agentmemory.window.frame import WINDOW_FRAME_PREFIX

_CALLS_HEAD = "assistant (calls: "
_CALL_START = re.compile(r"(?P<name>[\w.-]+)\(")
_OPENERS, _CLOSERS = "([{", ")]}"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_EARLIER_SUMMARY = "earlier summary: "
_CONTINUATION = "  "
_TOOL_RESULT = "tool_result["
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
    share of the span's; the fold adds its label of about 40 tokens, and refuses a
    summary that is not smaller than the span), ``MAX_TOKENS`` (600: at most this many
    tokens whatever the span, so that a summary folded again and again over a long
    thread still fits a recall budget; None for no cap).

    Structure is read only from an earlier summary in the span (a transcript line
    ``earlier summary: ...`` and its indented lines): its requests, tools and counts are
    carried forward. Every other message is data, whatever its lines look like; a
    window's frame message is not a request. Facts are read from every message, nested
    summaries included.

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

    def complete(self, prompt: list[ChatMessage]) -> SummaryResult:
        transcript = prompt[-1]["content"]
        span = read_span(transcript, max_words=int(self.options.get("MAX_WORDS", 24)))
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
class Span:
    """What the summarizer read of a transcript."""

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


def read_span(transcript: str, *, max_words: int) -> Span:
    # Split on newlines only: rendering indents what follows a newline, not what follows
    # the other characters str.splitlines() breaks at (U+2028, form feeds, ...).
    lines = transcript.split("\n")
    if lines[:1] == [TRANSCRIPT_OPEN]:
        lines = lines[1:]
    if lines[-1:] == [TRANSCRIPT_CLOSE]:
        lines = lines[:-1]
    span = Span(tokens=count_tokens("\n".join(lines)))
    for head, content in _messages(lines):
        if head == _EARLIER_SUMMARY:
            span.read(content, _read_earlier_summary(span, content))
        elif head.startswith(_CALLS_HEAD):
            span.tools.extend(name for name in called_tools(head) if name not in span.tools)
            # As the fact gate reads it: the words, then the calls with their arguments.
            span.read(f"{content} {head.removeprefix(_CALLS_HEAD)}")
        elif head == "user" and content.startswith(WINDOW_FRAME_PREFIX):
            # A window's summary message is role user too, but it is no request, and its
            # frame's numbers are ours, not facts of the conversation.
            span.read(content.partition("\n")[2])
        elif head == "user":
            first = _SENTENCE_END.split(" ".join(content.split()), maxsplit=1)[0]
            if first:
                span.asks.append(" ".join(first.split()[:max_words]))
            span.read(content)
        else:
            span.read(content)
    return span


def _messages(lines: list[str]) -> Iterator[tuple[str, str]]:
    """Each rendered message as (head, content). Continuation lines are indented under
    their message, so only an unindented line can start one: a message's content,
    whatever its lines look like, never passes for another message or an earlier
    summary."""
    message: tuple[str, list[str]] | None = None
    for line in lines:
        if message is not None and line.startswith(_CONTINUATION):
            message[1].append(line.removeprefix(_CONTINUATION))
            continue
        if message is not None:
            yield message[0], "\n".join(message[1])
        message = _split_head(line)
    if message is not None:
        yield message[0], "\n".join(message[1])


def _split_head(line: str) -> tuple[str, list[str]]:
    """A message's first line as its head (role, or the calls with their arguments)
    and the first line of its content."""
    if line.startswith(_CALLS_HEAD):
        # Scanned: the arguments may hold ": " and "): ".
        end = _scan_calls(line)[1]
        if end is not None and line.startswith("): ", end):
            return line[:end], [line[end + 3:]]
        return line, []
    if line.startswith(_EARLIER_SUMMARY):
        return _EARLIER_SUMMARY, [line.removeprefix(_EARLIER_SUMMARY)]
    if line.startswith(_TOOL_RESULT):
        name, _, text = line.partition("]: ")
        return f"{name}]", [text]
    role, _, text = line.partition(": ")
    return role, [text]


def _read_earlier_summary(span: Span, text: str) -> str:
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


def _fit(span: Span, budget: int, *, max_lines: int) -> str:
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


def _recency(span: Span) -> dict[Fact, tuple[int, int]]:
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
    span: Span, order: dict[Fact, tuple[int, int]], asks: list[str], budget: int
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

    if count_tokens(render(len(listed))) <= budget:
        return render(len(listed)), True
    # Binary search for the most facts that fit: the text only grows with each one kept.
    low, high = 0, len(listed) - 1
    while low < high:
        middle = (low + high + 1) // 2
        if count_tokens(render(middle)) <= budget:
            low = middle
        else:
            high = middle - 1
    return render(low), False


def _render(span: Span, asks: list[str], facts: list[str], facts_cut: int) -> str:
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


def called_tools(line: str) -> list[str]:
    """The tool names in a rendered ``assistant (calls: name(args), ...): content`` line."""
    return _scan_calls(line)[0]


def _scan_calls(line: str) -> tuple[list[str], int | None]:
    """The tool names of a calls head, and the index just past the last call (None when
    the head is not well formed).

    Scanned, not pattern-matched: arguments are JSON whose strings may hold commas,
    brackets and parentheses, so a name is read only where a call begins, after the
    previous call's parenthesis closed at depth zero outside any string.
    """
    names: list[str] = []
    index = len(_CALLS_HEAD)
    end: int | None = None
    while match := _CALL_START.match(line, index):
        names.append(match["name"])
        end = _call_end(line, match.end())
        if end is None or not line.startswith(", ", end):
            break
        index = end + 2
    return names, end


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
