"""Keyed fingerprints of summaries and spans: a row edited in the database is detected.

HMAC-SHA256 over a canonical payload, with AGENTMEMORY['SIGNING_KEY'] or, when that is
None, a key derived from SECRET_KEY (Django's salted_hmac). Rotating SECRET_KEY keeps
signatures valid while the old key is in SECRET_KEY_FALLBACKS; run ``manage.py
agentmemory_verify --resign`` before dropping it. A dedicated SIGNING_KEY has no
fallback: re-sign right after changing it.
"""

from __future__ import annotations

import hmac
import json
from typing import Any

from django.conf import settings
from django.utils.crypto import salted_hmac

from agentmemory.conf import memory_settings
from agentmemory.models import FoldedSpan, MemoryEntry, SummaryCoverage

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


def summary_payload(summary: MemoryEntry, coverage: SummaryCoverage) -> dict[str, Any]:
    """What a summary's signature covers: its text and key, and its coverage facts."""
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


def sign_summary(summary: MemoryEntry, coverage: SummaryCoverage) -> str:
    return _sign(summary_payload(summary, coverage))


def summary_is_intact(summary: MemoryEntry) -> bool:
    coverage = summary.coverage
    return _matches(coverage.signature, summary_payload(summary, coverage))


def span_payload(span: FoldedSpan) -> dict[str, Any]:
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


def sign_span(span: FoldedSpan) -> str:
    return _sign(span_payload(span))


def span_is_intact(span: FoldedSpan) -> bool:
    return _matches(span.signature, span_payload(span))
