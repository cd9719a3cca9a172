"""Check every summary and folded span against its keyed fingerprint."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from agentmemory import services
from agentmemory.management.options import BATCH_SIZE, add_dry_run, failed, many, progress


class Command(BaseCommand):
    help = (
        "Verify the signatures of all live summaries and folded spans. Tampered rows are "
        "reported, retired (summaries) or no longer returned (spans), and the command "
        "exits 1. --resign signs every row anew after a key rotation."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--resign",
            action="store_true",
            help="Sign every row with the current key instead of checking it.",
        )
        add_dry_run(parser, "the rows that are tampered (with --resign: would be signed)")

    def handle(self, *args: Any, **options: Any) -> None:
        resign, dry_run = options["resign"], options["dry_run"]
        odd = "resigned" if resign else "tampered"
        shown = progress(self.stdout, options, "agentmemory_verify", services.verify_count(),
                         "rows", "summaries", "spans", odd, every=BATCH_SIZE)

        def checked(kind: str, intact: bool) -> None:
            plural = "summaries" if kind == "summary" else "spans"
            shown.advance(**{plural: 1, odd: int(not intact)})

        found = services.verify(resign=resign, dry_run=dry_run, checked=checked)
        shown.finish()
        rows = (f"{many(shown.counts['summaries'], 'summary')} and "
                f"{many(shown.counts['spans'], 'span')}")
        if resign:
            changed = len(found["resigned_summaries"]) + len(found["resigned_spans"])
            if options["verbosity"] >= 1:
                would = " would be" if dry_run else ""
                self.stdout.write(
                    f"Checked {rows}: {many(changed, 'row')}{would} signed anew; every other "
                    "live summary and span is signed with the current key."
                    + (" Nothing was written." if dry_run else "")
                )
            return
        if found["summaries"] or found["spans"]:
            if options["verbosity"] >= 1:
                self.stdout.write(f"Checked {rows}: {shown.counts[odd]} tampered.")
            action = (
                "Nothing was written (--dry-run)." if dry_run else "Tampered summaries are "
                "retired and their originals are recalled verbatim."
            )
            raise failed(
                f"Tampered: summaries {found['summaries'] or 'none'}, spans "
                f"{found['spans'] or 'none'}. {action}"
            )
        if options["verbosity"] >= 1:
            self.stdout.write(f"Checked {rows}: all match their signatures.")
