"""A recall's options and its context; a fold's request and its outcome."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from agentmemory.api.serializers.base import MAX_BUDGET, SharedFields, StrictSerializer
from agentmemory.models import Tier
from agentmemory.pipeline.load import OMITTED_COUNT_LIMIT
from agentmemory.services import FoldState


class DecaySerializer(SharedFields, StrictSerializer):
    half_life_seconds = serializers.FloatField(min_value=0.001, max_value=1e10)
    min_score = serializers.FloatField(min_value=0, max_value=1, default=0.1)


class RecallRequestSerializer(SharedFields, StrictSerializer):
    budget_tokens = serializers.IntegerField(min_value=1, max_value=MAX_BUDGET)
    mode = serializers.ChoiceField(choices=["inline", "background"], required=False)
    load_count = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=1000,
        help_text="null (the default): every visible entry the room holds; a number: the "
        "newest N (the count-driven mode).",
    )
    tiers = serializers.ListField(
        child=serializers.ChoiceField(choices=Tier.choices), required=False, allow_empty=False,
        max_length=3,
    )
    trigger_min_entries = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=1000
    )
    high_water = serializers.FloatField(
        required=False, allow_null=True, min_value=0.01, max_value=1.0
    )
    trigger_min_tokens = serializers.IntegerField(
        required=False, min_value=0, max_value=MAX_BUDGET
    )
    low_water = serializers.FloatField(required=False, min_value=0.01, max_value=0.99)
    summary_share = serializers.FloatField(required=False, min_value=0.01, max_value=0.99)
    input_limit = serializers.IntegerField(required=False, min_value=100, max_value=MAX_BUDGET)
    preserve_recent = serializers.IntegerField(required=False, min_value=1, max_value=1000)
    min_fold_entries = serializers.IntegerField(required=False, min_value=1, max_value=1000)
    reserve_tokens = serializers.IntegerField(required=False, min_value=0, max_value=MAX_BUDGET)
    minimum_tokens = serializers.IntegerField(required=False, min_value=0, max_value=MAX_BUDGET)
    max_entries = serializers.IntegerField(required=False, min_value=1, max_value=1000)
    header = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    footer = serializers.CharField(required=False, allow_blank=True, max_length=2000)
    decay = DecaySerializer(required=False)


class RecalledMessageSerializer(SharedFields, serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    role = serializers.CharField()
    content = serializers.CharField()
    turn = serializers.IntegerField()
    tokens = serializers.IntegerField()
    tool_calls = serializers.ListField(child=serializers.DictField())
    tool_name = serializers.CharField()
    tool_call_id = serializers.CharField()

    def to_representation(self, instance: Any) -> dict[str, Any]:
        """A `RecalledMessage` as the fields above show it, built directly: its values
        already have the fields' types, and DRF's field-by-field pass cost a recall of
        164 messages about 3 ms. tests/test_api_recall_shape.py holds this to that pass
        over random messages."""
        return {
            "id": instance.id, "kind": instance.kind, "role": instance.role,
            "content": instance.content, "turn": instance.turn, "tokens": instance.tokens,
            "tool_calls": [{str(key): value for key, value in call.items()}
                           for call in instance.tool_calls],
            "tool_name": instance.tool_name, "tool_call_id": instance.tool_call_id,
        }


class RecallResponseSerializer(SharedFields, serializers.Serializer):
    messages = RecalledMessageSerializer(many=True)
    text = serializers.CharField()
    tokens = serializers.IntegerField()
    summaries_used = serializers.ListField(child=serializers.IntegerField())
    decline = serializers.CharField(allow_null=True)
    budget_decline = serializers.CharField(allow_null=True)
    folded_summary_id = serializers.IntegerField(allow_null=True)
    loaded_count = serializers.IntegerField()
    receipt_id = serializers.IntegerField(allow_null=True)
    omitted = serializers.IntegerField(
        help_text=f"Visible entries of the thread the context left out, counted up to "
        f"{OMITTED_COUNT_LIMIT} (a longer backlog reports {OMITTED_COUNT_LIMIT}); 0 when "
        "every earlier message is in it verbatim or stood for by a summary in it."
    )
    omitted_reason = serializers.CharField(
        allow_null=True,
        help_text="Why they were left out: over-budget, max-entries, decayed, "
        "unpaired-tool-message, newest-turn-too-large or below-minimum-tokens.",
    )
    chat_messages = serializers.ListField(
        child=serializers.DictField(), required=False,
        help_text="With ?format=chat: the context as Chat Completions messages.",
    )
    response_input = serializers.ListField(
        child=serializers.DictField(), required=False,
        help_text="With ?format=responses: the context as Responses API input items.",
    )


class FoldRequestSerializer(StrictSerializer):
    mode = serializers.ChoiceField(choices=["inline", "background"], required=False)
    budget_tokens = serializers.IntegerField(
        required=False, min_value=1, max_value=MAX_BUDGET,
        help_text="Inline: fold until the context fits this budget; default: the thread's "
        "fold budget.",
    )


class FoldResponseSerializer(serializers.Serializer):
    mode = serializers.CharField()
    task_id = serializers.CharField(allow_null=True, required=False)
    state = serializers.ChoiceField(choices=FoldState.choices, required=False)
    detail = serializers.CharField(required=False)
    folded = serializers.BooleanField(required=False)
    summary_id = serializers.IntegerField(allow_null=True, required=False)
    decline = serializers.CharField(allow_null=True, required=False)
