"""Moved to `agentmemory.trust.quarantine`; this path keeps working for existing imports."""

from agentmemory.trust.quarantine import (
    has_invisible,
    injection_flags,
    message_flags,
    strip_invisible,
)

__all__ = ["has_invisible", "injection_flags", "message_flags", "strip_invisible"]
