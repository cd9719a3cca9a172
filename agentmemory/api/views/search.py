"""Full-text search of a thread or of all the requesting user's threads."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from agentmemory import services
from agentmemory.api.errors import query_choices, query_datetime, query_int, query_value
from agentmemory.api.permissions import authenticated_user
from agentmemory.api.serializers.search import SearchHitSerializer, SearchResultsSerializer
from agentmemory.api.views.base import MemoryAPIView
from agentmemory.models import Role

DEFAULT_SEARCH_LIMIT = 10
_ROLE = f"(?:{'|'.join(Role.values)})"
ROLE_LIST = {"type": "string", "pattern": f"^{_ROLE}(?:,{_ROLE})*$"}
SEARCH_PARAMETERS = [
    # SearchText (api.schema): the rules of agentmemory.search.query as a pattern.
    OpenApiParameter(
        "q", {"$ref": "#/components/schemas/SearchText"}, required=True,
        description="Words and \"quoted phrases\", all of which must match.",
    ),
    OpenApiParameter(
        "limit", {"type": "integer", "minimum": 1, "maximum": services.MAX_SEARCH_LIMIT,
                  "default": DEFAULT_SEARCH_LIMIT},
        description=f"At most this many hits, best first: 1 to {services.MAX_SEARCH_LIMIT} "
        f"(default {DEFAULT_SEARCH_LIMIT}).",
    ),
    OpenApiParameter(
        "role", {"type": "array", "items": ROLE_LIST}, style="form", explode=True,
        description=f"Only messages of these roles ({', '.join(Role.values)}): repeat the "
        "parameter, or join roles with commas.",
    ),
    OpenApiParameter(
        "before", {"type": "string", "format": "date-time"},
        description="Only messages written before this instant (RFC 3339, with its offset).",
    ),
    OpenApiParameter(
        "after", {"type": "string", "format": "date-time"},
        description="Only messages written after this instant (RFC 3339, with its offset).",
    ),
]
SEARCH_DESCRIPTION = (
    "Full-text search over the original messages (never summaries, never the memory "
    "tools' own results) that have not expired, best match first. A hit covered by a "
    "summary names it (`covered_by`, `covered_by_handle`): its whole text is under that "
    "summary's `originals/`."
)


def search_response(request: Request, scope: Any) -> Response:
    """The hits of ``scope`` (a thread, or the requesting user for all their threads)
    for the request's search parameters; any bad one is a 400 naming it."""
    query = query_value(request, "q")
    if query is None:
        raise ValidationError({"q": ["This parameter is required."]})
    limit = query_int(request, "limit", minimum=1, maximum=services.MAX_SEARCH_LIMIT)
    roles = query_choices(request, "role", Role.values)
    before, after = query_datetime(request, "before"), query_datetime(request, "after")
    try:
        hits = services.search(scope, query, limit=limit or DEFAULT_SEARCH_LIMIT,
                               roles=roles, before=before, after=after)
    except services.InvalidSearchQuery as exc:  # the query text: the parser's rules
        message = str(exc)
        field = "role" if exc.field == "roles" else exc.field
        raise ValidationError({field: [message[:1].upper() + message[1:]]}) from exc
    return Response({"results": SearchHitSerializer(hits, many=True).data})


class ThreadSearch(MemoryAPIView):
    @extend_schema(parameters=SEARCH_PARAMETERS, responses=SearchResultsSerializer,
                   description=f"Search this thread. {SEARCH_DESCRIPTION}")
    def get(self, request: Request, thread_id: int) -> Response:
        return search_response(request, self.thread())


class OwnerSearch(MemoryAPIView):
    @extend_schema(parameters=SEARCH_PARAMETERS, responses=SearchResultsSerializer,
                   description=f"Search all of the requesting user's threads. "
                   f"{SEARCH_DESCRIPTION}")
    def get(self, request: Request) -> Response:
        return search_response(request, authenticated_user(request))
