"""Per-user throttles for append, recall and fold, rated by AGENTMEMORY['API_THROTTLE_RATES']."""

from __future__ import annotations

from typing import Any

from rest_framework.throttling import UserRateThrottle

from agentmemory.conf import DEFAULTS, memory_settings


class AgentMemoryThrottle(UserRateThrottle):
    """Scope ``append``, ``recall`` or ``fold``; a rate of None turns the throttle off, a
    scope the setting leaves out keeps its default rate."""

    def __init__(self) -> None:  # rates are read per request, not at import
        pass

    def allow_request(self, request: Any, view: Any) -> bool:
        self.scope = getattr(view, "throttle_scope", None)
        rates = {**DEFAULTS["API_THROTTLE_RATES"], **(memory_settings.API_THROTTLE_RATES or {})}
        self.rate = rates.get(self.scope) if self.scope else None
        if self.rate is None:
            return True
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return super().allow_request(request, view)

    def get_cache_key(self, request: Any, view: Any) -> str | None:
        return f"agentmemory-throttle-{self.scope}-{request.user.pk}"
