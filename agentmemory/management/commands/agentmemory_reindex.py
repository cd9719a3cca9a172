"""Build the full-text search index again, e.g. after SEARCH_LANGUAGE changed."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import DEFAULT_DB_ALIAS, connections

from agentmemory.conf import memory_settings
from agentmemory.search import schema


class Command(BaseCommand):
    help = (
        "Drop the full-text index of entries and build it again from every stored entry, "
        "in one transaction: on PostgreSQL with the current SEARCH_LANGUAGE (the stored "
        "vectors keep the configuration they were built with until then), on SQLite "
        "the FTS5 table and its triggers. Writes to entries wait while it runs."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS,
                            help="The database to reindex (default: 'default').")

    def handle(self, *args: Any, **options: Any) -> None:
        connection = connections[options["database"]]
        if not schema.create_statements(connection.vendor, memory_settings.SEARCH_LANGUAGE):
            self.stdout.write(f"{connection.vendor} has no full-text index to build.")
            return
        schema.rebuild(connection, memory_settings.SEARCH_LANGUAGE)
        self.stdout.write(f"Rebuilt the full-text index: {schema.indexed_count(connection)} "
                          "entries are searchable.")
