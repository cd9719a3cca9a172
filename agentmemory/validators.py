"""The rules a recall knob keeps, written once.

`agentmemory.checks` reports a setting that breaks one as a system-check error (the
setting's key, an id and a hint); `RecallConfig.validate` raises `InvalidRecallOption`
for a setting or a per-call override that breaks one (the option's name). A `Rule` is a
predicate, True when the value is allowed, and the words that say what it allows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

TIERS = ("hot", "warm", "cold")
RECALL_MODES = ("inline", "background")


def is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class Rule:
    """``rule(value)``: whether ``value`` is allowed; ``text``: what is, said after a name."""

    test: Callable[[Any], bool]
    text: str

    def __call__(self, value: Any) -> bool:
        return self.test(value)


POSITIVE_INT = Rule(lambda value: is_int(value) and value >= 1, "must be a positive integer")
OPTIONAL_POSITIVE_INT = Rule(
    lambda value: value is None or POSITIVE_INT(value), "must be None or a positive integer"
)
NON_NEGATIVE_INT = Rule(
    lambda value: is_int(value) and value >= 0, "must be a non-negative integer"
)
RECALL_MODE = Rule(lambda value: value in RECALL_MODES, "must be 'inline' or 'background'")
HIGH_WATER = Rule(
    lambda value: value is None or is_number(value) and 0 < value <= 1,
    "must be None (no token trigger) or a fraction of the room in (0, 1]",
)
FRACTION = Rule(
    lambda value: is_number(value) and 0 < value < 1, "must be a fraction of the room in (0, 1)"
)


def _is_decay(value: Any) -> bool:
    if value is None:
        return True
    if not isinstance(value, dict) or set(value) - {"HALF_LIFE", "MIN_SCORE"}:
        return False
    half_life, min_score = value.get("HALF_LIFE"), value.get("MIN_SCORE", 0.1)
    return is_number(half_life) and half_life > 0 and is_number(min_score) and 0 <= min_score <= 1


DECAY = Rule(_is_decay, "must be None (no decay stage) or {'HALF_LIFE': seconds > 0, "
                        "'MIN_SCORE': 0..1}")


def below_high_water(low_water: Any, high_water: Any) -> bool:
    """The fold leaves less of the room verbatim than the amount that triggers it."""
    return not is_number(high_water) or low_water < high_water


def loads_summary_tier(tiers: Sequence[str] | None, summary_tier: str) -> bool:
    """A summary is written to a tier that recall loads (None: every tier)."""
    return tiers is None or summary_tier in tiers


#: The recall options that are numbers or a mode, the setting each defaults from, and its
#: rule. (``low_water`` must also be below ``high_water``: `below_high_water`.)
RECALL_OPTIONS: dict[str, tuple[str, Rule]] = {
    "mode": ("RECALL_MODE", RECALL_MODE),
    "load_count": ("LOAD_COUNT", OPTIONAL_POSITIVE_INT),
    "trigger_min_entries": ("TRIGGER_MIN_ENTRIES", OPTIONAL_POSITIVE_INT),
    "preserve_recent": ("PRESERVE_RECENT", POSITIVE_INT),
    "min_fold_entries": ("MIN_FOLD_ENTRIES", POSITIVE_INT),
    "input_limit": ("FOLD_INPUT_LIMIT", POSITIVE_INT),
    "reserve_tokens": ("RESERVE_TOKENS", NON_NEGATIVE_INT),
    "minimum_tokens": ("MINIMUM_TOKENS", NON_NEGATIVE_INT),
    "high_water": ("FOLD_HIGH_WATER", HIGH_WATER),
    "trigger_min_tokens": ("FOLD_TRIGGER_MIN_TOKENS", NON_NEGATIVE_INT),
    "low_water": ("FOLD_LOW_WATER", FRACTION),
    "summary_share": ("SUMMARY_SHARE", FRACTION),
    "max_entries": ("MAX_ENTRIES", OPTIONAL_POSITIVE_INT),
}
