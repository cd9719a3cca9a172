"""The fact-retention gate: which specifics of a span does its summary still carry?

A summary that drops the amount a customer was refunded is worse than no summary,
and nothing downstream can tell. Before a summary is stored, the specifics of the span
(amounts, numbers, dates, ids, e-mail addresses, URLs, file paths, quoted names) are
extracted and looked for in the summary text; the score and the missing facts are
stored on the coverage, and below a threshold the fold is flagged for review, lists
them after the summary, or declines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

#: A written number with its separators: "1,250.00", "1.234,56", "12,50".
_NUMBER = r"\d(?:[\d,.]*\d)?"
_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
# Order matters: longer, more specific shapes first, and each match is removed from the
# text before the next pattern runs, so "$1,250.00" is one amount, not three numbers.
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("url", re.compile(r"\bhttps?://[^\s<>\"')\]]+", re.I)),
    ("email", re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")),
    ("path", re.compile(r"(?<![\w/])(?:~|\.{1,2})?/(?:[\w.-]+/)*[\w.-]+\.\w{1,6}\b")),
    ("date", re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b"
                        r"|\b\d{1,2}/\d{1,2}/\d{2,4}\b")),
    ("amount", re.compile(rf"(?:[$€£¥]\s?{_NUMBER}|\b{_NUMBER}\s?"
                          r"(?:USD|EUR|GBP|JPY|CHF|dollars|euros)\b)", re.I)),
    ("id", re.compile(r"\b(?=[A-Z0-9_-]*\d)(?=[A-Z0-9_-]*[A-Z])[A-Z0-9]+(?:[-_][A-Z0-9]+)+\b"
                      r"|#\d{2,}\b|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-"
                      r"[0-9a-f]{12}\b", re.I)),
    # Whole quoted strings, scanned left to right so a match never spans two of them;
    # the ``key`` group marks a JSON key, which is structure rather than a fact.
    # A quoted string never spans a line break of any kind: a fact is listed on one line.
    ("quoted", re.compile(rf"\"(?P<q>(?:[^\"\\{_BREAKS}]|\\[^{_BREAKS}])*)\"(?P<key>\s*:)?"
                          rf"|“(?P<c>[^”{_BREAKS}]*)”")),
    ("number", re.compile(r"(?<![\w.])\d{2,}(?:[.,]\d+)*(?![\w])")),
]
_WRITTEN_NUMBER = re.compile(_NUMBER)


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
            # Each match leaves the text as a space, as pattern.sub(" ", rest) would, but
            # from the one scan that found them: most patterns find nothing in most texts.
            kept: list[str] = []
            end = 0
            for match in pattern.finditer(rest):
                kept.append(rest[end : match.start()])
                end = match.end()
                if kind == "quoted":
                    value = (match["q"] or match["c"] or "").strip()
                    if match["key"] or not 2 <= len(value) <= 60:
                        continue
                else:
                    value = next((g for g in match.groups() if g), None) or match.group(0)
                value = value.strip().rstrip(".,;:")
                found.setdefault((kind, _normal(kind, value)), Fact(kind, value))
            if kept:
                kept.append(rest[end:])
                rest = " ".join(kept)
    return list(found.values())


def _normal(kind: str, value: str) -> str:
    if kind == "amount":
        written = _WRITTEN_NUMBER.search(value)
        number = number_value(written[0]) if written else None
        return value if number is None else str(number)
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
        # Compared as numbers, each read whole: "$1,250" and "1250.00 USD" both keep
        # "$1,250.00", "12.50 EUR" keeps "12,50 EUR", and "12,01" does not keep "$12".
        written = _WRITTEN_NUMBER.search(fact.text)
        wanted = number_value(written[0]) if written else None
        return wanted is not None and wanted in map(number_value, _WRITTEN_NUMBER.findall(haystack))
    if fact.kind == "number" or (fact.kind == "id" and fact.text.startswith("#")):
        plain = fact.text.lstrip("#")
        return any(
            re.search(rf"(?<![\d.]){re.escape(text)}(?![\d])", text_in) is not None
            for text, text_in in ((plain, haystack), (plain.replace(",", ""), digits))
        )
    return fact.text.lower() in haystack


def number_value(number: str) -> Decimal | None:
    """The value of a written number, whichever convention wrote it: with both "," and
    "." the last one is the decimal point ("1,234.56", "1.234,56"); a single "," is one
    unless exactly three digits follow it ("12,50" but "1,250"); a single "." is one;
    repeated, either only groups thousands ("1.250.000")."""
    commas, dots = number.count(","), number.count(".")
    if commas and dots:
        point = "," if number.rfind(",") > number.rfind(".") else "."
    elif commas == 1 and len(number) - number.rfind(",") != 4:
        point = ","
    elif dots == 1:
        point = "."
    else:
        point = ""
    whole, _, fraction = number.rpartition(point) if point else (number, "", "")
    try:
        return Decimal(re.sub(r"[,.]", "", whole) + (f".{fraction}" if fraction else ""))
    except InvalidOperation:
        return None


#: The review flag of a summary that kept fewer of its span's facts than the threshold
#: (ACTION "flag"): stored with the quarantine's flags, so it is listed for review and,
#: with HOLD_FLAGGED, held until approved.
LOST_FACTS_FLAG = "lost-facts"

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
