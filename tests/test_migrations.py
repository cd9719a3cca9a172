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
