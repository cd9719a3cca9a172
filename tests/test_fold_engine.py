"""The one fold engine: every fold goes through `attempt_fold`, and it backs off.

A refused span is latched by its exact key and by where it starts: a span that grows by
a turn at a time from the same start is not asked again until it holds twice the tokens
of the refused one. With no fact gate set, no facts are extracted at all.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import agentmemory.folding.attempt as engine
from agentmemory import services, signals
from agentmemory.folding import DeclineReason, latched
from agentmemory.folding.span import Span
from agentmemory.models import (
    CallOutcome,
    EntryKind,
    FoldLatch,
    FoldPurpose,
    MemoryEntry,
    SummarizerCall,
    Thread,
)
from agentmemory.summarizers import testing
from agentmemory.tokens import count_tokens
from agentmemory.transcript import render_message
from agentmemory.trust import facts
from agentmemory.window.compact import compact
from agentmemory.window.frame import span_fingerprint
from agentmemory.window.seams import WindowMessage
from tests.helpers import (
    AT_LENGTH,
    SHORT_SUMMARY,
    add_turns,
    capture,
    make_thread,
    recording_settings,
    turn_messages,
)

pytestmark = pytest.mark.django_db

BIG = 100_000
GATE = {"THRESHOLD": 0.9, "ACTION": "decline"}
#: Count-driven folds that load the whole thread and keep the newest turn (4 entries):
#: every fold of a growing thread starts at its first entry.
WHOLE_THREAD = {"LOAD_COUNT": 1000, "TRIGGER_MIN_ENTRIES": 2, "PRESERVE_RECENT": 4}
#: The request is pinned; the newest turn (4 messages) is kept; the rest is folded.
SLIDING = {"CLASS": "agentmemory.window.seams.SlidingWindow", "OPTIONS": {"MAX_MESSAGES": 6}}
REQUEST = {"role": "user", "content": "Chase every late order and tell me what you find."}

#: (summarizer reply, FACT_GATE, the refusal): a summary that drops the span's dates
#: and statuses, and one longer than any span here.
REFUSALS = [
    pytest.param(SHORT_SUMMARY, GATE, DeclineReason.LOST_FACTS, id="lost-facts"),
    pytest.param(AT_LENGTH, None, DeclineReason.NOT_SMALLER, id="not-smaller"),
]


def rebind(monkeypatch: pytest.MonkeyPatch, function: Any, replacement: Any) -> None:
    """Replace ``function`` wherever an agentmemory module bound it by name."""
    for name, module in list(sys.modules.items()):
        if name == "agentmemory" or name.startswith("agentmemory."):
            for attribute, value in list(vars(module).items()):
                if value is function:
                    monkeypatch.setattr(module, attribute, replacement)


def settings_for(reply: str, gate: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
    return recording_settings(
        reply, FACT_GATE=gate or {"THRESHOLD": None}, WINDOW=SLIDING, **WHOLE_THREAD,
        **extra,
    )


def messages_of(thread: Thread) -> list[MemoryEntry]:
    return list(
        MemoryEntry.objects.filter(thread=thread, kind=EntryKind.MESSAGE).order_by("position")
    )


def window(turns: int) -> list[dict[str, Any]]:
    return [REQUEST, *(message for n in range(1, turns + 1) for message in turn_messages(n))]


#: What one fold answers: the decline, and the tokens and start key of the span it took.
Folded = tuple[str | None, int, str]


def fold_by_recall(thread: Thread, turns: int) -> Folded:
    """Recall a thread of ``turns`` turns (appending the one that is new): every message
    but the newest turn is folded."""
    if turns == 3:
        add_turns(thread, 3)
    else:
        add_turns(thread, 1, start=turns)
    span = messages_of(thread)[:-4]
    decline = services.recall(thread, BIG).decline
    return decline, sum(entry.token_count for entry in span), str(span[0].pk)


def fold_by_compact(thread: Thread, turns: int) -> Folded:
    """Compact a window of ``turns`` turns: all but the request and the newest turn."""
    result = compact(thread, window(turns))
    assert result.refusal is None or result.window == window(turns)
    span = [WindowMessage.of(message) for message in window(turns)[1:-4]]
    tokens = sum(count_tokens(render_message(message)) for message in span)
    return result.refusal, tokens, span_fingerprint(span[:1])


FOLDS = [
    pytest.param(fold_by_recall, FoldPurpose.RECALL_FOLD, id="recall"),
    pytest.param(fold_by_compact, FoldPurpose.WINDOW_FOLD, id="window"),
]
OUTCOMES = {
    DeclineReason.LOST_FACTS: CallOutcome.REFUSED_LOST_FACTS,
    DeclineReason.NOT_SMALLER: CallOutcome.REFUSED_NOT_SMALLER,
}


# ---------------------------------------------------------------- backing off


@pytest.mark.parametrize("fold, purpose", FOLDS)
@pytest.mark.parametrize("reply, gate, reason", REFUSALS)
def test_a_growing_span_pays_for_one_refusal_until_it_has_doubled(
    settings: Any,
    fold: Callable[[Thread, int], Folded],
    purpose: str,
    reply: str,
    gate: dict[str, Any] | None,
    reason: DeclineReason,
) -> None:
    settings.AGENTMEMORY = settings_for(reply, gate)
    thread = make_thread()

    decline, refused, start = fold(thread, 3)  # folded: turns 1-2; kept: turn 3

    assert decline == reason and len(testing.calls) == 1
    latch = FoldLatch.objects.get(thread=thread)
    assert (latch.purpose, latch.reason, latch.start_key, latch.span_tokens) == (
        purpose, reason, start, refused
    )

    turns, backed_off = 3, 0
    with capture(signals.fold_declined) as declined:
        while True:
            turns += 1  # the span grows by one turn, from the same start
            decline, tokens, _ = fold(thread, turns)
            assert decline == reason
            if tokens >= 2 * refused:
                break
            backed_off += 1
            assert len(testing.calls) == 1, f"paid again at {turns} turns"

    assert backed_off >= 1
    assert len(testing.calls) == 2  # doubled: asked exactly once more
    assert [d["latched"] for d in declined] == [True] * backed_off + [False]
    assert list(SummarizerCall.objects.values_list("outcome", flat=True)) == [
        OUTCOMES[reason]
    ] * 2
    assert sorted(FoldLatch.objects.values_list("span_tokens", flat=True)) == [refused, tokens]


def test_latched_answers_for_a_span_without_folding_it(settings: Any) -> None:
    settings.AGENTMEMORY = settings_for(AT_LENGTH, None)
    thread = make_thread()
    add_turns(thread, 3)
    services.recall(thread, BIG)
    latch = FoldLatch.objects.get(thread=thread)
    purpose = FoldPurpose.RECALL_FOLD

    def ask(span_key: str, start_key: str, span_tokens: int) -> str | None:
        return latched(
            thread, purpose, span_key=span_key, start_key=start_key, span_tokens=span_tokens
        )

    assert ask(latch.span_key, "", 10**9) == "not-smaller"  # the exact span, however long
    assert ask("other", latch.start_key, 2 * latch.span_tokens - 1) == "not-smaller"
    assert ask("other", latch.start_key, 2 * latch.span_tokens) is None  # doubled
    assert ask("other", "elsewhere", 1) is None
    assert ask("other", "", 1) is None  # no start: only the exact key answers
    assert latched(
        thread, FoldPurpose.WINDOW_FOLD, span_key=latch.span_key, start_key=latch.start_key,
        span_tokens=1,
    ) is None  # another purpose


def test_regenerate_ignores_latches(settings: Any) -> None:
    settings.AGENTMEMORY = settings_for(SHORT_SUMMARY, None)
    thread = make_thread()
    add_turns(thread, 3)
    folded = services.recall(thread, BIG)
    summary = MemoryEntry.objects.get(pk=folded.folded_summary_id)
    span = list(summary.sources.values_list("entry_id", flat=True))
    FoldLatch.objects.create(
        thread=thread, purpose=FoldPurpose.RECALL_FOLD, span_key="another span",
        start_key=str(span[0]), span_tokens=10**6, reason="not-smaller", entry_count=1,
        model="test-model",
    )

    outcome = services.regenerate(summary)

    assert outcome.folded and len(testing.calls) == 2


# ---------------------------------------------------------------- no gate, no extraction


@pytest.fixture
def fact_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every call of `check_facts` from agentmemory code (it still runs)."""
    calls: list[int] = []
    real = facts.check_facts

    def recording(*args: Any, **kwargs: Any) -> facts.FactCheck:
        calls.append(1)
        return real(*args, **kwargs)

    rebind(monkeypatch, real, recording)
    return calls


