"""Settings for scripts/schemathesis.py: the example project on a throwaway PostgreSQL
database, named by AGENTMEMORY_FUZZ_DB (the runner creates and drops it; PGHOST, PGPORT,
PGUSER and PGPASSWORD locate the server). Celery runs eagerly, as in the embedded
example project; nothing leaves 127.0.0.1.
"""

import os

from example_project.settings import *  # noqa: F403

DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ["AGENTMEMORY_FUZZ_DB"],
        "USER": os.environ.get("PGUSER", "postgres"),
        "PASSWORD": os.environ.get("PGPASSWORD", ""),
        "HOST": os.environ.get("PGHOST", "127.0.0.1"),
        "PORT": os.environ.get("PGPORT", "5432"),
    }
}
CELERY_BROKER_URL = ""
CELERY_TASK_ALWAYS_EAGER = True
AGENTMEMORY = {
    "RECEIPTS": True,  # as in the example project: receipt ids name real rows
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
