"""A window to compact and its folded span; the lookup of a span by its summary."""

from __future__ import annotations

from rest_framework import serializers

from agentmemory.api.serializers.base import MAX_BUDGET, MAX_INT, StrictSerializer
from agentmemory.api.serializers.entries import MessageSerializer
from agentmemory.conf import memory_settings
from agentmemory.models import FoldedSpan, RetainPolicy


class FoldedSpanSerializer(serializers.ModelSerializer):
    nested_spans = serializers.PrimaryKeyRelatedField[FoldedSpan](many=True, read_only=True)

    class Meta:
        model = FoldedSpan
        fields = [
            "id", "fingerprint", "span_fingerprint", "content", "message_count", "iteration",
            "model", "prompt_tokens", "completion_tokens", "retain", "messages",
            "nested_spans", "created_at", "expires_at",
        ]
        read_only_fields = fields


class CompactRequestSerializer(StrictSerializer):
    messages = MessageSerializer(many=True, allow_empty=False)
    budget_tokens = serializers.IntegerField(required=False, min_value=1, max_value=MAX_BUDGET)
    iteration = serializers.IntegerField(required=False, min_value=0, max_value=MAX_INT, default=0)
    retain = serializers.ChoiceField(choices=RetainPolicy.choices, required=False)

    def count_limits(self) -> dict[str, tuple[str, int, str]]:
        return {
            "messages": ("API_MAX_WINDOW", memory_settings.API_MAX_WINDOW, "messages per window")
        }


class CompactResponseSerializer(serializers.Serializer):
    window = serializers.ListField(child=serializers.DictField())
    span = FoldedSpanSerializer(allow_null=True)
    refusal = serializers.CharField(allow_null=True)
    reused = serializers.BooleanField()


class LookupRequestSerializer(StrictSerializer):
    message = MessageSerializer()


class LookupResponseSerializer(serializers.Serializer):
    span = FoldedSpanSerializer(allow_null=True)
