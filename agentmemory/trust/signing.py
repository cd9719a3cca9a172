"""Keyed fingerprints of summaries and spans: a row edited in the database is detected.

HMAC-SHA256 over a canonical payload, with AGENTMEMORY['SIGNING_KEY'] or, when that is
None, a key derived from SECRET_KEY (Django's salted_hmac). Rotating SECRET_KEY keeps
signatures valid while the old key is in SECRET_KEY_FALLBACKS; run ``manage.py
agentmemory_verify --resign`` before dropping it. A dedicated SIGNING_KEY has no
fallback: re-sign right after changing it.

Signatures name their scheme (``v1:...``), so a later scheme can be told apart; one
without it vouches for nothing. A summary's covers its coverage rows (SummarySource), the
fact score, missing facts, injection flags, the hold, the review and the expiry; a
window span's also covers the digests of what it folded (SpanSource).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.utils.crypto import salted_hmac

from agentmemory.conf import memory_settings
from agentmemory.models import (
    FoldedSpan,
    MemoryEntry,
    SpanSource,
    SummaryCoverage,
    SummarySource,
)

_SALT = "agentmemory.signing"


def _sign(payload: dict[str, Any], secret: str | None = None) -> str:
    value = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    secret = secret or memory_settings.SIGNING_KEY or settings.SECRET_KEY
    return salted_hmac(_SALT, value, secret=secret, algorithm="sha256").hexdigest()


def _fallback_keys() -> list[str]:
    """Keys a signature may still be under after a rotation: Django's
    SECRET_KEY_FALLBACKS when the key is derived from SECRET_KEY, none otherwise."""
    if memory_settings.SIGNING_KEY:
        return []
    return list(getattr(settings, "SECRET_KEY_FALLBACKS", []))


def _matches(signature: str, payload: dict[str, Any]) -> bool:
    return any(
        hmac.compare_digest(signature, _sign(payload, key))
        for key in [None, *_fallback_keys()]
    )


#: The scheme signatures are written under, named by their prefix.
SCHEME = "v1"
_PREFIX = f"{SCHEME}:"


#: Signatures this process has checked and found to match their payload: a recall
#: checks the same few summaries on every call. Keyed by the signature, the payload (each
#: value with its type) and the keys it may be under, so an edited row or a changed key
#: is checked again; a mismatch is never kept. Each key's value is the length of the
#: text it holds; the whole is dropped before it would hold more than either limit, and
#: a text longer than the text limit is never kept.
_MATCHED: dict[tuple[Any, ...], int] = {}
_MATCHED_LIMIT = 4_096
_MATCHED_TEXT_LIMIT = 1 << 24  # characters of summary text: about 16 MiB of ASCII


def _verifies(signature: str, payload: dict[str, Any]) -> bool:
    if not signature.startswith(_PREFIX):
        return False
    key: tuple[Any, ...] | None = (signature, _frozen(payload), memory_settings.SIGNING_KEY,
                                   settings.SECRET_KEY, *_fallback_keys())
    try:
        if key in _MATCHED:
            return True
    except TypeError:  # a value of a type that cannot be hashed: checked every time
        key = None
    if not _matches(signature.removeprefix(_PREFIX), payload):
        return False
    text = len(str(payload.get("content") or ""))
    if key is not None and text <= _MATCHED_TEXT_LIMIT:
        if (len(_MATCHED) >= _MATCHED_LIMIT
                or sum(_MATCHED.values()) + text > _MATCHED_TEXT_LIMIT):
            _MATCHED.clear()
        _MATCHED[key] = text
    return True


def _frozen(value: Any) -> Any:
    """``value`` hashable, each scalar with its type (``1``, ``1.0`` and ``True`` differ),
    and any scalar but a string, an int or None by its repr, as the payload's JSON shows
    it (``0.0`` and ``-0.0``, ``Decimal("1.0")`` and ``Decimal("1.00")`` differ): equal
    keys are equal JSON. Dicts keep their order: another order only misses the cache."""
    kind = type(value)
    if kind is dict:
        return tuple((key, _frozen(item)) for key, item in value.items())
    if kind is list or kind is tuple:
        return (kind, *(_frozen(item) for item in value))
    if kind is str or kind is int or kind is bool or value is None:
        return (kind, value)
    return (kind, repr(value))


def _summary_fields(summary: MemoryEntry, coverage: SummaryCoverage) -> dict[str, Any]:
    return {
        "thread": summary.thread_id,
        "key": summary.summary_key,
        "content": summary.content,
        "turn": summary.turn,
        "position": summary.position,
        "tokens": summary.token_count,
        "from_turn": coverage.from_turn,
        "to_turn": coverage.to_turn,
        "entry_count": coverage.entry_count,
        "span_tokens": coverage.span_tokens,
        "original_tokens": coverage.original_tokens,
        "model": coverage.model,
        "version": coverage.version,
        "prompt_hash": coverage.prompt_hash,
        "temperature": coverage.temperature,
        "seed": coverage.seed,
        "library_version": coverage.library_version,
    }


def summary_sources(summary: MemoryEntry) -> list[int]:
    """The ids of the entries a summary stands for (its SummarySource rows), sorted."""
    return sorted(SummarySource.objects.filter(summary=summary).values_list("entry_id", flat=True))


def sources_by_summary(summaries: Iterable[MemoryEntry]) -> dict[int, list[int]]:
    """`summary_sources` of many summaries in one query."""
    found: dict[int, list[int]] = {summary.pk: [] for summary in summaries}
    if not found:
        return {}
    rows = SummarySource.objects.filter(summary_id__in=list(found)).values_list(
        "summary_id", "entry_id"
    )
    for summary_id, entry_id in rows:
        found[summary_id].append(entry_id)
    return {summary_id: sorted(ids) for summary_id, ids in found.items()}


def summary_payload(
    summary: MemoryEntry, coverage: SummaryCoverage, sources: Sequence[int]
) -> dict[str, Any]:
    """What a summary's signature covers: everything recall or a reviewer trusts. Its
    text, key and place; its coverage facts and provenance; the exact entries it stands
    for; the fact gate's score and the facts it found missing; the injection flags;
    whether it is held, and who reviewed it; when it expires."""
    return {
        **_summary_fields(summary, coverage),
        "scheme": SCHEME,
        "sources": sorted(sources),
        "level": coverage.level,
        "fact_score": coverage.fact_score,
        "missing_facts": coverage.missing_facts,
        "injection_flags": coverage.injection_flags,
        "held": summary.held_at is not None,
        "reviewed": coverage.reviewed_at is not None,
        "reviewed_by": coverage.reviewed_by_id,
        "expires_at": _instant(summary.expires_at),
    }


def sign_summary(
    summary: MemoryEntry, coverage: SummaryCoverage, sources: Sequence[int] | None = None
) -> str:
    """The current scheme's signature; ``sources`` is read from the database if omitted."""
    if sources is None:
        sources = summary_sources(summary)
    return _PREFIX + _sign(summary_payload(summary, coverage, sources))


