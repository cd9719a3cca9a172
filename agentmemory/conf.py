"""The ``AGENTMEMORY`` settings dict, read lazily against `DEFAULTS`.

Modelled on DRF's ``api_settings``: nothing is read at import time, an unknown key
raises, the settings in `IMPORT_STRINGS` are imported here, and one `reload` on
``setting_changed`` drops every cached value and every object built from one, so
``override_settings`` works in tests. The rules values keep live in
`agentmemory.validators` and `agentmemory.checks`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

from agentmemory.exceptions import AgentMemoryConfigurationError
from agentmemory.extras import missing_extra

SETTINGS_NAME = "AGENTMEMORY"

#: Every key, its default, and (in docs/settings.md) the check that guards it.
DEFAULTS: dict[str, Any] = {
    # Which summarizer folds spans. BACKEND is a dotted path; MODEL is required for
    # backends that call a model (no silent fallback to the agent's model).
    "SUMMARIZER": {
        "BACKEND": "agentmemory.summarizers.offline.OfflineSummarizer",
        "MODEL": "offline-extractive-1",
        "OPTIONS": {},
    },
    # "inline": the fold happens inside recall. "background": recall stays verbatim
    # and a Celery task folds after commit.
    "RECALL_MODE": "inline",
    # load stage. LOAD_COUNT None: every visible entry the room can hold (budget-driven
    # folding, the recall contract); a number: the newest N (the seeds' count-driven mode).
    "LOAD_COUNT": None,
    "TIERS": None,
    # summarize stage. Budget-driven: fold once the context would outgrow
    # FOLD_HIGH_WATER x the room (never below FOLD_TRIGGER_MIN_TOKENS: a smaller room
    # folds when it is full), down to a verbatim tail of FOLD_LOW_WATER x the room;
    # summaries hold at most SUMMARY_SHARE x the room (the cache minimum and two more
    # where the room caches): a fold absorbs or merges the newest past it. One call reads at
    # most FOLD_INPUT_LIMIT tokens of span. TRIGGER_MIN_ENTRIES None: no count trigger; a
    # number: also fold once that many entries are loaded (the seeds' trigger).
    "FOLD_HIGH_WATER": 0.6,
    "FOLD_TRIGGER_MIN_TOKENS": 0,
    "FOLD_LOW_WATER": 0.02,
    # The provider's cache minimum (OpenAI: 1,024). Where the room holds three times it,
    # the context a chunk fold leaves grows past FOLD_LOW_WATER to it, and the summaries
    # a fold leaves in front hold it, so later turns and fold turns are billed at the
    # cached price. 0: neither.
    "FOLD_CACHE_MIN_TOKENS": 1_024,
    "SUMMARY_SHARE": 0.25,
    "FOLD_INPUT_LIMIT": 64_000,
    "TRIGGER_MIN_ENTRIES": None,
    "PRESERVE_RECENT": 5,
    "MIN_FOLD_ENTRIES": 2,
    "SUMMARY_TIER": "cold",
    "SUMMARY_INSTRUCTION": None,
    # decay stage; None means no stage. Otherwise {"HALF_LIFE": seconds, "MIN_SCORE": float}.
    "DECAY": None,
    # budget stage
    "RESERVE_TOKENS": 256,
    "MINIMUM_TOKENS": 100,
    "MAX_ENTRIES": None,
    # format stage
    "FORMAT_HEADER": "Relevant context from prior conversation (oldest first):",
    "FORMAT_FOOTER": "",
    # write side: defaults for threads that set no policy of their own
    "WRITE_TIER": "hot",
    "DEFAULT_TTL": None,
    # background work (Celery). FOLD_QUEUE None: Celery's default queue. The periodic
    # tasks take their queue from the beat schedule (agentmemory.schedules).
    "FOLD_QUEUE": None,
    # search: PostgreSQL's text search configuration for the index and the queries (read
    # by the initial migration when it builds the index: see docs/settings.md to change it).
    "SEARCH_LANGUAGE": "english",
    "FOLD_RETRY_MAX": 3,
    "FOLD_RETRY_BACKOFF": 2.0,
    "FOLDS_PER_TASK": 10,
    # The recall budget a background fold keeps a thread within (Thread.fold_budget
    # overrides it), and how long an inline fold waits for another fold of its thread.
    "FOLD_BUDGET": 4000,
    "INLINE_FOLD_WAIT": 10.0,
    "PURGE_BATCH_SIZE": 1000,
    "SWEEP_WINDOW": 86400,
    "SWEEP_LIMIT": 500,
    # Faults (docs/operations.md): how long an enqueue may wait on the broker and the
    # result backend; how long a fold's lease lasts unless its heartbeat renews it; how
    # many deaths park a fold, and for how long before the sweep tries it again.
    "BROKER_TIMEOUT": 5.0,
    "FOLD_LEASE": 60.0,
    # How long CachedTokenAuthentication keeps a valid token's user in a process: the
    # longest a token revoked elsewhere keeps working (0: no cache).
    "TOKEN_CACHE_SECONDS": 10.0,
    "FOLD_MAX_DEATHS": 3,
    "FOLD_PARK_BACKOFF": 3600.0,
    # The circuit of a summarizer backend and model: this many failed calls in a row (any
    # thread, any process) stop every call to it for CIRCUIT_BACKOFF seconds, doubling
    # with each opening in a row up to CIRCUIT_BACKOFF_MAX (None: no circuit).
    "CIRCUIT_FAILURES": 5,
    "CIRCUIT_BACKOFF": 30.0,
    "CIRCUIT_BACKOFF_MAX": 900.0,
    # live-window compaction: the seam that selects, the smallest fold worth a call,
    # and the retention policy for threads that set none ("conversation" or "discard").
    "WINDOW": {"CLASS": "agentmemory.window.seams.SlidingWindow", "OPTIONS": {}},
    "WINDOW_MIN_FOLD": 2,
    "WINDOW_RETAIN": "conversation",
    # REST API limits. Throttle rates use DRF's syntax ("100/min"); None: no throttle.
    "API_MAX_CONTENT_CHARS": 100_000,
    "API_MAX_BATCH": 500,
    "API_MAX_WINDOW": 5_000,
    "API_PAGE_SIZE": 50,
    "API_THROTTLE_RATES": {"append": None, "recall": None, "fold": "30/min"},
    # trust and cost (see docs/concepts.md): recall receipts; the fact-retention gate
    # (every fold measures which specifics of its span the summary kept; one that keeps
    # fewer than THRESHOLD of them is flagged for review, or with ACTION "append" lists
    # what it dropped, or with "decline" is dropped; THRESHOLD None: no gate, nothing
    # measured); the key that signs summaries (None: derived from SECRET_KEY); holding
    # flagged summaries back until reviewed; a daily summarizer token quota per owner.
    "RECEIPTS": False,
    "FACT_GATE": {"THRESHOLD": 0.5, "ACTION": "flag"},
    "SIGNING_KEY": None,
    "HOLD_FLAGGED": False,
    "DAILY_TOKEN_QUOTA": None,
    # tokens
    "TOKEN_COUNTER": "agentmemory.tokens.EncodingCounter",
    "TOKEN_ENCODING": "o200k_base",
}


#: The settings that name a class by dotted path, and the key of the value that holds the
#: path (None: the value is the path itself). `AgentMemorySettings.plugin` imports them.
IMPORT_STRINGS: dict[str, str | None] = {
    "SUMMARIZER": "BACKEND",
    "TOKEN_COUNTER": None,
    "WINDOW": "CLASS",
}

T = TypeVar("T")


def import_from_string(path: str, setting: str) -> Any:
    """Import ``path``, which ``setting`` (e.g. ``AGENTMEMORY['WINDOW']['CLASS']``) gave.

    An ImportError becomes an error that names the setting; a class of agentmemory's own
    whose optional dependency is missing names the extra to install (MissingExtraError).
    """
    try:
        return import_string(path)
    except ImportError as exc:
        # Our own classes name the extra they need; a project's module is its own affair.
        missing = missing_extra(f"{setting} = {path!r}", exc)
        if missing is not None and path.startswith("agentmemory."):
            raise missing from exc
        raise AgentMemoryConfigurationError(
            f"{setting} = {path!r} cannot be imported: {exc}"
        ) from exc


class AgentMemorySettings:
    """Attribute access to ``AGENTMEMORY`` merged over `DEFAULTS`."""

    def __init__(self) -> None:
        self._cache: dict[str, Any] = {}
        self._plugins: dict[str, Any] = {}
        self._derived: dict[str, Any] = {}

    @property
    def user_settings(self) -> dict[str, Any]:
        value = getattr(django_settings, SETTINGS_NAME, {})
        if not isinstance(value, dict):
            raise AgentMemoryConfigurationError(
                f"{SETTINGS_NAME} must be a dict, got {type(value).__name__}."
            )
        return value

    def __getattr__(self, key: str) -> Any:
        if key.startswith("_") or key not in DEFAULTS:
            raise AttributeError(f"Invalid agentmemory setting: {key!r}")
        if key not in self._cache:
            value = self.user_settings.get(key, DEFAULTS[key])
            if key == "SUMMARIZER" and isinstance(value, dict):
                # Replaced whole, never merged: a BACKEND set without MODEL must not
                # inherit the offline default's model name.
                value = {"OPTIONS": {}, **value}
            self._cache[key] = value
        return self._cache[key]

    def imported(self, key: str) -> Any:
        """The class the setting ``key`` of `IMPORT_STRINGS` names."""
        part = IMPORT_STRINGS[key]
        value = getattr(self, key)
        setting = f"{SETTINGS_NAME}['{key}']"
        if part is not None:
            if not isinstance(value, dict):
                raise AgentMemoryConfigurationError(
                    f"{setting} must be a dict with {part} (a dotted path), got {value!r}."
                )
            setting, value = f"{setting}['{part}']", value.get(part)
        if not isinstance(value, str) or not value:
            raise AgentMemoryConfigurationError(f"{setting} must be a dotted path, got {value!r}.")
        return import_from_string(value, setting)

    def plugin(self, key: str, build: Callable[[Any], T]) -> T:
        """``build(cls)`` for the class the setting ``key`` names (see `imported`), made
        on first use and kept until `reload`: the summarizer, the token counter, the
        window seam. A ``build`` that raises caches nothing."""
        if key not in self._plugins:
            self._plugins[key] = build(self.imported(key))
        plugin: T = self._plugins[key]
        return plugin

    def derived(self, name: str, build: Callable[[], T]) -> T:
        """``build()``, a value computed from settings (recall's options), made on first
        use and kept until `reload`. A ``build`` that raises caches nothing."""
        if name not in self._derived:
            self._derived[name] = build()
        value: T = self._derived[name]
        return value

    def reload(self) -> None:
        """Forget every value read and every object built from one."""
        self._cache.clear()
        self._plugins.clear()
        self._derived.clear()


memory_settings = AgentMemorySettings()


def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting == SETTINGS_NAME:
        memory_settings.reload()


setting_changed.connect(_reload)
