"""Fold every thread a fold is due for, or the ones named: a backfill an operator watches."""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db.models import QuerySet

from agentmemory import services
from agentmemory.management.options import (
    add_batch_size,
    add_dry_run,
    add_user,
    failed,
    many,
    positive_int,
    progress,
    tally,
    usage_error,
    user_of,
)
from agentmemory.models import Thread


class Command(BaseCommand):
    help = (
        "Fold every thread a fold is due for (or the threads named), as a background "
        "fold would for each thread's fold budget, without its bound on folds per task: "
        "a long history never folded is folded forward, oldest span first, until nothing "
        "is due. Threads are read --batch-size at a time; each fold commits on its own. "
        "Exits 1 when the summarizer failed a fold, 2 on bad usage."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--thread", type=positive_int, action="append", dest="threads", metavar="ID",
            help="Fold this thread (repeat for more). Default: every thread.",
        )
        add_user(parser, "Fold the threads of this user: a username, an id, or id:N.")
        add_dry_run(parser, "the threads a fold is due for")
        add_batch_size(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        threads = self.threads(options)
        dry_run = options["dry_run"]
        counts = ("due", "declined") if dry_run else ("folded", "summaries", "calls", "failed")
        shown = progress(self.stdout, options, "agentmemory_fold", threads.count(), "threads",
                         *counts, every=options["batch_size"])
        total: Counter[str] = Counter()
        declined: Counter[str] = Counter()
        failures: Counter[str] = Counter()
        for result in services.fold_backlogs(threads, dry_run=dry_run,
                                             batch_size=options["batch_size"]):
            done = {"due": int(result.due), "declined": int(bool(result.reason)),
                    "folded": int(result.summaries > 0), "summaries": result.summaries,
                    "calls": result.calls, "failed": int(result.failed)}
            total.update(done)
            if result.reason:
                (failures if result.failed else declined)[result.reason] += 1
            shown.advance(**{name: done[name] for name in counts})
            if result.due and options["verbosity"] >= 2:
                stopped = f"; {result.reason}" if result.reason else ""
                shown.note(f"thread {result.thread_id}: {many(result.summaries, 'summary')}, "
                           f"{many(result.calls, 'call')}{stopped}")
        shown.finish()
        if options["verbosity"] >= 1:
            if dry_run:
                self.stdout.write(
                    f"Dry run: a fold is due for {total['due']} of {many(shown.total, 'thread')}"
                    + (f"; declined without a call: {tally(declined)}" if declined else "")
                    + ". Nothing was written."
                )
            else:
                self.stdout.write(
                    f"Folded {total['folded']} of {many(shown.total, 'thread')}: "
                    f"{many(total['summaries'], 'summary')}, "
                    f"{many(total['calls'], 'summarizer call')}."
                    + (f" Stopped short: {tally(declined)}." if declined else "")
                )
        if failures:
            raise failed(
                f"The fold of {many(total['failed'], 'thread')} failed ({tally(failures)}): the "
                "ledger has each call. Run agentmemory_fold again once the summarizer answers."
            )

    def threads(self, options: dict[str, Any]) -> QuerySet[Thread]:
        threads = Thread.objects.all()
        if options["threads"]:
            named = set(options["threads"])
            missing = named - set(threads.filter(pk__in=named).values_list("pk", flat=True))
            if missing:
                listed = ", ".join(str(pk) for pk in sorted(missing))
                raise usage_error(f"No agentmemory thread with id {listed}.")
            threads = threads.filter(pk__in=named)
        if options["user"] is not None:
            threads = threads.filter(owner_id=user_of(options["user"])[0])
        return threads
