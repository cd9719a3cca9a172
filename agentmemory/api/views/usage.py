"""What memory cost and saved: the summarizer ledger with its totals, the recall
receipts (each with the context it sent) and the savings of a thread or an owner."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response

from agentmemory.api.errors import query_int
from agentmemory.api.serializers.base import MAX_INT
from agentmemory.api.serializers.entries import EntrySerializer
from agentmemory.api.serializers.usage import (
    ReceiptContextSerializer,
    ReceiptSerializer,
    SavingsSerializer,
    SummarizerCallSerializer,
)
from agentmemory.api.views.base import MemoryAPIView, Pagination
from agentmemory.models import RecallReceipt, SummarizerCall
from agentmemory.querysets import SummarizerCallQuerySet
from agentmemory.trust.replay import replay
from agentmemory.trust.savings import savings


class Usage(MemoryAPIView, generics.ListAPIView):
    serializer_class = SummarizerCallSerializer
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


class ReceiptList(MemoryAPIView, generics.ListAPIView):
    serializer_class = ReceiptSerializer
    pagination_class = Pagination

    def get_queryset(self) -> QuerySet[RecallReceipt]:
        receipts = RecallReceipt.objects.filter(thread=self.thread())
        turn = query_int(self.request, "turn", minimum=0, maximum=MAX_INT)
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
        responses=ReceiptContextSerializer,
        description="The receipt and the context exactly as that recall sent it, rebuilt "
        "from the rows it names.",
    )
    def get(self, request: Request, thread_id: int, receipt_id: int) -> Response:
        receipt = get_object_or_404(
            RecallReceipt.objects, pk=receipt_id, thread=self.thread()
        )
        context = replay(receipt)
        return Response({
            "receipt": ReceiptSerializer(receipt).data,
            "messages": EntrySerializer(context.entries, many=True).data,
            "text": context.text,
        })


class ThreadSavings(MemoryAPIView):
    @extend_schema(responses=SavingsSerializer, description="Tokens spent summarizing "
                   "this thread against tokens its summaries saved in recorded recalls.")
    def get(self, request: Request, thread_id: int) -> Response:
        return Response(savings(thread=self.thread()))


class OwnerSavings(MemoryAPIView):
    @extend_schema(responses=SavingsSerializer, description="The same totals over all "
                   "of the requesting user's threads.")
    def get(self, request: Request) -> Response:
        return Response(savings(owner=request.user))