@pytest.mark.parametrize("threshold, measured", [(None, False), (0.0, True)])
def test_without_a_threshold_no_facts_are_extracted(
    settings: Any, fact_checks: list[int], threshold: float | None, measured: bool
) -> None:
    settings.AGENTMEMORY = settings_for(
        SHORT_SUMMARY, {"THRESHOLD": threshold, "ACTION": "decline"}
    )
    thread = make_thread()
    add_turns(thread, 3)

    folded = services.recall(thread, BIG)
    compacted = compact(thread, window(3))

    summary = MemoryEntry.objects.get(pk=folded.folded_summary_id)
    assert compacted.span is not None
    assert len(fact_checks) == (2 if measured else 0)
    for score, missing in (
        (summary.coverage.fact_score, summary.coverage.missing_facts),
        (compacted.span.fact_score, compacted.span.missing_facts),
    ):
        if measured:
            assert score is not None and score < 1 and missing
        else:
            assert score is None and missing == []


# ---------------------------------------------------------------- one entry point


class _Watched(list[Any]):
    """testing.calls that also notes whether each summarizer call ran inside the engine."""

    def __init__(self, depth: list[int]) -> None:
        super().__init__()
        self.depth = depth
        self.inside: list[bool] = []

    def append(self, item: Any) -> None:
        self.inside.append(self.depth[0] > 0)
        super().append(item)


