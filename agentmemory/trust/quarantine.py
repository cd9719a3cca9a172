"""The injection quarantine: text aimed at the model, found in spans and summaries.

Flagging does not change what is stored: a flagged summary is still data behind the
authored label. Invisible characters are different: they carry instructions a reader
cannot see, so they are stripped on the way into the summarizer and out of it.
"""

from __future__ import annotations

import json
import re
from typing import Any

# Unicode tag characters (U+E0000-U+E007F) spell hidden ASCII; zero-width and bidi
# controls hide or reorder text.
_INVISIBLE = re.compile(
    "[\U000e0000-\U000e007f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\u00ad]"
)

# Aimed at the model, not at a person: "ignore previous instructions", not "disregard my
# earlier message"; "reveal your system prompt", not "print the return label instructions".
_RULES: list[tuple[str, re.Pattern[str]]] = [
    ("ignore-instructions", re.compile(
        r"\b(?:ignore|disregard|forget|override)\b[^.\n]{0,40}\b(?:previous|prior|above|"
        r"earlier|all|system|your)\b[^.\n]{0,20}\b(?:instructions?|prompts?|rules|"
        r"guidelines)\b",
        re.I)),
    ("role-override", re.compile(
        r"(?:^|\n)\s*(?:system|assistant|developer)\s*:|\byou are now (?:an? |the |in )?(?:\w+ )?"
        r"(?:ai|assistant|model|bot|dan|mode|unrestricted|jailbroken|system)\b"
        r"|\bnew (?:system )?instructions?\s*:|\bact as (?:the )?(?:system|developer|admin)\b"
        r"|<\|?(?:im_start|system)\|?>",
        re.I)),
    ("tool-call-imitation", re.compile(
        r"\"(?:tool_calls|function_call)\"\s*:|<tool_call>|<function_calls?>|\btool_result\[",
        re.I)),
    ("prompt-exfiltration", re.compile(
        r"\b(?:reveal|print|show|repeat|output)\b[^.\n]{0,30}\b(?:(?:your|the) system prompt"
        r"|system prompt|(?:your|hidden|initial|original) (?:instructions|prompt)|api keys?)\b",
        re.I)),
]


def has_invisible(text: str) -> bool:
    return not text.isascii() and _INVISIBLE.search(text) is not None


def strip_invisible(text: str) -> str:
    # Every invisible character is outside ASCII: most texts need no search.
    return text if text.isascii() else _INVISIBLE.sub("", text)


def injection_flags(text: str) -> list[str]:
    """The rules ``text`` trips, in a fixed order; empty when it looks like plain data."""
    flags = [name for name, pattern in _RULES if pattern.search(text)]
    if has_invisible(text):
        flags.append("invisible-characters")
    return flags


def message_flags(message: Any) -> list[str]:
    """The flags of all a message shows the summarizer: its text, its tool name and its
    tool calls (names and arguments), read before invisible characters are stripped."""
    parts = [message.content, message.tool_name]
    for call in message.tool_calls or ():
        arguments = call.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, sort_keys=True, ensure_ascii=False)
        parts.append(f"{call.get('name', '')}({arguments})")
    return injection_flags("\n".join(part for part in parts if part))
