"""``manage.py check`` names the bad AGENTMEMORY key, its value and the fix."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings


def agentmemory_messages(value: Any) -> list[Any]:
    with override_settings(AGENTMEMORY=value):
        return [m for m in run_checks() if m.id and m.id.startswith("agentmemory.")]


def ids(value: Any) -> list[str]:
    return sorted({message.id for message in agentmemory_messages(value)})


@pytest.mark.parametrize(
    "value",
    [
        {},
        {
            "LOAD_COUNT": 40,
            "PRESERVE_RECENT": 6,
            "TIERS": ["hot", "cold"],
            "SUMMARY_TIER": "cold",
            "DECAY": {"HALF_LIFE": 3600, "MIN_SCORE": 0.2},
            "DEFAULT_TTL": timedelta(days=30),
            "RECALL_MODE": "background",
            "SUMMARIZER": {
                "BACKEND": "agentmemory.summarizers.callable.CallableSummarizer",
                "MODEL": "test-model",
                "OPTIONS": {"FUNCTION": "tests.helpers.count_lines"},
            },
        },
        {"DEFAULT_TTL": 86400},
        {"DEFAULT_TTL": 3600.5},
    ],
    ids=["empty", "everything-set", "ttl-in-seconds", "ttl-in-fractional-seconds"],
)
def test_clean_settings_give_no_agentmemory_message(value: dict[str, Any]) -> None:
    assert agentmemory_messages(value) == []


def test_an_unknown_key_is_e001_and_names_the_key() -> None:
    [message] = agentmemory_messages({"LOAD_CONT": 10})

    assert message.id == "agentmemory.E001"
    assert "LOAD_CONT" in message.msg
    assert "LOAD_COUNT" in message.hint


@pytest.mark.parametrize(
    ("key", "meant"),
    [("SUMARIZER", "SUMMARIZER"), ("preserve_recent", "PRESERVE_RECENT"),
     ("FOLD_HIGHWATER", "FOLD_HIGH_WATER"), ("RECIEPTS", "RECEIPTS")],
)
def test_a_misspelt_key_is_e001_with_the_setting_it_was_meant_to_be(key: str, meant: str) -> None:
    [message] = agentmemory_messages({key: 1})

    assert message.id == "agentmemory.E001"
    assert message.msg == (
        f"AGENTMEMORY[{key!r}] is not a setting of agentmemory. Did you mean {meant!r}?"
    )
    assert message.hint.startswith(f"Rename it to {meant!r}")
    assert "LOAD_COUNT" not in message.hint  # one name, not the list of every setting


def test_an_unknown_key_near_no_setting_lists_them_all() -> None:
    [message] = agentmemory_messages({"COLOUR_SCHEME": "dark"})

    assert message.id == "agentmemory.E001"
    assert "Did you mean" not in message.msg
    assert "SUMMARIZER" in message.hint and "LOAD_COUNT" in message.hint


def test_settings_that_are_not_a_dict_are_e001() -> None:
    assert ids(["LOAD_COUNT", 10]) == ["agentmemory.E001"]


@pytest.mark.parametrize(
    "summarizer",
    [
        {"BACKEND": "agentmemory.summarizers.offline.OfflineSummarizer"},
        {"BACKEND": "agentmemory.summarizers.openai.OpenAISummarizer", "MODEL": "  "},
        {"BACKEND": "agentmemory.summarizers.nowhere.Summarizer", "MODEL": "m"},
        {"BACKEND": "agentmemory.models.Thread", "MODEL": "m"},
        {"MODEL": "gpt-4o-mini"},
        {"BACKEND": "agentmemory.summarizers.offline.OfflineSummarizer", "MODEL": "m",
         "OPTIONS": {"TEMPERATURE": 1}},
        {"BACKEND": "agentmemory.summarizers.callable.CallableSummarizer", "MODEL": "m",
         "OPTIONS": {"FUNCTION": "tests.helpers.no_such_function"}},
    ],
    ids=["no-model", "blank-model", "backend-not-importable", "backend-not-a-summarizer",
         "no-backend", "unknown-option", "function-not-importable"],
)
def test_an_unusable_summarizer_is_e002(summarizer: dict[str, Any]) -> None:
    messages = agentmemory_messages({"SUMMARIZER": summarizer})

    assert [m.id for m in messages] == ["agentmemory.E002"]
    assert "SUMMARIZER" in messages[0].msg


@pytest.mark.parametrize(
    ("value", "expected", "key"),
    [
        ({"RECALL_MODE": "sometimes"}, "agentmemory.E003", "RECALL_MODE"),
        ({"LOAD_COUNT": -1}, "agentmemory.E004", "LOAD_COUNT"),
        ({"LOAD_COUNT": 0}, "agentmemory.E004", "LOAD_COUNT"),
        ({"PRESERVE_RECENT": "5"}, "agentmemory.E004", "PRESERVE_RECENT"),
        ({"RESERVE_TOKENS": -10}, "agentmemory.E004", "RESERVE_TOKENS"),
        ({"MAX_ENTRIES": 0}, "agentmemory.E004", "MAX_ENTRIES"),
        ({"DECAY": {"HALF_LIFE": 0}}, "agentmemory.E005", "DECAY"),
        ({"DECAY": {"HALF_LIFE": 60, "MIN_SCORE": 2}}, "agentmemory.E005", "DECAY"),
        ({"DECAY": {"HALFLIFE": 60}}, "agentmemory.E005", "DECAY"),
        ({"DECAY": "fast"}, "agentmemory.E005", "DECAY"),
        ({"TIERS": ["hot"]}, "agentmemory.E006", "SUMMARY_TIER"),
        ({"TIERS": ["hot", "warm"], "SUMMARY_TIER": "cold"}, "agentmemory.E006", "SUMMARY_TIER"),
        ({"TIERS": ["boiling"], "SUMMARY_TIER": "hot"}, "agentmemory.E006", "TIERS"),
        ({"WRITE_TIER": "tepid"}, "agentmemory.E006", "WRITE_TIER"),
        ({"DEFAULT_TTL": -5}, "agentmemory.E008", "DEFAULT_TTL"),
        ({"DEFAULT_TTL": timedelta(0)}, "agentmemory.E008", "DEFAULT_TTL"),
        ({"DEFAULT_TTL": "30 days"}, "agentmemory.E008", "DEFAULT_TTL"),
        ({"DEFAULT_TTL": True}, "agentmemory.E008", "DEFAULT_TTL"),
        ({"DEFAULT_TTL": -0.5}, "agentmemory.E008", "DEFAULT_TTL"),
    ],
)
def test_a_bad_value_is_reported_under_its_id(
    value: dict[str, Any], expected: str, key: str
) -> None:
    messages = agentmemory_messages(value)

    assert {m.id for m in messages} == {expected}
    assert any(f"['{key}']" in m.msg for m in messages)
    assert all(m.hint for m in messages)


def test_summary_tier_outside_tiers_says_why() -> None:
    [message] = agentmemory_messages({"TIERS": ["hot", "warm"]})

    assert message.id == "agentmemory.E006"
    assert "SUMMARY_TIER" in message.msg and "TIERS" in message.hint


def test_several_bad_values_are_all_reported() -> None:
    assert ids({"RECALL_MODE": "x", "LOAD_COUNT": -1, "DEFAULT_TTL": "x", "BOGUS": 1}) == [
        "agentmemory.E001", "agentmemory.E003", "agentmemory.E004", "agentmemory.E008"
    ]


def test_manage_py_check_fails_on_a_bad_setting_and_passes_on_clean_ones() -> None:
    with override_settings(AGENTMEMORY={"RECALL_MODE": "sometimes"}):
        with pytest.raises(SystemCheckError, match=r"agentmemory\.E003"):
            call_command("check")
    with override_settings(AGENTMEMORY={}):
        call_command("check")


@pytest.fixture
def sqlite_file(tmp_path: Any, django_db_blocker: Any) -> Any:
    """A file-backed SQLite database under its own alias, opened with ``options``."""
    from django.db import connections

    made: list[str] = []

    def add(options: dict[str, Any]) -> str:
        alias = f"journal{len(made)}"
        connections.settings[alias] = connections.configure_settings({
            "default": connections.settings["default"],
            alias: {"ENGINE": "django.db.backends.sqlite3",
                    "NAME": str(tmp_path / f"{alias}.sqlite3"), "OPTIONS": options},
        })[alias]
        made.append(alias)
        return alias

    with django_db_blocker.unblock():
        yield add
        for alias in made:
            connections[alias].close()
            del connections[alias]
            del connections.settings[alias]


WAL = {"init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"}


@pytest.mark.parametrize(("options", "receipts", "warned"), [
    ({}, True, True),  # Django's default: the rollback journal
    ({"init_command": "PRAGMA journal_mode=TRUNCATE;"}, True, True),
    (WAL, True, False),
    ({}, False, False),
])
def test_receipts_on_a_journal_synced_at_every_commit_are_warned_of(
    sqlite_file: Any, options: dict[str, Any], receipts: bool, warned: bool,
) -> None:
    """W004, from ``manage.py check --database``: it reads the database's journal mode."""
    alias = sqlite_file(options)
    with override_settings(AGENTMEMORY={"RECEIPTS": receipts}):
        if warned:
            with pytest.raises(SystemCheckError, match="agentmemory.W004") as raised:
                call_command("check", "--database", alias, "--fail-level", "WARNING")
            assert f"'{alias}'" in str(raised.value) and "journal_mode=WAL" in str(raised.value)
        else:
            call_command("check", "--database", alias, "--fail-level", "WARNING")
