"""Views: parse input, call a service, shape the output. Nothing else lives here."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.urls import include, path
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, extend_schema
from drf_spectacular.views import SpectacularAPIView
from rest_framework import generics, status
from rest_framework.exceptions import APIException, NotFound, ParseError, ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.pagination import PageNumberPagination
from rest_framework.parsers import JSONParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from agentmemory import services
from agentmemory.api import serializers as s
from agentmemory.api.errors import (
    Conflict,
    RequestTooLarge,
    query_choices,
    query_datetime,
    query_flag,
    query_int,
    query_value,
)
from agentmemory.api.permissions import authenticated_user, expandable_thread, owned_thread
from agentmemory.api.throttling import AgentMemoryThrottle
from agentmemory.conf import memory_settings
from agentmemory.exceptions import (
    EntryGoneError,
    InvalidMessageError,
    MessageConflictError,
    ThreadGoneError,
)
from agentmemory.messages import clean_message
from agentmemory.models import (
    FoldedSpan,
    MemoryEntry,
    RecallReceipt,
    Role,
    SummarizerCall,
    Thread,
)
from agentmemory.pipeline.config import ConflictingRecallOption, InvalidRecallOption
from agentmemory.querysets import MemoryEntryQuerySet, SummarizerCallQuerySet
from agentmemory.shapes import flat_message
from agentmemory.trust.receipts import replay, savings


class Pagination(PageNumberPagination):
    """``page`` from 1 (past the last page: 404), ``page_size`` from 1 to 500; anything
    else is a 400 rather than silently the default."""

    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_size(self, request: Request) -> int:
        size = query_int(request, "page_size", minimum=1, maximum=self.max_page_size)
        return size or memory_settings.API_PAGE_SIZE

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> Any:
        query_int(request, self.page_query_param, minimum=1, maximum=s.MAX_INT)
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


class MemoryAPIView(APIView):
    parser_classes = [JSONBodyParser]
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
        # Keyed by int index, as ListSerializer keys its own; the stubs allow str keys only.
        return error({key: {exc.index: detail}})  # type: ignore[dict-item]
    items: list[dict[str, Any]] = [{} for _ in range(batch)]
    items[exc.index] = detail
    return error({key: items})


# ---------------------------------------------------------------- threads


class ThreadList(MemoryAPIView, generics.ListCreateAPIView):
    serializer_class = s.ThreadSerializer
    pagination_class = Pagination

    def get_queryset(self) -> QuerySet[Thread]:
        owner = authenticated_user(self.request)
        return Thread.objects.owned_by(owner).order_by("-created_at", "-id")

    def perform_create(self, serializer: Any) -> None:
        save_thread(serializer, owner=self.request.user)


def save_thread(serializer: Any, **extra: Any) -> None:
    """Save, turning a client_key taken meanwhile (another worker's request) into a 409."""
    try:
        with transaction.atomic():
            serializer.save(**extra)
    except IntegrityError as exc:
        raise Conflict(
            {"client_key": ["You already have a thread with this client_key."]}
        ) from exc


class ThreadDetail(MemoryAPIView, generics.RetrieveUpdateDestroyAPIView):
    serializer_class = s.ThreadSerializer
    lookup_url_kwarg = "thread_id"

    def perform_update(self, serializer: Any) -> None:
        save_thread(serializer)

    def get_queryset(self) -> QuerySet[Thread]:
        return Thread.objects.owned_by(authenticated_user(self.request))

    @extend_schema(description="Erase the thread: entries, summaries, spans and latches.")
    def delete(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        services.erase_thread(self.thread())
        return Response(status=status.HTTP_204_NO_CONTENT)


# ---------------------------------------------------------------- entries


class ListReadsOnly(AutoSchema):
    """Only GET pages: an append answers a plain list, and takes no page parameters."""

    def _get_paginator(self) -> Any:
        return super()._get_paginator() if self.method == "GET" else None


class EntryList(MemoryAPIView, generics.ListAPIView):
    serializer_class = s.EntrySerializer
    pagination_class = Pagination
    schema = ListReadsOnly()

    def get_queryset(self) -> QuerySet[MemoryEntry]:
        entries = MemoryEntry.objects.filter(thread=self.thread())
        if not query_flag(self.request, "include_covered"):
            entries = entries.visible()
        return entries.order_by("position", "id")

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "include_covered", bool, description="Also list entries hidden by a summary."
            )
        ]
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self.list(request, *args, **kwargs)

    @property
    def throttle_scope(self) -> str | None:
        return "append" if self.request.method == "POST" else None

    @extend_schema(
        request=s.MessageSerializer,
        responses={201: s.EntrySerializer(many=True)},
        description="Append one message, or a batch as {\"entries\": [...]}. A batch with "
        "one bad entry writes nothing.",
    )
    def post(self, request: Request, thread_id: int) -> Response:
        thread = self.thread()
        data: Any = request.data
        is_batch = isinstance(data, dict) and "entries" in data
        # OpenAI shapes are made flat first (agentmemory.shapes, the rule Python append
        # follows too); the serializer then checks the flat form's types and limits.
        try:
            if not is_batch:
                data = flat_message(data, 0)
            elif isinstance(data["entries"], list):
                batch = data["entries"]
                data = {**data, "entries": [flat_message(m, i) for i, m in enumerate(batch)]}
        except InvalidMessageError as exc:
            raise message_error(exc, batch=len(data["entries"]) if is_batch else None) from exc
        serializer = (s.BatchSerializer if is_batch else s.MessageSerializer)(data=data)
        serializer.is_valid(raise_exception=True)
        messages = serializer.validated_data["entries"] if is_batch else serializer.validated_data
        try:
            entries = services.append(thread, messages)
        except InvalidMessageError as exc:
            raise message_error(exc, batch=len(messages) if is_batch else None) from exc
        return Response(s.EntrySerializer(entries, many=True).data, status=status.HTTP_201_CREATED)


