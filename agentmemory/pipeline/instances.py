"""Model instances from raw rows, as a queryset would build them but without its
per-row work: each value goes through the converters Django applies to its field
(looked up once per field, `converters_of`), and instances skip `Model.__init__`. While a
``pre_init`` or ``post_init`` receiver listens on the model, instances are built by
`Model.from_db`, so receivers see every one."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

Converter = Callable[[Any, Any, BaseDatabaseWrapper], Any]
#: A field's converters on one database, each with the column it is applied for.
Converters = list[tuple[Converter, Any]]


def convert(value: Any, converters: Converters, connection: BaseDatabaseWrapper) -> Any:
    if (value == "[]" or value == "{}") and (
        converters[-1][1].output_field.get_internal_type() == "JSONField"
    ):
        # Most tool_calls and metadata: what json.loads would give, without the decoder.
        return [] if value == "[]" else {}
    for converter, column in converters:
        value = converter(value, column, connection)
    return value


def init_receivers(model: type[Model]) -> bool:
    return pre_init.has_listeners(model) or post_init.has_listeners(model)


def instance_of(model: type[Model], alias: str, names: list[str], values: list[Any]) -> Any:
    if init_receivers(model):
        return model.from_db(alias, names, values)
    instance = bare_instance(model, alias)
    instance.__dict__.update(zip(names, values, strict=True))
    return instance


def bare_instance(model: type[Model], alias: str) -> Any:
    """An instance of ``model`` as `Model.from_db` leaves it, before its values: read
    from ``alias``, not being added. Without `Model.__init__`, which walks every field of
    the model for each row."""
    instance = model.__new__(model)
    instance._state = ModelState()
    instance._state.adding = False
    instance._state.db = alias
    return instance


def field_of(model: type[Model], name: str) -> Any:
    return model._meta.get_field(name)


def typed_null(field: Field[Any, Any], connection: BaseDatabaseWrapper) -> str:
    return f"CAST(NULL AS {field.cast_db_type(connection) or 'TEXT'})"


def converters_of(field: Field[Any, Any], connection: BaseDatabaseWrapper) -> Converters:
    """What a queryset applies to this field's values on this database (as its compiler
    does: the backend's converters, then the field's)."""
    column = field.get_col(field.model._meta.db_table)
    found = [*connection.ops.get_db_converters(column), *column.get_db_converters(connection)]
    return [(converter, column) for converter in found]


def named_placeholders(sql: str) -> str:
    """``sql`` with its ``%s`` as ``%(p0)s``, ``%(p1)s``...: Django hands SQLite a
    statement with named parameters to the driver through one ``%`` formatting, where
    one with ``%s`` goes through a regular expression over the whole text (57 µs for
    recall's first load). Pass its values through `named`."""
    numbers = itertools.count()
    return re.sub(r"(?<!%)%s", lambda _: f"%(p{next(numbers)})s", sql)


def named(values: Sequence[Any]) -> dict[str, Any]:
    """The values of a statement from `named_placeholders`, in their order."""
    return {f"p{number}": value for number, value in enumerate(values)}
