"""Send the folds that are due and were never sent, as the periodic sweep does, watched."""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from agentmemory import services
from agentmemory.conf import memory_settings
from agentmemory.management.options import (
    add_batch_size,
    add_dry_run,
    failed,
    many,
    positive_int,
    positive_seconds,
    progress,
    tally,
)
from agentmemory.services import FoldState


class Command(BaseCommand):
    help = (
        "Send a fold task for every thread a fold is due for and none is on its way "
        "(a task lost to a broker outage or a killed worker, a parked fold whose back-off "
        "is over), and settle the ledger rows of calls that died unnoticed, as the "
        "periodic agentmemory.sweep task does: the threads written within --window "
        "seconds, newest first, at most --limit. Exits 1 when the broker took no task."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--window", type=positive_seconds, metavar="SECONDS",
            help="Look at threads written within this many seconds (default: SWEEP_WINDOW).",
        )
        parser.add_argument(
            "--limit", type=positive_int,
            help="Look at this many threads at most (default: SWEEP_LIMIT).",
        )
        add_dry_run(parser, "the folds it would send")
        add_batch_size(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        now = timezone.now()
        window = options["window"] or float(memory_settings.SWEEP_WINDOW)
        ids = services.sweep_candidates(now=now, window=window, limit=options["limit"])
        dry_run = options["dry_run"]
        settled = 0 if dry_run else services.settle_abandoned(now=now)
        shown = progress(self.stdout, options, "agentmemory_sweep", len(ids), "threads",
                         "due", "sent", every=options["batch_size"])
        states: Counter[str] = Counter()
        for swept in services.sweep_threads(ids, now=now, dry_run=dry_run,
                                            batch_size=options["batch_size"]):
            if swept.state is not None:
                states[swept.state] += 1
            shown.advance(due=int(swept.state is not None),
                          sent=int(swept.state == FoldState.QUEUED))
            if swept.state is not None and options["verbosity"] >= 2:
                shown.note(f"thread {swept.thread_id}: {swept.state}")
        shown.finish()
        sent = states.pop(FoldState.QUEUED, 0)
        if options["verbosity"] >= 1:
            looked = f"{many(len(ids), 'thread')} written in the last {window:g} s"
            if dry_run:
                self.stdout.write(f"Dry run: of {looked}, {sent} would be sent a fold"
                                  + (f"; not sent: {tally(states)}" if states else "")
                                  + ". Nothing was sent or written.")
            else:
                self.stdout.write(f"Swept {looked}: sent {many(sent, 'fold')}"
                                  + (f"; not sent: {tally(states)}" if states else "")
                                  + f". Settled {many(settled, 'abandoned summarizer call')}.")
        if not dry_run and states.get(FoldState.BROKER_DOWN):
            raise failed(
                f"{many(states[FoldState.BROKER_DOWN], 'due fold')} could not be sent: the broker "
                "did not answer within BROKER_TIMEOUT. Run agentmemory_sweep again once it "
                "does (the periodic sweep will too)."
            )
