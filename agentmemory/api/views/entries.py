"""Entries of a thread: list, append (one message or a batch), read and erase."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import APIException
from rest_framework.request import Request
from rest_framework.response import Response

from agentmemory import services
from agentmemory.api.errors import query_flag
from agentmemory.api.permissions import authenticated_user
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
        try:
            entries = self._append(request, thread_id)
        except APIException:
            # Refused before the thread was known to be the requester's: a request to
            # another's thread is a 404 whatever its body (a 400 would confirm the id).
            self.thread()
            raise
        if entries is None:
            raise Http404(f"No thread {thread_id}.")
        return Response(EntrySerializer.represent(entries), status=status.HTTP_201_CREATED)

    def _append(self, request: Request, thread_id: int) -> list[MemoryEntry] | None:
        """The body checked, then appended to the requester's thread (None: not theirs).
        The owner's check is part of the append's own statement where it can be, one
        round trip (`services.append_owned`)."""
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
            return services.append_owned(authenticated_user(request), thread_id, messages)
        except InvalidMessageError as exc:
            raise message_error(exc, batch=len(messages) if is_batch else None) from exc


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
