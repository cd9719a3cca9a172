"""The settings object: import strings imported and cached in one place, one reload, and
the recall knobs' rules applied alike by ``manage.py check`` and by recall."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

import agentmemory.conf
from agentmemory import services
from agentmemory.checks import check_settings
from agentmemory.conf import IMPORT_STRINGS, memory_settings
from agentmemory.pipeline.config import InvalidRecallOption, RecallConfig
from agentmemory.summarizers import BaseSummarizer, get_summarizer
from agentmemory.summarizers.callable import CallableSummarizer
from agentmemory.summarizers.offline import OfflineSummarizer
from agentmemory.summarizers.openai import OpenAISummarizer
from agentmemory.tokens import EncodingCounter, EstimateCounter, get_counter
from agentmemory.window.seams import SlidingWindow, get_window
from tests.helpers import KeepNewest

PLUGGED = ("agentmemory.summarizers", "agentmemory.tokens", "agentmemory.window")


def test_conf_imports_no_summarizer_counter_or_seam_module() -> None:
    """Not at import time and not inside a function (the old reload did): no circle."""
    tree = ast.parse(Path(agentmemory.conf.__file__).read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {
        alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
        for alias in node.names
    }
    assert not {name for name in imported if name and name.startswith(PLUGGED)}
    assert "agentmemory" not in imported  # no `from agentmemory import summarizers`

    code = (
        "import sys, django; from django.conf import settings; settings.configure(); "
        "django.setup(); import agentmemory.conf; "
        "print(' '.join(m for m in sys.modules if m.startswith('agentmemory.')))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "agentmemory.conf" in loaded
    assert not [name for name in loaded if name.startswith(PLUGGED)]


@pytest.mark.parametrize(
    ("key", "value", "get", "overridden", "default"),
    [
        ("TOKEN_COUNTER", "agentmemory.tokens.EstimateCounter", get_counter, EstimateCounter,
         EncodingCounter),
        ("SUMMARIZER", {"BACKEND": "agentmemory.summarizers.callable.CallableSummarizer",
                        "MODEL": "m", "OPTIONS": {"FUNCTION": "tests.helpers.instant"}},
         get_summarizer, CallableSummarizer, OfflineSummarizer),
        ("WINDOW", {"CLASS": "tests.helpers.KeepNewest", "OPTIONS": {"KEEP": 3}},
         get_window, KeepNewest, SlidingWindow),
    ],
    ids=["token-counter", "summarizer", "window"],
)
def test_overriding_an_import_string_setting_takes_effect_and_is_undone(
    key: str, value: Any, get: Any, overridden: type, default: type
) -> None:
    assert key in IMPORT_STRINGS
    before = get()
    assert isinstance(before, default) and get() is before  # built once, then kept

    with override_settings(AGENTMEMORY={key: value}):
        inside = get()
        assert isinstance(inside, overridden) and get() is inside

    after = get()
    assert isinstance(after, default) and after is not before  # the reload dropped both


def test_an_import_string_that_does_not_import_names_the_setting() -> None:
    with override_settings(AGENTMEMORY={"TOKEN_COUNTER": "tests.nowhere.Counter"}):
        [error] = [e for e in check_settings() if e.id == "agentmemory.E007"]
    assert "AGENTMEMORY['TOKEN_COUNTER'] = 'tests.nowhere.Counter' cannot be imported" in (
        error.msg
    )
    with override_settings(AGENTMEMORY={"TOKEN_COUNTER": 42}):
        [error] = [e for e in check_settings() if e.id == "agentmemory.E007"]
    assert "must be a dotted path, got 42" in error.msg


class QuickSummarizer(OfflineSummarizer):
    timeout = 5.0


@pytest.mark.parametrize(
    ("summarizer", "soft", "hard"),
    [
        (OfflineSummarizer(model="offline-extractive-1"), 90.0, 120.0),
        (QuickSummarizer(model="offline-extractive-1"), 35.0, 65.0),
        (OpenAISummarizer(model="gpt-4o-mini", options={"TIMEOUT": 10}), 40.0, 70.0),
    ],
    ids=["base-default", "backend-timeout", "openai-timeout-option"],
)
def test_the_fold_task_time_limits_sit_above_the_summarizer_timeout(
    summarizer: BaseSummarizer, soft: float, hard: float
) -> None:
    options = services.fold_task_options(summarizer)
    assert (options["soft_time_limit"], options["time_limit"]) == (soft, hard)


@pytest.mark.parametrize(
    ("key", "option", "value", "code"),
    [
        ("RECALL_MODE", "mode", "sometimes", "agentmemory.E003"),
        ("LOAD_COUNT", "load_count", 0, "agentmemory.E004"),
        ("TRIGGER_MIN_ENTRIES", "trigger_min_entries", True, "agentmemory.E004"),
        ("PRESERVE_RECENT", "preserve_recent", "5", "agentmemory.E004"),
        ("MIN_FOLD_ENTRIES", "min_fold_entries", 0, "agentmemory.E004"),
        ("FOLD_INPUT_LIMIT", "input_limit", 0.5, "agentmemory.E004"),
        ("RESERVE_TOKENS", "reserve_tokens", -1, "agentmemory.E004"),
        ("MINIMUM_TOKENS", "minimum_tokens", None, "agentmemory.E004"),
        ("MAX_ENTRIES", "max_entries", True, "agentmemory.E004"),
        ("FOLD_HIGH_WATER", "high_water", 1.5, "agentmemory.E004"),
        ("FOLD_LOW_WATER", "low_water", 0, "agentmemory.E004"),
        ("SUMMARY_SHARE", "summary_share", 1, "agentmemory.E004"),
        ("DECAY", "decay", {"HALF_LIFE": 0}, "agentmemory.E005"),
        ("DECAY", "decay", {"HALFLIFE": 60}, "agentmemory.E005"),
    ],
)
def test_check_and_recall_refuse_the_same_values(
    key: str, option: str, value: Any, code: str
) -> None:
    with override_settings(AGENTMEMORY={key: value}):
        messages = [m for m in check_settings() if m.id == code]
        assert any(f"['{key}']" in m.msg for m in messages), messages
        with pytest.raises(InvalidRecallOption) as from_settings:
            RecallConfig.build()
    with pytest.raises(InvalidRecallOption) as per_call:
        RecallConfig.build(**{option: value})
    assert from_settings.value.field == per_call.value.field == option


def test_settings_are_read_again_after_a_reload() -> None:
    assert memory_settings.PRESERVE_RECENT == 5
    with override_settings(AGENTMEMORY={"PRESERVE_RECENT": 7}):
        assert memory_settings.PRESERVE_RECENT == 7
    assert memory_settings.PRESERVE_RECENT == 5

    counter, summarizer, seam = get_counter(), get_summarizer(), get_window()
    memory_settings.reload()  # by hand, as a new process would start
    assert get_counter() is not counter
    assert get_summarizer() is not summarizer
    assert get_window() is not seam


def test_recall_options_follow_the_settings_and_an_override_may_repair_one() -> None:
    """RecallConfig.build reads the settings once until they change: a change is seen at
    once and undone after; an override is validated with the settings it overrides, so
    it may repair a setting that alone would be refused."""
    assert RecallConfig.build().preserve_recent == 5
    with override_settings(AGENTMEMORY={"PRESERVE_RECENT": 7}):
        assert RecallConfig.build().preserve_recent == 7
        assert RecallConfig.build(preserve_recent=3).preserve_recent == 3
    assert RecallConfig.build().preserve_recent == 5
    with override_settings(AGENTMEMORY={"FOLD_LOW_WATER": 0.7, "FOLD_HIGH_WATER": 0.6}):
        with pytest.raises(InvalidRecallOption):
            RecallConfig.build()
        assert RecallConfig.build(low_water=0.1).low_water == 0.1
        with pytest.raises(InvalidRecallOption):
            RecallConfig.build()  # nothing of the repaired config was kept


def test_a_kept_config_answers_only_for_its_own_overrides_and_settings() -> None:
    """RecallConfig.build keeps the config of each set of overrides: the same overrides
    give the same config until the settings change, a value of another type (True for
    1) is validated on its own, and a refused value is refused every time."""
    background = RecallConfig.build(mode="background", preserve_recent=1)
    assert RecallConfig.build(mode="background", preserve_recent=1) is background
    assert RecallConfig.build(preserve_recent=1, mode="background") is background
    for _ in range(2):
        with pytest.raises(InvalidRecallOption):
            RecallConfig.build(mode="background", preserve_recent=True)
        with pytest.raises(InvalidRecallOption):
            RecallConfig.build(mode="background", preserve_recent=-1)
    with override_settings(AGENTMEMORY={"FORMAT_HEADER": "history:"}):
        changed = RecallConfig.build(mode="background", preserve_recent=1)
        assert changed is not background and changed.header == "history:"
    assert RecallConfig.build(mode="background", preserve_recent=1).header == background.header
    hot = {"tiers": ["hot", "cold"]}  # a list: not hashable, built every time
    tiers = RecallConfig.build(**hot)
    assert tiers.tiers == ("hot", "cold") and RecallConfig.build(**hot) is not tiers
