"""The core installs and runs without the extras; a configured feature names its extra.

A missing package is simulated the way Python itself reports one: a ``None`` entry in
``sys.modules`` makes ``import name`` raise ModuleNotFoundError.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.checks import run_checks
from django.test import override_settings

from agentmemory.exceptions import MissingExtraError
from agentmemory.summarizers import load_summarizer

ROOT = Path(__file__).resolve().parent.parent
OPENAI_BACKEND = "agentmemory.summarizers.openai.OpenAISummarizer"


def e014(setting: dict[str, Any]) -> list[Any]:
    with override_settings(AGENTMEMORY=setting):
        return [m for m in run_checks() if m.id == "agentmemory.E014"]


def forget(monkeypatch: pytest.MonkeyPatch, *prefixes: str) -> None:
    """Drop imported modules so the next import runs them again (restored after the test)."""
    for name in [n for n in sys.modules if n.startswith(prefixes)]:
        monkeypatch.delitem(sys.modules, name)


def test_background_mode_without_celery_is_e014_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "celery", None)

    [message] = e014({"RECALL_MODE": "background"})

    assert "RECALL_MODE" in message.msg and "'celery'" in message.msg
    assert 'pip install "django-agentmemory[celery]"' in message.hint


def test_inline_mode_needs_no_celery(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "celery", None)

    assert e014({"RECALL_MODE": "inline"}) == []


def test_the_openai_summarizer_without_openai_is_e014_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    forget(monkeypatch, "agentmemory.summarizers.openai")
    config = {"BACKEND": OPENAI_BACKEND, "MODEL": "gpt-4o-mini", "OPTIONS": {}}

    [message] = e014({"SUMMARIZER": config})
    with pytest.raises(MissingExtraError) as raised:
        load_summarizer(config)

    assert OPENAI_BACKEND in message.msg
    assert 'pip install "django-agentmemory[openai]"' in message.hint
    assert (raised.value.extra, raised.value.module) == ("openai", "openai")


def test_a_project_summarizer_missing_a_package_is_not_blamed_on_our_extras(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    (tmp_path / "project_summarizer_probe.py").write_text("import openai\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))

    with override_settings(AGENTMEMORY={"SUMMARIZER": {
        "BACKEND": "project_summarizer_probe.Summarizer", "MODEL": "m",
    }}):
        found = {m.id for m in run_checks() if m.id and m.id.startswith("agentmemory.")}

    assert found == {"agentmemory.E002"}


@pytest.mark.parametrize("missing", ["rest_framework", "drf_spectacular"])
def test_a_urlconf_mounting_the_api_without_the_api_extra_is_e014(
    monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    monkeypatch.setitem(sys.modules, missing, None)
    forget(monkeypatch, "agentmemory.api", "tests.urls")

    [message] = e014({})
    with pytest.raises(MissingExtraError) as raised:
        __import__("agentmemory.api.urls")

    assert repr(missing) in message.msg
    assert 'pip install "django-agentmemory[api]"' in message.hint
    assert raised.value.extra == "api"


def test_with_every_extra_installed_there_is_no_e014() -> None:
    assert e014({"RECALL_MODE": "background", "SUMMARIZER": {
        "BACKEND": OPENAI_BACKEND, "MODEL": "gpt-4o-mini", "OPTIONS": {},
    }}) == []


# Run in a fresh interpreter: no extra can be imported, and the whole core still
# imports, migrates, appends, recalls (with an inline fold) and passes its checks.
CORE_WITHOUT_EXTRAS = r'''
import importlib, sys
BLOCKED = ("rest_framework", "drf_spectacular", "celery", "kombu", "redis", "openai",
           "agents", "langchain_core", "langchain", "langgraph")
for name in BLOCKED:
    sys.modules[name] = None

import django
from django.conf import settings

settings.configure(
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
    INSTALLED_APPS=["django.contrib.admin", "django.contrib.auth",
                    "django.contrib.contenttypes", "django.contrib.sessions",
                    "django.contrib.messages", "agentmemory"],
    SECRET_KEY="core-without-extras",
    USE_TZ=True,
    AGENTMEMORY={"PRESERVE_RECENT": 2, "MIN_FOLD_ENTRIES": 2, "TRIGGER_MIN_ENTRIES": 4},
)
django.setup()

from pathlib import Path
import agentmemory
OPTIONAL = ("agentmemory.api", "agentmemory.tasks", "agentmemory.summarizers.openai",
            "agentmemory.integrations.openai_agents", "agentmemory.integrations.langchain")
package = Path(agentmemory.__file__).parent
modules = [".".join(("agentmemory",) + path.relative_to(package).with_suffix("").parts)
           .removesuffix(".__init__") for path in sorted(package.rglob("*.py"))]
assert len(modules) > 40, modules
for name in modules:
    if not name.startswith(OPTIONAL):
        importlib.import_module(name)
leaked = sorted(n for n in sys.modules if n.split(".")[0] in BLOCKED and sys.modules[n])
assert not leaked, leaked

from django.core.checks import run_checks
from django.core.management import call_command
call_command("migrate", verbosity=0)
messages = [m for m in run_checks() if m.id and m.id.startswith("agentmemory.")]
assert not messages, messages

from agentmemory import services
from agentmemory.models import Thread
thread = Thread.objects.create(title="no extras")
for turn in range(6):
    services.append(thread, [
        {"role": "user", "content": f"Question {turn}: where is order NW-{turn}?"},
        {"role": "assistant", "content": f"Order NW-{turn} ships on day {turn}."},
    ])
context = services.recall(thread, 500)
assert context.summaries_used, (context.decline, context.text)
assert "Order NW-5 ships on day 5." in context.text
assert context.as_chat_messages()[-1] == {"role": "assistant",
                                          "content": "Order NW-5 ships on day 5."}
assert context.as_response_input()[0]["role"] == "system"

from agentmemory.exceptions import MissingExtraError
try:
    importlib.import_module("agentmemory.api.urls")
except MissingExtraError as exc:
    assert exc.extra == "api", exc
else:
    raise AssertionError("agentmemory.api imported without DRF")
try:
    importlib.import_module("agentmemory.tasks")
except ImportError as exc:
    assert exc.name == "celery", exc
else:
    raise AssertionError("agentmemory.tasks imported without Celery")
for module, extra in (("openai_agents", "agents"), ("langchain", "langchain"),
                      ("langchain_agents", "langchain")):
    try:
        importlib.import_module(f"agentmemory.integrations.{module}")
    except MissingExtraError as exc:
        assert exc.extra == extra, exc
    else:
        raise AssertionError(f"agentmemory.integrations.{module} imported without its extra")
print("core ok")
'''


@pytest.mark.parametrize("missing", ["langchain", "langgraph"])
def test_the_agent_middleware_without_langchain_names_the_langchain_extra(
    monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    """langchain-core alone (what the chat history needs) is not enough for the middleware."""
    monkeypatch.setitem(sys.modules, missing, None)
    forget(monkeypatch, "agentmemory.integrations.langchain_agents", "langchain.", f"{missing}.")

    with pytest.raises(MissingExtraError) as raised:
        __import__("agentmemory.integrations.langchain_agents")

    assert (raised.value.extra, raised.value.module) == ("langchain", missing)
    assert 'pip install "django-agentmemory[langchain]"' in str(raised.value)


def test_the_core_imports_and_runs_without_any_extra() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    result = subprocess.run(
        [sys.executable, "-c", CORE_WITHOUT_EXTRAS], capture_output=True, text=True,
        env=env, timeout=120, cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "core ok"


@pytest.mark.django_db
def test_enqueueing_a_fold_without_celery_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentmemory import services
    from agentmemory.models import Thread

    thread = Thread.objects.create(title="no celery")
    monkeypatch.setitem(sys.modules, "celery", None)
    forget(monkeypatch, "agentmemory.tasks")

    with pytest.raises(MissingExtraError) as raised:
        services.enqueue_fold(thread.pk)

    assert raised.value.extra == "celery"
    assert 'pip install "django-agentmemory[celery]"' in str(raised.value)
