"""The knobs of one recall: settings, overridden per call."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from agentmemory.conf import memory_settings
from agentmemory.exceptions import AgentMemoryError
from agentmemory.transcript import DEFAULT_INSTRUCTION
from agentmemory.validators import (
    DECAY,
    RECALL_OPTIONS,
    below_high_water,
    loads_summary_tier,
)


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


#: How many validated configs `RecallConfig.build` keeps, one per set of overrides: a
#: recall's call sites pass a few (mode="background"...); a caller passing ever new
#: values only empties the store when it is full.
BUILT_CONFIGS = 64


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
    high_water: float | None = 0.6
    trigger_min_tokens: int = 0
    low_water: float = 0.02
    cache_min_tokens: int = 1_024
    summary_share: float = 0.25
    input_limit: int = 64_000

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
        """The settings' options with ``overrides`` over them, validated together (an
        override may repair a setting). The settings are read once until they change,
        and the config of each of the last few sets of hashable overrides is kept with
        them (a frozen value: `BUILT_CONFIGS`)."""
        # Each value with its type: 1, 1.0 and True validate differently.
        key: tuple[Any, ...] | None = tuple(
            (name, type(value), value) for name, value in sorted(overrides.items()))
        try:
            hash(key)
        except TypeError:  # a list of tiers, a decay dict: built every time
            key = None
        if key is None:
            return cls._built(overrides)
        built: dict[tuple[Any, ...], RecallConfig] = memory_settings.derived(
            "recall-configs", dict)
        config = built.get(key)
        if config is None:
            config = cls._built(overrides)  # raises, and keeps nothing, if invalid
            if len(built) >= BUILT_CONFIGS:
                built.clear()
            built[key] = config
        return config

    @classmethod
    def _built(cls, overrides: dict[str, Any]) -> RecallConfig:
        config = memory_settings.derived("recall-config", cls._from_settings)
        if overrides:
            config = dataclasses.replace(config, **cls._normalised(overrides))
        config.validate()
        return config

    @classmethod
    def _from_settings(cls) -> RecallConfig:
        s = memory_settings
        values: dict[str, Any] = {
            name: getattr(s, setting) for name, (setting, _) in RECALL_OPTIONS.items()
        }
        values.update(
            tiers=tuple(s.TIERS) if s.TIERS is not None else None,
            summary_tier=s.SUMMARY_TIER,
            instruction=s.SUMMARY_INSTRUCTION or DEFAULT_INSTRUCTION,
            decay=_decay(s.DECAY),
            header=s.FORMAT_HEADER,
            footer=s.FORMAT_FOOTER,
            cache_min_tokens=s.FOLD_CACHE_MIN_TOKENS,
        )
        return cls(**values)

    @classmethod
    def _normalised(cls, overrides: dict[str, Any]) -> dict[str, Any]:
        names = {field.name for field in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for name, value in overrides.items():
            if name not in names:
                raise InvalidRecallOption(
                    f"Unknown recall option {name!r}; known: {', '.join(sorted(names))}.",
                    field=name,
                )
            if name == "tiers" and value is not None:
                value = tuple(value)
            if name == "decay":
                value = _decay(value)
            if name == "instruction" and not value:
                value = DEFAULT_INSTRUCTION
            values[name] = value
        return values

    def validate(self) -> None:
        """The rules of `agentmemory.validators`, which ``manage.py check`` also applies
        to the settings these options default from."""
        for name, (_, rule) in RECALL_OPTIONS.items():
            value = getattr(self, name)
            if not rule(value):
                raise InvalidRecallOption(f"{name} {rule.text}, got {value!r}.", field=name)
        if not below_high_water(self.low_water, self.high_water):
            raise ConflictingRecallOption(
                f"low_water must be below high_water ({self.high_water!r}), got "
                f"{self.low_water!r}.",
                field="low_water",
            )
        if not loads_summary_tier(self.tiers, self.summary_tier):
            # Coverage would hide the originals while the filter hides their summary: the
            # folded turns would vanish from recall, and the span be folded again.
            raise ConflictingRecallOption(
                f"tiers {list(self.tiers or ())} leaves out the summary tier "
                f"{self.summary_tier!r}; add it, or set summary_tier to one of the tiers.",
                field="tiers",
            )
        if self.decay is not None:
            decay = {"HALF_LIFE": self.decay.half_life_seconds, "MIN_SCORE": self.decay.min_score}
            if not DECAY(decay):
                raise InvalidRecallOption(f"decay {DECAY.text}, got {decay!r}.", field="decay")


def _decay(value: Any) -> DecayConfig | None:
    """The decay stage of a ``DECAY``-shaped dict (empty or None: no stage)."""
    if isinstance(value, DecayConfig):
        return value
    if not value:
        return None
    if not DECAY(value):
        raise InvalidRecallOption(f"decay {DECAY.text}, got {value!r}.", field="decay")
    return DecayConfig(float(value["HALF_LIFE"]), float(value.get("MIN_SCORE", 0.1)))
