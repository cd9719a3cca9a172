"""A message to append (alone or in a batch) and a stored entry as the API shows it."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from agentmemory.api.serializers.base import (
    MAX_TURN,
    CheckedCharField,
    ColumnReads,
    SharedFields,
    StrictSerializer,
    storable_json,
)
from agentmemory.conf import memory_settings
from agentmemory.models import MemoryEntry, Role, Tier

# A tool call's arguments when none are sent: OpenAI's own default, an empty string.
_NO_ARGUMENTS: Any = ""


class ToolCallSerializer(SharedFields, StrictSerializer):
    id = CheckedCharField(max_length=200)
    name = CheckedCharField(max_length=200)
    # Any JSON value may come (OpenAI sends a string); typed Any, as some stubs allow only
    # an object default.
    arguments = serializers.JSONField(
        required=False, default=_NO_ARGUMENTS, validators=[storable_json]
    )


class MessageSerializer(SharedFields, StrictSerializer):
    """One message to append (or one message of a window to compact)."""

    role = serializers.ChoiceField(choices=Role.choices)
    content = CheckedCharField(allow_blank=True, trim_whitespace=False, default="")
    tool_calls = ToolCallSerializer(many=True, required=False)
    tool_name = CheckedCharField(max_length=200, required=False, allow_blank=True)
    tool_call_id = CheckedCharField(max_length=200, required=False, allow_blank=True)
    turn = serializers.IntegerField(required=False, min_value=1, max_value=MAX_TURN)
    tier = serializers.ChoiceField(choices=Tier.choices, required=False)
    metadata = serializers.DictField(required=False, validators=[storable_json])

    def validate_content(self, value: str) -> str:
        limit = memory_settings.API_MAX_CONTENT_CHARS
        if len(value) > limit:
            raise serializers.ValidationError(
                f"At most {limit} characters (AGENTMEMORY['API_MAX_CONTENT_CHARS'])."
            )
        return value


class BatchSerializer(SharedFields, StrictSerializer):
    entries = MessageSerializer(many=True, allow_empty=False)

    def count_limits(self) -> dict[str, tuple[str, int, str]]:
        return {"entries": ("API_MAX_BATCH", memory_settings.API_MAX_BATCH, "entries per batch")}


class EntrySerializer(ColumnReads, serializers.ModelSerializer):
    class Meta:
        model = MemoryEntry
        fields = [
            "id", "kind", "role", "content", "tool_calls", "tool_name", "tool_call_id",
            "turn", "position", "tier", "token_count", "created_at", "expires_at",
            "metadata", "summary_key", "covered_by",
        ]
        read_only_fields = fields
