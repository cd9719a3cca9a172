"""The fact-retention gate: which specifics of a span does its summary still carry?

A summary that drops the amount a customer was refunded is worse than no summary,
and nothing downstream can tell. Before a summary is stored, the specifics of the span
(amounts, numbers, dates, ids, e-mail addresses, URLs, file paths, quoted names) are
extracted and looked for in the summary text; the score and the missing facts are
stored on the coverage, and below a threshold the fold declines or lists them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

# Order matters: longer, more specific shapes first, and each match is removed from the
# text before the next pattern runs, so "$1,250.00" is one amount, not three numbers.
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("url", re.compile(r"\bhttps?://[^\s<>\"')\]]+", re.I)),
    ("email", re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")),
    ("path", re.compile(r"(?<![\w/])(?:~|\.{1,2})?/(?:[\w.-]+/)*[\w.-]+\.\w{1,6}\b")),
    ("date", re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b"
                        r"|\b\d{1,2}/\d{1,2}/\d{2,4}\b")),
    ("amount", re.compile(r"(?:[$€£¥]\s?\d[\d,]*(?:\.\d+)?|\b\d[\d,]*(?:\.\d+)?\s?"
                          r"(?:USD|EUR|GBP|JPY|CHF|dollars|euros)\b)", re.I)),
    ("id", re.compile(r"\b(?=[A-Z0-9_-]*\d)(?=[A-Z0-9_-]*[A-Z])[A-Z0-9]+(?:[-_][A-Z0-9]+)+\b"
                      r"|#\d{2,}\b|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-"
                      r"[0-9a-f]{12}\b", re.I)),
    # Whole quoted strings, scanned left to right so a match never spans two of them;
    # the ``key`` group marks a JSON key, which is structure rather than a fact.
    ("quoted", re.compile(r"\"(?P<q>(?:[^\"\\\n]|\\.)*)\"(?P<key>\s*:)?|“(?P<c>[^”\n]*)”")),
    ("number", re.compile(r"(?<![\w.])\d{2,}(?:[.,]\d+)*(?![\w])")),
]
#: A number in a summary's text (thousands separators already removed), for amounts.
_NUMBER_IN_TEXT = re.compile(r"(?<![\d.])\d+(?:\.\d+)?(?![\d])")


@dataclass(frozen=True)
class Fact:
    kind: str
    text: str


@dataclass(frozen=True)
class FactCheck:
    """``score``: the share of the span's facts found in the summary (1.0 with none)."""

    facts: list[Fact]
    missing: list[Fact]

    @property
    def score(self) -> float:
        if not self.facts:
            return 1.0
        return round(1 - len(self.missing) / len(self.facts), 4)


def extract_facts(texts: Iterable[str]) -> list[Fact]:
    """The specifics of ``texts``, each once, in order of first appearance."""
    found: dict[tuple[str, str], Fact] = {}
    for text in texts:
        rest = text
        for kind, pattern in _PATTERNS:
            for match in pattern.finditer(rest):
                if kind == "quoted":
                    value = (match["q"] or match["c"] or "").strip()
                    if match["key"] or not 2 <= len(value) <= 60:
                        continue
                else:
                    value = next((g for g in match.groups() if g), None) or match.group(0)
                value = value.strip().rstrip(".,;:")
                found.setdefault((kind, _normal(kind, value)), Fact(kind, value))
            rest = pattern.sub(" ", rest)
    return list(found.values())


def _normal(kind: str, value: str) -> str:
    if kind == "amount":
        return re.sub(r"[^\d.]", "", value.replace(",", ""))
    if kind in ("email", "url", "id"):
        return value.lower()
    return value


def check_facts(span_texts: Iterable[str], summary_text: str) -> FactCheck:
    facts = extract_facts(span_texts)
    haystack = summary_text.lower()
    digits = re.sub(r"(?<=\d),(?=\d{3})", "", summary_text)
    missing = [fact for fact in facts if not _mentioned(fact, haystack, digits)]
    return FactCheck(facts=facts, missing=missing)


def _mentioned(fact: Fact, haystack: str, digits: str) -> bool:
    if fact.kind == "amount":
        # Compared as numbers: "$1,250" and "1250.00 USD" both keep "$1,250.00".
        wanted = _amount_value(_normal("amount", fact.text))
        return wanted is not None and any(
            _amount_value(found) == wanted for found in _NUMBER_IN_TEXT.findall(digits)
        )
    if fact.kind == "number" or (fact.kind == "id" and fact.text.startswith("#")):
        plain = fact.text.lstrip("#").replace(",", "")
        return re.search(rf"(?<![\d.]){re.escape(plain)}(?![\d])", digits) is not None
    return fact.text.lower() in haystack


def _amount_value(number: str) -> Decimal | None:
    try:
        return Decimal(number)
    except InvalidOperation:
        return None


FACT_NOTE_OPENING = "[facts from the originals that the summary above does not mention: "


def missing_facts_note(missing: list[str]) -> str:
    """The authored list appended after a summary that dropped facts (gate action "append")."""
    return f"{FACT_NOTE_OPENING}{'; '.join(missing)}]"


def split_fact_note(text: str, missing: list[str]) -> tuple[str, str]:
    """``text`` (a summary's, after its label) as the model's words and agentmemory's fact
    note after them (``""`` when there is none). The note is recognised as the exact one
    the gate writes for ``missing``, so a model cannot pass its own words off as it."""
    if missing:
        note = missing_facts_note(missing)
        if text.endswith(f"\n{note}"):
            return text[: -len(note) - 1], note
    return text, ""
