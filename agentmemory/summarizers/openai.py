"""The OpenAI backend, on the official ``openai`` client.

``base_url`` makes any OpenAI-compatible server work. The key is read from the
environment variable named by ``API_KEY_ENV`` at call time: never from the database,
never logged. A provider's error is reduced to its class, status, code and type: its
text (which may echo the key or the prompt) is never kept. One attempt per call: the
client's own retries are off, and retrying is the background task's decision (law 11).
"""

from __future__ import annotations

import email.utils
import os
from datetime import UTC, datetime
from typing import Any

import openai
from openai.types.chat import ChatCompletion

from agentmemory.exceptions import (
    AgentMemoryConfigurationError,
    SummarizerError,
    TransientSummarizerError,
)
from agentmemory.redaction import redact
from agentmemory.summarizers.base import BaseSummarizer, ChatMessage, SummaryResult

_TRANSIENT = (
    openai.APITimeoutError,
    openai.APIConnectionError,
    openai.RateLimitError,
    openai.InternalServerError,
)


class OpenAISummarizer(BaseSummarizer):
    option_names = frozenset(
        {"BASE_URL", "API_KEY_ENV", "TIMEOUT", "SEED", "MAX_TOKENS", "ORGANIZATION"}
    )

    def __init__(self, *, model: str, options: dict[str, Any] | None = None) -> None:
        super().__init__(model=model, options=options)
        timeout = self.options.get("TIMEOUT", 30.0)
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
            raise AgentMemoryConfigurationError(
                "AGENTMEMORY['SUMMARIZER']['OPTIONS']['TIMEOUT'] must be a positive number "
                f"of seconds, got {timeout!r}."
            )
        self.timeout = float(timeout)
        self.seed = int(self.options.get("SEED", 0))
        self.temperature = 0.0
        self.api_key_env = str(self.options.get("API_KEY_ENV", "OPENAI_API_KEY"))
        self._client: openai.OpenAI | None = None

    @property
    def client(self) -> openai.OpenAI:
        if self._client is None:
            api_key = os.environ.get(self.api_key_env)
            if not api_key:
                raise SummarizerError(
                    f"The environment variable {self.api_key_env} is empty; set it to the API "
                    "key, or name another with AGENTMEMORY['SUMMARIZER']['OPTIONS']"
                    "['API_KEY_ENV']."
                )
            self._client = openai.OpenAI(
                api_key=api_key,
                base_url=self.options.get("BASE_URL"),
                organization=self.options.get("ORGANIZATION"),
                timeout=self.timeout,
                max_retries=0,
            )
        return self._client

    def complete(self, prompt: list[ChatMessage]) -> SummaryResult:
        extra: dict[str, Any] = {}
        if self.options.get("MAX_TOKENS"):
            extra["max_tokens"] = int(self.options["MAX_TOKENS"])
        try:
            response = self.client.chat.completions.create(
                model=self.model,
                messages=prompt,  # type: ignore[arg-type]
                temperature=0,
                seed=self.seed,
                **extra,
            )
        except openai.OpenAIError as exc:
            # Only what the provider's error is, never what it says: its message may echo
            # the key (masked or not) or the prompt, and this error reaches the ledger, the
            # logs and Celery's retry line. Not chained, so no traceback carries it either.
            raise _provider_error(exc, self.model) from None
        if not isinstance(response, ChatCompletion):
            # An HTML error page or a proxy's text with status 200: the client hands back
            # the raw body, which is not ours to keep.
            raise SummarizerError(
                f"{self.model}: the provider's reply was not a chat completion "
                f"({type(response).__name__} body)."
            )
        if not response.choices:
            raise SummarizerError(f"{self.model} returned no choices.")
        usage = response.usage
        details = usage.prompt_tokens_details if usage else None
        return SummaryResult(
            text=response.choices[0].message.content or "",
            prompt_tokens=usage.prompt_tokens if usage else None,
            completion_tokens=usage.completion_tokens if usage else None,
            cached_tokens=details.cached_tokens if details else None,
        )


def _provider_error(exc: openai.OpenAIError, model: str) -> SummarizerError:
    """Our error for a provider's: its class, HTTP status, error code and type."""
    error = TransientSummarizerError if isinstance(exc, _TRANSIENT) else SummarizerError
    status = exc.status_code if isinstance(exc, openai.APIStatusError) else None
    code = getattr(exc, "code", None)
    error_type = getattr(exc, "type", None)
    details = [
        f"{label} {value}"
        for label, value in (("HTTP", status), ("code", code), ("type", error_type))
        if value is not None
    ]
    suffix = f" ({', '.join(details)})" if details else ""
    kwargs: dict[str, Any] = {
        "status_code": status,
        "code": str(code) if code is not None else None,
        "error_type": str(error_type) if error_type is not None else None,
    }
    if error is TransientSummarizerError and isinstance(exc, openai.APIStatusError):
        kwargs["retry_after"] = retry_after(exc.response.headers)
    return error(
        redact(f"{model}: the provider failed with {type(exc).__name__}{suffix}."), **kwargs
    )


def retry_after(headers: Any) -> float | None:
    """The wait a 429 or 503 asks for: ``retry-after-ms``, or ``Retry-After`` in seconds or
    as an HTTP date; None when absent or unreadable."""
    milliseconds = headers.get("retry-after-ms")
    try:
        if milliseconds is not None:
            return max(0.0, float(milliseconds) / 1000)
    except ValueError:
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
