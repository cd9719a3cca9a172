"""The optional integrations, and the package extra that installs each one.

The core (models, services, admin, the offline and callable summarizers, the OpenAI
message shapes) needs Django and the tokenizer only. The REST API, Celery tasks, the
OpenAI summarizer and the agent-framework integrations import their libraries when they
are used; ``manage.py check`` reports a configured feature
whose extra is missing (agentmemory.E014).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from agentmemory.exceptions import MissingExtraError

# The top-level module a feature imports -> the extra of django-agentmemory that brings it.
# (psycopg, of the postgres extra, is reported by Django's own database backend.)
EXTRA_OF_MODULE = {
    "rest_framework": "api",
    "drf_spectacular": "api",
    "celery": "celery",
    "openai": "openai",
    "agents": "agents",
    "langchain_core": "langchain",
    "langchain": "langchain",
    "langgraph": "langchain",
}


def install_command(extra: str) -> str:
    return f'pip install "django-agentmemory[{extra}]"'


def missing_extra(feature: str, exc: ImportError) -> MissingExtraError | None:
    """The error to raise for ``exc`` when it is one of our optional modules missing."""
    module = (exc.name or "").partition(".")[0]
    extra = EXTRA_OF_MODULE.get(module)
    if extra is None:
        return None
    return MissingExtraError(
        f"{feature} needs the {module!r} package, which is not installed: "
        f"{install_command(extra)}.",
        extra=extra,
        module=module,
    )


def require(feature: str, *modules: str) -> ModuleType:
    """Import ``modules`` and return the last; MissingExtraError names a missing extra."""
    module = None
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            error = missing_extra(feature, exc)
            if error is None:
                raise
            raise error from exc
    assert module is not None, "require() needs at least one module"
    return module
