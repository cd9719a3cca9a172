"""System checks for ``AGENTMEMORY``: ``manage.py check`` names the key and the fix.

Ids: E001 unknown key, E002 summarizer, E003 recall mode, E004 integer knobs,
E005 decay, E006 tiers, E007 token counter, E008 default TTL, E009 format text,
E010 background work (retries, batches, queue), E011 window compaction, E012 API limits,
W002 the API schema needs drf-spectacular's AutoSchema, E013 trust and cost settings,
E014 a configured feature's extra is not installed, W001 the summarizer's API key
variable is empty, W003 Django's body cap refuses a message the content limit allows, E015 search.
W004, the one check that reads a database, is `agentmemory.journal_check`'s.

`RULES` is the table, applied in its order by `check_settings`: a `SettingRule` holds
settings to a rule of `agentmemory.validators` or `agentmemory.check_rules` (with the
message, hint and id of a value that breaks it), a `Loads` builds the class a setting
names, and the named checks beside the table say what one value alone cannot: a rule
across settings, an optional extra, Django's own settings.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from importlib import import_module
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.checks import CheckMessage, Error, Tags, Warning, register

from agentmemory.check_rules import (
    BOOLEAN,
    DEFAULT,
    FACT_GATE,
    INSTRUCTION,
    NON_NEGATIVE_SECONDS,
    POSITIVE_SECONDS,
    QUEUE,
    SEARCH_LANGUAGE,
    SIGNING_KEY,
    TEXT,
    THROTTLE_RATES,
    TIER,
    TIER_LIST,
    TTL,
    WINDOW_RETAIN,
    Loads,
    SettingRule,
    got,
    got_type,
    is_value,
    setting_error,
    stated,
    unknown_key,
)
from agentmemory.conf import DEFAULTS, SETTINGS_NAME, memory_settings
from agentmemory.exceptions import AgentMemoryConfigurationError, MissingExtraError
from agentmemory.extras import install_command, require
from agentmemory.summarizers import get_summarizer
from agentmemory.tokens import get_counter
from agentmemory.validators import (
    DECAY,
    FRACTION,
    HIGH_WATER,
    NON_NEGATIVE_INT,
    OPTIONAL_POSITIVE_INT,
    POSITIVE_INT,
    RECALL_MODE,
    RECALL_OPTIONS,
    TIERS,
    below_high_water,
    is_int,
    loads_summary_tier,
)
from agentmemory.window.seams import get_window

#: E004: the counts among the recall knobs, held to the rule recall holds them to.
COUNTS = {
    setting: rule
    for setting, rule in [*RECALL_OPTIONS.values(), ("FOLD_BUDGET", POSITIVE_INT)]
    if rule in (POSITIVE_INT, OPTIONAL_POSITIVE_INT, NON_NEGATIVE_INT)
}

#: Bytes of an append body around one message's content: {"role": "assistant", ...}.
MESSAGE_ENVELOPE = 200


def _missing_extra(exc: MissingExtraError) -> CheckMessage:
    """E014: a configured feature whose optional dependency is not installed."""
    return Error(str(exc), hint=f"Install the {exc.extra!r} extra: {install_command(exc.extra)}",
                 id="agentmemory.E014")


def _summarizer() -> list[CheckMessage]:
    """E002: SUMMARIZER builds a summarizer (E014 without its extra); W001: its API key."""
    try:
        summarizer = get_summarizer()
    except MissingExtraError as exc:
        return [_missing_extra(exc)]
    except AgentMemoryConfigurationError as exc:
        return [setting_error(
            "SUMMARIZER", f"is not usable: {exc}",
            "Give BACKEND (a dotted path), MODEL (the model it calls) and OPTIONS.", "E002")]
    key_env = getattr(summarizer, "api_key_env", None)
    if key_env and not os.environ.get(key_env):
        return [Warning(
            f"The summarizer {summarizer.backend} reads its API key from ${key_env}, "
            "which is empty in this process.",
            hint=f"Export {key_env} where the web and worker processes run; recall stays "
            "verbatim (summarizer-failed) until it is set.",
            id="agentmemory.W001",
        )]
    return []


def _background_needs_celery() -> list[CheckMessage]:
    """E014: background folds run in Celery."""
    if memory_settings.RECALL_MODE != "background":
        return []
    try:
        require(f"{SETTINGS_NAME}['RECALL_MODE'] = 'background' (folds run in Celery)",
                "celery")
    except MissingExtraError as exc:
        return [_missing_extra(exc)]
    return []


def _low_water_below_high() -> list[CheckMessage]:
    """E004: a fold leaves less of the room verbatim than what triggers it (checked once
    FOLD_HIGH_WATER itself is good)."""
    high, low = memory_settings.FOLD_HIGH_WATER, memory_settings.FOLD_LOW_WATER
    if not HIGH_WATER(high) or FRACTION(low) and below_high_water(low, high):
        return []
    return [setting_error(
        "FOLD_LOW_WATER", f"must be a fraction of the room above 0 and below "
        f"FOLD_HIGH_WATER, got {low!r}.",
        "The default is 0.1: a fold leaves about 10% of the room verbatim.", "E004")]


def _summary_tier_loaded() -> list[CheckMessage]:
    """E006: TIERS, when a list, loads the tier summaries are written to."""
    tiers, tier = memory_settings.TIERS, memory_settings.SUMMARY_TIER
    if not isinstance(tiers, list | tuple) or loads_summary_tier(tiers, tier):
        return []
    return [setting_error(
        "SUMMARY_TIER", f"is {tier!r}, which TIERS does not load.",
        "A summary that is never loaded is folded and paid for again on every recall; "
        "add the summary tier to TIERS.", "E006")]


def _api_installed() -> list[CheckMessage]:
    """E014: the URLconf mounts agentmemory.api.urls but DRF or drf-spectacular is missing.

    Importing the URLconf is what Django's own URL check does; an error other than ours
    is left to that check to report.
    """
    urlconf = getattr(settings, "ROOT_URLCONF", None)
    if not urlconf:
        return []
    try:
        import_module(urlconf)
    except MissingExtraError as exc:
        return [_missing_extra(exc)]
    except Exception:
        pass  # any other import error: Django's urls check reports it
    return []


def _api_schema() -> list[CheckMessage]:
    """W002: the API's schema endpoint needs drf-spectacular's AutoSchema (read, not
    imported)."""
    if not apps.is_installed("rest_framework"):
        return []
    schema_class = getattr(settings, "REST_FRAMEWORK", {}).get("DEFAULT_SCHEMA_CLASS")
    if schema_class == "drf_spectacular.openapi.AutoSchema":
        return []
    return [Warning(
        "agentmemory's API schema endpoint (api/memory/schema/) needs drf-spectacular.",
        hint='Set REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"] = "drf_spectacular.openapi.AutoSchema".',
        id="agentmemory.W002",
    )]


def _body_cap() -> list[CheckMessage]:
    """W003: one message of API_MAX_CONTENT_CHARS (ASCII) must fit in Django's body cap,
    or the documented per-entry limit is a 413 before it is reached. A full batch of
    such messages need not fit: the cap bounds a batch's total (docs/operations.md)."""
    cap = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    chars = memory_settings.API_MAX_CONTENT_CHARS
    if (not apps.is_installed("rest_framework") or cap is None or not is_int(chars)
            or chars + MESSAGE_ENVELOPE <= cap):
        return []
    return [Warning(
        f"DATA_UPLOAD_MAX_MEMORY_SIZE ({cap} bytes) refuses a message of "
        f"{SETTINGS_NAME}['API_MAX_CONTENT_CHARS'] ({chars}) characters with a 413.",
        hint=f"Raise DATA_UPLOAD_MAX_MEMORY_SIZE to at least {chars + MESSAGE_ENVELOPE}, or "
        "lower API_MAX_CONTENT_CHARS.",
        id="agentmemory.W003",
    )]


