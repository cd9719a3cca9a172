"""Compact a window (the folded span it records), list the spans, look one up by its
summary message."""

from __future__ import annotations

from django.db import transaction
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import generics
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from agentmemory import services
from agentmemory.api.serializers.spans import (
    CompactRequestSerializer,
    CompactResponseSerializer,
    FoldedSpanSerializer,
    LookupRequestSerializer,
    LookupResponseSerializer,
)
from agentmemory.api.views.base import MemoryAPIView, Pagination, message_error
from agentmemory.exceptions import InvalidMessageError
from agentmemory.messages import clean_message
from agentmemory.models import FoldedSpan


class Compact(MemoryAPIView):
    @extend_schema(request=CompactRequestSerializer, responses=CompactResponseSerializer)
    def post(self, request: Request, thread_id: int) -> Response:
        thread = self.thread()
        serializer = CompactRequestSerializer(data=request.data)
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
            "span": FoldedSpanSerializer(result.span).data if result.span else None,
            "refusal": result.refusal,
            "reused": result.reused,
        })


class FoldList(MemoryAPIView, generics.ListAPIView):
    serializer_class = FoldedSpanSerializer
    pagination_class = Pagination

    def get_queryset(self) -> QuerySet[FoldedSpan]:
        return (
            FoldedSpan.objects.filter(thread=self.thread())
            .prefetch_related("nested_spans")
            .order_by("created_at", "id")
        )


class FoldLookup(MemoryAPIView):
    @extend_schema(
        request=LookupRequestSerializer,
        responses=LookupResponseSerializer,
        description="The span this thread recorded for a summary message, joined by a hash "
        "of its whole content; span null: no fold of this thread was recorded for it (or "
        "several of its spans share that content).",
    )
    def post(self, request: Request, thread_id: int) -> Response:
        thread = self.thread()
        serializer = LookupRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:  # the same rules as a message appended, so the schema is one MessageRequest
            message = clean_message(serializer.validated_data["message"], 0)
        except InvalidMessageError as exc:
            raise ValidationError({"message": {exc.field: [str(exc)]}}) from exc
        span = services.folded_span_for(thread, message)
        return Response({"span": FoldedSpanSerializer(span).data if span else None})
