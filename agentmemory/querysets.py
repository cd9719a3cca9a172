"""Reusable filters. Visibility rules live here and nowhere else."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import models
from django.db.models import Q
from django.utils import timezone

if TYPE_CHECKING:
    # Named in the quoted QuerySet["..."] bases below, which pyflakes does not read.
    from agentmemory.models import MemoryEntry, Thread  # noqa: F401


def unexpired_q(now: datetime, prefix: str = "") -> Q:
    return Q(**{f"{prefix}expires_at__isnull": True}) | Q(**{f"{prefix}expires_at__gt": now})


class MemoryEntryQuerySet(models.QuerySet["MemoryEntry"]):
    def unexpired(self, now: datetime | None = None) -> MemoryEntryQuerySet:
        return self.filter(unexpired_q(now or timezone.now()))

    def expired(self, now: datetime | None = None) -> MemoryEntryQuerySet:
        return self.filter(expires_at__lte=now or timezone.now())

    def uncovered(self) -> MemoryEntryQuerySet:
        return self.filter(covered_by__isnull=True)

    def live(self) -> MemoryEntryQuerySet:
        """Not retired (unfolded, regenerated, tampered) and not held for review."""
        return self.filter(retired_at__isnull=True, held_at__isnull=True)

    def covered(self) -> MemoryEntryQuerySet:
        return self.filter(covered_by__isnull=False)

    def retired(self) -> MemoryEntryQuerySet:
        """Unfolded, replaced by a new version, or found tampered: never loaded again."""
        return self.filter(retired_at__isnull=False)

    def held(self) -> MemoryEntryQuerySet:
        """Summaries held for review: they cover nothing until approved."""
        return self.filter(held_at__isnull=False)

    def awaiting_review(self) -> MemoryEntryQuerySet:
        """Summaries with injection flags that nobody has reviewed yet."""
        return self.exclude(coverage__injection_flags=[]).filter(
            coverage__reviewed_at__isnull=True
        )

    def tampered(self) -> MemoryEntryQuerySet:
        return self.filter(coverage__tampered_at__isnull=False)

    def lost_facts(self) -> MemoryEntryQuerySet:
        """Summaries that do not mention some facts of their originals."""
        return self.exclude(coverage__missing_facts=[])

    def recalled_in_place(self) -> dict[int, int]:
        """Per summary of these rows, the summary recall loads in its place: itself when
        uncovered, else the one at the top of its ``covered_by`` chain, since recall
        loads only uncovered rows (``pipeline.load``). One query; pass all the summaries
        of a thread so every chain is complete."""
        parents: dict[int, int | None] = dict(self.summaries().values_list("pk", "covered_by"))
        tops: dict[int, int] = {}
        for pk in parents:
            top = pk
            while (parent := parents.get(top)) is not None:
                top = parent
            tops[pk] = top
        return tops

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
        """Threads with no fold queued, retrying or holding the lease (a claim or a lease
        past its time counts as gone: its holder died)."""
        return self.filter(
            Q(fold_queued_until__isnull=True) | Q(fold_queued_until__lt=now),
            Q(fold_lease_owner="") | Q(fold_lease_until__lt=now),
        )

    def lock(self, pk: int) -> bool:
        """Take the thread's row lock (inside a transaction); False if it is gone.

        The one lock order: every transaction that writes a thread's rows (append, fold
        write-back, window journal, ledger row, receipt, erasure, unfold, review, retire,
        purge, clear) takes this lock first, before any other row of that thread, so
        concurrent writers queue instead of deadlocking, and a thread erased meanwhile is
        seen here rather than as a foreign-key violation at commit."""
        return self.lock_many([pk]) == [pk]

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