class EntryDetail(MemoryAPIView):
    def entry(self) -> MemoryEntry:
        return get_object_or_404(
            MemoryEntry.objects.select_related("coverage"),
            pk=self.kwargs["entry_id"],
            thread=self.thread(),
        )

    @extend_schema(responses=s.EntrySerializer)
    def get(self, request: Request, thread_id: int, entry_id: int) -> Response:
        return Response(s.EntrySerializer(self.entry()).data)

    @extend_schema(responses={204: None}, description="Erase the entry and every summary "
                   "derived from it; the surviving originals are recalled verbatim again.")
    def delete(self, request: Request, thread_id: int, entry_id: int) -> Response:
        services.erase_entry(self.entry())
        return Response(status=status.HTTP_204_NO_CONTENT)


# ---------------------------------------------------------------- recall and fold


class _NoURLFormatOverride:
    """DRF's settings, without the URL format override."""

    URL_FORMAT_OVERRIDE = None

    def __getattr__(self, name: str) -> Any:
        return getattr(api_settings, name)


class ContextFormatNegotiation(DefaultContentNegotiation):
    """Content negotiation that leaves ``?format=`` to the view: recall's ``format``
    names the shape of the context, not a renderer."""

    settings = _NoURLFormatOverride()  # type: ignore[assignment]


#: ``?format=`` of a recall -> the response field and the RecallResult method that fill it.
CONTEXT_FORMATS = {
    "chat": ("chat_messages", "as_chat_messages"),
    "responses": ("response_input", "as_response_input"),
}


class Recall(MemoryAPIView):
    throttle_scope = "recall"
    content_negotiation_class = ContextFormatNegotiation

    @extend_schema(
        request=s.RecallRequestSerializer,
        responses=s.RecallResponseSerializer,
        parameters=[OpenApiParameter(
            "format", str, enum=sorted(CONTEXT_FORMATS), required=False,
            description="Also return the context ready to send to OpenAI: `chat` adds "
            "`chat_messages` (Chat Completions messages), `responses` adds "
            "`response_input` (Responses API input items). A summary is a leading "
            "`system` message.",
        )],
    )
    def post(self, request: Request, thread_id: int) -> Response:
        thread = self.thread()
        shape = request.query_params.get("format")
        if shape is not None and shape not in CONTEXT_FORMATS:
            raise ValidationError({"format": [
                f"format must be one of {', '.join(sorted(CONTEXT_FORMATS))}, got {shape!r}."
            ]})
        serializer = s.RecallRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        options = dict(serializer.validated_data)
        budget = options.pop("budget_tokens")
        if "decay" in options:
            decay = options["decay"]
            options["decay"] = {"HALF_LIFE": decay["half_life_seconds"],
                                "MIN_SCORE": decay["min_score"]}
        try:
            result = services.recall(thread, budget, **options)
        except ConflictingRecallOption as exc:
            raise Conflict({exc.field: [str(exc)]}) from exc
        except InvalidRecallOption as exc:
            raise ValidationError({exc.field: [str(exc)]}) from exc
        data = s.RecallResponseSerializer(result).data
        if shape is not None:
            field, method = CONTEXT_FORMATS[shape]
            data[field] = getattr(result, method)()
        return Response(data)


