"""Build the demo conversation, fold it as an agent would, and say where to look.

Idempotent: the demo threads (client keys ``demo-support-chat`` and ``demo-agent-run``
of the ``admin`` user) are emptied and rebuilt on every run, never duplicated, and keep
their ids, so the links a run printed still open the same threads after the next one.
The conversation is generated from fixed data, so every run writes the same messages.
The links name ``settings.DEMO_ADDR``, where ``make demo`` serves.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Count, Sum
from django.urls import NoReverseMatch, reverse

from agentmemory import services
from agentmemory.conf import memory_settings
from agentmemory.models import FoldedSpan, MemoryEntry, SummarizerCall, Thread
from agentmemory.summarizers import get_summarizer
from agentmemory.window.seams import SlidingWindow
from example_project.demo.address import DEFAULT_ADDR, site_url
from example_project.demo.conversation import (
    DEMO_CLIENT_KEY,
    DEMO_PASSWORD,
    DEMO_TITLE,
    DEMO_USERNAME,
    WINDOW_CLIENT_KEY,
    WINDOW_TITLE,
    Message,
    assistant_message,
    call,
    steps,
    tool,
    user_message,
)

WINDOW_SIZE = 12
RECALL_BUDGET = 1500
LINE_WIDTH = 100


class Command(BaseCommand):
    help = (
        "Create (or recreate) a demo support conversation, fold it with the configured "
        "summarizer through recall, and print the summaries, the context and the ledger."
    )
    requires_migrations_checks = True

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--turns", type=int, default=40, help="User turns in the conversation (default 40)."
        )
        parser.add_argument(
            "--quiet", action="store_true", help="Print only the login and where to look."
        )

    def handle(self, *args: Any, turns: int, quiet: bool, **options: Any) -> None:
        if turns < 1:
            raise CommandError(f"--turns must be at least 1, got {turns}.")
        user, created = _demo_superuser()
        thread = _emptied_thread(user, DEMO_CLIENT_KEY, DEMO_TITLE)
        recalls = folds = 0
        # The agent loop: before every model call the agent recalls its context within
        # a budget (a fold happens there when one is due): after the user's message and
        # after each tool result. Each step's messages are appended as they happen.
        for number in range(1, turns + 1):
            for step in steps(number):
                services.append(thread, step)
                if step[-1]["role"] in ("user", "tool"):
                    result = services.recall(thread, RECALL_BUDGET)
                    recalls += 1
                    folds += result.folded_summary_id is not None
        # What a background worker would do once the conversation goes quiet.
        last_fold = services.fold(thread)
        final = services.recall(thread, RECALL_BUDGET)
        window_thread, spans = _window_run(user)

        out = self.stdout.write
        out(self.style.MIGRATE_HEADING("agentmemory demo"))
        state = "created" if created else "already existed; its password was left unchanged"
        out(f"Admin login: {DEMO_USERNAME} / {DEMO_PASSWORD} ({state}).")
        out("  For this local demo only: never keep this account on a reachable server.")
        if not quiet:
            self._conversation(thread, turns, recalls, folds, last_fold)
            self._summaries(thread)
            self._final_recall(final)
            self._ledger(thread)
            self._window(window_thread, spans)
        self._where_to_look(thread)

    def _conversation(
        self,
        thread: Thread,
        turns: int,
        recalls: int,
        folds: int,
        last_fold: services.FoldOutcome,
    ) -> None:
        messages = MemoryEntry.objects.filter(thread=thread).messages().aggregate(
            count=Count("id"), tokens=Sum("token_count")
        )
        summarizer = get_summarizer()
        out = self.stdout.write
        out("")
        out(self.style.MIGRATE_HEADING(f"Thread #{thread.pk}: {thread.title}"))
        out(
            f"  {turns} turns, {messages['count']} messages, {messages['tokens'] or 0} tokens, "
            f"written with services.append."
        )
        out(
            f"  {recalls} calls of services.recall(thread, {RECALL_BUDGET}), one before each "
            f"model call; {folds} of them folded (mode {memory_settings.RECALL_MODE!r})."
        )
        if memory_settings.RECALL_MODE == "background":
            out("  In background mode recall stays verbatim: append enqueued the fold_thread "
                "task, which folded.")
        out(f"  Summarizer: {summarizer.model} ({summarizer.backend}).")
        if last_fold.summary is not None:
            out(f"  A last services.fold(thread) folded into #{last_fold.summary.pk}.")
        else:
            reason = last_fold.decline or "nothing to fold"
            out(f"  A last services.fold(thread) declined: {reason}.")

    def _summaries(self, thread: Thread) -> None:
        out = self.stdout.write
        entries = MemoryEntry.objects.filter(thread=thread)
        summaries = list(entries.summaries().select_related("coverage"))
        # What recall may load, by the querysets' rule: uncovered, live and unexpired.
        visible = set(entries.summaries().visible().values_list("pk", flat=True))
        out("")
        out(self.style.MIGRATE_HEADING(f"Summaries ({len(summaries)}), oldest first"))
        if not summaries:
            out("  None yet: the thread is too short to fold. Try more --turns.")
            return
        out(
            "  Each covers the exact entries services.expand returns; a later summary covers "
            "the earlier one."
        )
        out(f"  Each opens with an authored label: {_clip(summaries[0].content.splitlines()[0])}")
        for summary in summaries:
            covered = services.expand(summary)
            live = summary.pk in visible
            if live:
                where = "live: recall uses it"
            elif summary.covered_by_id is not None:
                where = f"covered by #{summary.covered_by_id}"
            else:
                where = "not loaded: retired, held for review or expired"
            out(
                f"  #{summary.pk} {summary.summary_key} ({where}) covers {len(covered)} "
                f"entries: {describe_ids(covered)}"
            )
            text = summary.content.splitlines()[1:]
            for line in text if live else text[:1]:
                out(f"      {_clip(line)}")

    def _final_recall(self, final: services.RecallResult) -> None:
        out = self.stdout.write
        used = ", ".join(f"#{pk}" for pk in final.summaries_used) or "none"
        out("")
        out(self.style.MIGRATE_HEADING("The context the agent gets now"))
        out(
            f"  services.recall(thread, {RECALL_BUDGET}): {len(final.messages)} messages, "
            f"{final.tokens} tokens, summaries used: {used}."
        )
        for line in final.text.splitlines():
            out(f"  | {_clip(line)}")

    def _ledger(self, thread: Thread) -> None:
        calls = SummarizerCall.objects.filter(thread=thread)
        totals = calls.aggregate(
            count=Count("id"), prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens")
        )
        by_outcome = ", ".join(
            f"{row['n']} {row['outcome']}"
            for row in calls.values("outcome").annotate(n=Count("id")).order_by("outcome")
        )
        out = self.stdout.write
        out("")
        out(self.style.MIGRATE_HEADING("Usage ledger (SummarizerCall)"))
        out(
            f"  {totals['count']} summarizer calls ({by_outcome or 'none'}): "
            f"{totals['prompt'] or 0} prompt + {totals['completion'] or 0} completion tokens."
        )

    def _window(self, thread: Thread, spans: list[FoldedSpan]) -> None:
        out = self.stdout.write
        out("")
        out(self.style.MIGRATE_HEADING(f"Thread #{thread.pk}: {thread.title}"))
        out(f"  An agent loop whose own window grew past {WINDOW_SIZE} messages was compacted "
            "twice with services.compact:")
        for span in spans:
            found = services.folded_span_for(thread, span.content)
            kept = "its originals kept" if span.messages is not None else "originals discarded"
            out(f"  span #{span.pk}: {span.message_count} messages at iteration "
                f"{span.iteration}, {kept}; folded_span_for(the summary message) finds "
                f"#{found.pk if found else None}")
            out(f"    {_clip(span.content.splitlines()[0])}")
        out(f"  folded_messages(thread) returns {len(services.folded_messages(thread))} "
            "retained messages; the discarded span contributes none.")

    def _where_to_look(self, thread: Thread) -> None:
        entries = reverse("admin:agentmemory_memoryentry_changelist")
        window = Thread.objects.filter(owner=thread.owner, client_key=WINDOW_CLIENT_KEY).first()
        links = [
            ("admin", reverse("admin:index")),
            ("timeline", reverse("admin:agentmemory_thread_timeline", args=[thread.pk])),
            ("summaries", f"{reverse('admin:agentmemory_summary_changelist')}"
                          f"?thread__id__exact={thread.pk}"),
            ("entries", f"{entries}?thread__id__exact={thread.pk}"),
            ("receipts", f"{reverse('admin:agentmemory_recallreceipt_changelist')}"
                         f"?thread__id__exact={thread.pk}"),
            (
                "ledger",
                f"{reverse('admin:agentmemory_summarizercall_changelist')}"
                f"?thread__id__exact={thread.pk}",
            ),
        ]
        if window is not None:
            links.append(("spans", f"{reverse('admin:agentmemory_foldedspan_changelist')}"
                                   f"?thread__id__exact={window.pk}"))
        try:
            api = reverse("agentmemory-api:summary-list", args=[thread.pk])
        except NoReverseMatch:
            pass  # the project does not mount agentmemory.api.urls
        else:
            links.append(("api", api))
        site = site_url(getattr(settings, "DEMO_ADDR", DEFAULT_ADDR))
        out = self.stdout.write
        out("")
        out(self.style.MIGRATE_HEADING("Where to look"))
        out(f"  Serve the site on {site}/ (`make demo` does), then log in as "
            f"{DEMO_USERNAME} / {DEMO_PASSWORD}:")
        for name, path in links:
            out(f"  {name + ':':<11}{site}{path}")


def _window_run(user: Any) -> tuple[Thread, list[FoldedSpan]]:
    """A live agent run: a request, then tool loops. The window is compacted as it
    grows, once keeping the originals with the conversation and once discarding them."""
    thread = _emptied_thread(user, WINDOW_CLIENT_KEY, WINDOW_TITLE)
    seam = SlidingWindow(WINDOW_SIZE)
    window: list[Message] = [
        {"role": "system", "content": "You are Northwind's returns agent."},
        user_message("Process the returns for orders 4001 to 4030 and tell me the total refunded."),
    ]
    spans: list[FoldedSpan] = []
    for iteration, number in enumerate(range(4001, 4031), start=1):
        process = call(number, 1, "process_return", {"order": number})
        window += [
            assistant_message(f"Processing the return of order {number}.", [process]),
            tool(process, {"order": number, "refunded": f"{20 + number % 7}.00 EUR"}),
        ]
        if len(window) > WINDOW_SIZE + 8:
            retain = "conversation" if not spans else "discard"
            result = services.compact(
                thread, window, iteration=iteration, retain=retain, window=seam
            )
            if result.span is not None:
                window, spans = result.window, [*spans, result.span]
        if len(spans) == 2:
            break
    return thread, spans


def _demo_superuser() -> tuple[Any, bool]:
    User = get_user_model()
    user = User._default_manager.filter(**{User.USERNAME_FIELD: DEMO_USERNAME}).first()
    if user is not None:
        return user, False
    return User._default_manager.create_superuser(
        **{User.USERNAME_FIELD: DEMO_USERNAME},
        email="admin@example.com",
        password=DEMO_PASSWORD,
    ), True


def _emptied_thread(user: Any, client_key: str, title: str) -> Thread:
    """The user's thread of ``client_key``, created on the first run and emptied on the
    next ones (`services.clear_thread`): the same row, so its id, and every link that
    names it, stays valid."""
    thread, created = Thread.objects.get_or_create(
        owner=user, client_key=client_key, defaults={"title": title}
    )
    if not created:
        services.clear_thread(thread)
        if thread.title != title:
            thread.title = title
            thread.save(update_fields=["title"])
    return thread


def describe_ids(entries: list[MemoryEntry]) -> str:
    """``summary #2 + #3-#5, #9``: short enough to read, exact enough to check."""
    nested = [f"summary #{entry.pk}" for entry in entries if entry.is_summary]
    ranges: list[list[int]] = []
    for pk in (entry.pk for entry in entries if not entry.is_summary):
        if ranges and pk == ranges[-1][1] + 1:
            ranges[-1][1] = pk
        else:
            ranges.append([pk, pk])
    messages = ", ".join(f"#{a}" if a == b else f"#{a}-#{b}" for a, b in ranges)
    return " + ".join([*nested, messages] if messages else nested)


def _clip(line: str) -> str:
    line = line.rstrip()
    return line if len(line) <= LINE_WIDTH else line[: LINE_WIDTH - 3] + "..."
