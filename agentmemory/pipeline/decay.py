"""Decay (optional): let old entries fade by age against a half-life."""

from __future__ import annotations

from datetime import datetime

from agentmemory.models import MemoryEntry
from agentmemory.pipeline.config import DecayConfig


def decay_score(entry: MemoryEntry, now: datetime, config: DecayConfig) -> float:
    age = max((now - entry.created_at).total_seconds(), 0.0)
    return float(0.5 ** (age / config.half_life_seconds))


def filter_by_decay(
    entries: list[MemoryEntry], now: datetime, config: DecayConfig
) -> list[MemoryEntry]:
    return [entry for entry in entries if decay_score(entry, now, config) >= config.min_score]
