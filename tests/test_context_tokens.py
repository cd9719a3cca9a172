"""A recall's ``tokens`` is the exact count of its ``text``, taken from the stored counts.

Recall never tokenizes the finished context: it adds each line's stored count and what
the line break after it adds (`tokens.line_break_cost`, measured on the line's end).
Over random lines (punctuation, spaces, marks, scripts and digits where a line break
can merge with what precedes it) and over random threads recalled at random budgets,
the sum is the tokenizer's own count of the text, and the text stays within the budget.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from django.test import override_settings
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agentmemory import services
from agentmemory.models import MemoryEntry, Thread
from agentmemory.pipeline.config import RecallConfig
from agentmemory.summarizers import get_summarizer
from agentmemory.summarizers.base import build_prompt, transcript_tokens
from agentmemory.tokens import count_tokens, line_break_cost
from agentmemory.transcript import DEFAULT_INSTRUCTION, render_transcript
from agentmemory.window.seams import WindowMessage

pytestmark = pytest.mark.django_db

#: Pieces a line may end in: punctuation runs, spaces, a combining mark, an apostrophe
#: before letters, digits, another script, a line break inside the content.
PIECES = st.sampled_from([
    "order", "Porto", " ", "  ", "\t", ".", "...", "?!", "'s", "'", '"', ")", "(", "]", "}",
    "#", "/", "\\", "_", "-", "--", ":", ";", "€", "42", "2026-10-31", "é", "e\u0301",
    "\u0301", "漢字", "\u00a0", "\n", "\n\n", "\r\n", "http://x.io/", "**", "`", "…",
])
CONTENT = st.lists(PIECES, min_size=1, max_size=40).map("".join)
ROLE = st.sampled_from(["user", "assistant"])


@given(lines=st.lists(st.tuples(ROLE, CONTENT), min_size=1, max_size=6))
@settings(max_examples=400, deadline=None)
def test_lines_and_their_breaks_add_up_to_the_count_of_the_joined_text(
    lines: list[tuple[str, str]],
) -> None:
    rendered = [f"{role}: {content}" for role, content in lines]
    counted = sum(map(count_tokens, rendered)) + sum(
        line_break_cost(line, following) for line, following in itertools.pairwise(rendered)
    )
    assert counted == count_tokens("\n".join(rendered))


@given(tail=CONTENT, footer=st.sampled_from(["", "end", " end", "\n\nend", "  ", "<end>"]))
@settings(max_examples=200, deadline=None)
def test_a_footer_that_begins_with_spaces_is_counted_with_the_break_before_it(
    tail: str, footer: str,
) -> None:
    line = f"assistant: {tail}"
    parts = [line, footer] if footer else [line]
    counted = sum(map(count_tokens, parts)) + (line_break_cost(line, footer) if footer else 0)
    assert counted == count_tokens("\n".join(parts))


@given(
    turns=st.lists(st.tuples(CONTENT, CONTENT).filter(lambda pair: all(map(str.strip, pair))),
                   min_size=1, max_size=10),
    budget=st.sampled_from([300, 400, 600, 1000, 4000]),
    frame=st.sampled_from([("", ""), ("[memory]", "[end of memory]"), ("", "  done.")]),
)
@settings(max_examples=40, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
def test_a_recall_counts_its_text_exactly_and_within_the_budget(
    turns: list[tuple[str, str]], budget: int, frame: tuple[str, str],
) -> None:
    header, footer = frame
    with override_settings(AGENTMEMORY={
        "FORMAT_HEADER": header, "FORMAT_FOOTER": footer, "RESERVE_TOKENS": 0,
        "MINIMUM_TOKENS": 0, "RECALL_MODE": "background",
    }):
        thread = Thread.objects.create()
        for question, answer in turns:
            services.append(thread, [{"role": "user", "content": question},
                                     {"role": "assistant", "content": answer}])
        result = services.recall(thread, budget)
        assert result.tokens == (count_tokens(result.text) if result.text else 0)
        assert result.tokens <= budget - RecallConfig.build().reserve_tokens or (
            result.budget_decline is not None
        )


def _old_estimate(summarizer: Any, messages: Any, instruction: str) -> int:
    """`estimate_tokens` as the whole prompt counted: what the stored counts stand for."""
    prompt = build_prompt(messages, instruction)
    prompt_tokens = sum(count_tokens(message["content"]) + 4 for message in prompt) + 3
    completion = max(1, prompt_tokens // 4)
    cap = summarizer.completion_cap
    return prompt_tokens + (min(completion, cap) if cap is not None else completion)


@given(
    turns=st.lists(st.tuples(CONTENT, CONTENT).filter(lambda pair: all(map(str.strip, pair))),
                   min_size=2, max_size=10),
    fold_at=st.sampled_from([60, 120, 240]),
    instruction=st.sampled_from(["", "Summarize.", "Keep ids.\n\nReply with the summary."]),
)
@settings(max_examples=40, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
def test_a_fold_prompt_is_counted_exactly_from_the_stored_counts(
    turns: list[tuple[str, str]], fold_at: int, instruction: str,
) -> None:
    """The transcript a fold sends, counted from its messages' stored counts (summaries
    and window messages counted as shown), is the tokenizer's own count of it; the
    call's estimate is the whole prompt counted."""
    thread = Thread.objects.create()
    with override_settings(AGENTMEMORY={"RESERVE_TOKENS": 0, "MINIMUM_TOKENS": 0}):
        for number, (question, answer) in enumerate(turns):
            services.append(thread, [{"role": "user", "content": question},
                                     {"role": "assistant", "content": answer}])
            if number in (len(turns) // 2, len(turns) - 1):
                services.recall(thread, fold_at, mode="inline")  # summaries, nested too
    entries = list(MemoryEntry.objects.filter(thread=thread, retired_at__isnull=True)
                   .order_by("position", "id"))
    assume(any(entry.is_summary for entry in entries))
    window = [WindowMessage(role=e.role, content=e.content) for e in entries
              if not e.is_summary]
    for messages in (entries, window):
        assert transcript_tokens(messages) == count_tokens(render_transcript(messages))
    summarizer = get_summarizer()
    instruction = instruction or DEFAULT_INSTRUCTION
    assert summarizer.estimate_tokens(entries, instruction=instruction) == _old_estimate(
        summarizer, entries, instruction)
