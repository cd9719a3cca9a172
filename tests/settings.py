"""Test settings. AGENTMEMORY_TEST_DB=postgres runs the same suite on PostgreSQL."""

import os

SECRET_KEY = "agentmemory-tests-only"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
ALLOWED_HOSTS = ["*"]

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
]

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "agentmemory.api.authentication.CachedTokenAuthentication",
        "rest_framework.authentication.BasicAuthentication",
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
]

ROOT_URLCONF = "tests.urls"
# Tests log users in thousands of times; a slow hasher would dominate the run.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
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
STATIC_URL = "/static/"

TEST_DB = os.environ.get("AGENTMEMORY_TEST_DB", "sqlite")
if TEST_DB == "postgres":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": os.environ.get("PGDATABASE", "agentmemory"),
            "USER": os.environ.get("PGUSER", "postgres"),
            "PASSWORD": os.environ.get("PGPASSWORD", ""),
            "HOST": os.environ.get("PGHOST", "127.0.0.1"),
            "PORT": os.environ.get("PGPORT", "5432"),
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": ":memory:",
        }
    }

CELERY_TASK_ALWAYS_EAGER = True
REDIS_URL = os.environ.get("AGENTMEMORY_TEST_REDIS", "redis://127.0.0.1:6379/15")

AGENTMEMORY = {}

# ---------------------------------------------------------------------------------
# Real Celery worker tests (tests/test_worker.py, tests/celery_app.py) and
# bench/worker_latency.py, appended by the worker-tests helper. The broker and result
# backend of tests.celery_app are Redis DB 14 (AGENTMEMORY_TEST_BROKER overrides both).
# The rest applies only to a process started with AGENTMEMORY_TEST_CELERY=worker: the
# worker subprocess those tests start runs with the configuration of the test that
# started it (eager mode off; AGENTMEMORY and the broker transport options read as JSON
# from the environment). Without that variable nothing above changes.
import json  # noqa: E402

CELERY_BROKER_URL = os.environ.get("AGENTMEMORY_TEST_BROKER", "redis://127.0.0.1:6379/14")
CELERY_RESULT_BACKEND = CELERY_BROKER_URL
if os.environ.get("AGENTMEMORY_TEST_CELERY") == "worker":
    CELERY_TASK_ALWAYS_EAGER = False
    # One message reserved per pool process: with acks_late, a killed worker strands
    # only what it was running.
    CELERY_WORKER_PREFETCH_MULTIPLIER = 1
    CELERY_BROKER_TRANSPORT_OPTIONS = json.loads(
        os.environ.get("AGENTMEMORY_TEST_BROKER_OPTIONS", "{}")
    )
    AGENTMEMORY = json.loads(os.environ.get("AGENTMEMORY_TEST_SETTINGS", "{}"))
