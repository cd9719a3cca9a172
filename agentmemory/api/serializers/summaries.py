"""A summary with its coverage, and a summary's originals."""

from __future__ import annotations

from rest_framework import serializers

from agentmemory.api.serializers.base import SharedFields
from agentmemory.api.serializers.entries import EntrySerializer
from agentmemory.models import SummaryCoverage


class CoverageSerializer(SharedFields, serializers.ModelSerializer):
    class Meta:
        model = SummaryCoverage
        fields = [
            "from_turn", "to_turn", "entry_count", "span_tokens", "original_tokens", "model",
            "summarized_at", "prompt_tokens", "completion_tokens", "version", "prompt_hash",
            "temperature", "seed", "library_version", "tampered_at", "fact_score",
            "missing_facts", "injection_flags", "reviewed_at", "level",
        ]


class SummarySerializer(EntrySerializer):
    # Null for a message (the originals list mixes messages and nested summaries).
    coverage = CoverageSerializer(read_only=True, allow_null=True)

    class Meta(EntrySerializer.Meta):
        fields = [*EntrySerializer.Meta.fields, "coverage"]
        read_only_fields = fields


class OriginalsResponseSerializer(serializers.Serializer):
    summary = SummarySerializer()
    recursive = serializers.BooleanField()
    originals = SummarySerializer(many=True)