@pytest.fixture
def attempts(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[list[dict[str, Any]], _Watched]]:
    """Every `attempt_fold` call (it still runs), and every summarizer call."""
    seen: list[dict[str, Any]] = []
    depth = [0]
    real: Callable[..., Any] = engine.attempt_fold

    def recording(thread: Thread, span: Span, summarizer: Any, **options: Any) -> Any:
        seen.append({"purpose": span.purpose, "thread": thread, **options})
        depth[0] += 1
        try:
            return real(thread, span, summarizer, **options)
        finally:
            depth[0] -= 1

    rebind(monkeypatch, real, recording)
    watched = _Watched(depth)
    monkeypatch.setattr(testing, "calls", watched)
    yield seen, watched


def test_recall_background_regenerate_and_compact_all_go_through_attempt_fold(
    settings: Any, attempts: tuple[list[dict[str, Any]], _Watched]
) -> None:
    seen, calls = attempts
    settings.AGENTMEMORY = settings_for(SHORT_SUMMARY, None)
    inline, background = make_thread(), make_thread()
    add_turns(inline, 3)
    add_turns(background, 3)

    recalled = services.recall(inline, BIG)
    assert recalled.folded_summary_id is not None
    assert [(s["purpose"], s["thread"]) for s in seen] == [(FoldPurpose.RECALL_FOLD, inline)]

    settled = services.fold_until_settled(background.pk)
    assert settled and settled[0].folded
    assert seen[1]["purpose"] == FoldPurpose.RECALL_FOLD and seen[1]["thread"] == background
    assert seen[1]["raise_transient"] is True

    summary = MemoryEntry.objects.get(pk=recalled.folded_summary_id)
    seen.clear()
    assert services.regenerate(summary).folded
    assert [(s["purpose"], s["ignore_latches"]) for s in seen] == [
        (FoldPurpose.RECALL_FOLD, True)
    ]

    seen.clear()
    assert compact(inline, window(3)).compacted
    assert [s["purpose"] for s in seen] == [FoldPurpose.WINDOW_FOLD]

    assert len(calls) == 4 and all(calls.inside)  # no summarizer call outside the engine
    assert SummarizerCall.objects.count() == 4
