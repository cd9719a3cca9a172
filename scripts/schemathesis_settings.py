"""Settings for scripts/schemathesis.py: the example project on a throwaway SQLite file.

The file is named by AGENTMEMORY_FUZZ_DB (a temp dir the runner makes and removes).
Celery runs eagerly, as in the embedded example project; nothing leaves 127.0.0.1.
"""

import os

from example_project.settings import *  # noqa: F403

DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ["AGENTMEMORY_FUZZ_DB"],
        # The dev server is single-threaded here; the timeout only covers the runner's
        # own setup connections.
        "OPTIONS": {"timeout": 20},
    }
}
CELERY_BROKER_URL = ""
CELERY_TASK_ALWAYS_EAGER = True
AGENTMEMORY = {
    "SUMMARIZER": {
        "BACKEND": "agentmemory.summarizers.offline.OfflineSummarizer",
        "MODEL": "offline-extractive-1",
    },
}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    # Server errors are what the run looks for: print their tracebacks.
    "loggers": {"django.request": {"handlers": ["console"], "level": "ERROR"}},
}
