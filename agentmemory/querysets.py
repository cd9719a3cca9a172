"""Reusable filters. Visibility and expiry rules, and the ledger's token totals, live
here and nowhere else."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Self, TypeVar

from django.db import models
from django.db.models import Case, Count, F, Q, Sum, Value, When
from django.db.models.expressions import CombinedExpression
from django.db.models.functions import Coalesce
from django.utils import timezone

from agentmemory.choices import CallOutcome

if TYPE_CHECKING:
    # Named in the quoted QuerySet["..."] bases below, which pyflakes does not read.
    from agentmemory.models import (  # noqa: F401
        FoldedSpan,
        MemoryEntry,
        RecallReceipt,
        SummarizerCall,
        Thread,
    )


def expired_q(now: datetime) -> Q:
    return Q(expires_at__lte=now)


def is_expired(now: datetime) -> Case:
    """Per row, whether `ExpiringQuerySet.expired` would select it at ``now`` (to annotate
    every row of a read with its state, rather than filter them)."""
    return Case(When(expired_q(now), then=Value(True)), default=Value(False),
                output_field=models.BooleanField())


def unexpired_q(now: datetime, prefix: str = "") -> Q:
    return Q(**{f"{prefix}expires_at__isnull": True}) | Q(**{f"{prefix}expires_at__gt": now})


def no_fold_on_its_way_q(now: datetime, prefix: str = "") -> Q:
    """No fold queued, retrying or holding the lease (a claim or a lease past its time
    counts as gone: its holder died). ``prefix`` reaches a thread through a relation."""
    return (
        Q(**{f"{prefix}fold_queued_until__isnull": True})
        | Q(**{f"{prefix}fold_queued_until__lt": now})
    ) & (Q(**{f"{prefix}fold_lease_owner": ""}) | Q(**{f"{prefix}fold_lease_until__lt": now}))


def loaded_in_place(parents: dict[int, int | None]) -> dict[int, int]:
    """Per summary (``parents``: each summary's ``covered_by``), the summary recall loads
    in its place: the top of its chain of covering summaries, as recall loads only
    uncovered rows."""
    tops: dict[int, int] = {}
    for pk in parents:
        top = pk
        while (parent := parents.get(top)) is not None:
            top = parent
        tops[pk] = top
    return tops


_Model = TypeVar("_Model", bound=models.Model)


class ExpiringQuerySet(models.QuerySet[_Model]):
    """``expires_at`` rules, shared by every model that expires."""

    def expired(self, now: datetime | None = None) -> Self:
        """Rows whose ``expires_at`` is at or before ``now`` (default: the clock's now)."""
        return self.filter(expired_q(now or timezone.now()))

    def unexpired(self, now: datetime | None = None) -> Self:
        """Rows that never expire or expire after ``now`` (default: the clock's now)."""
        return self.filter(unexpired_q(now or timezone.now()))

    def never_expiring(self) -> Self:
        """Rows without an ``expires_at``."""
        return self.filter(expires_at__isnull=True)


class MemoryEntryQuerySet(ExpiringQuerySet["MemoryEntry"]):
    def uncovered(self) -> MemoryEntryQuerySet:
        """Entries no live summary covers."""
        return self.filter(covered_by__isnull=True)

    def live(self) -> MemoryEntryQuerySet:
        """Not retired (unfolded, regenerated, tampered) and not held for review."""
        return self.unretired().filter(held_at__isnull=True)

    def unretired(self) -> MemoryEntryQuerySet:
        """Not retired; a summary held for review is unretired but not live."""
        return self.filter(retired_at__isnull=True)

    def retired(self) -> MemoryEntryQuerySet:
        """Retired summaries (unfolded, regenerated, rejected, expired or found tampered):
        still readable, never recalled."""
        return self.filter(retired_at__isnull=False)

    def held(self) -> MemoryEntryQuerySet:
        """Summaries held back from recall until a reviewer approves them."""
        return self.filter(held_at__isnull=False)

    def needs_review(self) -> MemoryEntryQuerySet:
        """Summaries the injection quarantine or the fact gate (ACTION "flag") flagged
        that nobody has reviewed yet."""
        # Summaries only: a message has no coverage row, and the exclude would keep it.
        return self.summaries().exclude(coverage__injection_flags=[]).filter(
            coverage__reviewed_at__isnull=True
        )

    def tampered(self) -> MemoryEntryQuerySet:
        """Summaries found not to match their signature."""
        return self.filter(coverage__tampered_at__isnull=False)

    def lost_facts(self) -> MemoryEntryQuerySet:
        """Summaries the fact gate found missing some of their span's facts."""
        return self.summaries().exclude(coverage__missing_facts=[])

    def unexpired_or_summaries(self, now: datetime) -> MemoryEntryQuerySet:
        """Unexpired rows, and summaries whatever their expiry: until it is retired, an
        expired summary still hides originals that may be live, so recall reads it."""
        return self.filter(unexpired_q(now) | Q(kind="summary"))

    def covered(self) -> MemoryEntryQuerySet:
        return self.filter(covered_by__isnull=False)

    def recalled_in_place(self) -> dict[int, int]:
        """Per summary of these rows, the summary recall loads in its place: itself when
        uncovered, else the one at the top of its ``covered_by`` chain, since recall
        loads only uncovered rows (``pipeline.load``). One query; pass all the summaries
        of a thread so every chain is complete."""
        return loaded_in_place(dict(self.summaries().values_list("pk", "covered_by")))

    def visible(
        self, now: datetime | None = None, tiers: Iterable[str] | None = None
    ) -> MemoryEntryQuerySet:
        """What recall may load: live, not expired, not covered by a summary, in ``tiers``.

        A summary expires with the earliest original it stands for, and is retired on the
        next load (``services.retire_expired``), so what it hid comes back verbatim.
        """
        qs = self.uncovered().live().unexpired(now)
        if tiers is not None:
            qs = qs.filter(tier__in=list(tiers))
        return qs

    def summaries(self) -> MemoryEntryQuerySet:
        return self.filter(kind="summary")

    def messages(self) -> MemoryEntryQuerySet:
        return self.filter(kind="message")

    def newest_first(self) -> MemoryEntryQuerySet:
        return self.order_by("-position", "-id")

    def tool_call_ids(self) -> tuple[set[str], set[str]]:
        """The tool call ids these entries call, and those their tool results answer."""
        called: set[str] = set()
        answered: set[str] = set()
        rows = self.filter(kind="message", role__in=["assistant", "tool"]).values_list(
            "role", "tool_calls", "tool_call_id"
        )
        for role, calls, answer in rows:
            if role == "tool":
                answered.add(answer)
            else:
                called.update(str(call.get("id", "")) for call in calls or [])
        return called, answered


class ThreadQuerySet(models.QuerySet["Thread"]):
    def owned_by(self, user: object) -> ThreadQuerySet:
        return self.filter(owner=user)

    def without_fold_on_its_way(self, now: datetime) -> ThreadQuerySet:
        """Threads with no fold queued, retrying or holding the lease
        (`no_fold_on_its_way_q`)."""
        return self.filter(no_fold_on_its_way_q(now))

    def fold_on_its_way(self, now: datetime) -> ThreadQuerySet:
        """Threads whose fold is queued, retrying or holding the lease, and not parked."""
        return self.filter(fold_parked_until__isnull=True).exclude(no_fold_on_its_way_q(now))

    def follow_recall_budget(self, pk: int, budget_tokens: int) -> bool:
        """Record a background recall's budget as the thread's fold room when it is the
        smallest yet (a conditional update: concurrent recalls keep the smallest); False
        when it was not smaller."""
        smaller = models.Q(recall_budget__isnull=True) | models.Q(recall_budget__gt=budget_tokens)
        return bool(self.filter(smaller, pk=pk).update(recall_budget=budget_tokens))

    def lock(self, pk: int) -> bool:
        """Take the thread's row lock (inside a transaction); False if it is gone.

        The one lock order: every transaction that writes a thread's rows (append, fold
        write-back, window journal, ledger row, receipt, erasure, unfold, review, retire,
        purge, clear) takes this lock first, before any other row of that thread, so
        concurrent writers queue instead of deadlocking, and a thread erased meanwhile is
        seen here rather than as a foreign-key violation at commit."""
        return self.lock_many([pk]) == [pk]

    def lock_for_summary(self, pk: int) -> bool:
        """`lock`, for the write-back of a summary: taken by the UPDATE that empties
        ``unfolded_tokens`` (once a summary is written, what was appended no longer
        bounds what recall loads). False if the thread is gone."""
        return bool(self.filter(pk=pk).update(unfolded_tokens=None))

    def lock_many(self, pks: Iterable[int]) -> list[int]:
        """`lock` for several threads, in id order (two callers never wait on each other
        crosswise); returns the ids still there."""
        wanted = sorted(set(pks))
        if not wanted:
            return []
        return list(
            self.select_for_update().filter(pk__in=wanted).order_by("pk").values_list(
                "pk", flat=True
            )
        )


class FoldedSpanQuerySet(ExpiringQuerySet["FoldedSpan"]):
    def tampered(self) -> FoldedSpanQuerySet:
        """Spans found not to match their signature: lookups answer none of them."""
        return self.filter(tampered_at__isnull=False)

    def untampered(self) -> FoldedSpanQuerySet:
        """Spans not found tampered (yet: lookups still check each one's signature)."""
        return self.filter(tampered_at__isnull=True)


class RecallReceiptQuerySet(ExpiringQuerySet["RecallReceipt"]):
    """Receipts expire with the thread's TTL; the expiry rules are all they need (which
    receipts show an entry is `agentmemory.trust.receipts.receipts_showing`)."""


def reported_tokens() -> CombinedExpression:
    """A call's prompt and completion tokens as its backend reported them (none: 0)."""
    return Coalesce(F("prompt_tokens"), 0) + Coalesce(F("completion_tokens"), 0)


class SummarizerCallQuerySet(models.QuerySet["SummarizerCall"]):
    def spent_tokens(self) -> int:
        """The tokens these calls' backends reported, prompt and completion together."""
        return int(self.aggregate(tokens=Sum(reported_tokens()))["tokens"] or 0)

    def charged_tokens(self) -> int:
        """What these calls count against a quota.

        A settled call counts the prompt and completion tokens its backend reported. A
        call still in flight (or lost with its worker), and one whose backend reports no
        usage, counts its estimate. A failed call reported none and counts nothing.
        """
        estimate = Coalesce(F("estimated_tokens"), 0)
        charge = Case(
            When(outcome=CallOutcome.RESERVED, then=estimate),
            When(
                ~Q(outcome=CallOutcome.FAILED),
                prompt_tokens__isnull=True,
                completion_tokens__isnull=True,
                then=estimate,
            ),
            default=reported_tokens(),
        )
        return int(self.aggregate(tokens=Sum(charge))["tokens"] or 0)

    def totals(self) -> dict[str, Any]:
        """Calls, prompt and completion tokens, the prompt tokens providers reported read
        from their cache, and calls by outcome, in one query."""
        outcomes = CallOutcome.values
        totals = self.aggregate(
            calls=Count("id"),
            prompt_tokens=Sum("prompt_tokens", default=0),
            completion_tokens=Sum("completion_tokens", default=0),
            cached_tokens=Sum("cached_tokens", default=0),
            **{outcome: Count("id", filter=Q(outcome=outcome)) for outcome in outcomes},
        )
        return {
            "calls": totals["calls"],
            "prompt_tokens": totals["prompt_tokens"],
            "completion_tokens": totals["completion_tokens"],
            "cached_tokens": totals["cached_tokens"],
            "by_outcome": {outcome: totals[outcome] for outcome in outcomes},
        }

