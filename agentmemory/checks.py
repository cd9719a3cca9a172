"""System checks for ``AGENTMEMORY``: ``manage.py check`` names the key and the fix.

Ids: E001 unknown key, E002 summarizer, E003 recall mode, E004 integer knobs,
E005 decay, E006 tiers, E007 token counter, E008 default TTL, E009 format text,
E010 background work (retries, batches, queue), E011 window compaction, E012 API limits,
W002 the API schema needs drf-spectacular's AutoSchema, E013 trust and cost settings,
E014 a configured feature's extra is not installed, W001 the summarizer's API key
variable is empty, W003 Django's body cap refuses a message the content limit allows, E015 search.
"""

from __future__ import annotations

import os
from datetime import timedelta
from importlib import import_module
from typing import Any

from django.core.checks import CheckMessage, Error, Tags, Warning, register

from agentmemory.conf import DEFAULTS, SETTINGS_NAME, memory_settings
from agentmemory.exceptions import AgentMemoryConfigurationError, MissingExtraError
from agentmemory.extras import install_command, require
from agentmemory.search.schema import checked_language
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
    is_number,
    loads_summary_tier,
)

#: E004: the counts among the recall knobs, held to the rule recall holds them to.
COUNTS = {
    setting: rule
    for setting, rule in [*RECALL_OPTIONS.values(), ("FOLD_BUDGET", POSITIVE_INT)]
    if rule in (POSITIVE_INT, OPTIONAL_POSITIVE_INT, NON_NEGATIVE_INT)
}


