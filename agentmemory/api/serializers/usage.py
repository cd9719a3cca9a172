"""The summarizer ledger, recall receipts and the savings they add up to."""

from __future__ import annotations

from rest_framework import serializers

from agentmemory.api.serializers.entries import EntrySerializer
from agentmemory.models import EntryKind, RecallReceipt, SummarizerCall


class SummarizerCallSerializer(serializers.ModelSerializer):
    class Meta:
        model = SummarizerCall
        fields = [
            "id", "purpose", "backend", "model", "outcome", "error_class", "error_message",
            "attempt", "entry_count", "estimated_tokens", "prompt_tokens", "completion_tokens",
            "cached_tokens", "duration_ms", "summary", "created_at",
        ]
        read_only_fields = fields


class UsageTotalsSerializer(serializers.Serializer):
    calls = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    cached_tokens = serializers.IntegerField()
    by_outcome = serializers.DictField(child=serializers.IntegerField())


class ReceiptItemSerializer(serializers.Serializer):
    """One entry the context showed: its place, its kind and its token count then."""

    order = serializers.IntegerField(read_only=True, min_value=0)
    entry_id = serializers.IntegerField(read_only=True)
    kind = serializers.ChoiceField(choices=EntryKind.choices, read_only=True)
    tokens = serializers.IntegerField(read_only=True, min_value=0)


class ReceiptSerializer(serializers.ModelSerializer):
    items = ReceiptItemSerializer(many=True, read_only=True)
    folded_summary_id = serializers.IntegerField(read_only=True, allow_null=True)

    class Meta:
        model = RecallReceipt
        fields = [
            "id", "turn", "budget_tokens", "tokens", "decline", "budget_decline",
            "omitted", "omitted_reason", "folded_summary_id", "config", "created_at",
            "expires_at", "items",
        ]
        read_only_fields = fields


class ReceiptContextSerializer(serializers.Serializer):
    receipt = ReceiptSerializer()
    messages = EntrySerializer(many=True)
    text = serializers.CharField()


class SavingsSerializer(serializers.Serializer):
    spent_tokens = serializers.IntegerField()
    saved_tokens = serializers.IntegerField()
    summary_loads = serializers.IntegerField()
    net_tokens = serializers.IntegerField()
    ratio = serializers.FloatField(allow_null=True)
