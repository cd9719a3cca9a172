"""The text of a row as this user may read it: the one rule of
:mod:`agentmemory.permissions`, applied per row in SQL so a list needs no query per row."""

from __future__ import annotations

from typing import Any

from django.db.models import BooleanField, Case, F, Q, TextField, Value, When
from django.db.models.expressions import Combinable
from django.db.models.functions import Left, StrIndex
from django.http import HttpRequest

from agentmemory.permissions import expandable_rows
from agentmemory.trust.facts import FACT_NOTE_OPENING, split_fact_note

FACT_NOTE = "\n" + FACT_NOTE_OPENING
FACT_NOTE_WITHHELD = (
    "[agentmemory's note of the facts from the originals that this summary does not "
    "mention: withheld; reading it needs permission]"
)


def split_summary(content: str, missing: list[str]) -> tuple[str, str, str]:
    """The authored label (first line), the model's text and agentmemory's fact note (or
    ``""``), shown apart: what agentmemory wrote is never shown as the model's."""
    label, _, text = content.partition("\n")
    text, note = split_fact_note(text, missing)
    return label, text, note


def summary_parts(content: str, missing: list[str], may_expand: bool) -> tuple[str, str, str]:
    """:func:`split_summary` for display: a fact note this user may not read is replaced by
    a line that says it was withheld."""
    label, text, note = split_summary(content, missing)
    return label, text, note if may_expand or not note else FACT_NOTE_WITHHELD


def expandable(request: HttpRequest, thread_field: str = "thread") -> Combinable:
    """Per row: may this user read the hidden text of the row's thread?"""
    rows = expandable_rows(request.user, thread_field)
    if rows is None:
        return Value(True)
    return Case(When(rows, then=Value(True)), default=Value(False), output_field=BooleanField())


def readable_text(
    request: HttpRequest, field: str, covered: Q | None = None, summaries: Q | None = None
) -> Combinable:
    """Per row, the text of ``field`` this user may read (for search and lists): all of it
    where they may expand; elsewhere nothing of a ``covered`` row, and of the
    ``summaries`` (every row when ``None``) the text before the fact note that lists
    facts of their originals (cut at its first opening, so a model's imitation of it
    hides more, never less)."""
    rows = expandable_rows(request.user)
    if rows is None:
        return F(field)
    cases = [When(rows, then=F(field))]
    if covered is not None:
        cases.append(When(covered, then=Value("")))
    cases.append(When(
        Q(**{f"{field}__contains": FACT_NOTE}) & (summaries or Q()),
        then=Left(field, StrIndex(field, Value(FACT_NOTE)) - 1),
    ))
    return Case(*cases, default=F(field), output_field=TextField())


def may_read(obj: Any) -> bool:
    """The per-row answer that the admin's ``get_queryset`` annotates (``expandable``)."""
    return bool(obj.expandable)


def readable(obj: Any) -> str:
    """The row's text this user may read, annotated by ``get_queryset``."""
    return str(obj.readable_content)


def shown_text(obj: Any, content: str) -> str:
    """``content`` as this user may read it, saying where a fact note was withheld."""
    text = readable(obj)
    return text if text == content else f"{text}\n{FACT_NOTE_WITHHELD}"


def shown_missing_facts(obj: Any) -> str:
    """The facts of the originals a summary or span does not mention: originals' text."""
    if not obj.missing_facts:
        return "-"
    if not may_read(obj):
        return f"{len(obj.missing_facts)} (withheld: reading them needs permission)"
    return "; ".join(obj.missing_facts)
