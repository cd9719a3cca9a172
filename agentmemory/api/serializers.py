"""Request and response shapes. Validation here gives field-level 400s; the rules
that belong to the domain (roles, tool-call pairing) are the services' and are mapped
back to fields by the views."""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import Any

from rest_framework import serializers

from agentmemory.api.errors import Conflict
from agentmemory.conf import memory_settings
from agentmemory.models import (
    FoldedSpan,
    MemoryEntry,
    RecallReceipt,
    ReceiptItem,
    RetainPolicy,
    Role,
    SummarizerCall,
    SummaryCoverage,
    Thread,
    Tier,
)
from agentmemory.services import FoldState

MAX_INT = 2**31 - 1
MAX_BUDGET = 10_000_000
# Later messages count turns up from an explicit one: leave them room below MAX_INT.
MAX_TURN = 1_000_000_000
MAX_JSON_DEPTH = 64
SURROGATE = re.compile(r"[\ud800-\udfff]")


def storable_json(value: Any) -> Any:
    """Reject what a JSON column or the renderer cannot take: NUL (PostgreSQL), lone
    surrogates (UTF-8), non-finite numbers (strict JSON) and very deep nesting."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise serializers.ValidationError(f"Nested deeper than {MAX_JSON_DEPTH} levels.")
        if isinstance(item, dict):
            stack.extend((part, depth + 1) for pair in item.items() for part in pair)
        elif isinstance(item, list):
            stack.extend((part, depth + 1) for part in item)
        elif isinstance(item, str):
            if "\x00" in item:
                raise serializers.ValidationError("Null characters are not allowed.")
            if SURROGATE.search(item):
                raise serializers.ValidationError("Surrogate characters are not allowed.")
        elif isinstance(item, float) and not math.isfinite(item):
            raise serializers.ValidationError("Numbers must be finite.")
    return value


#: JSON types per field class, checked before DRF coerces: DRF reads "7" and 8.0 as the
#: integer 7 and 8, and 0 as the string "0"; the schema promises an integer or a string.
JSON_TYPES: list[tuple[type[serializers.Field], tuple[type, ...], str]] = [
    (serializers.BooleanField, (bool,), "a boolean"),
    (serializers.IntegerField, (int,), "an integer"),
    (serializers.FloatField, (int, float), "a number"),
    (serializers.CharField, (str,), "a string"),
    (serializers.ChoiceField, (str,), "a string"),
]


def type_errors(fields: Any, data: dict[str, Any]) -> dict[str, list[str]]:
    errors = {}
    for name, value in data.items():
        field = fields.get(name)
        if field is None or field.read_only or value is None:
            continue  # unknown fields are refused by name; null by the field itself
        for field_class, types, label in JSON_TYPES:
            if isinstance(field, field_class):
                wrong = isinstance(value, bool) and bool not in types
                if wrong or not isinstance(value, types):
                    errors[name] = [f"Must be {label}, not {type(value).__name__}."]
                break
    return errors


# A response serializer whose fields are built once per class, not per instance. DRF
# builds a serializer's fields on every instance, reading the model's fields each time;
# for a one-entry append that cost more than the data. These serializers only read (no
# field keeps per-request state or reads the context), so one set serves every instance;
# settings the fields read (date format, time zone) are still read per call. No
# docstring: drf-spectacular would describe every serializer below with it.
class SharedFields:
    _shared: Any = None

    @property
    def fields(self) -> Any:
        cls = type(self)
        shared = cls.__dict__.get("_shared")
        if shared is None:
            shared = super().fields  # type: ignore[misc]
            cls._shared = shared
        return shared


class StrictSerializer(serializers.Serializer):
    """Unknown fields are an error, not silently dropped; values are never coerced."""

    unknown_message = "Unknown field."

    def count_limits(self) -> dict[str, tuple[str, int, str]]:
        """List fields bounded by a setting: field -> (setting, limit, unit)."""
        return {}

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            # Counts first, before any item is validated: a 150,000-item body is refused
            # for the price of a len(), not of 150,000 item validations.
            for name, (setting, limit, unit) in self.count_limits().items():
                value = data.get(name)
                if isinstance(value, list) and len(value) > limit:
                    raise serializers.ValidationError(
                        {name: [f"At most {limit} {unit} (AGENTMEMORY['{setting}'])."]}
                    )
            writable = {name for name, field in self.fields.items() if not field.read_only}
            errors = {name: [self.unknown_message] for name in sorted(set(data) - writable)}
            errors.update(type_errors(self.fields, data))
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)


class StrictModelSerializer(StrictSerializer, serializers.ModelSerializer):
    unknown_message = "Unknown or read-only field."


# ---------------------------------------------------------------- threads


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


# ---------------------------------------------------------------- entries


class ToolCallSerializer(StrictSerializer):
    id = serializers.CharField(max_length=200)
    name = serializers.CharField(max_length=200)
    # Any JSON value may come (OpenAI sends a string); the stubs allow only an object default.
    arguments = serializers.JSONField(
        required=False, default="", validators=[storable_json]  # type: ignore[arg-type]
    )


class MessageSerializer(StrictSerializer):
    """One message to append (or one message of a window to compact)."""

    role = serializers.ChoiceField(choices=Role.choices)
    content = serializers.CharField(allow_blank=True, trim_whitespace=False, default="")
    tool_calls = ToolCallSerializer(many=True, required=False)
    tool_name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    tool_call_id = serializers.CharField(max_length=200, required=False, allow_blank=True)
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


class BatchSerializer(StrictSerializer):
    entries = MessageSerializer(many=True, allow_empty=False)

    def count_limits(self) -> dict[str, tuple[str, int, str]]:
        return {"entries": ("API_MAX_BATCH", memory_settings.API_MAX_BATCH, "entries per batch")}


class CoverageSerializer(SharedFields, serializers.ModelSerializer):
    class Meta:
        model = SummaryCoverage
        fields = [
            "from_turn", "to_turn", "entry_count", "span_tokens", "original_tokens", "model",
            "summarized_at", "prompt_tokens", "completion_tokens", "version", "prompt_hash",
            "temperature", "seed", "library_version", "tampered_at", "fact_score",
            "missing_facts", "injection_flags", "reviewed_at", "level",
        ]


class EntrySerializer(SharedFields, serializers.ModelSerializer):
    class Meta:
        model = MemoryEntry
        fields = [
            "id", "kind", "role", "content", "tool_calls", "tool_name", "tool_call_id",
            "turn", "position", "tier", "token_count", "created_at", "expires_at",
            "metadata", "summary_key", "covered_by",
        ]
        read_only_fields = fields


class SummarySerializer(EntrySerializer):
    # Null for a message (the originals list mixes messages and nested summaries).
    coverage = CoverageSerializer(read_only=True, allow_null=True)

    class Meta(EntrySerializer.Meta):
        fields = [*EntrySerializer.Meta.fields, "coverage"]
        read_only_fields = fields


# ---------------------------------------------------------------- recall and fold


class DecaySerializer(StrictSerializer):
    half_life_seconds = serializers.FloatField(min_value=0.001, max_value=1e10)
    min_score = serializers.FloatField(min_value=0, max_value=1, default=0.1)


class RecallRequestSerializer(StrictSerializer):
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
        help_text="Visible entries of the thread the context left out; 0 when every "
        "earlier message is in it verbatim or stood for by a summary in it."
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


class OriginalsResponseSerializer(serializers.Serializer):
    summary = SummarySerializer()
    recursive = serializers.BooleanField()
    originals = SummarySerializer(many=True)


# ---------------------------------------------------------------- window


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


# ---------------------------------------------------------------- usage


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


# ---------------------------------------------------------------- receipts and savings


class ReceiptItemSerializer(serializers.ModelSerializer):
    entry_id = serializers.IntegerField(read_only=True)

    class Meta:
        model = ReceiptItem
        fields = ["order", "entry_id", "kind", "tokens"]
        read_only_fields = fields


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


# ---------------------------------------------------------------- search


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
        allow_null=True, help_text="That summary's key, the handle its label shows."
    )


class SearchResultsSerializer(serializers.Serializer):
    results = SearchHitSerializer(many=True)
