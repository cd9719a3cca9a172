"""The migrations match the models, and no migration depends on a setting."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings


@pytest.mark.django_db
def test_no_migrations_are_missing() -> None:
    out = StringIO()
    try:
        call_command("makemigrations", "agentmemory", "--check", "--dry-run", stdout=out)
    except SystemExit:  # pragma: no cover - the failure we are here to catch
        pytest.fail(f"Unmade migrations for agentmemory:\n{out.getvalue()}")
    assert "No changes detected" in out.getvalue()


@pytest.mark.django_db
def test_the_schema_does_not_depend_on_settings() -> None:
    changed = {
        "WRITE_TIER": "cold",
        "SUMMARY_TIER": "warm",
        "DEFAULT_TTL": 60,
        "LOAD_COUNT": 5,
        "TIERS": ["hot", "warm"],
    }
    out = StringIO()
    with override_settings(AGENTMEMORY=changed):
        try:
            call_command("makemigrations", "agentmemory", "--check", "--dry-run", stdout=out)
        except SystemExit:  # pragma: no cover
            pytest.fail(f"The schema changes with AGENTMEMORY settings:\n{out.getvalue()}")
    assert "No changes detected" in out.getvalue()


@pytest.mark.django_db(transaction=True)
def test_spans_made_before_span_derivation_are_linked_by_proof_or_marked_unknown() -> None:
    """0004_span_derivation: a span that kept its messages is linked message by message
    (to the entries that are that exact message, by digest otherwise); a discarded one
    proves nothing, is marked unknown, and goes with the first erasure in its thread."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    from agentmemory import services
    from agentmemory.models import FoldedSpan, MemoryEntry, SpanSource

    before = [("agentmemory", "0003_entry_order_by_id")]
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes("agentmemory")
    executor.migrate(before)
    old = executor.loader.project_state(before).apps
    thread, other = (old.get_model("agentmemory", "Thread").objects.create() for _ in "ab")
    entries = old.get_model("agentmemory", "MemoryEntry").objects
    secret = entries.create(thread=thread, role="user", content="my PIN is 4417", turn=1,
                            position=1)
    plain = entries.create(thread=thread, role="assistant", content="Noted.", turn=1,
                           position=2)
    spans = old.get_model("agentmemory", "FoldedSpan").objects
    common = {"message_count": 2, "model": "old-model", "content": "[compacted conversation]"}
    kept = spans.create(
        thread=thread, fingerprint="k", span_fingerprint="k", retain="conversation",
        messages=[{"role": "user", "content": "my PIN is 4417"},
                  {"role": "assistant", "content": "never stored"}], **common,
    )
    discarded = spans.create(thread=thread, fingerprint="d", span_fingerprint="d",
                             retain="discard", messages=None, **common)
    elsewhere = spans.create(thread=other, fingerprint="e", span_fingerprint="e",
                             retain="discard", messages=None, **common)

    executor = MigrationExecutor(connection)
    executor.migrate(latest)

    rows = list(SpanSource.objects.filter(span_id=kept.pk).order_by("position"))
    assert [(row.position, row.entry_id) for row in rows] == [(0, secret.pk), (1, None)]
    assert len({row.digest for row in rows}) == 2
    unknown = FoldedSpan.objects.filter(derivation_unknown=True).values_list("pk", flat=True)
    assert sorted(unknown) == sorted([discarded.pk, elsewhere.pk])

    services.erase_entry(MemoryEntry.objects.get(pk=plain.pk))
    remaining = set(FoldedSpan.objects.values_list("pk", flat=True))
    assert remaining == {kept.pk, elsewhere.pk}  # the unknown span of that thread went
    services.erase_entry(MemoryEntry.objects.get(pk=secret.pk))
    assert set(FoldedSpan.objects.values_list("pk", flat=True)) == {elsewhere.pk}