class Fold(MemoryAPIView):
    throttle_scope = "fold"

    @extend_schema(
        request=s.FoldRequestSerializer,
        responses={200: s.FoldResponseSerializer, 202: s.FoldResponseSerializer,
                   409: s.FoldResponseSerializer, 503: s.FoldResponseSerializer},
        description="Background mode: 202 with the task id and state `queued`, or with "
        "no new task and the state of the one queued or folding (`already-queued`, "
        "`folding`); 409 when the thread's fold is parked after dying FOLD_MAX_DEATHS "
        "times; 503 when the broker could not be reached. Inline: 200 with the result.",
    )
    def post(self, request: Request, thread_id: int) -> Response:
        thread = self.thread()
        serializer = s.FoldRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        mode = serializer.validated_data.get("mode", memory_settings.RECALL_MODE)
        if mode == "background":
            return self.background(thread)
        outcome = services.fold(
            thread, budget_tokens=serializer.validated_data.get("budget_tokens")
        )
        return Response({
            "mode": mode,
            "folded": outcome.folded,
            "summary_id": outcome.summary.pk if outcome.summary else None,
            "decline": outcome.decline,
        })

    def background(self, thread: Thread) -> Response:
        asked = services.request_fold(thread.pk)
        body: dict[str, Any] = {"mode": "background", "task_id": asked.task_id,
                                "state": asked.state.value}  # fmt: skip
        if asked.state == services.FoldState.BROKER_DOWN:
            body["detail"] = ("No fold could be queued: the task broker did not answer. "
                              "Nothing was lost; the periodic sweep queues it, or retry "
                              "later.")  # fmt: skip
            return Response(body, status=status.HTTP_503_SERVICE_UNAVAILABLE,
                            headers={"Retry-After": str(int(services.BROKER_BACKOFF_SECONDS))})
        if asked.state == services.FoldState.PARKED:
            body["detail"] = (f"This thread's fold died AGENTMEMORY['FOLD_MAX_DEATHS'] times "
                              f"and is parked until {asked.parked_until}; the sweep retries "
                              "it then, or staff unpark it in the admin.")  # fmt: skip
            return Response(body, status=status.HTTP_409_CONFLICT)
        return Response(body, status=status.HTTP_202_ACCEPTED)


# ---------------------------------------------------------------- summaries


def thread_summaries(thread: Thread) -> MemoryEntryQuerySet:
    """Every summary of the thread, retired versions included (they stay readable)."""
    return (
        MemoryEntry.objects.filter(thread=thread).summaries()
        .select_related("coverage")
        .order_by("position", "id")
    )


