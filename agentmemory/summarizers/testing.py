"""A summarizer for your tests: it records every prompt and answers what the test sets.

Like Django's ``locmem`` e-mail backend and ``django.core.mail.outbox``::

    AGENTMEMORY = {"SUMMARIZER": {
        "BACKEND": "agentmemory.summarizers.testing.RecordingSummarizer",
        "MODEL": "test-model",
        "OPTIONS": {"REPLY": "The user asked about order 1."},
    }}

Every prompt it is sent is appended to ``calls``; ``reset()`` empties it and drops the
overrides. ``override(reply=..., error=..., delay=...)`` changes the answer for a block.
The record is kept per process: calls made in other threads of the process are recorded,
but a Celery worker in another process records in its own list, which the test process
cannot read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from agentmemory.exceptions import AgentMemoryConfigurationError, SummarizerError
from agentmemory.summarizers.base import BaseSummarizer, ChatMessage, SummaryResult

#: A reply: the summary's text, a ``SummaryResult`` (to report token usage), or a
#: function of the prompt that returns either.
Reply = str | SummaryResult | Callable[[list[ChatMessage]], "str | SummaryResult"]

#: Every prompt a ``RecordingSummarizer`` was sent in this process, oldest first. A
#: prompt is a list of ``{"role", "content"}`` dicts: the instruction, then the transcript.
calls: list[list[ChatMessage]] = []

#: The reply when neither ``OPTIONS["REPLY"]`` nor ``override`` gives one.
DEFAULT_REPLY = "A summary of the earlier conversation."

_overrides: dict[str, Any] = {}


def reset() -> None:
    """Empty ``calls`` (the same list object) and drop every override."""
    calls.clear()
    _overrides.clear()


@contextmanager
def override(**behaviour: Any) -> Iterator[None]:
    """Within the block, answer ``reply``, raise ``error`` or first sleep ``delay`` seconds,
    whatever the settings' ``OPTIONS`` say; ``error=None`` or ``delay=None`` turns off
    one the settings give. The previous behaviour is restored when the block ends."""
    for name, value in behaviour.items():
        _check(name.upper(), value, where=f"override({name}=...)")
    previous = dict(_overrides)
    _overrides.update({name.upper(): value for name, value in behaviour.items()})
    try:
        yield
    finally:
        _overrides.clear()
        _overrides.update(previous)


def _check(name: str, value: Any, *, where: str) -> None:
    """Raise naming ``where`` unless ``value`` is a usable REPLY, ERROR or DELAY."""
    if name == "REPLY":
        ok = isinstance(value, str | SummaryResult) or callable(value)
        expected = "a str, a SummaryResult, or a function of the prompt returning one"
    elif name == "ERROR":
        ok = value is None or isinstance(value, BaseException) or (
            isinstance(value, type) and issubclass(value, BaseException)
        )
        expected = "an exception instance or class, or None"
    elif name == "DELAY":
        ok = value is None or (
            isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
        )
        expected = "a non-negative number of seconds, or None"
    else:
        raise TypeError(f"{where}: RecordingSummarizer takes reply, error and delay.")
    if not ok:
        raise AgentMemoryConfigurationError(f"{where} must be {expected}, got {value!r}.")


class RecordingSummarizer(BaseSummarizer):
    """Appends each prompt to ``calls``, then waits ``DELAY``, raises ``ERROR`` or answers
    ``REPLY``.

    Options: ``REPLY`` (a str, a ``SummaryResult``, or a function of the prompt returning
    either; default ``DEFAULT_REPLY``), ``ERROR`` (an exception instance or class to raise
    instead of answering; default none), ``DELAY`` (seconds to sleep before answering or
    raising; default none). ``override`` takes precedence over them. Token usage is
    recorded as unknown unless the reply is a ``SummaryResult`` that gives it.
    """

    option_names = frozenset({"REPLY", "ERROR", "DELAY"})

    def __init__(self, *, model: str, options: dict[str, Any] | None = None) -> None:
        super().__init__(model=model, options=options)
        for name, value in self.options.items():
            _check(name, value, where=f"AGENTMEMORY['SUMMARIZER']['OPTIONS']['{name}']")

    def _current(self, name: str, default: Any) -> Any:
        return _overrides[name] if name in _overrides else self.options.get(name, default)

    def complete(self, prompt: list[ChatMessage]) -> SummaryResult:
        calls.append(prompt)
        if delay := self._current("DELAY", None):
            time.sleep(delay)
        if (error := self._current("ERROR", None)) is not None:
            raise error
        reply = self._current("REPLY", DEFAULT_REPLY)
        if callable(reply):
            reply = reply(prompt)
        if isinstance(reply, SummaryResult):
            return reply
        if not isinstance(reply, str):
            raise SummarizerError(f"The REPLY function returned {type(reply).__name__}, not str.")
        return SummaryResult(text=reply)
