"""What every hand-written statement shares: its SQL built once per database, and
the quoted names of the tables and columns it reads from the models' ``_meta``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Model

from agentmemory.pipeline.instances import field_of

#: The range of the integer columns: Django answers a lookup beyond it with no row (the
#: database would refuse the parameter).
BIGINT = range(-(2**63), 2**63)
#: At most this many rows in one INSERT (fewer where the database takes fewer parameters).
INSERT_ROWS = 500

_built: dict[tuple[str, Any], str] = {}


def statement(alias: str, key: Any, build: Callable[[BaseDatabaseWrapper], str]) -> str:
    """``build``'s SQL for this database, built on first use."""
    text = _built.get((alias, key))
    if text is None:
        text = _built[(alias, key)] = build(connections[alias])
    return text


def column_names(connection: BaseDatabaseWrapper, model: type[Model]) -> Callable[[str], str]:
    """A field's quoted column, by field name."""
    return lambda name: connection.ops.quote_name(str(field_of(model, name).column))


def table_name(connection: BaseDatabaseWrapper, model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def no_fold_on_its_way(
    table: str, t: Callable[[str], str], now: str = "%s", no_owner: str = "%s",
) -> str:
    """`querysets.no_fold_on_its_way_q`, as a filter (a NULL compares as no match); by
    default its parameters are now, an empty lease owner, now (else the expressions
    ``now`` and ``no_owner``)."""
    return (f"({table}{t('fold_queued_until')} IS NULL OR {table}{t('fold_queued_until')}"
            f" < {now}) AND ({table}{t('fold_lease_owner')} = {no_owner}"
            f" OR {table}{t('fold_lease_until')} < {now})")