class SummaryList(MemoryAPIView, generics.ListAPIView):
    serializer_class = s.SummarySerializer
    pagination_class = Pagination

    def get_queryset(self) -> QuerySet[MemoryEntry]:
        summaries = thread_summaries(self.thread())
        if not query_flag(self.request, "include_retired"):
            summaries = summaries.unretired()
        return summaries

    @extend_schema(
        parameters=[OpenApiParameter(
            "include_retired", bool, description="Also list unfolded, regenerated and "
            "tampered summaries."
        )]
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self.list(request, *args, **kwargs)


class SummaryDetail(MemoryAPIView):
    @extend_schema(responses=s.SummarySerializer)
    def get(self, request: Request, thread_id: int, summary_id: int) -> Response:
        summary = get_object_or_404(thread_summaries(self.thread()), pk=summary_id)
        return Response(s.SummarySerializer(summary).data)

    @extend_schema(responses={204: None}, description="Unfold: retire the summary (and any "
                   "summary built on it). It stays readable here and in receipts, covers "
                   "nothing, and the next recall is verbatim.")
    def delete(self, request: Request, thread_id: int, summary_id: int) -> Response:
        summary = get_object_or_404(thread_summaries(self.thread()), pk=summary_id)
        services.unfold(summary)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SummaryOriginals(MemoryAPIView):
    @extend_schema(
        parameters=[OpenApiParameter("recursive", bool, description="Expand nested summaries.")],
        responses=s.OriginalsResponseSerializer,
    )
    def get(self, request: Request, thread_id: int, summary_id: int) -> Response:
        thread = expandable_thread(request, thread_id)
        summary = get_object_or_404(thread_summaries(thread), pk=summary_id)
        recursive = query_flag(request, "recursive")
        originals = services.expand(summary, recursive=recursive)
        return Response({
            "summary": s.SummarySerializer(summary).data,
            "recursive": recursive,
            "originals": s.SummarySerializer(originals, many=True).data,
        })


# ---------------------------------------------------------------- window


class Compact(MemoryAPIView):
    @extend_schema(request=s.CompactRequestSerializer, responses=s.CompactResponseSerializer)
    def post(self, request: Request, thread_id: int) -> Response:
        thread = self.thread()
        serializer = s.CompactRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            with transaction.atomic():
                result = services.compact(
                    thread,
                    data["messages"],
                    budget_tokens=data.get("budget_tokens"),
                    iteration=data["iteration"],
                    retain=data.get("retain"),
                )
        except InvalidMessageError as exc:
            raise message_error(exc, batch=len(data["messages"]), key="messages") from exc
        except ValueError as exc:  # a seam that cannot select without a budget
            raise ValidationError({"budget_tokens": [str(exc)]}) from exc
        return Response({
            "window": result.window,
            "span": s.FoldedSpanSerializer(result.span).data if result.span else None,
            "refusal": result.refusal,
            "reused": result.reused,
        })


class FoldList(MemoryAPIView, generics.ListAPIView):
    serializer_class = s.FoldedSpanSerializer
    pagination_class = Pagination

    def get_queryset(self) -> QuerySet[FoldedSpan]:
        return (
            FoldedSpan.objects.filter(thread=self.thread())
            .prefetch_related("nested_spans")
            .order_by("created_at", "id")
        )


class FoldLookup(MemoryAPIView):
    @extend_schema(
        request=s.LookupRequestSerializer,
        responses=s.LookupResponseSerializer,
        description="The span this thread recorded for a summary message, joined by a hash "
        "of its whole content; span null: no fold of this thread was recorded for it (or "
        "several folds made before frames carried their reference share it).",
    )
    def post(self, request: Request, thread_id: int) -> Response:
        thread = self.thread()
        serializer = s.LookupRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:  # the same rules as a message appended, so the schema is one MessageRequest
            message = clean_message(serializer.validated_data["message"], 0)
        except InvalidMessageError as exc:
            raise ValidationError({"message": {exc.field: [str(exc)]}}) from exc
        span = services.folded_span_for(thread, message)
        return Response({"span": s.FoldedSpanSerializer(span).data if span else None})


# ---------------------------------------------------------------- usage


class Usage(MemoryAPIView, generics.ListAPIView):
    serializer_class = s.SummarizerCallSerializer
    pagination_class = Pagination

    def get_queryset(self) -> SummarizerCallQuerySet:
        return SummarizerCall.objects.filter(thread=self.thread()).order_by("-created_at", "-id")

    @extend_schema(description="The thread's ledger rows, newest first, with its totals "
                   "(calls, tokens, calls by outcome) under 'totals'.")
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response = self.list(request, *args, **kwargs)
        response.data["totals"] = usage_totals(self.get_queryset())
        return response


def usage_totals(calls: SummarizerCallQuerySet) -> dict[str, Any]:
    """Calls and tokens of a ledger selection, in one query."""
    return calls.totals()


# ---------------------------------------------------------------- receipts and savings


class ReceiptList(MemoryAPIView, generics.ListAPIView):
    serializer_class = s.ReceiptSerializer
    pagination_class = Pagination

    def get_queryset(self) -> QuerySet[RecallReceipt]:
        receipts = RecallReceipt.objects.filter(thread=self.thread()).prefetch_related("items")
        turn = query_int(self.request, "turn", minimum=0, maximum=s.MAX_INT)
        if turn is not None:
            receipts = receipts.filter(turn=turn)
        return receipts.order_by("-created_at", "-id")

    @extend_schema(
        parameters=[OpenApiParameter(
            "turn", int, description="Only the recalls made at this turn: what the model "
            "saw at turn N."
        )]
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self.list(request, *args, **kwargs)


class ReceiptDetail(MemoryAPIView):
    @extend_schema(
        responses=s.ReceiptContextSerializer,
        description="The receipt and the context exactly as that recall sent it, rebuilt "
        "from the rows it names.",
    )
    def get(self, request: Request, thread_id: int, receipt_id: int) -> Response:
        receipt = get_object_or_404(
            RecallReceipt.objects.prefetch_related("items"), pk=receipt_id, thread=self.thread()
        )
        context = replay(receipt)
        return Response({
            "receipt": s.ReceiptSerializer(receipt).data,
            "messages": s.EntrySerializer(context.entries, many=True).data,
            "text": context.text,
        })


class ThreadSavings(MemoryAPIView):
    @extend_schema(responses=s.SavingsSerializer, description="Tokens spent summarizing "
                   "this thread against tokens its summaries saved in recorded recalls.")
    def get(self, request: Request, thread_id: int) -> Response:
        return Response(savings(thread=self.thread()))


class OwnerSavings(MemoryAPIView):
    @extend_schema(responses=s.SavingsSerializer, description="The same totals over all "
                   "of the requesting user's threads.")
    def get(self, request: Request) -> Response:
        return Response(savings(owner=request.user))


# ---------------------------------------------------------------- search


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
    return Response({"results": s.SearchHitSerializer(hits, many=True).data})


class ThreadSearch(MemoryAPIView):
    @extend_schema(parameters=SEARCH_PARAMETERS, responses=s.SearchResultsSerializer,
                   description=f"Search this thread. {SEARCH_DESCRIPTION}")
    def get(self, request: Request, thread_id: int) -> Response:
        return search_response(request, self.thread())


class OwnerSearch(MemoryAPIView):
    @extend_schema(parameters=SEARCH_PARAMETERS, responses=s.SearchResultsSerializer,
                   description=f"Search all of the requesting user's threads. "
                   f"{SEARCH_DESCRIPTION}")
    def get(self, request: Request) -> Response:
        return search_response(request, authenticated_user(request))


# ---------------------------------------------------------------- unknown paths


@extend_schema(exclude=True)
class UnknownPath(MemoryAPIView):
    """Any other path under the API's prefix (an id that is not a number, a missing
    slash) answers the API's JSON 404, not the site's HTML page."""

    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        raise Http404("No such path in this API.")

    post = put = patch = delete = get


# ---------------------------------------------------------------- schema


class MemorySchemaView(SpectacularAPIView):
    """The OpenAPI 3 schema of these endpoints alone, under whatever prefix they are mounted.

    Needs ``REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"] =
    "drf_spectacular.openapi.AutoSchema"`` (checked by agentmemory.W002).
    """

    custom_settings = {
        "TITLE": "agentmemory API",
        "DESCRIPTION": "Durable, explainable conversation memory for LLM agents.",
        "VERSION": __import__("agentmemory").__version__,
        "COMPONENT_SPLIT_REQUEST": True,
        "ENUM_NAME_OVERRIDES": {
            "TierEnum": "agentmemory.models.Tier",
            "RetainPolicyEnum": "agentmemory.models.RetainPolicy",
            "RoleEnum": "agentmemory.models.Role",
        },
        "POSTPROCESSING_HOOKS": [
            "drf_spectacular.hooks.postprocess_schema_enums",
            "agentmemory.api.schema.postprocess",
        ],
    }

    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        prefix = request.path.lstrip("/").removesuffix("schema/")
        self.patterns = [path(prefix, include("agentmemory.api.urls"))]
        return super().get(request, *args, **kwargs)