@register(Tags.compatibility)
def check_settings(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        user = memory_settings.user_settings
    except AgentMemoryConfigurationError as exc:
        return [Error(str(exc), hint=f"Set {SETTINGS_NAME} = {{...}}.", id="agentmemory.E001")]
    errors: list[CheckMessage] = []

    def error(key: str, text: str, hint: str, code: str) -> None:
        message = f"{SETTINGS_NAME}['{key}'] {text}"
        errors.append(Error(message, hint=hint, id=f"agentmemory.{code}"))

    for key in sorted(set(user) - set(DEFAULTS)):
        error(key, "is not a setting of agentmemory.",
              f"Remove it; the settings are: {', '.join(sorted(DEFAULTS))}.", "E001")

    get = memory_settings.__getattr__
    try:
        from agentmemory.summarizers import get_summarizer

        summarizer = get_summarizer()
    except MissingExtraError as exc:
        errors.append(_missing_extra(exc))
    except AgentMemoryConfigurationError as exc:
        error("SUMMARIZER", f"is not usable: {exc}",
              "Give BACKEND (a dotted path), MODEL (the model it calls) and OPTIONS.", "E002")
    else:
        key_env = getattr(summarizer, "api_key_env", None)
        if key_env and not os.environ.get(key_env):
            errors.append(Warning(
                f"The summarizer {summarizer.backend} reads its API key from ${key_env}, "
                "which is empty in this process.",
                hint=f"Export {key_env} where the web and worker processes run; recall stays "
                "verbatim (summarizer-failed) until it is set.",
                id="agentmemory.W001",
            ))

    if not RECALL_MODE(get("RECALL_MODE")):
        error("RECALL_MODE", f"is {get('RECALL_MODE')!r}.", "Use 'inline' or 'background'.",
              "E003")
    elif get("RECALL_MODE") == "background":
        try:
            require(f"{SETTINGS_NAME}['RECALL_MODE'] = 'background' (folds run in Celery)",
                    "celery")
        except MissingExtraError as exc:
            errors.append(_missing_extra(exc))
    for key, rule in COUNTS.items():
        if not rule(get(key)):
            default = "None means no cap." if key == "MAX_ENTRIES" else None
            hint = default or f"The default is {DEFAULTS[key]}."
            error(key, f"{rule.text}, got {get(key)!r}.", hint, "E004")
    _check_water_marks(error)
    _check_search(error)

    if not DECAY(get("DECAY")):
        error("DECAY", f"is {get('DECAY')!r}.", f"Use {DECAY.text.removeprefix('must be ')}.",
              "E005")

    tiers = get("TIERS")
    if tiers is not None and (
        not isinstance(tiers, list | tuple) or not tiers or set(tiers) - set(TIERS)
    ):
        error("TIERS", f"is {tiers!r}.", f"Use None or a non-empty list of {TIERS}.", "E006")
    for key in ("WRITE_TIER", "SUMMARY_TIER"):
        if get(key) not in TIERS:
            error(key, f"is {get(key)!r}.", f"Use one of {TIERS}.", "E006")
    if isinstance(tiers, list | tuple) and not loads_summary_tier(tiers, get("SUMMARY_TIER")):
        error("SUMMARY_TIER", f"is {get('SUMMARY_TIER')!r}, which TIERS does not load.",
              "A summary that is never loaded is folded and paid for again on every recall; "
              "add the summary tier to TIERS.", "E006")

    try:
        from agentmemory.tokens import get_counter

        get_counter()
    except AgentMemoryConfigurationError as exc:
        error("TOKEN_COUNTER", f"is not usable: {exc}",
              "Use agentmemory.tokens.EncodingCounter or a class with count(text) -> int.",
              "E007")

    ttl = get("DEFAULT_TTL")
    if ttl is not None and not (
        isinstance(ttl, timedelta) and ttl > timedelta(0)
        or isinstance(ttl, int | float) and not isinstance(ttl, bool) and ttl > 0
    ):
        error("DEFAULT_TTL", f"is {ttl!r}.",
              "Use None (keep forever), a positive number of seconds or a timedelta.", "E008")

    for key in ("FOLD_RETRY_MAX", "FOLDS_PER_TASK", "PURGE_BATCH_SIZE", "SWEEP_LIMIT",
                "FOLD_MAX_DEATHS"):
        if not is_int(get(key)) or get(key) < (0 if key == "FOLD_RETRY_MAX" else 1):
            error(key, f"must be a {'non-negative' if key == 'FOLD_RETRY_MAX' else 'positive'} "
                  f"integer, got {get(key)!r}.", f"The default is {DEFAULTS[key]}.", "E010")
    failures = get("CIRCUIT_FAILURES")
    if failures is not None and (not is_int(failures) or failures < 1):
        error("CIRCUIT_FAILURES", f"must be None or a positive integer, got {failures!r}.",
              f"The default is {DEFAULTS['CIRCUIT_FAILURES']}.", "E010")
    for key in ("FOLD_RETRY_BACKOFF", "SWEEP_WINDOW", "BROKER_TIMEOUT", "FOLD_LEASE",
                "FOLD_PARK_BACKOFF", "CIRCUIT_BACKOFF", "CIRCUIT_BACKOFF_MAX"):
        value = get(key)
        if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
            error(key, f"must be a positive number of seconds, got {value!r}.",
                  f"The default is {DEFAULTS[key]}.", "E010")
    fold_queue = get("FOLD_QUEUE")
    if fold_queue is not None and (not isinstance(fold_queue, str) or not fold_queue):
        error("FOLD_QUEUE", f"is {fold_queue!r}.", "Use None or a queue name.", "E010")

    try:
        from agentmemory.window.seams import get_window

        get_window()
    except AgentMemoryConfigurationError as exc:
        error("WINDOW", f"is not usable: {exc}",
              "Use {'CLASS': 'agentmemory.window.seams.SlidingWindow', 'OPTIONS': "
              "{'MAX_MESSAGES': 40}} or a class with select(messages, *, budget_tokens).",
              "E011")
    if not is_int(get("WINDOW_MIN_FOLD")) or get("WINDOW_MIN_FOLD") < 1:
        error("WINDOW_MIN_FOLD", f"must be a positive integer, got {get('WINDOW_MIN_FOLD')!r}.",
              "The default is 2.", "E011")
    if get("WINDOW_RETAIN") not in ("conversation", "discard"):
        error("WINDOW_RETAIN", f"is {get('WINDOW_RETAIN')!r}.",
              "Use 'conversation' (keep folded messages) or 'discard'.", "E011")

    errors.extend(_check_api_installed())
    errors.extend(_check_api())
    _check_trust(error)

    for key in ("FORMAT_HEADER", "FORMAT_FOOTER"):
        if not isinstance(get(key), str):
            error(key, f"must be a string, got {type(get(key)).__name__}.", "Use '' for none.",
                  "E009")
    instruction = get("SUMMARY_INSTRUCTION")
    if instruction is not None and (not isinstance(instruction, str) or not instruction.strip()):
        error("SUMMARY_INSTRUCTION", "must be None or non-empty text.",
              "None uses the authored default instruction.", "E009")
    return errors


def _check_water_marks(error: Any) -> None:
    """E004: the budget-driven fold's marks, fractions of the room."""
    get = memory_settings.__getattr__
    high, low, share = get("FOLD_HIGH_WATER"), get("FOLD_LOW_WATER"), get("SUMMARY_SHARE")
    if not HIGH_WATER(high):
        error("FOLD_HIGH_WATER", f"{HIGH_WATER.text}, got {high!r}.",
              "The default is 0.6: fold once the context outgrows 60% of the room "
              "(and FOLD_TRIGGER_MIN_TOKENS).", "E004")
    elif not FRACTION(low) or not below_high_water(low, high):
        error("FOLD_LOW_WATER", f"must be a fraction of the room above 0 and below "
              f"FOLD_HIGH_WATER, got {low!r}.",
              "The default is 0.1: a fold leaves about 10% of the room verbatim.", "E004")
    if not FRACTION(share):
        error("SUMMARY_SHARE", f"{FRACTION.text}, got {share!r}.",
              "The default is 0.25: summaries are merged once they hold more.", "E004")
    for key, default in (("INLINE_FOLD_WAIT", "10.0"),
                         ("TOKEN_CACHE_SECONDS", "10.0; 0 turns the token cache off")):
        wait = get(key)
        if not is_number(wait) or wait < 0:
            error(key, f"must be a non-negative number of seconds, got {wait!r}.",
                  f"The default is {default}.", "E010")


def _check_search(error: Any) -> None:
    """E015: the PostgreSQL text search configuration, written into SQL as a name."""
    language = memory_settings.SEARCH_LANGUAGE
    try:
        checked_language(language)
    except ValueError:
        error("SEARCH_LANGUAGE", f"must be a text search configuration name, got "
              f"{language!r}.", "The default is 'english'; 'simple' does no stemming.", "E015")


def _missing_extra(exc: MissingExtraError) -> CheckMessage:
    """E014: a configured feature whose optional dependency is not installed."""
    return Error(str(exc), hint=f"Install the {exc.extra!r} extra: {install_command(exc.extra)}",
                 id="agentmemory.E014")


def _check_api_installed() -> list[CheckMessage]:
    """E014: the URLconf mounts agentmemory.api.urls but DRF or drf-spectacular is missing.

    Importing the URLconf is what Django's own URL check does; an error other than ours
    is left to that check to report.
    """
    from django.conf import settings

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


def _check_api() -> list[CheckMessage]:
    """The API's schema endpoint needs drf-spectacular's AutoSchema (read, not imported)."""
    from django.apps import apps
    from django.conf import settings

    if not apps.is_installed("rest_framework"):
        return []
    errors: list[CheckMessage] = []
    schema_class = getattr(settings, "REST_FRAMEWORK", {}).get("DEFAULT_SCHEMA_CLASS")
    if schema_class != "drf_spectacular.openapi.AutoSchema":
        errors.append(Warning(
            "agentmemory's API schema endpoint (api/memory/schema/) needs drf-spectacular.",
            hint='Set REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"] = '
            '"drf_spectacular.openapi.AutoSchema".',
            id="agentmemory.W002",
        ))
    rates = memory_settings.API_THROTTLE_RATES
    if not isinstance(rates, dict) or set(rates) - {"append", "recall", "fold"} or any(
        rate is not None and not (isinstance(rate, str) and "/" in rate)
        for rate in rates.values()
    ):
        errors.append(Error(
            f"{SETTINGS_NAME}['API_THROTTLE_RATES'] is {rates!r}.",
            hint='Use {"append": "120/min" or None, "recall": "60/min" or None, '
            '"fold": "30/min" or None}.',
            id="agentmemory.E012",
        ))
    for key in ("API_MAX_CONTENT_CHARS", "API_MAX_BATCH", "API_MAX_WINDOW", "API_PAGE_SIZE"):
        value = getattr(memory_settings, key)
        if not is_int(value) or value < 1:
            errors.append(Error(
                f"{SETTINGS_NAME}['{key}'] must be a positive integer, got {value!r}.",
                hint=f"The default is {DEFAULTS[key]}.",
                id="agentmemory.E012",
            ))
    errors.extend(_check_body_cap(settings.DATA_UPLOAD_MAX_MEMORY_SIZE))
    return errors


#: Bytes of an append body around one message's content: {"role": "assistant", ...}.
MESSAGE_ENVELOPE = 200


def _check_body_cap(cap: int | None) -> list[CheckMessage]:
    """W003: one message of API_MAX_CONTENT_CHARS (ASCII) must fit in Django's body cap,
    or the documented per-entry limit is a 413 before it is reached. A full batch of
    such messages need not fit: the cap bounds a batch's total (docs/operations.md)."""
    chars = memory_settings.API_MAX_CONTENT_CHARS
    if cap is None or not is_int(chars) or chars + MESSAGE_ENVELOPE <= cap:
        return []
    return [Warning(
        f"DATA_UPLOAD_MAX_MEMORY_SIZE ({cap} bytes) refuses a message of "
        f"{SETTINGS_NAME}['API_MAX_CONTENT_CHARS'] ({chars}) characters with a 413.",
        hint=f"Raise DATA_UPLOAD_MAX_MEMORY_SIZE to at least {chars + MESSAGE_ENVELOPE}, or "
        "lower API_MAX_CONTENT_CHARS.",
        id="agentmemory.W003",
    )]


def _check_trust(error: Any) -> None:
    """E013: receipts, the fact gate, the signing key, holding flagged, the quota."""
    get = memory_settings.__getattr__
    for key in ("RECEIPTS", "HOLD_FLAGGED"):
        if not isinstance(get(key), bool):
            error(key, f"must be True or False, got {get(key)!r}.", "", "E013")
    gate = get("FACT_GATE")
    threshold = gate.get("THRESHOLD") if isinstance(gate, dict) else None
    if (
        not isinstance(gate, dict)
        or set(gate) - {"THRESHOLD", "ACTION"}
        or gate.get("ACTION", "decline") not in ("decline", "append")
        or threshold is not None
        and (not isinstance(threshold, int | float) or not 0 <= threshold <= 1)
    ):
        error("FACT_GATE", f"is {gate!r}.",
              "Use {'THRESHOLD': None or 0..1, 'ACTION': 'decline' or 'append'}.", "E013")
    key = get("SIGNING_KEY")
    if key is not None and (not isinstance(key, str) or len(key) < 32):
        error("SIGNING_KEY", "must be None (derive from SECRET_KEY) or a string of at least "
              "32 characters.", "Generate one with django.core.management.utils."
              "get_random_secret_key().", "E013")
    quota = get("DAILY_TOKEN_QUOTA")
    if quota is not None and (not is_int(quota) or quota < 1):
        error("DAILY_TOKEN_QUOTA", f"must be None or a positive integer, got {quota!r}.",
              "None means no quota; per-owner overrides live in OwnerQuota.", "E013")
