"""The injection quarantine: text aimed at the model, found in spans and summaries.

Flagging does not change what is stored: a flagged summary is still data behind the
authored label. Invisible characters are different: they carry instructions a reader
cannot see, so they are stripped on the way into the summarizer and out of it.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: What "invisible" means, the one definition every filter uses: every format character
#: (Unicode category Cf: zero-width characters, bidirectional controls, the tag
#: characters U+E0000-U+E007F that spell hidden ASCII, interlinear annotation marks,
#: the soft hyphen...), and the characters of other categories that draw nothing: the
#: combining grapheme joiner, the variation selectors, the Hangul fillers, the Khmer
#: inherent vowels and the Mongolian free variation selectors. Written out (as of
#: Unicode 15.1) rather than computed at import; tests/test_quarantine.py checks every
#: Cf character of the running Python's Unicode database is in it.
INVISIBLE_RANGES: tuple[tuple[int, int], ...] = (
    # category Cf
    (0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD),
    (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180E, 0x180E),
    (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F),
    (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD),
    (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
    # other categories that draw nothing
    (0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180D),
    (0x180F, 0x180F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0),
    (0xE0100, 0xE01EF),
)
_INVISIBLE = re.compile(
    "[" + "".join(f"{chr(low)}-{chr(high)}" for low, high in INVISIBLE_RANGES) + "]"
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
