"""Serializers whose fields are built once (`api.serializers.base.SharedFields`), and
read their columns straight from the instance (`ColumnReads`, its kept reader
`ColumnReads.represent` too), answer exactly as DRF's serializers that build their fields
per instance and walk each field's source; the request serializers among them validate
each request on its own, two at once included.

Each shared serializer is compared with a twin of the same declaration without the mixin,
over random entries, summaries and recalls, under a time zone other than UTC and under a
changed date format: the settings the fields read are read per call, not frozen.
"""

from __future__ import annotations

import copy
import threading
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework import serializers
from rest_framework.settings import api_settings

from agentmemory import services
from agentmemory.api.serializers.base import SharedFields
from agentmemory.api.serializers.entries import (
    BatchSerializer,
    EntrySerializer,
    MessageSerializer,
)
from agentmemory.api.serializers.recall import RecallRequestSerializer, RecallResponseSerializer
from agentmemory.api.serializers.summaries import SummarySerializer
from agentmemory.models import MemoryEntry, Thread

pytestmark = pytest.mark.django_db


def twin(shared: type[serializers.Serializer]) -> type[serializers.Serializer]:
    """The same declaration on DRF's own base, nested serializers included: DRF builds
    its fields per instance."""
    base = (serializers.ModelSerializer if issubclass(shared, serializers.ModelSerializer)
            else serializers.Serializer)
    namespace: dict[str, Any] = {"__module__": __name__}
    if hasattr(shared, "Meta"):
        namespace["Meta"] = shared.Meta
    for name, field in shared._declared_fields.items():  # type: ignore[attr-defined]
        namespace[name] = rebuilt(field)
    return type(f"Twin{shared.__name__}", (base,), namespace)


def rebuilt(field: Any) -> Any:
    """A fresh copy of a declared field (as DRF copies them), shared serializers inside it
    replaced by their twins."""
    if isinstance(field, serializers.ListSerializer):
        kwargs = {key: value for key, value in field._kwargs.items() if key != "child"}
        return serializers.ListSerializer(child=rebuilt(field.child), **kwargs)
    if isinstance(field, SharedFields):
        return twin(type(field))(*field._args, **copy.deepcopy(field._kwargs))
    return copy.deepcopy(field)


texts = st.text(st.characters(blacklist_categories=["Cs", "Cc", "Cf", "Zs", "Zl", "Zp"]),
                min_size=1, max_size=40)
messages = st.fixed_dictionaries({
    "role": st.sampled_from(["user", "assistant", "system"]),
    "content": texts,
    "metadata": st.dictionaries(st.sampled_from(["a", "b", "ü"]),
                                st.one_of(st.integers(), texts, st.none()), max_size=3),
})


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    batch=st.lists(messages, min_size=1, max_size=6),
    ttl_hours=st.one_of(st.none(), st.integers(1, 1000)),
    zone=st.sampled_from(["UTC", "Europe/Berlin", "America/Santiago", "Asia/Kathmandu"]),
    iso=st.booleans(),
)
def test_entries_answer_as_drf_builds_them(
    batch: list[dict[str, Any]], ttl_hours: int | None, zone: str, iso: bool,
    settings: Any,
) -> None:
    thread = Thread.objects.create(ttl=timedelta(hours=ttl_hours) if ttl_hours else None)
    entries = services.append(thread, batch, now=datetime(2026, 3, 29, 0, 30, tzinfo=UTC))
    settings.REST_FRAMEWORK = {**getattr(settings, "REST_FRAMEWORK", {}),
                               "DATETIME_FORMAT": "iso-8601" if iso else "%d.%m.%Y %H:%M"}
    api_settings.reload()
    try:
        with timezone.override(ZoneInfo(zone)):
            shared = EntrySerializer(entries, many=True).data
            fresh = twin(EntrySerializer)(entries, many=True).data
            kept = EntrySerializer.represent(entries)  # one instance for every answer
    finally:
        del settings.REST_FRAMEWORK
        api_settings.reload()
    assert shared == fresh == kept
    assert [item["id"] for item in shared] == [entry.pk for entry in entries]


