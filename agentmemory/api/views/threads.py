"""Threads: list and create, read, update and erase."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response

from agentmemory import services
from agentmemory.api.errors import Conflict
from agentmemory.api.permissions import authenticated_user
from agentmemory.api.serializers.threads import ThreadSerializer
from agentmemory.api.views.base import MemoryAPIView, Pagination
from agentmemory.models import Thread


class ThreadList(MemoryAPIView, generics.ListCreateAPIView):
    serializer_class = ThreadSerializer
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
    serializer_class = ThreadSerializer
    lookup_url_kwarg = "thread_id"

    def perform_update(self, serializer: Any) -> None:
        save_thread(serializer)

    def get_queryset(self) -> QuerySet[Thread]:
        return Thread.objects.owned_by(authenticated_user(self.request))

    @extend_schema(description="Erase the thread: entries, summaries, spans and latches.")
    def delete(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        services.erase_thread(self.thread())
        return Response(status=status.HTTP_204_NO_CONTENT)
