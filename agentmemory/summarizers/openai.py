"""The OpenAI backend, on the official ``openai`` client.

``base_url`` makes any OpenAI-compatible server work. The key is read from the
environment variable named by ``API_KEY_ENV`` at call time: never from the database,
never logged. A provider's error is reduced to its class, status, code and type: its
text (which may echo the key or the prompt) is never kept. One attempt per call: the
client's own retries are off, and retrying is the background task's decision (law 11).

Calls to OpenAI's own API carry a ``prompt_cache_key`` named after the instruction, the
prefix every call of this summarizer shares (``PROMPT_CACHE_KEY``: another key, or none).
"""

from __future__ import annotations

import email.utils
import hashlib
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
    option_names = frozenset({
        "BASE_URL", "API_KEY_ENV", "TIMEOUT", "SEED", "MAX_TOKENS", "ORGANIZATION",
        "PROMPT_CACHE_KEY",
    })

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
        # Unset, OpenAI's own API gets a key and another server none: a server that
        # refuses parameters it does not know would fail every fold.
        cache_key = self.options.get("PROMPT_CACHE_KEY", not self.options.get("BASE_URL"))
        if cache_key is not None and not isinstance(cache_key, bool | str):
            raise AgentMemoryConfigurationError(
                "AGENTMEMORY['SUMMARIZER']['OPTIONS']['PROMPT_CACHE_KEY'] must be True (a "
                "key named after the instruction), a string (that key) or False (none), "
                f"got {cache_key!r}."
            )
        self.cache_key: bool | str = cache_key or False
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

    def prompt_cache_key(self, prompt: list[ChatMessage]) -> str | None:
        """The ``prompt_cache_key`` sent with ``prompt``: ``PROMPT_CACHE_KEY``'s string, or
        one named after the prompt's instruction (every call of this summarizer and
        instruction begins with it), or None."""
        if isinstance(self.cache_key, str):
            return self.cache_key
        if not self.cache_key:
            return None
        instruction = prompt[0]["content"] if prompt and prompt[0]["role"] == "system" else ""
        digest = hashlib.sha256(instruction.encode()).hexdigest()[:16]
        return f"agentmemory-summarizer-{digest}"

    def complete(self, prompt: list[ChatMessage]) -> SummaryResult:
        extra: dict[str, Any] = {}
        if self.options.get("MAX_TOKENS"):
            extra["max_tokens"] = int(self.options["MAX_TOKENS"])
        cache_key = self.prompt_cache_key(prompt)
        if cache_key is not None:
            extra["prompt_cache_key"] = cache_key
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
        except ValueError:
            # A 200 whose body is not JSON (a proxy's page, an empty body): said in words,
            # not as the parser's error, which would quote the body.
            raise SummarizerError(
                f"{self.model}: the provider's answer was not JSON."
            ) from None
        if not isinstance(response, ChatCompletion):
            # An HTML error page or a proxy's text with status 200: the client hands back
            # the raw body, which is not ours to keep.
            raise SummarizerError(
                f"{self.model}: the provider's answer was not a chat completion "
                f"({type(response).__name__} body)."
            )
        if not response.choices:
            raise SummarizerError(f"{self.model}: the provider's answer held no choices.")
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
