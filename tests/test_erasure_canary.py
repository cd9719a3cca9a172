"""Erasure by derivation (law 7): after erasing one message, no row of any table holds
its words, whatever the recall folds and window compactions made of it.

One message carries a unique canary. It is folded twice (a summary of a summary),
recalled with receipts on, compacted in a window that is compacted again (a nested
span), compacted in a ``discard`` window, and the agent stores its compacted window's
frame as a message. The fact gate notes what each summary left out, and the summaries
either carry the canary in their text (offline) or leave it to the fact notes (brief).
Then it is erased (one entry, its thread, its owner) or expires and is purged, and
every column of every table is scanned on the backend under test, SQLite or
PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from agentmemory import services
from agentmemory.models import FoldedSpan, MemoryEntry, SummaryCoverage, Thread
from tests.helpers import RECORDING, SHORT_SUMMARY

CANARY = "ZQ7-CANARY-X41"
KNOBS = {"preserve_recent": 2, "trigger_min_entries": 4, "load_count": 40}
VERBATIM = {"trigger_min_entries": 1000}
TTL = timedelta(days=30)
SETTINGS = {
    "RECEIPTS": True,
    # Every fold notes the specifics its summary left out: the fact note is derived
    # text too.
    "FACT_GATE": {"THRESHOLD": 1.0, "ACTION": "append"},
    "WINDOW": {"CLASS": "agentmemory.window.seams.SlidingWindow",
               "OPTIONS": {"MAX_MESSAGES": 4}},
}
#: The offline summarizer carries the canary in its text; the brief one drops it, so
#: only the fact notes (the appended line and ``missing_facts``) carry it on.
SUMMARIZERS = {
    "offline": {},
    "brief": {"SUMMARIZER": {
        "BACKEND": RECORDING,
        "MODEL": "brief-test-model",
        "OPTIONS": {"REPLY": SHORT_SUMMARY},
    }},
}
ANSWER = (
    "Invoice {n} was issued on the first of the month, paid by card on the fifth, and "
    "refunded in part after the customer returned two of the five items in the order; "
    "the remaining balance is zero and nothing further is owed by either side."
)


def rows_holding(text: str) -> dict[str, int]:
    """Per table, how many rows hold ``text`` in any column (every column is cast to
    text, so JSON, text and character columns are all read), found by introspection."""
    found: dict[str, int] = {}
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            columns = connection.introspection.get_table_description(cursor, table)
            where = " OR ".join(
                f"LOWER(CAST({quote(column.name)} AS TEXT)) LIKE %s" for column in columns
            )
            cursor.execute(
                f"SELECT COUNT(*) FROM {quote(table)} WHERE {where}",
                [f"%{text.lower()}%"] * len(columns),
            )
            count = cursor.fetchone()[0]
            if count:
                found[table] = count
    return found


@dataclass
class Story:
    thread: Thread
    canary: MemoryEntry
    start: datetime
    spans: dict[str, FoldedSpan]


def build(thread: Thread, *, stored_frame: bool) -> Story:
    """Turns of invoice talk with the canary in turn 1, folded, recalled and compacted."""
    start = timezone.now() - timedelta(days=10)

    def turn(n: int, question: str | None = None) -> list[MemoryEntry]:
        return services.append(
            thread,
            [
                {"role": "user", "content": question or f"What happened to invoice {n}?"},
                {"role": "assistant", "content": ANSWER.format(n=n)},
            ],
            now=start + timedelta(hours=n),
        )

    canary = turn(1, f"My locker code is {CANARY}; invoice 1 is in locker {CANARY} too.")[0]
    for n in (2, 3):
        turn(n)
    # The agent runs on its recalled context (a receipt, the canary in it) as a live
    # window, compacted once and then again: the second fold swallows the first frame.
    request = {"role": "user", "content": "Which invoices are still open?"}
    verbatim = services.recall(thread, 100_000, **VERBATIM)
    window = [request] + [{"role": m.role, "content": m.content} for m in verbatim.messages]
    first = services.compact(thread, window, iteration=1, retain="conversation")
    # A new turn, so the second fold may take the whole turn before it (turns fold whole).
    grown = first.window + [{"role": "user", "content": "And invoices 6 to 8?"}] + [
        {"role": "assistant", "content": f"Checking invoice {n} in the ledger now."}
        for n in (6, 7, 8)
    ]
    second = services.compact(thread, grown, iteration=2, retain="conversation")

    inner = services.fold(thread, **KNOBS).summary
    for n in (4, 5):
        turn(n)
    outer = services.fold(thread, **KNOBS).summary
    assert inner is not None and outer is not None
    inner.refresh_from_db()
    assert inner.covered_by_id == outer.pk  # a summary of a summary
    services.recall(thread, 100_000)  # a receipt naming the nested summary
    # Another run compacts the same recalled turns under "discard": only its summary
    # text is kept, and that text carries the canary.
    preface = {"role": "assistant", "content": "Let me look back at what you told me."}
    recalled = [{"role": m.role, "content": m.content} for m in verbatim.messages]
    discarded = services.compact(
        thread, [request, preface, *recalled], iteration=1, retain="discard"
    )
    assert first.span and second.span and discarded.span
    if stored_frame:  # the agent stored its compacted window: a frame is a message too
        services.append(thread, [{"role": "user", "content": first.span.content}],
                        now=start + timedelta(hours=6))
    return Story(
        thread=thread,
        canary=canary,
        start=start,
        spans={"first": first.span, "second": second.span, "discarded": discarded.span},
    )


def erase_entry(story: Story) -> datetime | None:
    services.erase_entry(story.canary)
    return None


def erase_thread(story: Story) -> datetime | None:
    services.erase_thread(story.thread)
    return None


def erase_user(story: Story) -> datetime | None:
    assert story.thread.owner_id is not None
    services.erase_user(story.thread.owner_id)
    return None


def expire_and_purge(story: Story) -> datetime | None:
    """Turn 1 expires (it was written first); everything later lives on."""
    now = story.start + TTL + timedelta(hours=1, minutes=30)
    services.purge_expired(now=now)
    return now


@pytest.mark.django_db
@pytest.mark.parametrize("summarizer", sorted(SUMMARIZERS))
@pytest.mark.parametrize("stored_frame", [False, True], ids=["", "stored-frame"])
@pytest.mark.parametrize(
    "erase", [erase_entry, erase_thread, erase_user, expire_and_purge],
    ids=["erase_entry", "erase_thread", "erase_user", "expiry+purge"],
)
def test_no_row_in_any_table_holds_an_erased_message(
    erase: Callable[[Story], datetime | None], stored_frame: bool, summarizer: str
) -> None:
    users = get_user_model().objects
    owner = users.create_user("canary-owner")
    bystander = Thread.objects.create(owner=users.create_user("bystander"), ttl=TTL)
    services.append(bystander, [{"role": "user", "content": "Unrelated, and it stays."}])
    with override_settings(AGENTMEMORY={**SETTINGS, **SUMMARIZERS[summarizer]}):
        story = build(Thread.objects.create(owner=owner, ttl=TTL), stored_frame=stored_frame)
        before = rows_holding(CANARY)
        first, second, discarded = (story.spans[k] for k in ("first", "second", "discarded"))
        # Every path the canary took is there before erasure, so the scan below means it.
        assert first.messages and any(CANARY in m["content"] for m in first.messages)
        assert CANARY in first.content  # the summary carries it on
        assert second.messages and {"role": "user", "content": first.content} in second.messages
        assert list(second.nested_spans.all()) == [first]
        assert discarded.messages is None and CANARY in discarded.content
        assert before.keys() >= {"agentmemory_memoryentry", "agentmemory_foldedspan"}
        # The original, the two summaries, and the stored frame when there is one.
        assert before["agentmemory_memoryentry"] == 3 + stored_frame
        assert before["agentmemory_foldedspan"] == 3
        if summarizer == "brief":  # the canary lives on in the fact notes only
            notes = [*SummaryCoverage.objects.values_list("missing_facts", flat=True),
                     *FoldedSpan.objects.values_list("missing_facts", flat=True)]
            assert sum(CANARY in facts for facts in notes) >= 3

        # The search index finds it (test_search.py checks FTS5's own data blocks).
        assert services.search(owner, "canary")
        survivors = list(
            MemoryEntry.objects.filter(thread=story.thread).messages()
            .exclude(content__icontains=CANARY)
            .values_list("pk", flat=True)
        )
        now = erase(story)

        assert rows_holding(CANARY) == {}
        assert services.search(owner, "canary") == []
        if Thread.objects.filter(pk=story.thread.pk).exists():
            alive = MemoryEntry.objects.filter(pk__in=survivors)
            if now is not None:
                alive = alive.filter(expires_at__gt=now)
            recalled = services.recall(story.thread, 100_000, now=now, **VERBATIM)
            assert [m.id for m in recalled.messages] == list(
                alive.order_by("position", "id").values_list("pk", flat=True)
            )
            assert len(recalled.messages) >= len(survivors) - 2
        else:
            assert not FoldedSpan.objects.filter(thread_id=story.thread.pk).exists()
    kept = services.recall(bystander, 100_000)
    assert [m.content for m in kept.messages] == ["Unrelated, and it stays."]


@pytest.mark.django_db
def test_a_message_folded_before_it_was_stored_is_found_by_its_digest() -> None:
    """A window is the agent's: a message may be folded (here under ``discard``, so the
    span keeps no copy to search) before it is appended. The span's source row keeps
    the message's digest, and erasing the entry appended later deletes the span."""
    thread = Thread.objects.create()
    secret = {"role": "user", "content": f"Ship it to {CANARY}, the back door."}
    window = [
        {"role": "user", "content": "Sort out today's deliveries."},
        secret,
        *({"role": "assistant", "content": ANSWER.format(n=n)} for n in range(5)),
        # a newer turn: the secret's turn folds whole (turns are never split)
        {"role": "user", "content": "Anything else for today?"},
        {"role": "assistant", "content": ANSWER.format(n=5)},
    ]
    with override_settings(AGENTMEMORY=SETTINGS):
        compacted = services.compact(thread, window, retain="discard")
        span = compacted.span
        assert span is not None and span.messages is None, compacted.refusal
        unseen = services.compact(thread, [window[0], *window[2:]], iteration=2)
    other = unseen.span
    assert other is not None, unseen.refusal  # a fold that never saw the message
    entry, unrelated = services.append(
        thread, [secret, {"role": "assistant", "content": ANSWER.format(n=9)}]
    )
    assert span.sources.filter(entry__isnull=True).count() == span.message_count

    services.erase_entry(unrelated)
    assert FoldedSpan.objects.filter(pk=span.pk).exists()  # not derived from that one
    services.erase_entry(entry)
    assert list(FoldedSpan.objects.filter(thread=thread)) == [other]
