"""docs/agent-loop.md and docs/migrating.md show code copied from tests that run it.

A block marked ``<!-- snippet: tests/FILE.py#NAME -->`` must equal the region between
``# --8<-- [start:NAME]`` and ``# --8<-- [end:NAME]`` of that test file, dedented.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["docs/agent-loop.md", "docs/migrating.md"]
MARKED = re.compile(r"^<!-- snippet: (\S+)#([\w-]+) -->\n```python\n(.*?)^```", re.M | re.S)


def region(path: str, name: str) -> str:
    text = (ROOT / path).read_text(encoding="utf-8")
    match = re.search(
        rf"^[ \t]*# --8<-- \[start:{name}\]\n(.*?)^[ \t]*# --8<-- \[end:{name}\]", text,
        re.M | re.S,
    )
    assert match, f"{path} has no region {name!r}"
    return textwrap.dedent(match.group(1))


@pytest.mark.parametrize("page", PAGES)
def test_every_code_block_is_a_copy_of_a_tested_region(page: str) -> None:
    text = (ROOT / page).read_text(encoding="utf-8")
    marked = MARKED.findall(text)
    assert marked, f"{page} shows no tested code"
    assert len(marked) == text.count("```python"), f"{page} has an unmarked python block"
    for path, name, block in marked:
        assert block == region(path, name), f"{page}: {path}#{name} differs from the test"
