"""Reading a large table a page at a time, for work over every row (commands, verify)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

from django.db import models

_Model = TypeVar("_Model", bound=models.Model)


def pages(rows: models.QuerySet[_Model], size: int) -> Iterator[list[_Model]]:
    """The rows of ``rows`` in pages of at most ``size``, in id order, each page one
    query that starts after the last id of the page before (no OFFSET, no cursor held
    in between): however many rows there are, only a page is in memory, and rows deleted
    or added behind the last id meanwhile do not shift the next page."""
    after: int | None = None
    while True:
        page_query = rows.order_by("pk")
        if after is not None:
            page_query = page_query.filter(pk__gt=after)
        page = list(page_query[:size])
        if page:
            yield page
        if len(page) < size:
            return
        after = page[-1].pk
