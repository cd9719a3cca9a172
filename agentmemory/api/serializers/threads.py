"""A thread as the API reads and writes it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from rest_framework import serializers

from agentmemory.api.errors import Conflict
from agentmemory.api.serializers.base import (
    MAX_BUDGET,
    MAX_INT,
    StrictModelSerializer,
    storable_json,
)
from agentmemory.models import Thread


class SecondsField(serializers.IntegerField):
    """A duration as whole seconds on the wire; validated as an integer first."""

    def run_validation(self, data: Any = serializers.empty) -> Any:
        value = super().run_validation(data)
        return None if value is None else timedelta(seconds=value)

    def to_representation(self, value: timedelta | int) -> int:
        return int(value.total_seconds()) if isinstance(value, timedelta) else value


class ThreadSerializer(StrictModelSerializer):
    ttl_seconds = SecondsField(
        source="ttl", required=False, allow_null=True, min_value=1, max_value=MAX_INT,
        help_text="How long written entries live, in seconds; null: the project default.",
    )

    class Meta:
        model = Thread
        fields = [
            "id", "client_key", "title", "metadata", "ttl_seconds", "write_tier",
            "window_retain", "fold_budget", "last_turn", "created_at", "updated_at",
        ]
        read_only_fields = ["id", "last_turn", "created_at", "updated_at"]
        extra_kwargs = {"fold_budget": {"min_value": 200, "max_value": MAX_BUDGET}}
        # The owner-scoped uniqueness is checked in validate_client_key.
        validators: list[Any] = []

    def validate_metadata(self, value: Any) -> Any:
        if not isinstance(value, dict):
            raise serializers.ValidationError("Must be an object.")
        return storable_json(value)

    def validate_client_key(self, value: str) -> str:
        owner = self.context["request"].user
        clash = Thread.objects.filter(owner=owner, client_key=value).exclude(client_key="")
        if self.instance is not None:
            clash = clash.exclude(pk=self.instance.pk)
        if value and clash.exists():
            raise Conflict({"client_key": ["You already have a thread with this client_key."]})
        return value
