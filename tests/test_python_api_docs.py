"""docs/python-api.md documents every public name of agentmemory.services (issue 26).

Every name of ``services.__all__`` appears in backticks in the page (`name` or
`name(...)`), and every services name the page's reference section gives in backticks
exists, so the reference can neither miss a name nor keep one that is gone.
"""

from __future__ import annotations

import importlib
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


def subsections(section: str) -> list[tuple[str | None, str]]:
    """The reference's text under each ``### `agentmemory.x`` heading, with that module's
    dotted name (None for the text before the first heading)."""
    parts = re.split(r"^### `([\w.]+)`\s*$", section, flags=re.MULTILINE)
    return [(None, parts[0])] + list(zip(parts[1::2], parts[2::2], strict=True))


def test_the_reference_names_only_what_exists() -> None:
    modules = {module.name for module in pkgutil.iter_modules(services.__path__)}
    unknown = []
    for module_name, text in subsections(reference_section(PAGE.read_text(encoding="utf-8"))):
        module = importlib.import_module(module_name) if module_name else services
        for span in spans(text):
            match = re.fullmatch(rf"(?:agentmemory\.)?services\.({NAME})", span) or re.match(
                rf"({NAME})(?:\(|$)", span
            )
            name = match.group(1) if match else None
            if name and name not in services.__all__ and name not in modules \
                    and not hasattr(module, name):
                unknown.append(f"{module_name or 'agentmemory.services'}: {span}")
    assert not unknown, f"the reference names what its modules lack: {unknown}"
