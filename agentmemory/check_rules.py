"""The rows of `agentmemory.checks.RULES`, and the predicates they add to the validators.

A `SettingRule` holds each of its settings to one `agentmemory.validators.Rule` and says
how a value that breaks it is reported: the message after the key (`got`, `is_value`,
`got_type` or `stated` put the rule's words and the value together), the hint and the
check id. A `Loads` row builds the class a setting names and reports why it cannot.
The rules below are those of settings that recall never reads as options.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from difflib import get_close_matches
from typing import Any

from django.apps import apps
from django.core.checks import CheckMessage, Error

from agentmemory.conf import DEFAULTS, SETTINGS_NAME, memory_settings
from agentmemory.exceptions import AgentMemoryConfigurationError
from agentmemory.search.schema import checked_language
from agentmemory.validators import TIERS, Rule, is_number


def setting_error(key: str, text: str, hint: str, code: str) -> Error:
    """``AGENTMEMORY['KEY'] <text>``, under ``agentmemory.<code>``."""
    return Error(f"{SETTINGS_NAME}['{key}'] {text}", hint=hint, id=f"agentmemory.{code}")


def unknown_key(key: str) -> Error:
    """E001 for a key that is not a setting: the nearest setting's name when one is
    close (a typo), else every setting's name."""
    near = get_close_matches(str(key).upper(), DEFAULTS, n=1)
    if near:
        return setting_error(key, f"is not a setting of agentmemory. Did you mean {near[0]!r}?",
                             f"Rename it to {near[0]!r}; docs/settings.md lists every setting.",
                             "E001")
    return setting_error(key, "is not a setting of agentmemory.",
                         f"Remove it; the settings are: {', '.join(sorted(DEFAULTS))}.", "E001")


# How a rule's message says what was wrong with the value.
def got(rule: Rule, value: Any) -> str:
    return f"{rule.text}, got {value!r}."


def is_value(rule: Rule, value: Any) -> str:
    return f"is {value!r}."


def got_type(rule: Rule, value: Any) -> str:
    return f"{rule.text}, got {type(value).__name__}."


def stated(rule: Rule, value: Any) -> str:
    return f"{rule.text}."


#: A hint of None says the key's default: "The default is 4000."
DEFAULT = None


@dataclass(frozen=True)
class SettingRule:
    """Each of ``keys`` must pass ``rule``; a value that does not is an error ``id``
    whose message is ``says(rule, value)`` after the key, with ``hint`` (`DEFAULT`: the
    key's default). With ``app``, the rule holds only while that app is installed."""

    keys: tuple[str, ...]
    rule: Rule
    says: Callable[[Rule, Any], str]
    hint: str | None
    id: str
    app: str | None = None

    def __call__(self) -> list[CheckMessage]:
        if self.app is not None and not apps.is_installed(self.app):
            return []
        errors: list[CheckMessage] = []
        for key in self.keys:
            value = getattr(memory_settings, key)
            if not self.rule(value):
                hint = f"The default is {DEFAULTS[key]}." if self.hint is None else self.hint
                errors.append(setting_error(key, self.says(self.rule, value), hint, self.id))
        return errors


@dataclass(frozen=True)
class Loads:
    """``key`` names a class that ``load`` builds; a configuration error it raises is
    error ``id``, quoted after the key."""

    key: str
    load: Callable[[], object]
    hint: str
    id: str

    def __call__(self) -> list[CheckMessage]:
        try:
            self.load()
        except AgentMemoryConfigurationError as exc:
            return [setting_error(self.key, f"is not usable: {exc}", self.hint, self.id)]
        return []


def _is_search_language(value: Any) -> bool:
    try:
        checked_language(value)
    except ValueError:
        return False
    return True


def _is_tier_list(value: Any) -> bool:
    return value is None or (
        isinstance(value, list | tuple) and bool(value) and not set(value) - set(TIERS)
    )


def _is_ttl(value: Any) -> bool:
    return value is None or (
        isinstance(value, timedelta) and value > timedelta(0) or is_number(value) and value > 0
    )


def _is_throttle_rates(value: Any) -> bool:
    return isinstance(value, dict) and not set(value) - {"append", "recall", "fold"} and all(
        rate is None or isinstance(rate, str) and "/" in rate for rate in value.values()
    )


def _is_fact_gate(value: Any) -> bool:
    if not isinstance(value, dict) or set(value) - {"THRESHOLD", "ACTION"}:
        return False
    threshold = value.get("THRESHOLD")
    return value.get("ACTION", "flag") in ("flag", "append", "decline") and (
        threshold is None or isinstance(threshold, int | float) and 0 <= threshold <= 1
    )


SEARCH_LANGUAGE = Rule(_is_search_language, "must be a text search configuration name")
TIER_LIST = Rule(_is_tier_list, f"must be None or a non-empty list of {TIERS}")
TIER = Rule(lambda value: value in TIERS, f"must be one of {TIERS}")
TTL = Rule(_is_ttl, "must be None, a positive number of seconds or a timedelta")
POSITIVE_SECONDS = Rule(
    lambda value: is_number(value) and value > 0, "must be a positive number of seconds"
)
NON_NEGATIVE_SECONDS = Rule(
    lambda value: is_number(value) and value >= 0, "must be a non-negative number of seconds"
)
QUEUE = Rule(lambda value: value is None or isinstance(value, str) and bool(value),
             "must be None or a queue name")
WINDOW_RETAIN = Rule(lambda value: value in ("conversation", "discard"),
                     "must be 'conversation' or 'discard'")
THROTTLE_RATES = Rule(_is_throttle_rates, "must map append, recall and fold to a rate or None")
BOOLEAN = Rule(lambda value: isinstance(value, bool), "must be True or False")
FACT_GATE = Rule(_is_fact_gate,
                 "must be {'THRESHOLD': None or 0..1, 'ACTION': 'flag', 'append' or 'decline'}")
SIGNING_KEY = Rule(
    lambda value: value is None or isinstance(value, str) and len(value) >= 32,
    "must be None (derive from SECRET_KEY) or a string of at least 32 characters",
)
TEXT = Rule(lambda value: isinstance(value, str), "must be a string")
INSTRUCTION = Rule(lambda value: value is None or isinstance(value, str) and bool(value.strip()),
                   "must be None or non-empty text")
