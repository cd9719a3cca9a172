"""Where rules and modules live: state and expiry filters on the querysets only, and the
trust-and-cost modules under ``agentmemory.trust`` with their documented old paths."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "agentmemory"

# A filter keyword on a state or expiry column, e.g. ``retired_at__isnull=True`` or
# ``coverage__tampered_at__isnull``: the querysets name these rules.
STATE_FILTER = re.compile(r"\b\w*(?:retired_at|held_at|expires_at|tampered_at|reviewed_at)__\w+")

# Where the rules are written, and the migrations that record the schema.
HOMES = {"querysets.py", "models"}


def test_state_and_expiry_filters_are_written_only_on_the_querysets() -> None:
    found: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "migrations" or relative.parts[0] in HOMES:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            found.extend(
                f"agentmemory/{relative}:{number}: {match}"
                for match in STATE_FILTER.findall(line)
            )
    assert found == [], "call the queryset methods instead:\n" + "\n".join(found)


def test_the_pattern_finds_filters_of_each_kind() -> None:
    lines = [
        "qs.filter(retired_at__isnull=True)",
        "Q(expires_at__lte=now)",
        "qs.exclude(coverage__tampered_at__isnull=False)",
        "qs.filter(held_at__isnull=False, coverage__reviewed_at__isnull=True)",
    ]
    assert [len(STATE_FILTER.findall(line)) for line in lines] == [1, 1, 1, 2]
    assert STATE_FILTER.findall("row.retired_at is None and update(retired_at=now)") == []


def test_the_api_is_one_module_per_resource() -> None:
    """The REST API's views and serializers are packages with a module per resource (the
    size of every module is kept by tests/test_import_graph.py)."""
    api = PACKAGE / "api"
    for package in ("views", "serializers"):
        modules = {path.stem for path in (api / package).glob("*.py")}
        assert {"__init__", "base", "threads", "entries", "recall"} <= modules
