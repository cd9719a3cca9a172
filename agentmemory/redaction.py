"""What a failure may say in the ledger and in log lines: its class, the HTTP status, the
provider's error code and type. Never a key, a masked key echo or the provider's text
(which may quote the prompt, i.e. conversation text that erasure could not reach there).
"""

from __future__ import annotations

import re

from agentmemory.exceptions import AgentMemoryError

#: The longest error message a ledger row keeps (the column's length).
MAX_ERROR_CHARS = 300

REDACTED = "[redacted]"

_KEY_LIKE = re.compile(
    # Provider keys and their masked echoes: sk-proj-abc..., sk-canar*******T123.
    r"\b(?:sk|pk|rk|ak)-[A-Za-z0-9_\-*.]{3,}"
    # Any masked echo: a few characters, a run of asterisks, maybe a tail.
    r"|[A-Za-z0-9_\-.]*\*{3,}[A-Za-z0-9_\-.]*"
    # Bearer tokens and long opaque secrets (hex, base64, JWT-like).
    r"|(?i:bearer)\s+\S+"
    r"|[A-Za-z0-9_\-+/=]{32,}"
)


def redact(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` with anything key-like replaced, one line, at most ``limit`` characters."""
    line = " ".join(_KEY_LIKE.sub(REDACTED, text).split())
    return line if len(line) <= limit else f"{line[: limit - 1]}…"


def describe_error(exc: BaseException) -> str:
    """A short, bounded, redacted description of a summarizer failure.

    agentmemory's own errors keep their message (we author it, never from the provider's
    text); any other exception keeps only its class and the status, code and type it
    carries: its message may quote anything, the conversation included.
    """
    details = [
        f"{label} {redact(str(value), 60)}"
        for label, value in (
            ("HTTP", getattr(exc, "status_code", None)),
            ("code", getattr(exc, "code", None)),
            ("type", getattr(exc, "error_type", None) or getattr(exc, "type", None)),
        )
        if isinstance(value, str | int) and not isinstance(value, bool) and value != ""
    ]
    text = type(exc).__name__
    if isinstance(exc, AgentMemoryError) and str(exc):
        text = f"{text}: {exc}"
    elif details:
        text = f"{text} ({', '.join(details)})"
    return redact(text)
