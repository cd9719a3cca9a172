"""The knobs of one recall: settings, overridden per call."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from agentmemory.conf import memory_settings
from agentmemory.exceptions import AgentMemoryError
from agentmemory.transcript import DEFAULT_INSTRUCTION


class InvalidRecallOption(AgentMemoryError, ValueError):
    """A recall override has an unknown name or a value out of range."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class ConflictingRecallOption(InvalidRecallOption):
    """Options each in range that contradict each other or the project's settings
    (low_water not below high_water, tiers without the summary tier): the API's 409."""


@dataclass(frozen=True)
class DecayConfig:
    half_life_seconds: float
    min_score: float


@dataclass(frozen=True)
class RecallConfig:
    mode: str
    load_count: int | None
    tiers: tuple[str, ...] | None
    trigger_min_entries: int | None
    preserve_recent: int
    min_fold_entries: int
    summary_tier: str
    instruction: str
    decay: DecayConfig | None
    reserve_tokens: int
    minimum_tokens: int
    max_entries: int | None
    header: str
    footer: str
    high_water: float | None = 1.0
    low_water: float = 0.2
    summary_share: float = 0.25
    input_limit: int = 16_000

    @property
    def budget_driven(self) -> bool:
        """Load by the room and fold by tokens (the contract), not the seeds' counts."""
        return self.load_count is None

    @property
    def effective_min_fold(self) -> int:
        """Law 5: never fold less than you keep."""
        return max(self.min_fold_entries, self.preserve_recent)

    @classmethod
    def build(cls, **overrides: Any) -> RecallConfig:
        s = memory_settings
        decay = s.DECAY
        values: dict[str, Any] = {
            "mode": s.RECALL_MODE,
            "load_count": s.LOAD_COUNT,
            "tiers": tuple(s.TIERS) if s.TIERS is not None else None,
            "trigger_min_entries": s.TRIGGER_MIN_ENTRIES,
            "preserve_recent": s.PRESERVE_RECENT,
            "min_fold_entries": s.MIN_FOLD_ENTRIES,
            "summary_tier": s.SUMMARY_TIER,
            "instruction": s.SUMMARY_INSTRUCTION or DEFAULT_INSTRUCTION,
            "decay": DecayConfig(float(decay["HALF_LIFE"]), float(decay.get("MIN_SCORE", 0.1)))
            if decay
            else None,
            "reserve_tokens": s.RESERVE_TOKENS,
            "minimum_tokens": s.MINIMUM_TOKENS,
            "max_entries": s.MAX_ENTRIES,
            "header": s.FORMAT_HEADER,
            "footer": s.FORMAT_FOOTER,
            "high_water": s.FOLD_HIGH_WATER,
            "low_water": s.FOLD_LOW_WATER,
            "summary_share": s.SUMMARY_SHARE,
            "input_limit": s.FOLD_INPUT_LIMIT,
        }
        names = {field.name for field in dataclasses.fields(cls)}
        for name, value in overrides.items():
            if name not in names:
                raise InvalidRecallOption(
                    f"Unknown recall option {name!r}; known: {', '.join(sorted(names))}.",
                    field=name,
                )
            if name == "tiers" and value is not None:
                value = tuple(value)
            if name == "decay" and isinstance(value, dict):
                value = DecayConfig(float(value["HALF_LIFE"]), float(value.get("MIN_SCORE", 0.1)))
            if name == "instruction" and not value:
                value = DEFAULT_INSTRUCTION
            values[name] = value
        config = cls(**values)
        config.validate()
        return config

    def validate(self) -> None:
        if self.mode not in ("inline", "background"):
            raise InvalidRecallOption(
                f"mode must be 'inline' or 'background', got {self.mode!r}.", field="mode"
            )
        for name in (
            "load_count", "trigger_min_entries", "preserve_recent", "min_fold_entries",
            "input_limit",
        ):
            value = getattr(self, name)
            if value is None and name in ("load_count", "trigger_min_entries"):
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidRecallOption(
                    f"{name} must be a positive integer, got {value!r}.", field=name
                )
        for name in ("reserve_tokens", "minimum_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidRecallOption(
                    f"{name} must be a non-negative integer, got {value!r}.", field=name
                )
        if self.high_water is not None and not _fraction(self.high_water, upper=True):
            raise InvalidRecallOption(
                f"high_water must be None or in (0, 1], got {self.high_water!r}.",
                field="high_water",
            )
        if not _fraction(self.low_water):
            raise InvalidRecallOption(
                f"low_water must be in (0, 1), got {self.low_water!r}.", field="low_water"
            )
        if self.high_water is not None and self.low_water >= self.high_water:
            raise ConflictingRecallOption(
                f"low_water must be below high_water ({self.high_water!r}), got "
                f"{self.low_water!r}.",
                field="low_water",
            )
        if not _fraction(self.summary_share):
            raise InvalidRecallOption(
                f"summary_share must be in (0, 1), got {self.summary_share!r}.",
                field="summary_share",
            )
        if self.tiers is not None and self.summary_tier not in self.tiers:
            # Coverage would hide the originals while the filter hides their summary: the
            # folded turns would vanish from recall, and the span be folded again.
            raise ConflictingRecallOption(
                f"tiers {list(self.tiers)} leaves out the summary tier {self.summary_tier!r}; "
                "add it, or set summary_tier to one of the tiers.",
                field="tiers",
            )
        if self.max_entries is not None and (
            not isinstance(self.max_entries, int) or self.max_entries < 1
        ):
            raise InvalidRecallOption(
                f"max_entries must be a positive integer or None, got {self.max_entries!r}.",
                field="max_entries",
            )
        if self.decay is not None and (
            self.decay.half_life_seconds <= 0 or not 0 <= self.decay.min_score <= 1
        ):
            raise InvalidRecallOption(
                "decay needs HALF_LIFE > 0 seconds and 0 <= MIN_SCORE <= 1.", field="decay"
            )


def _fraction(value: object, *, upper: bool = False) -> bool:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return False
    return 0 < value <= 1 if upper else 0 < value < 1
