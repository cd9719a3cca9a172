"""Moved to `agentmemory.trust.signing`. Kept only for services.py and admin.py until
they import the new path; delete it then."""

from agentmemory.trust.signing import (
    is_legacy,
    sign_span,
    sign_summary,
    sources_by_summary,
    span_is_intact,
    summary_is_intact,
)

__all__ = [
    "is_legacy",
    "sign_span",
    "sign_summary",
    "sources_by_summary",
    "span_is_intact",
    "summary_is_intact",
]
