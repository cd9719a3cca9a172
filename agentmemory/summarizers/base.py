"""The summarizer contract: a fixed prompt in, text and usage out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentmemory.exceptions import AgentMemoryConfigurationError
from agentmemory.tokens import count_fixed, count_tokens, line_breaks_cost
from agentmemory.transcript import (
    TRANSCRIPT_CLOSE,
    TRANSCRIPT_OPEN,
    MessageLike,
    render_message,
    render_transcript,
)

ChatMessage = dict[str, str]


@dataclass(frozen=True)
class SummaryResult:
    """What one call returned. Token counts are None when the backend cannot know them;
    ``cached_tokens`` (the part of the prompt the provider read from its prompt cache) is
    None when the response does not say."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None


def build_prompt(messages: Sequence[MessageLike], instruction: str) -> list[ChatMessage]:
    """The request every backend sends: the authored instruction, then the span as data."""
    return [
        {"role": "system", "content": instruction},
        {"role": "user", "content": render_transcript(messages)},
    ]


def transcript_tokens(messages: Sequence[MessageLike]) -> int:
    """``count_tokens(render_transcript(messages))``, without tokenizing the transcript:
    a stored message (one with a ``token_count``) is counted as stored, since the
    transcript shows it as its line in a context, which is what its count is of; a
    summary (shown without its label) or a window message is counted; the line breaks
    as a recall counts its context (`tokens.line_breaks_cost`). Stored counts are of the
    counter the message was appended under."""
    lines = [TRANSCRIPT_OPEN, *map(render_message, messages), TRANSCRIPT_CLOSE]
    total = count_fixed(TRANSCRIPT_OPEN) + count_fixed(TRANSCRIPT_CLOSE) + line_breaks_cost(lines)
    for message, line in zip(messages, lines[1:-1], strict=True):
        stored = getattr(message, "token_count", None)
        if isinstance(stored, int) and not getattr(message, "is_summary", False):
            total += stored
        else:
            total += count_tokens(line)
    return total


class BaseSummarizer:
    """Subclasses implement `complete`; the prompt is composed here, once. A backend that
    reads the messages themselves rather than a model's prompt overrides `summarize`."""

    #: Options this backend accepts in ``AGENTMEMORY['SUMMARIZER']['OPTIONS']``.
    option_names: frozenset[str] = frozenset()
    #: Recorded on every summary (provenance); None where the backend cannot set it.
    temperature: float | None = None
    seed: int | None = None
    #: Seconds one call may take. The background fold's Celery time limits are set above
    #: it (``services.fold_task_options``: soft at +30 s, hard at +60 s); a backend that
    #: calls out sets it from its options.
    timeout: float = 60.0

    def __init__(self, *, model: str, options: dict[str, Any] | None = None) -> None:
        if not isinstance(model, str) or not model.strip():
            raise AgentMemoryConfigurationError(
                f"AGENTMEMORY['SUMMARIZER']['MODEL'] must name the model {type(self).__name__} "
                "calls; there is no fallback to the agent's model."
            )
        options = dict(options or {})
        unknown = sorted(set(options) - self.option_names)
        if unknown:
            raise AgentMemoryConfigurationError(
                f"AGENTMEMORY['SUMMARIZER']['OPTIONS'] has unknown keys {unknown} for "
                f"{type(self).__name__}; accepted: {sorted(self.option_names) or 'none'}."
            )
        self.model = model
        self.options = options

    @property
    def backend(self) -> str:
        return f"{type(self).__module__}.{type(self).__qualname__}"

    @property
    def completion_cap(self) -> int | None:
        """The most tokens one completion may take (``MAX_TOKENS``); None: no cap."""
        cap = self.options.get("MAX_TOKENS")
        return int(cap) if cap else None

    def estimate_tokens(self, messages: Sequence[MessageLike], *, instruction: str) -> int:
        """What one call for ``messages`` is expected to cost, reserved against the quota
        before it is made: the prompt (`build_prompt`) counted with the project's counter,
        the transcript from its messages' stored counts (`transcript_tokens`), plus the
        chat format's few tokens a message, plus a completion of a quarter of the prompt
        (a summary is much shorter than its span), at most ``completion_cap``."""
        # Two messages, the instruction and the transcript, each with its format tokens.
        prompt_tokens = count_fixed(instruction) + 4 + transcript_tokens(messages) + 4 + 3
        completion = max(1, prompt_tokens // 4)
        cap = self.completion_cap
        return prompt_tokens + (min(completion, cap) if cap is not None else completion)

    def summarize(self, messages: Sequence[MessageLike], *, instruction: str) -> SummaryResult:
        return self.complete(build_prompt(messages, instruction))

    def complete(self, prompt: list[ChatMessage]) -> SummaryResult:
        raise NotImplementedError
