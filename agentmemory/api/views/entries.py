"""Entries of a thread: list, append (one message or a batch), read and erase."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response

from agentmemory import services
from agentmemory.api.errors import query_flag
from agentmemory.api.serializers.entries import BatchSerializer, EntrySerializer, MessageSerializer
from agentmemory.api.views.base import MemoryAPIView, Pagination, message_error
from agentmemory.exceptions import InvalidMessageError
from agentmemory.models import MemoryEntry
from agentmemory.shapes import flat_message


class ListReadsOnly(AutoSchema):
    """Only GET pages: an append answers a plain list, and takes no page parameters."""

    def _get_paginator(self) -> Any:
        return super()._get_paginator() if self.method == "GET" else None


class EntryList(MemoryAPIView, generics.ListAPIView):
    serializer_class = EntrySerializer
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
        request=MessageSerializer,
        responses={201: EntrySerializer(many=True)},
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
        serializer = (BatchSerializer if is_batch else MessageSerializer)(data=data)
        serializer.is_valid(raise_exception=True)
        messages = serializer.validated_data["entries"] if is_batch else serializer.validated_data
        try:
            entries = services.append(thread, messages)
        except InvalidMessageError as exc:
            raise message_error(exc, batch=len(messages) if is_batch else None) from exc
        return Response(EntrySerializer(entries, many=True).data, status=status.HTTP_201_CREATED)


class EntryDetail(MemoryAPIView):
    def entry(self) -> MemoryEntry:
        return get_object_or_404(
            MemoryEntry.objects.select_related("coverage"),
            pk=self.kwargs["entry_id"],
            thread=self.thread(),
        )

    @extend_schema(responses=EntrySerializer)
    def get(self, request: Request, thread_id: int, entry_id: int) -> Response:
        return Response(EntrySerializer(self.entry()).data)

    @extend_schema(responses={204: None}, description="Erase the entry and every summary "
                   "derived from it; the surviving originals are recalled verbatim again.")
    def delete(self, request: Request, thread_id: int, entry_id: int) -> Response:
        services.erase_entry(self.entry())
        return Response(status=status.HTTP_204_NO_CONTENT)
