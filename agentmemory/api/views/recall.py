"""Recall a thread's context (with ``?format=`` for OpenAI's shapes), and fold it."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from agentmemory import services
from agentmemory.api.errors import Conflict
from agentmemory.api.serializers.recall import (
    FoldRequestSerializer,
    FoldResponseSerializer,
    RecallRequestSerializer,
    RecallResponseSerializer,
)
from agentmemory.api.views.base import ContextFormatNegotiation, MemoryAPIView
from agentmemory.conf import memory_settings
from agentmemory.models import Thread
from agentmemory.pipeline.config import ConflictingRecallOption, InvalidRecallOption

#: ``?format=`` of a recall -> the response field and the RecallResult method that fill it.
CONTEXT_FORMATS = {
    "chat": ("chat_messages", "as_chat_messages"),
    "responses": ("response_input", "as_response_input"),
}


class Recall(MemoryAPIView):
    throttle_scope = "recall"
    content_negotiation_class = ContextFormatNegotiation

    @extend_schema(
        request=RecallRequestSerializer,
        responses=RecallResponseSerializer,
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
        serializer = RecallRequestSerializer(data=request.data)
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
        data = RecallResponseSerializer(result).data
        if shape is not None:
            field, method = CONTEXT_FORMATS[shape]
            data[field] = getattr(result, method)()
        return Response(data)


class Fold(MemoryAPIView):
    throttle_scope = "fold"

    @extend_schema(
        request=FoldRequestSerializer,
        responses={200: FoldResponseSerializer, 202: FoldResponseSerializer,
                   409: FoldResponseSerializer, 503: FoldResponseSerializer},
        description="Background mode: 202 with the task id and state `queued`, or with "
        "no new task and the state of the one queued or folding (`already-queued`, "
        "`folding`); 409 when the thread's fold is parked after dying FOLD_MAX_DEATHS "
        "times; 503 when the broker could not be reached. Inline: 200 with the result.",
    )
    def post(self, request: Request, thread_id: int) -> Response:
        thread = self.thread()
        serializer = FoldRequestSerializer(data=request.data)
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
