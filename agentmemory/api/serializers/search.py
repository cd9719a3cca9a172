"""A search hit and the answer that lists them."""

from __future__ import annotations

from rest_framework import serializers

from agentmemory.api.serializers.base import SharedFields
from agentmemory.models import Role


class SearchHitSerializer(SharedFields, serializers.Serializer):
    entry_id = serializers.IntegerField(help_text="The original message that matched.")
    thread_id = serializers.IntegerField()
    turn = serializers.IntegerField()
    position = serializers.IntegerField()
    role = serializers.ChoiceField(choices=Role.choices)
    snippet = serializers.CharField(
        help_text="The matched words in their context, each marked `**like this**`; … where "
        "text was left out."
    )
    score = serializers.FloatField(help_text="Higher is a better match; compare within one "
                                   "answer only.")
    covered_by = serializers.IntegerField(
        source="covered_by_id", allow_null=True,
        help_text="The summary that stands for this original now; null: it is recalled "
        "verbatim.",
    )
    covered_by_handle = serializers.CharField(
        allow_null=True,
        help_text="That summary's handle: the turns its label names (its key without the "
        "msg-summary- prefix).",
    )


class SearchResultsSerializer(serializers.Serializer):
    results = SearchHitSerializer(many=True)
