"""One exception family, mixed with Django's own where Django has a matching class."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured


class AgentMemoryError(Exception):
    """Base of every error agentmemory raises on purpose."""


class AgentMemoryConfigurationError(AgentMemoryError, ImproperlyConfigured):
    """A setting in ``AGENTMEMORY`` is missing or wrong; the message names the key."""


class InvalidMessageError(AgentMemoryError, ValueError):
    """A message given to ``append`` cannot be stored; ``field`` names what is wrong."""

    def __init__(self, message: str, *, field: str, index: int | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.index = index


class MessageConflictError(InvalidMessageError):
    """A well-formed message that conflicts with what the thread already holds (or with
    the rest of its batch): a turn before the thread's current turn, a tool result for a
    call that was never stored, a tool call id used twice. The API answers 409."""


class ToolCallIdError(MessageConflictError):
    """A tool call id that cannot pair: ``call_id`` names it, ``field`` says whether the
    call (``tool_calls``) or the result (``tool_call_id``) is refused."""

    def __init__(self, message: str, *, field: str, index: int | None, call_id: str) -> None:
        super().__init__(message, field=field, index=index)
        self.call_id = call_id


class ContextDeclinedError(AgentMemoryError):
    """A recall gave nothing to send, and a model call needs messages: the newest turn
    alone does not fit the budget, or the budget leaves no room. ``reason`` is the
    recall's ``budget_decline`` (``newest-turn-too-large``, ``below-minimum-tokens``)."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class NotASummaryError(AgentMemoryError, ValueError):
    """An entry that is not a summary was given where a summary is required."""


class SummarizerError(AgentMemoryError):
    """The summarizer could not produce a summary. Recall treats this as a decline.

    ``status_code``, ``code`` and ``error_type``: what the provider said went wrong, kept
    for the ledger; the message never carries the provider's own text.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        code: str | None = None,
        error_type: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.code = code
        self.error_type = error_type


class TransientSummarizerError(SummarizerError):
    """A summarizer failure worth retrying later (rate limit, timeout, 5xx).

    ``retry_after``: the seconds the provider asked us to wait (its ``Retry-After``
    header), or None when it said nothing; a background fold retries no sooner.
    """

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class BrokerTimeoutError(AgentMemoryError, TimeoutError):
    """The broker (or the result backend) did not answer an enqueue within
    AGENTMEMORY['BROKER_TIMEOUT'] seconds."""


class BrokerBusyError(BrokerTimeoutError):
    """No send was tried: another send of this process is still waiting on the broker,
    or one failed moments ago and the process is backing off."""


class ThreadGoneError(AgentMemoryError, LookupError):
    """The thread was erased while the call ran (by another request); nothing was written.
    The API answers 404, as for a thread that never existed."""


class EntryGoneError(AgentMemoryError, LookupError):
    """An entry the call had read was erased before it wrote (by another request); nothing
    was written. The API answers 409: the same request again sees the thread as it is."""


class MissingExtraError(AgentMemoryConfigurationError):
    """A feature is used whose optional dependency is not installed; ``extra`` names it."""

    def __init__(self, message: str, *, extra: str, module: str) -> None:
        super().__init__(message)
        self.extra = extra
        self.module = module
