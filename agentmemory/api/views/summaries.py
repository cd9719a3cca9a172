"""Summaries of a thread: list, read, unfold, and expand into their originals."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response

from agentmemory import services
from agentmemory.api.errors import query_flag
from agentmemory.api.permissions import expandable_thread
from agentmemory.api.serializers.summaries import OriginalsResponseSerializer, SummarySerializer
from agentmemory.api.views.base import MemoryAPIView, Pagination
from agentmemory.models import MemoryEntry, Thread
from agentmemory.querysets import MemoryEntryQuerySet


def thread_summaries(thread: Thread) -> MemoryEntryQuerySet:
    """Every summary of the thread, retired versions included (they stay readable)."""
    return (
        MemoryEntry.objects.filter(thread=thread).summaries()
        .select_related("coverage")
        .order_by("position", "id")
    )


class SummaryList(MemoryAPIView, generics.ListAPIView):
    serializer_class = SummarySerializer
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
    @extend_schema(responses=SummarySerializer)
    def get(self, request: Request, thread_id: int, summary_id: int) -> Response:
        summary = get_object_or_404(thread_summaries(self.thread()), pk=summary_id)
        return Response(SummarySerializer(summary).data)

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
        responses=OriginalsResponseSerializer,
    )
    def get(self, request: Request, thread_id: int, summary_id: int) -> Response:
        thread = expandable_thread(request, thread_id)
        summary = get_object_or_404(thread_summaries(thread), pk=summary_id)
        recursive = query_flag(request, "recursive")
        originals = services.expand(summary, recursive=recursive)
        return Response({
            "summary": SummarySerializer(summary).data,
            "recursive": recursive,
            "originals": SummarySerializer(originals, many=True).data,
        })
