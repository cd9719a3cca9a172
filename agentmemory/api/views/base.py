"""What every view of the API shares: the JSON body parser, pagination, content
negotiation (DRF's, without its parsing where a request states no preference, and a
kind that leaves ``?format=`` to the view), `MemoryAPIView` (the parser, the
negotiation, the permission, the throttle and the mapping of domain errors) and the
mapping of a message's validation error to field errors."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from rest_framework.exceptions import APIException, NotFound, ParseError, ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.pagination import PageNumberPagination
from rest_framework.parsers import JSONParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from agentmemory.api.errors import Conflict, RequestTooLarge, query_int
from agentmemory.api.permissions import owned_thread
from agentmemory.api.serializers.base import MAX_INT
from agentmemory.api.throttling import AgentMemoryThrottle
from agentmemory.conf import memory_settings
from agentmemory.exceptions import (
    EntryGoneError,
    InvalidMessageError,
    MessageConflictError,
    ThreadGoneError,
)
from agentmemory.models import Thread


class Pagination(PageNumberPagination):
    """``page`` from 1 (past the last page: 404), ``page_size`` from 1 to 500; anything
    else is a 400 rather than silently the default."""

    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_size(self, request: Request) -> int:
        size = query_int(request, "page_size", minimum=1, maximum=self.max_page_size)
        return size or memory_settings.API_PAGE_SIZE

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> Any:
        query_int(request, self.page_query_param, minimum=1, maximum=MAX_INT)
        return super().paginate_queryset(queryset, request, view)


class JSONBodyParser(JSONParser):
    """JSON only (messages nest; forms cannot say them), and too deep is a 400."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        # DRF reads the body as a stream, past Django's DATA_UPLOAD_MAX_MEMORY_SIZE check.
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        request = (parser_context or {}).get("request")
        length = request.META.get("CONTENT_LENGTH") if request is not None else None
        if limit is not None and length and length.isdigit() and int(length) > limit:
            raise RequestTooLarge.over_the_cap()
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError("JSON parse error - nested too deeply.") from exc


class UnstatedAcceptNegotiation(DefaultContentNegotiation):
    """DRF's content negotiation, with its answer to a request that states no
    preference given without parsing one: no ``Accept`` header (or ``*/*``), no format
    suffix, and no query string where DRF would read a format from it. DRF then picks
    the first renderer with its own media type; building the request's headers and
    query dict and parsing every media type to learn that held 215 of 1,978 samples of
    the append view's CPU in a sampling profile over HTTP (7 after).
    tests/test_negotiation.py holds both to the same answer over random requests."""

    def select_renderer(self, request: Any, renderers: Any, format_suffix: Any = None) -> Any:
        meta = getattr(request, "_request", request).META
        if (renderers and not format_suffix and meta.get("HTTP_ACCEPT", "*/*") == "*/*"
                and not (self.settings.URL_FORMAT_OVERRIDE and meta.get("QUERY_STRING"))):
            return renderers[0], renderers[0].media_type
        return super().select_renderer(request, renderers, format_suffix)


class MemoryAPIView(APIView):
    parser_classes = [JSONBodyParser]
    content_negotiation_class = UnstatedAcceptNegotiation
    permission_classes = [IsAuthenticated]
    throttle_classes = [AgentMemoryThrottle]

    def thread(self) -> Thread:
        return owned_thread(self.request, self.kwargs["thread_id"])

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, RequestDataTooBig):  # Django's own size check, in our words
            exc = RequestTooLarge.over_the_cap()
        # Races with another request's erasure (the services see them under the thread
        # lock): the thread is gone as for any unknown id; an entry gone is a conflict.
        elif isinstance(exc, ThreadGoneError):
            exc = NotFound(str(exc))
        elif isinstance(exc, EntryGoneError):
            exc = Conflict(str(exc))
        return super().handle_exception(exc)


def message_error(
    exc: InvalidMessageError, *, batch: int | None = None, key: str = "entries"
) -> APIException:
    """A domain validation error as DRF field errors (per item for a batch, in the shape
    DRF gives its own list errors): a 409 for a conflict with the thread, else a 400."""
    error = Conflict if isinstance(exc, MessageConflictError) else ValidationError
    detail = {exc.field: [str(exc)]}
    if batch is None or exc.index is None:
        return error(detail)
    if getattr(api_settings, "LIST_SERIALIZER_ERRORS_AS_DICT", False):
        # Keyed by int index, as ListSerializer keys its own (typed Any: some stubs allow
        # str keys only).
        by_index: dict[Any, Any] = {exc.index: detail}
        return error({key: by_index})
    items: list[dict[str, Any]] = [{} for _ in range(batch)]
    items[exc.index] = detail
    return error({key: items})


class _NoURLFormatOverride:
    """DRF's settings, without the URL format override."""

    URL_FORMAT_OVERRIDE = None

    def __getattr__(self, name: str) -> Any:
        return getattr(api_settings, name)


class ContextFormatNegotiation(UnstatedAcceptNegotiation):
    """Content negotiation that leaves ``?format=`` to the view: recall's ``format``
    names the shape of the context, not a renderer."""

    settings = _NoURLFormatOverride()  # type: ignore[assignment]
