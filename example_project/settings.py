"""The demo site. Embedded default: SQLite, eager Celery, the offline summarizer.

Environment variables switch it to a real deployment shape:
DATABASE_URL-style PG* variables with AGENTMEMORY_DB=postgres, and
CELERY_BROKER_URL=redis://127.0.0.1:6379/0 for a real worker. DEMO_ADDR (``make demo
ADDR=host:port``) is where the site serves.
"""

import os
from pathlib import Path

from example_project.demo.address import DEFAULT_ADDR, allowed_host

BASE_DIR = Path(__file__).resolve().parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "agentmemory-demo-not-for-production")
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
# Where `make demo` serves (its ADDR): runserver listens there, the demo command's links
# name it, and its host is allowed.
DEMO_ADDR = os.environ.get("DEMO_ADDR") or DEFAULT_ADDR
ALLOWED_HOSTS = sorted({"127.0.0.1", "localhost", allowed_host(DEMO_ADDR)})
USE_TZ = True
TIME_ZONE = "UTC"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "agentmemory",
    "example_project.demo",
]

# Session auth for the browsable API, token auth for agents:
#   python manage.py drf_create_token <username>
#   curl -H "Authorization: Token <key>" http://127.0.0.1:8000/api/memory/threads/
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        # DRF's token authentication, with the token's user kept for a few seconds.
        "agentmemory.api.authentication.CachedTokenAuthentication",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "example_project.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
WSGI_APPLICATION = "example_project.wsgi.application"
STATIC_URL = "/static/"

if os.environ.get("AGENTMEMORY_DB") == "postgres":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": os.environ.get("PGDATABASE", "agentmemory_demo"),
            "USER": os.environ.get("PGUSER", "postgres"),
            "PASSWORD": os.environ.get("PGPASSWORD", ""),
            "HOST": os.environ.get("PGHOST", "127.0.0.1"),
            "PORT": os.environ.get("PGPORT", "5432"),
            # Persistent connections: opening one costs a request several milliseconds
            # (docs/operations.md, "The request path"; bench/api.py measures it).
            "CONN_MAX_AGE": int(os.environ.get("DJANGO_CONN_MAX_AGE", "60")),
            "CONN_HEALTH_CHECKS": True,
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": BASE_DIR / "db.sqlite3",
            # RECEIPTS (below) commits at every recall: in WAL mode that commit does not
            # wait for the disk (agentmemory.W004; docs/operations.md).
            "OPTIONS": {"init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"},
        }
    }

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "")
# No broker configured: run tasks in-process so the demo needs nothing else running.
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True

AGENTMEMORY = {
    "RECALL_MODE": os.environ.get("AGENTMEMORY_RECALL_MODE", "inline"),
    # Every recall leaves a receipt: what the model saw at each turn, and the savings.
    "RECEIPTS": True,
    "SUMMARIZER": {
        "BACKEND": "agentmemory.summarizers.offline.OfflineSummarizer",
        "MODEL": "offline-extractive-1",
    },
}
if os.environ.get("AGENTMEMORY_OPENAI_MODEL"):
    AGENTMEMORY["SUMMARIZER"] = {
        "BACKEND": "agentmemory.summarizers.openai.OpenAISummarizer",
        "MODEL": os.environ["AGENTMEMORY_OPENAI_MODEL"],
        "OPTIONS": {"BASE_URL": os.environ.get("OPENAI_BASE_URL") or None},
    }

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"agentmemory": {"handlers": ["console"], "level": "INFO"}},
}
