"""Delete what has expired, batch by batch, as the periodic purge does, watched."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from agentmemory import services
from agentmemory.conf import memory_settings
from agentmemory.management.options import add_batch_size, add_dry_run, many, progress


class Command(BaseCommand):
    help = (
        "Delete the expired entries, window spans and recall receipts (with what is "
        "derived from them), --batch-size of each per transaction, as the periodic "
        "agentmemory.purge_expired task does. Expired rows are invisible to recall "
        "already; this frees their space now."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_dry_run(parser, "the expired rows")
        add_batch_size(parser, default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        now = timezone.now()  # what expires while it runs is the next purge's
        expired = services.count_expired(now=now)
        found = (f"{many(expired.entries, 'entry')}, {many(expired.spans, 'window span')} "
                 f"and {many(expired.receipts, 'recall receipt')}")
        if options["dry_run"]:
            if options["verbosity"] >= 1:
                self.stdout.write(f"Dry run: {found} have expired (a purge also deletes "
                                  "what is derived from them). Nothing was deleted.")
            return
        size = options["batch_size"] or memory_settings.PURGE_BATCH_SIZE
        shown = progress(self.stdout, options, "agentmemory_purge",
                         expired.entries + expired.spans, "rows", "entries", "spans", "batches")
        entries = spans = batches = 0
        while True:
            batch = services.purge_expired(now=now, batch_size=size, max_batches=1)
            if not batch.batches:
                break
            entries, spans, batches = entries + batch.entries, spans + batch.spans, batches + 1
            shown.advance(batch.entries + batch.spans, entries=batch.entries,
                          spans=batch.spans, batches=1)
            shown.checkpoint()
        shown.finish()
        if options["verbosity"] >= 1:
            self.stdout.write(f"Purged {many(entries, 'entry')} and "
                              f"{many(spans, 'window span')} in {many(batches, 'batch')} of "
                              f"at most {size}; found expired: {found}.")