API = "rest_framework"  # the API's limits are checked only where DRF is installed
SECONDS = ("FOLD_RETRY_BACKOFF", "SWEEP_WINDOW", "BROKER_TIMEOUT", "FOLD_LEASE",
           "FOLD_PARK_BACKOFF", "CIRCUIT_BACKOFF", "CIRCUIT_BACKOFF_MAX")

#: Every check of AGENTMEMORY but E001, in the order its messages are reported.
RULES: tuple[Callable[[], list[CheckMessage]], ...] = (
    _summarizer,
    SettingRule(("RECALL_MODE",), RECALL_MODE, is_value, "Use 'inline' or 'background'.",
                "E003"),
    _background_needs_celery,
    *(SettingRule((key,), rule, got, "None means no cap." if key == "MAX_ENTRIES" else DEFAULT,
                  "E004") for key, rule in COUNTS.items()),
    SettingRule(("FOLD_HIGH_WATER",), HIGH_WATER, got, "The default is 0.6: fold once the "
                "context outgrows 60% of the room (and FOLD_TRIGGER_MIN_TOKENS).", "E004"),
    _low_water_below_high,
    SettingRule(("FOLD_CACHE_MIN_TOKENS",), NON_NEGATIVE_INT, got,
                "The default is 1024 (OpenAI caches from 1,024 tokens); 0 turns it off.", "E004"),
    SettingRule(("SUMMARY_SHARE",), FRACTION, got,
                "The default is 0.25: summaries are merged once they hold more.", "E004"),
    SettingRule(("INLINE_FOLD_WAIT",), NON_NEGATIVE_SECONDS, got, DEFAULT, "E010"),
    SettingRule(("TOKEN_CACHE_SECONDS",), NON_NEGATIVE_SECONDS, got,
                "The default is 10.0; 0 turns the token cache off.", "E010"),
    SettingRule(("SEARCH_LANGUAGE",), SEARCH_LANGUAGE, got,
                "The default is 'english'; 'simple' does no stemming.", "E015"),
    SettingRule(("DECAY",), DECAY, is_value, f"Use {DECAY.text.removeprefix('must be ')}.",
                "E005"),
    SettingRule(("TIERS",), TIER_LIST, is_value, f"Use None or a non-empty list of {TIERS}.",
                "E006"),
    SettingRule(("WRITE_TIER", "SUMMARY_TIER"), TIER, is_value, f"Use one of {TIERS}.", "E006"),
    _summary_tier_loaded,
    Loads("TOKEN_COUNTER", get_counter,
          "Use agentmemory.tokens.EncodingCounter or a class with count(text) -> int.", "E007"),
    SettingRule(("DEFAULT_TTL",), TTL, is_value,
                "Use None (keep forever), a positive number of seconds or a timedelta.", "E008"),
    SettingRule(("FOLD_RETRY_MAX",), NON_NEGATIVE_INT, got, DEFAULT, "E010"),
    SettingRule(("FOLDS_PER_TASK", "PURGE_BATCH_SIZE", "SWEEP_LIMIT", "FOLD_MAX_DEATHS"),
                POSITIVE_INT, got, DEFAULT, "E010"),
    SettingRule(("CIRCUIT_FAILURES",), OPTIONAL_POSITIVE_INT, got, DEFAULT, "E010"),
    SettingRule(SECONDS, POSITIVE_SECONDS, got, DEFAULT, "E010"),
    SettingRule(("FOLD_QUEUE",), QUEUE, is_value, "Use None or a queue name.", "E010"),
    Loads("WINDOW", get_window,
          "Use {'CLASS': 'agentmemory.window.seams.SlidingWindow', 'OPTIONS': "
          "{'MAX_MESSAGES': 40}} or a class with select(messages, *, budget_tokens).", "E011"),
    SettingRule(("WINDOW_MIN_FOLD",), POSITIVE_INT, got, DEFAULT, "E011"),
    SettingRule(("WINDOW_RETAIN",), WINDOW_RETAIN, is_value,
                "Use 'conversation' (keep folded messages) or 'discard'.", "E011"),
    _api_installed,
    _api_schema,
    SettingRule(("API_THROTTLE_RATES",), THROTTLE_RATES, is_value,
                'Use {"append": "120/min" or None, "recall": "60/min" or None, '
                '"fold": "30/min" or None}.', "E012", app=API),
    SettingRule(("API_MAX_CONTENT_CHARS", "API_MAX_BATCH", "API_MAX_WINDOW", "API_PAGE_SIZE"),
                POSITIVE_INT, got, DEFAULT, "E012", app=API),
    _body_cap,
    SettingRule(("RECEIPTS", "HOLD_FLAGGED"), BOOLEAN, got, "", "E013"),
    SettingRule(("FACT_GATE",), FACT_GATE, is_value,
                "Use {'THRESHOLD': None or 0..1, 'ACTION': 'flag', 'append' or 'decline'}; "
                "the default is {'THRESHOLD': 0.5, 'ACTION': 'flag'}.", "E013"),
    SettingRule(("SIGNING_KEY",), SIGNING_KEY, stated, "Generate one with "
                "django.core.management.utils.get_random_secret_key().", "E013"),
    SettingRule(("DAILY_TOKEN_QUOTA",), OPTIONAL_POSITIVE_INT, got,
                "None means no quota; per-owner overrides live in OwnerQuota.", "E013"),
    SettingRule(("FORMAT_HEADER", "FORMAT_FOOTER"), TEXT, got_type, "Use '' for none.", "E009"),
    SettingRule(("SUMMARY_INSTRUCTION",), INSTRUCTION, stated,
                "None uses the authored default instruction.", "E009"),
)


@register(Tags.compatibility)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """E001 for settings that are not a dict or keys that are not settings, then every
    row of `RULES`."""
    try:
        user = memory_settings.user_settings
    except AgentMemoryConfigurationError as exc:
        return [Error(str(exc), hint=f"Set {SETTINGS_NAME} = {{...}}.", id="agentmemory.E001")]
    errors: list[CheckMessage] = [unknown_key(key) for key in sorted(set(user) - set(DEFAULTS))]
    for rule in RULES:
        errors.extend(rule())
    return errors

