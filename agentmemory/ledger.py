"""Moved to `agentmemory.trust.ledger`. Kept only for services.py and admin.py until
they import the new path; delete it then."""

from agentmemory.trust.ledger import quota_exceeded, tokens_used_today

__all__ = ["quota_exceeded", "tokens_used_today"]
