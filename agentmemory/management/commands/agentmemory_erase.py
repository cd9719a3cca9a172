"""Erase a user's conversations (right to erasure): threads, entries, summaries, spans."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from agentmemory import services
from agentmemory.management.options import (
    add_batch_size,
    add_dry_run,
    add_user,
    many,
    positive_int,
    progress,
    usage_error,
    user_of,
)
from agentmemory.models import Thread


class Command(BaseCommand):
    help = (
        "Erase every agentmemory thread of a user, or one thread, with all derived rows: "
        "thread by thread, each in its own transaction. Exits 2 when the user or thread "
        "does not exist."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        target = parser.add_mutually_exclusive_group(required=True)
        add_user(target, "Erase all threads of this user: a username, an id, or id:N.")
        target.add_argument("--thread", type=positive_int, help="Erase this one thread id.")
        add_dry_run(parser, "the threads and entries it would erase")
        add_batch_size(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        if options["user"] is not None:
            owner, name = user_of(options["user"])
            threads = Thread.objects.filter(owner_id=owner)
            whose = f" of user {name} (id {owner})"
        else:
            threads = Thread.objects.filter(pk=options["thread"])
            if not threads.exists():
                raise usage_error(f"No agentmemory thread with id {options['thread']}.")
            whose = ""
        dry_run = options["dry_run"]
        shown = progress(self.stdout, options, "agentmemory_erase", threads.count(), "threads",
                         "entries", every=options["batch_size"])
        for erased in services.erase_threads(threads, dry_run=dry_run,
                                             batch_size=options["batch_size"]):
            shown.advance(entries=erased.entries)
            if options["verbosity"] >= 2:
                shown.note(f"thread {erased.thread_id}: {many(erased.entries, 'entry')}")
        shown.finish()
        if options["verbosity"] < 1:
            return
        if options["thread"] is not None:
            erased_what = f"thread {options['thread']} ({many(shown.counts['entries'], 'entry')})"
        else:
            erased_what = (f"{many(shown.done, 'thread')} "
                           f"({many(shown.counts['entries'], 'entry')}){whose}")
        if dry_run:
            self.stdout.write(f"Dry run: would erase {erased_what}. Nothing was erased.")
        else:
            self.stdout.write(f"Erased {erased_what}.")
