"""Erase a user's conversations (right to erasure): threads, entries, summaries, spans."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentmemory import services
from agentmemory.models import Thread


class Command(BaseCommand):
    help = "Erase every agentmemory thread of a user, or one thread, with all derived rows."

    def add_arguments(self, parser: CommandParser) -> None:
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--user", type=int, help="Erase all threads owned by this user id.")
        target.add_argument("--thread", type=int, help="Erase this one thread id.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["user"] is not None:
            count = services.erase_user(options["user"])
            self.stdout.write(f"Erased {count} thread(s) of user {options['user']}.")
            return
        thread = Thread.objects.filter(pk=options["thread"]).first()
        if thread is None:
            raise CommandError(f"No agentmemory thread with id {options['thread']}.")
        services.erase_thread(thread)
        self.stdout.write(f"Erased thread {options['thread']}.")
