"""The documentation stays true to the code.

docs/api.md is regenerated from the OpenAPI schema the code serves and must match the
file; docs/settings.md must name every key of ``agentmemory.conf.DEFAULTS`` with the
check that reports a bad value of it (found by giving the key a bad value and running
the checks), and every check id of agentmemory/checks.py.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from django.test import override_settings

from agentmemory.checks import check_settings
from agentmemory.conf import DEFAULTS

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

# One value per key that its check must reject. A key added to DEFAULTS without an
# entry here fails test_every_key_has_a_bad_value: document it and say what guards it.
BAD_VALUES: dict[str, Any] = {
    "SUMMARIZER": {"BACKEND": "agentmemory.summarizers.nowhere.Missing", "MODEL": "m"},
    "RECALL_MODE": "sometimes",
    "LOAD_COUNT": 0,
    "TIERS": ["lukewarm"],
    "TRIGGER_MIN_ENTRIES": 0,
    "PRESERVE_RECENT": 0,
    "MIN_FOLD_ENTRIES": 0,
    "SUMMARY_TIER": "lukewarm",
    "SUMMARY_INSTRUCTION": "   ",
    "DECAY": {"HALF_LIFE": 0},
    "RESERVE_TOKENS": -1,
    "MINIMUM_TOKENS": -1,
    "MAX_ENTRIES": 0,
    "FORMAT_HEADER": 1,
    "FORMAT_FOOTER": None,
    "WRITE_TIER": "lukewarm",
    "DEFAULT_TTL": -1,
    "FOLD_HIGH_WATER": 0,
    "FOLD_LOW_WATER": 1.0,
    "SUMMARY_SHARE": 1,
    "FOLD_INPUT_LIMIT": 0,
    "FOLD_TRIGGER_MIN_TOKENS": -1,
    "FOLD_CACHE_MIN_TOKENS": -1,
    "SEARCH_LANGUAGE": "english; drop table",
    "FOLD_BUDGET": 0,
    "INLINE_FOLD_WAIT": -1,
    "TOKEN_CACHE_SECONDS": -1,
    "FOLD_QUEUE": "",
    "FOLD_RETRY_MAX": -1,
    "FOLD_RETRY_BACKOFF": 0,
    "FOLDS_PER_TASK": 0,
    "PURGE_BATCH_SIZE": 0,
    "SWEEP_WINDOW": 0,
    "SWEEP_LIMIT": 0,
    "BROKER_TIMEOUT": 0,
    "FOLD_LEASE": -1,
    "FOLD_MAX_DEATHS": 0,
    "FOLD_PARK_BACKOFF": "an hour",
    "CIRCUIT_FAILURES": 0,
    "CIRCUIT_BACKOFF": -1,
    "CIRCUIT_BACKOFF_MAX": "15 min",
    "WINDOW": {"CLASS": "agentmemory.window.seams.SlidingWindow", "OPTIONS": {"MAX_MESSAGES": 1}},
    "WINDOW_MIN_FOLD": 0,
    "WINDOW_RETAIN": "forever",
    "API_MAX_CONTENT_CHARS": 0,
    "API_MAX_BATCH": 0,
    "API_MAX_WINDOW": 0,
    "API_PAGE_SIZE": 0,
    "API_THROTTLE_RATES": {"append": "often"},
    "RECEIPTS": "yes",
    "FACT_GATE": {"THRESHOLD": 2},
    "SIGNING_KEY": "too-short",
    "HOLD_FLAGGED": "yes",
    "DAILY_TOKEN_QUOTA": 0,
    "TOKEN_COUNTER": "agentmemory.tokens.NoSuchCounter",
    "TOKEN_ENCODING": "no_such_encoding",
}


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "api_reference", ROOT / "scripts" / "api_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def settings_rows() -> dict[str, str]:
    """Each settings table row of docs/settings.md, by the key in its first cell."""
    rows = {}
    for line in (DOCS / "settings.md").read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\| `([A-Z][A-Z0-9_]*)` \|", line)
        if match:
            rows[match.group(1)] = line
    return rows


def test_api_reference_matches_the_schema_the_code_serves(on_postgres: bool) -> None:
    if on_postgres:
        # Integer bounds in the schema come from the database backend's field ranges;
        # the page is generated with the embedded default, so compare it there.
        pytest.skip("docs/api.md is generated on SQLite; the SQLite run compares it")
    expected = load_generator().render()
    current = (DOCS / "api.md").read_text(encoding="utf-8")
    assert current == expected, (
        "docs/api.md is stale: run `.venv/bin/python scripts/api_reference.py`."
    )


def test_api_reference_lists_every_route_and_method() -> None:
    schema = load_generator().fetch_schema()
    text = (DOCS / "api.md").read_text(encoding="utf-8")
    for path, item in schema["paths"].items():
        short = path.removeprefix("/api/memory")
        for method in ("get", "post", "put", "patch", "delete"):
            if method in item:
                assert f"### {method.upper()} `{short}`" in text, (method, path)


def test_every_key_has_a_bad_value() -> None:
    assert set(BAD_VALUES) == set(DEFAULTS)


def test_every_setting_is_documented() -> None:
    rows = settings_rows()
    missing = sorted(set(DEFAULTS) - set(rows))
    assert not missing, f"docs/settings.md has no row for {missing}"
    unknown = sorted(set(rows) - set(DEFAULTS))
    assert not unknown, f"docs/settings.md documents keys that do not exist: {unknown}"


@pytest.mark.parametrize("key", sorted(DEFAULTS))
def test_each_setting_names_the_check_that_guards_it(key: str) -> None:
    with override_settings(AGENTMEMORY={key: BAD_VALUES[key]}):
        reported = {message.id for message in check_settings() if message.id}
    ids = reported - {"agentmemory.W001", "agentmemory.W002"}
    assert ids, f"no check rejects AGENTMEMORY[{key!r}] = {BAD_VALUES[key]!r}"
    row = settings_rows()[key]
    for check_id in sorted(ids):
        assert check_id in row, f"docs/settings.md row of {key} does not name {check_id}"


def test_every_check_id_is_documented() -> None:
    source = (ROOT / "agentmemory" / "checks.py").read_text(encoding="utf-8")
    ids = set(re.findall(r"\b([EW]\d{3})\b", source))
    assert ids, "no check ids found in agentmemory/checks.py"
    text = (DOCS / "settings.md").read_text(encoding="utf-8")
    missing = sorted(i for i in ids if f"agentmemory.{i}" not in text)
    assert not missing, f"docs/settings.md does not mention {missing}"


def test_the_makefile_states_the_benchmark_time_the_page_measured() -> None:
    """`make bench`'s comment says how long it takes; docs/benchmarks.md measured it."""
    page = (DOCS / "benchmarks.md").read_text(encoding="utf-8")
    measured = re.search(r"The last run measured for \*\*([\d.]+) minutes\*\*", page)
    stated = re.search(r"## The benchmark suite .*?, in about (\d+) minutes on",
                       (ROOT / "Makefile").read_text(encoding="utf-8"), re.S)
    assert measured and stated
    # "about": the measured time rounded to five minutes.
    assert int(stated[1]) == 5 * round(float(measured[1]) / 5), (stated[0], measured[0])


def test_the_home_page_and_readme_say_make_test_runs_ruff_mypy_and_both_suites() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "Runs `ruff` and `mypy`, then the whole test suite twice" in readme
    [line] = [line for line in (DOCS / "index.md").read_text(encoding="utf-8").splitlines()
              if line.startswith("make test")]
    assert all(word in line for word in ("ruff", "mypy", "SQLite", "PostgreSQL")), line
