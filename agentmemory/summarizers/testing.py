"""A summarizer for your tests: it records every prompt and answers what the test sets.

Like Django's ``locmem`` e-mail backend and ``django.core.mail.outbox``::

    AGENTMEMORY = {"SUMMARIZER": {
        "BACKEND": "agentmemory.summarizers.testing.RecordingSummarizer",
        "MODEL": "test-model",
        "OPTIONS": {"REPLY": "The user asked about order 1."},
    }}

Every prompt it is sent is appended to :data:`calls`; :func:`reset` empties it and
drops the overrides. :func:`override` changes the reply, the error or the delay for a
block. The record is per process: a Celery worker in another process records in its own
list, which the test process cannot read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from agentmemory.exceptions import AgentMemoryConfigurationError
from agentmemory.summarizers.base import BaseSummarizer, ChatMessage, SummaryResult

#: A reply: the summary's text, a ``SummaryResult`` (to report token usage), or a
#: function of the prompt that returns either.
Reply = str | SummaryResult | Callable[[list[ChatMessage]], "str | SummaryResult"]

#: Every prompt a ``RecordingSummarizer`` was sent in this process, oldest first: a list
#: of ``{"role", "content"}`` dicts each, the system instruction then the transcript.
calls: list[list[ChatMessage]] = []

#: The reply when neither ``OPTIONS["REPLY"]`` nor :func:`override` gives one.
DEFAULT_REPLY = "A summary of the earlier conversation."

_overrides: dict[str, Any] = {}


def reset() -> None:
    """Empty :data:`calls` and drop every override; call it before each test."""
    calls.clear()
    _overrides.clear()


@contextmanager
def override(**behaviour: Any) -> Iterator[None]:
    """Within the block, answer with ``reply``, raise ``error`` or sleep ``delay``
    seconds first, whatever the settings' ``OPTIONS`` say. Pass ``error=None`` or
    ``delay=None`` to turn off one the settings set."""
    unknown = sorted(set(behaviour) - {"reply", "error", "delay"})
    if unknown:
        raise TypeError(f"override() takes reply, error and delay, not {unknown}.")
    previous = dict(_overrides)
    _overrides.update(behaviour)
    try:
        yield
    finally:
        _overrides.clear()
        _overrides.update(previous)


class RecordingSummarizer(BaseSummarizer):
    """Appends each prompt to :data:`calls`, then waits ``DELAY``, raises ``ERROR`` or
    answers ``REPLY``.

    Options: ``REPLY`` (a str, a ``SummaryResult``, or a function of the prompt that
    returns one; default :data:`DEFAULT_REPLY`), ``ERROR`` (an exception instance or
    class to raise instead of answering; default none), ``DELAY`` (seconds to sleep
    before answering or raising; default none). :func:`override` takes precedence.
    Token usage is recorded as unknown unless the reply is a ``SummaryResult`` that
    gives it.
    """

    option_names = frozenset({"REPLY", "ERROR", "DELAY"})

    def __init__(self, *, model: str, options: dict[str, Any] | None = None) -> None:
        super().__init__(model=model, options=options)
        delay = self.options.get("DELAY")
        if delay is not None and (
            not isinstance(delay, int | float) or isinstance(delay, bool) or delay < 0
        ):
            raise AgentMemoryConfigurationError(
                "AGENTMEMORY['SUMMARIZER']['OPTIONS']['DELAY'] must be a non-negative "
                f"number of seconds, got {delay!r}."
            )

    def _setting(self, name: str, default: Any) -> Any:
        if name.lower() in _overrides:
            return _overrides[name.lower()]
        return self.options.get(name, default)

    def complete(self, prompt: list[ChatMessage]) -> SummaryResult:
        calls.append(prompt)
        if delay := self._setting("DELAY", None):
            time.sleep(delay)
        if (error := self._setting("ERROR", None)) is not None:
            raise error
        reply = self._setting("REPLY", DEFAULT_REPLY)
        if callable(reply):
            reply = reply(prompt)
        return reply if isinstance(reply, SummaryResult) else SummaryResult(text=reply)
