"""Check every summary and folded span against its keyed fingerprint."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentmemory import services


class Command(BaseCommand):
    help = (
        "Verify the signatures of all live summaries and folded spans. Tampered rows are "
        "reported, retired (summaries) or no longer returned (spans), and the command "
        "exits non-zero. --resign signs every row anew after a key rotation."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--resign",
            action="store_true",
            help="Sign every row with the current key instead of checking it.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        found = services.verify(resign=options["resign"])
        if options["resign"]:
            self.stdout.write("Every live summary and span is signed with the current key.")
            return
        if found["summaries"] or found["spans"]:
            raise CommandError(
                f"Tampered: summaries {found['summaries'] or 'none'}, spans "
                f"{found['spans'] or 'none'}. Tampered summaries are retired and their "
                "originals are recalled verbatim."
            )
        self.stdout.write("All summaries and folded spans match their signatures.")
