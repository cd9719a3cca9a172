"""What every resource's serializers share: the bounds of numbers on the wire, the
checks a JSON value must pass to be stored, request serializers that refuse unknown
fields and uncoerced types, and response serializers whose fields are built once."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from django.core.exceptions import FieldDoesNotExist
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.fields import SkipField
from rest_framework.relations import PKOnlyObject, RelatedField
from rest_framework.validators import ProhibitSurrogateCharactersValidator

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


class NoSurrogates(ProhibitSurrogateCharactersValidator):
    """DRF's check that a text holds no surrogate, with its message, by a regular
    expression (none at all for ASCII) instead of a Python loop over every character
    (bench/serializers.py)."""

    def __call__(self, value: Any) -> None:
        text = str(value)
        found = None if text.isascii() else SURROGATE.search(text)
        if found is not None:
            raise ValidationError(self.message.format(code_point=ord(found.group())),
                                  code=self.code)


class CheckedCharField(serializers.CharField):
    """DRF's ``CharField`` whose surrogate check is `NoSurrogates`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators = [
            NoSurrogates() if type(check) is ProhibitSurrogateCharactersValidator else check
            for check in self.validators]


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


# A serializer whose fields are built once per class, not per instance. DRF builds a
# serializer's fields on every instance (a deep copy of the declared ones, or the model's
# read again); for a one-entry append that cost more than the data. Response serializers
# only read; the request serializers that mix it in are never partial and no validator
# of theirs needs the instance, the context or the parent (a ModelSerializer's unique
# validators do: those keep their own), so validating reads only the fields'
# configuration, and one set serves every instance; settings are still read per call
# (`validate_content`, `count_limits`). No docstring: drf-spectacular would describe
# every serializer that mixes it in with it.
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


# A response ModelSerializer with shared fields that reads each field showing one column
# of its model straight from the instance (a foreign key's from its ``_id``), then hands
# it to the field's own ``to_representation``: the same answer as DRF's walk, without the
# walk (per field, ``get_attribute`` through ``source_attrs``, a callable check and the
# exceptions it catches), which cost an append's answer of one entry 44 µs against 31
# (bench/serializers.py). Any other field (nested, a method, a dotted source) takes DRF's walk.
# tests/test_shared_fields.py compares both over random entries and summaries. No
# docstring, as for SharedFields.
class ColumnReads(SharedFields):
    _reads: Any = None
    _reader: Any = None

    @classmethod
    def represent(cls, instances: Iterable[Any]) -> list[dict[str, Any]]:
        """What ``cls(instances, many=True).data`` holds, as a plain list, from one
        instance of the class kept for every call: its fields are shared, and reading
        needs no context. Building a ListSerializer and its child per answer cost an
        append's request more than serializing its entry."""
        reader = cls.__dict__.get("_reader")
        if reader is None:
            reader = cls._reader = cls()
        return [reader.to_representation(instance) for instance in instances]

    def to_representation(self, instance: Any) -> dict[str, Any]:
        cls = type(self)
        reads = cls.__dict__.get("_reads")
        if reads is None:
            reads = cls._reads = _column_reads(self.fields, self.Meta.model)  # type: ignore[attr-defined]
        answer: dict[str, Any] = {}
        for name, field, column, pk_only in reads:
            if column is None:
                try:
                    value = field.get_attribute(instance)
                except SkipField:
                    continue
                empty = (value.pk if isinstance(value, PKOnlyObject) else value) is None
            else:
                value = getattr(instance, column)
                empty = value is None
                if pk_only and not empty:
                    value = PKOnlyObject(pk=value)
            answer[name] = None if empty else field.to_representation(value)
        return answer


def _column_reads(fields: Any, model: Any) -> list[tuple[str, Any, str | None, bool]]:
    """(name, field, the attribute to read or None for DRF's walk, whether the field
    takes the related row's key only) for each readable field, in order."""
    reads = []
    for name, field in fields.items():
        if field.write_only:
            continue
        column, pk_only = None, False
        if len(field.source_attrs) == 1:
            try:
                model_field = model._meta.get_field(field.source_attrs[0])
            except FieldDoesNotExist:
                model_field = None
            if model_field is not None and model_field.concrete:
                if not model_field.is_relation and not isinstance(field, RelatedField):
                    column = model_field.attname
                elif (model_field.many_to_one and isinstance(field, RelatedField)
                        and field.use_pk_only_optimization()):
                    column, pk_only = model_field.attname, True
        reads.append((name, field, column, pk_only))
    return reads
