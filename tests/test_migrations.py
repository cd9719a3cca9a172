"""The migrations match the models, and no migration depends on a setting."""

from __future__ import annotations

from io import StringIO
from typing import Any

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


def test_the_release_has_one_migration() -> None:
    from pathlib import Path

    import agentmemory.migrations

    folder = Path(agentmemory.migrations.__file__).parent
    assert sorted(path.name for path in folder.glob("0*.py")) == ["0001_initial.py"]


@pytest.mark.django_db(transaction=True)
def test_the_migration_reverses_and_builds_the_search_index_again() -> None:
    """Unapplied, it leaves none of its tables, triggers or columns; applied again, the
    index works on the new rows."""
    from django.db import connection

    from agentmemory import services
    from agentmemory.models import Thread
    from agentmemory.search.index import FTS_TABLE

    call_command("migrate", "agentmemory", "zero", verbosity=0)
    left = [name for name in connection.introspection.table_names()
            if name.startswith("agentmemory_")]
    assert left == []
    assert FTS_TABLE not in connection.introspection.table_names()
    if connection.vendor == "postgresql":  # the receipt's and the append's functions
        with connection.cursor() as cursor:
            cursor.execute("SELECT proname FROM pg_proc WHERE proname LIKE 'agentmemory%%'")
            assert cursor.fetchall() == []
    call_command("migrate", "agentmemory", verbosity=0)

    thread = Thread.objects.create()
    [entry] = services.append(thread, {"role": "user",  # one statement on PostgreSQL
                                        "content": "the parcel ORD-4417 never came"})
    assert [hit.entry_id for hit in services.search(thread, "parcel")] == [entry.pk]


@pytest.mark.django_db(transaction=True)
def test_reindex_builds_the_index_again_over_every_entry(settings: Any) -> None:
    """After SEARCH_LANGUAGE changes, agentmemory_reindex rebuilds the stored vectors with
    it (PostgreSQL: 'simple' keeps the stop words 'english' drops); on SQLite it rebuilds
    the FTS5 table from the rows."""
    from django.db import connection

    from agentmemory import services
    from agentmemory.models import Thread
    from agentmemory.search.index import FTS_TABLE
    from agentmemory.search.schema import indexed_count

    thread = Thread.objects.create()
    entries = services.append(thread, [
        {"role": "user", "content": text}
        for text in ("to be or not to be", "the parcel ORD-4417 never came")])
    before = [hit.entry_id for hit in services.search(thread, "parcel")]
    assert before == [entries[1].pk]
    if connection.vendor == "sqlite":  # an emptied index, which only a rebuild refills
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('delete-all')")
        assert services.search(thread, "parcel") == []
    settings.AGENTMEMORY = {"SEARCH_LANGUAGE": "simple"}
    out = StringIO()
    try:
        call_command("agentmemory_reindex", stdout=out)

        assert f"{indexed_count(connection)} entries are searchable" in out.getvalue()
        assert indexed_count(connection) == 2
        assert [hit.entry_id for hit in services.search(thread, "parcel")] == before
        if connection.vendor == "postgresql":  # stop words are words under 'simple'
            assert [hit.entry_id for hit in services.search(thread, "not")] == [entries[0].pk]
    finally:  # the schema outlives the test: give the next ones the default language
        settings.AGENTMEMORY = {}
        call_command("agentmemory_reindex", stdout=StringIO())
