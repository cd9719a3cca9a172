"""Settings for the gunicorn server of tests/test_contention.py: the test settings on the
test database the pytest run created (PGDATABASE names it), inline folds with the offline
summarizer and small counts so recalls and POST fold/ really fold while others write,
receipts on (they name entries that deleters erase), no throttles."""

from tests.settings import *  # noqa: F403

DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
AGENTMEMORY = {
    "RECALL_MODE": "inline",
    "RECEIPTS": True,
    "LOAD_COUNT": 20,
    "TRIGGER_MIN_ENTRIES": 8,
    "FOLD_HIGH_WATER": None,
    "PRESERVE_RECENT": 2,
    "API_THROTTLE_RATES": {"append": None, "recall": None, "fold": None},
    "SUMMARIZER": {
        "BACKEND": "agentmemory.summarizers.offline.OfflineSummarizer",
        "MODEL": "offline-extractive-1",
    },
}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    # A server error is what the test looks for: its traceback goes to gunicorn's log.
    "loggers": {"django.request": {"handlers": ["console"], "level": "ERROR"}},
}