def test_summaries_and_recalls_answer_as_drf_builds_them() -> None:
    thread = Thread.objects.create()
    for number in range(12):
        services.append(thread, [
            {"role": "user", "content": f"Where is order {number}? It was due on Monday."},
            {"role": "assistant", "content": f"Order {number} ships on Friday with DHL."},
        ])
    services.append(thread, [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call-1", "name": "track", "arguments": {"order": 3}}]},
        {"role": "tool", "tool_call_id": "call-1", "tool_name": "track", "content": "late"},
    ])
    result = services.recall(thread, 1200, mode="inline", trigger_min_entries=4,
                             preserve_recent=2)
    assert result.summaries_used, "the recall folded nothing to compare"
    # Every row, the covered ones (a foreign key to their summary) and the tool pair too.
    rows = list(MemoryEntry.objects.filter(thread=thread))
    assert any(row.covered_by_id for row in rows) and any(row.tool_calls for row in rows)
    fresh = twin(EntrySerializer)(rows, many=True).data
    assert EntrySerializer(rows, many=True).data == fresh == EntrySerializer.represent(rows)
    summaries = list(MemoryEntry.objects.filter(pk__in=result.summaries_used)
                     .select_related("coverage"))
    fresh = twin(SummarySerializer)(summaries, many=True).data
    assert SummarySerializer(summaries, many=True).data == fresh
    assert SummarySerializer.represent(summaries) == fresh
    # Each class keeps its own reader: a summary's answer holds its coverage.
    assert "coverage" in SummarySerializer.represent(summaries)[0]
    assert "coverage" not in EntrySerializer.represent(summaries)[0]
    shared = RecallResponseSerializer(result).data
    fresh = twin(RecallResponseSerializer)(result).data
    assert shared == fresh and shared["messages"]


def test_the_fields_are_built_once_per_class() -> None:
    thread = Thread.objects.create()
    [entry] = services.append(thread, {"role": "user", "content": "once"})
    first, second = EntrySerializer(entry), EntrySerializer(entry)
    assert first.fields is second.fields
    assert SummarySerializer(entry).fields is not first.fields  # a subclass has its own


def test_request_serializers_share_one_set_of_fields() -> None:
    for serializer in (MessageSerializer, BatchSerializer, RecallRequestSerializer):
        assert serializer(data={}).fields is serializer(data={}).fields


def test_each_request_validation_keeps_its_own_data_and_errors() -> None:
    shape = MessageSerializer(data={"role": "user", "content": 3, "extra": 1})
    bad = MessageSerializer(data={"role": "nobody", "content": "x", "turn": 0})
    good = MessageSerializer(data={"role": "user", "content": "hello", "turn": 2})
    assert not shape.is_valid() and not bad.is_valid() and good.is_valid()
    assert set(shape.errors) == {"content", "extra"} and set(bad.errors) == {"role", "turn"}
    assert dict(good.validated_data) == {"role": "user", "content": "hello", "turn": 2}
    again = RecallRequestSerializer(data={"budget_tokens": 0, "decay": {"min_score": 2}})
    fine = RecallRequestSerializer(data={"budget_tokens": 900,
                                         "decay": {"half_life_seconds": 60}})
    assert not again.is_valid() and fine.is_valid(), fine.errors
    assert set(again.errors) == {"budget_tokens", "decay"}
    assert fine.validated_data["decay"] == {"half_life_seconds": 60.0, "min_score": 0.1}


def test_request_validations_in_flight_at_once_do_not_mix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each waits inside its content check until the other is inside too (a barrier both
    must reach), so both run on the shared fields at once; a field that kept a request's
    data or errors would show them in the other's."""
    both_inside = threading.Barrier(2, timeout=10)
    check = MessageSerializer.validate_content

    def waiting(self: Any, value: str) -> str:
        both_inside.wait()  # the other validation is inside too
        return check(self, value)

    monkeypatch.setattr(MessageSerializer, "validate_content", waiting)
    results: dict[str, Any] = {}

    def validate(name: str, data: dict[str, Any]) -> None:
        serializer = BatchSerializer(data={"entries": [data, {"role": "bogus"}]})
        serializer.is_valid()
        results[name] = serializer.errors

    workers = [threading.Thread(target=validate, args=(name, data)) for name, data in [
        ("first", {"role": "user", "content": "one", "turn": 0}),
        ("second", {"role": "assistant", "content": "two", "tier": "lukewarm"}),
    ]]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(20)
    assert both_inside.n_waiting == 0 and not both_inside.broken
    first, second = results["first"]["entries"], results["second"]["entries"]
    assert set(first[0]) == {"turn"} and set(second[0]) == {"tier"}
    assert set(first[1]) == set(second[1]) == {"role"}
