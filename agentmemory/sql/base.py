"""What every hand-written statement shares: its SQL built once per database, and
the quoted names of the tables and columns it reads from the models' ``_meta``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper
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



@contextmanager
def bound_cursor(connection: BaseDatabaseWrapper) -> Iterator[CursorWrapper]:
    """Django's cursor; on psycopg 3, one that sends the parameters apart from the SQL
    (as Django's ``server_side_binding`` option does, for this cursor only): psycopg
    then neither quotes each value into the text nor the server reads them back out of
    it. For the append's call of one message, 0.73 against 0.83 ms of the client's CPU,
    the server's the same (in process, interleaved, one run). Nothing is prepared unless
    the database's ``prepare_threshold`` asks for it (Django's default does not), so
    transaction poolers see no session state."""
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    raw = connection.connection
    binding = _server_binding_cursor(raw)
    if binding is None:
        with connection.cursor() as cursor:
            yield cursor
        return
    factory = raw.cursor_factory
    raw.cursor_factory = binding
    try:
        cursor = connection.cursor()
    finally:
        raw.cursor_factory = factory
    with cursor:
        yield cursor


def _server_binding_cursor(raw: Any) -> Any:
    """psycopg 3's server-binding cursor class for a psycopg 3 connection, else None."""
    try:
        import psycopg
    except ImportError:
        return None
    return psycopg.Cursor if isinstance(raw, psycopg.Connection) else None