def summary_is_intact(summary: MemoryEntry, sources: Sequence[int] | None = None) -> bool:
    """Whether the row still matches its signature (``sources``: as `sign_summary`)."""
    if sources is None:
        sources = summary_sources(summary)
    coverage = summary.coverage
    return _verifies(coverage.signature, summary_payload(summary, coverage, sources))


def _span_fields(span: FoldedSpan) -> dict[str, Any]:
    return {
        "thread": span.thread_id,
        "fingerprint": span.fingerprint,
        "span_fingerprint": span.span_fingerprint,
        "content": span.content,
        "messages": span.messages,
        "message_count": span.message_count,
        "iteration": span.iteration,
        "model": span.model,
        "retain": span.retain,
        "prompt_hash": span.prompt_hash,
        "temperature": span.temperature,
        "seed": span.seed,
        "library_version": span.library_version,
    }


def span_derivation(span: FoldedSpan) -> list[str]:
    """The digests of the messages a span folded, by position (its SpanSource rows)."""
    if span.pk is None:
        return []
    rows = SpanSource.objects.filter(span=span).order_by("position").values_list(
        "position", "digest"
    )
    return [digest for _, digest in dict(rows).items()]


def span_payload(span: FoldedSpan, derivation: Sequence[str]) -> dict[str, Any]:
    """What a span's signature covers: its frame, folded messages and provenance, what
    it was made from (the digests of its SpanSource rows), the fact gate's score and
    missing facts, the injection flags, and its expiry."""
    return {
        **_span_fields(span),
        "scheme": SCHEME,
        "derivation": list(derivation),
        "fact_score": span.fact_score,
        "missing_facts": span.missing_facts,
        "injection_flags": span.injection_flags,
        "expires_at": _instant(span.expires_at),
    }


def sign_span(span: FoldedSpan, derivation: Sequence[str] | None = None) -> str:
    """The current scheme's signature; ``derivation`` is read from the database if
    omitted (`span_derivation`)."""
    if derivation is None:
        derivation = span_derivation(span)
    return _PREFIX + _sign(span_payload(span, derivation))


def span_is_intact(span: FoldedSpan, derivation: Sequence[str] | None = None) -> bool:
    """Whether the span still matches its signature (``derivation``: as `sign_span`)."""
    if derivation is None:
        derivation = span_derivation(span)
    return _verifies(span.signature, span_payload(span, derivation))


def _instant(value: datetime | None) -> str | None:
    """A timestamp as signed: UTC, to the microsecond, whatever the database returned."""
    return value.astimezone(UTC).isoformat() if value is not None else None
