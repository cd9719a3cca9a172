"""docs/quickstart.md's examples run as written, on a fresh database, and print what
the page says they print.

Section 7's Python block is executed verbatim and its output compared with the text
block after it; section 8's curl commands are replayed through Django's test client
(same method, path, body and token header), and the ids and recall the page shows are
compared with the answers.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

QUICKSTART = Path(__file__).resolve().parent.parent / "docs" / "quickstart.md"


def section(number: int) -> str:
    text = QUICKSTART.read_text(encoding="utf-8")
    match = re.search(rf"^## {number}\. .*?(?=^## |\Z)", text, flags=re.M | re.S)
    assert match, f"docs/quickstart.md has no section {number}"
    return match.group(0)


def blocks(text: str) -> list[tuple[str, str]]:
    """The fenced blocks of ``text``: (language, body)."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.M | re.S)


def run_section_7() -> str:
    python, output = [body for lang, body in blocks(section(7)) if lang in ("python", "text")][:2]
    assert "services.recall" in python
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(python, "docs/quickstart.md#7", "exec"), {})
    assert printed.getvalue() == output
    return output


def shell_commands(script: str) -> list[tuple[list[str], list[str]]]:
    """Each command of a shell block (continuations joined), with the comments after it."""
    commands: list[tuple[list[str], list[str]]] = []
    pending = ""
    for line in re.sub(r"\\\n", " ", script).splitlines():
        if line.startswith("#") and not pending:
            commands[-1][1].append(line.removeprefix("#"))
            continue
        pending += line + "\n"
        try:
            words = shlex.split(pending, comments=True)
        except ValueError:
            continue  # a quoted argument goes on to the next line
        if words:
            commands.append((words, []))
        pending = ""
    assert not pending, f"unclosed quote in {pending!r}"
    return commands


@pytest.mark.django_db(transaction=True, reset_sequences=True)
def test_section_7_runs_as_written_and_prints_what_the_page_shows(
    settings: Any,
) -> None:
    settings.AGENTMEMORY = {}
    get_user_model().objects.create_superuser("ada", "ada@example.com", "pw")

    run_section_7()


@pytest.mark.django_db(transaction=True, reset_sequences=True)
def test_section_8_curl_answers_what_the_page_shows_on_a_fresh_project(
    settings: Any,
) -> None:
    settings.AGENTMEMORY = {}
    get_user_model().objects.create_superuser("ada", "ada@example.com", "pw")
    run_section_7()  # the page's order: section 7's thread exists first
    token_block, curl_block = [body for lang, body in blocks(section(8)) if lang == "sh"]

    [(create_token, _), *_] = shell_commands(token_block)
    assert create_token[:3] == ["python", "manage.py", "drf_create_token"]
    out = io.StringIO()
    call_command(*create_token[2:], stdout=out)
    token = re.search(r"Generated token (\w+) for user ada", out.getvalue())
    assert token, out.getvalue()

    client = Client(HTTP_AUTHORIZATION=f"Token {token.group(1)}")
    env: dict[str, str] = {}
    answers = []
    for words, comments in shell_commands(curl_block):
        if words[0] == "export":
            name, _, value = words[1].partition("=")
            env[name] = value
            continue
        assert words[:4] == ["curl", "-s", "-X", "POST"], words
        url = re.sub(r"\$(\w+)", lambda m: env[m.group(1)], words[4])
        path = url.removeprefix("http://127.0.0.1:8000")
        body = json.loads(words[words.index("-d") + 1])
        response = client.post(path, body, content_type="application/json")
        assert response.status_code in (200, 201), (path, response.content)
        answers.append((response.json(), "".join(c.removeprefix(" ") for c in comments)))

    (created, shown_created), _, (recalled, shown_recall) = answers
    shown_id = re.search(r'"id": (\d+)', shown_created)
    assert shown_id and int(shown_id.group(1)) == created["id"] == int(env["THREAD"])
    assert created["client_key"] in shown_created
    shown = re.search(r'"text": ("(?:[^"\\]|\\.)*"), "tokens": (\d+)', shown_recall)
    assert shown, shown_recall
    assert json.loads(shown.group(1)) == recalled["text"]
    assert int(shown.group(2)) == recalled["tokens"]
    assert '"summaries_used": []' in shown_recall and recalled["summaries_used"] == []


def operations_setting(name: str) -> object:
    """The value docs/operations.md gives a Celery setting, read from its code."""
    text = (QUICKSTART.parent / "operations.md").read_text(encoding="utf-8")
    match = re.search(rf"^{name} = (.+?)(?:\s+#.*)?$", text, flags=re.M)
    assert match, f"docs/operations.md does not set {name}"
    return ast.literal_eval(match.group(1))


@pytest.mark.parametrize("web_process", ["1", None])
def test_section_6_sets_what_operations_requires_web_processes_only(
    monkeypatch: pytest.MonkeyPatch, web_process: str | None
) -> None:
    [settings_block] = [body for lang, body in blocks(section(6))
                        if lang == "python" and "CELERY_BROKER_URL" in body]
    if web_process is None:
        monkeypatch.delenv("WEB_PROCESS", raising=False)
    else:
        monkeypatch.setenv("WEB_PROCESS", web_process)
    namespace: dict[str, object] = {}

    exec(compile(settings_block, "docs/quickstart.md#6", "exec"), namespace)

    for name in ("CELERY_BROKER_URL", "CELERY_WORKER_PREFETCH_MULTIPLIER"):
        assert namespace[name] == operations_setting(name)
    from agentmemory.schedules import beat_schedule

    assert namespace["CELERY_BEAT_SCHEDULE"] == beat_schedule()
    options = namespace.get("CELERY_BROKER_TRANSPORT_OPTIONS")
    expected = operations_setting("CELERY_BROKER_TRANSPORT_OPTIONS")
    assert options == (expected if web_process else None)
