"""The circuit of a summarizer backend and model: an outage costs a bounded number of calls.

Every failed call counts against its backend and model, whatever thread or process made
it (the state is one database row, `SummarizerCircuit`). ``CIRCUIT_FAILURES`` failures
in a row open the circuit: no fold calls that summarizer until its back-off has passed
(``CIRCUIT_BACKOFF`` seconds, doubling with each opening in a row, at most
``CIRCUIT_BACKOFF_MAX``, never sooner than a provider's ``Retry-After``). Then one call,
claimed by a conditional update, probes it: a success closes the circuit, a failure
opens it again for twice as long. So an outage of any length costs at most
``CIRCUIT_FAILURES`` calls, then one per back-off, for every thread together.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from agentmemory import signals
from agentmemory.conf import memory_settings
from agentmemory.exceptions import TransientSummarizerError
from agentmemory.models import SummarizerCircuit
from agentmemory.redaction import describe_error
from agentmemory.summarizers.base import BaseSummarizer

logger = logging.getLogger("agentmemory")


@dataclass(frozen=True)
class Circuit:
    """What `admit` read of a circuit: whether a call's outcome must be written back."""

    failures: int = 0
    probing: bool = False

    @property
    def clean(self) -> bool:
        return self.failures == 0 and not self.probing


def _rows(summarizer: BaseSummarizer) -> QuerySet[SummarizerCircuit]:
    return SummarizerCircuit.objects.filter(backend=summarizer.backend, model=summarizer.model)


def admit(summarizer: BaseSummarizer, now: datetime | None = None) -> Circuit | None:
    """May a fold call ``summarizer`` now? The circuit as read, or None while it is open.

    An open circuit whose back-off has passed admits exactly one caller, the probe (the
    others still see it open): a probe that never reports back (its process died) is
    followed by the next after twice the summarizer's timeout."""
    if memory_settings.CIRCUIT_FAILURES is None:
        return Circuit()
    now = now or timezone.now()
    row = _rows(summarizer).values_list("pk", "failures", "open_until").first()
    if row is None:
        return Circuit()
    pk, failures, open_until = row
    if open_until is None:
        return Circuit(failures=failures)
    if open_until > now:
        return None
    probe_until = now + timedelta(seconds=2 * summarizer.timeout)
    claimed = SummarizerCircuit.objects.filter(pk=pk, open_until=open_until).update(
        open_until=probe_until, updated_at=now
    )
    return Circuit(failures=failures, probing=True) if claimed else None


def succeeded(summarizer: BaseSummarizer, circuit: Circuit) -> None:
    """A call answered: the failures in a row end (one write, only when there were any)."""
    if circuit.clean or memory_settings.CIRCUIT_FAILURES is None:
        return
    was_open = _rows(summarizer).filter(open_until__isnull=False).exists()
    _rows(summarizer).update(failures=0, openings=0, open_until=None, updated_at=timezone.now())
    if was_open:
        logger.warning(
            "agentmemory: the summarizer %s (model %s) answered again; its circuit is "
            "closed.", summarizer.backend, summarizer.model,
        )
        signals.summarizer_circuit.send(
            sender=SummarizerCircuit, backend=summarizer.backend, model=summarizer.model,
            state="closed", until=None, failures=0, error="",
        )


def failed(summarizer: BaseSummarizer, circuit: Circuit, exc: BaseException) -> None:
    """A call failed: count it, and open the circuit at ``CIRCUIT_FAILURES`` in a row (or
    again, for longer, when the call was the probe)."""
    threshold = memory_settings.CIRCUIT_FAILURES
    if threshold is None:
        return
    now = timezone.now()
    error = describe_error(exc)[:300]
    SummarizerCircuit.objects.get_or_create(backend=summarizer.backend, model=summarizer.model)
    with transaction.atomic():
        row = _rows(summarizer).select_for_update().get()
        row.failures += 1
        row.last_error = error
        row.updated_at = now
        # Opened already by a call that failed beside this one: counted, not opened again.
        opens = row.failures >= threshold and row.open_until is None or circuit.probing
        if opens:
            row.openings += 1
            row.open_until = now + timedelta(seconds=_backoff(row.openings, exc))
        row.save()
    if opens:
        logger.warning(
            "agentmemory: the summarizer %s (model %s) failed %s times in a row (%s); no "
            "fold calls it until %s, then one call probes it.",
            summarizer.backend, summarizer.model, row.failures, error, row.open_until,
        )
        signals.summarizer_circuit.send(
            sender=SummarizerCircuit, backend=summarizer.backend, model=summarizer.model,
            state="open", until=row.open_until, failures=row.failures, error=error,
        )


def _backoff(openings: int, exc: BaseException) -> float:
    base = float(memory_settings.CIRCUIT_BACKOFF)
    seconds = min(base * 2 ** (openings - 1), float(memory_settings.CIRCUIT_BACKOFF_MAX))
    retry_after = exc.retry_after if isinstance(exc, TransientSummarizerError) else None
    return max(seconds, retry_after or 0.0)


def is_open(summarizer: BaseSummarizer, now: datetime | None = None) -> bool:
    """Whether no call may be made now (read only: claims no probe)."""
    if memory_settings.CIRCUIT_FAILURES is None:
        return False
    now = now or timezone.now()
    return _rows(summarizer).filter(open_until__gt=now).exists()
