"""docs/python-api.md documents every public name of agentmemory.services (issue 26).

Every name of ``services.__all__`` appears in backticks in the page (`name` or
`name(...)`), and every services name the page's reference section gives in backticks
exists, so the reference can neither miss a name nor keep one that is gone.
"""

from __future__ import annotations

import pkgutil
import re
from pathlib import Path

from agentmemory import services

PAGE = Path(__file__).resolve().parent.parent / "docs" / "python-api.md"
HEADING = "## Reference: every name in agentmemory.services"
NAME = r"[A-Za-z_][A-Za-z0-9_]*"


def spans(text: str) -> list[str]:
    return [span.strip() for span in re.findall(r"`([^`]+)`", text)]


def reference_section(text: str) -> str:
    assert HEADING in text, f"docs/python-api.md has no {HEADING!r} section"
    section = text.split(HEADING, 1)[1]
    return re.split(r"^## ", section, maxsplit=1, flags=re.MULTILINE)[0]


def test_every_public_name_is_documented() -> None:
    documented = spans(PAGE.read_text(encoding="utf-8"))
    missing = [
        name for name in services.__all__
        if not any(span == name or span.startswith(f"{name}(") for span in documented)
    ]
    assert not missing, f"docs/python-api.md does not document {missing}"


def test_the_reference_names_only_what_exists() -> None:
    modules = {module.name for module in pkgutil.iter_modules(services.__path__)}
    unknown = []
    for span in spans(reference_section(PAGE.read_text(encoding="utf-8"))):
        match = re.fullmatch(rf"(?:agentmemory\.)?services\.({NAME})", span) or re.match(
            rf"({NAME})(?:\(|$)", span
        )
        if match and match.group(1) not in services.__all__ and match.group(1) not in modules:
            unknown.append(span)
    assert not unknown, f"the reference names what agentmemory.services lacks: {unknown}"
