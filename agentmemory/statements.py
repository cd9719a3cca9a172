"""Queries whose SQL Django builds once per process: the few that every request makes.

Django builds a query's SQL anew on every call, and for a small query that costs more CPU
than the database spends running it: the fold decision's aggregate took 3.7 ms to build
and 0.15 ms to run (measured once on the benchmark machine). A `Statement` keeps the
queryset as the one definition of its query and asks Django for the SQL once per
database: it builds the queryset with two sets of marker values, learns where each value
lands among the parameters (exactly the places where the two builds differ), and from
then on runs that SQL with the call's values in those places, prepared as Django
prepares them.

The rows are the database's own values: Django's converters do not run, so a statement
selects integers, strings and booleans, not dates or JSON. A queryset that does not pass
a value as a parameter (a value in ``LIMIT``, or one Django changes before it binds it)
is refused with `StatementError` when it is first built, never run wrong.

`Insert` does the same for ``bulk_create``: the INSERT's SQL is built once per number of
rows, and each row's values are prepared by its fields as Django prepares them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import AutoField, Model, QuerySet, sql
from django.db.transaction import TransactionManagementError, mark_for_rollback_on_error

_KINDS = (int, datetime)


def _marker(kind: type, side: int, number: int) -> Any:
    """The marker of the ``number``-th value on build ``side`` (0 or 1): distinct for every
    value and side, and unlike anything a query holds on its own."""
    if kind is datetime:
        return datetime(1970 + side, 1, 2, 3, 4, 5, 678901, tzinfo=UTC) + timedelta(days=number)
    return 1_900_000_037 + side * 10_007 + number * 101


class StatementError(Exception):
    """A queryset whose values cannot be found among its SQL's parameters."""


def _prepare(kind: type, value: Any, connection: BaseDatabaseWrapper) -> Any:
    """A value as Django binds it to a lookup on a field of that kind."""
    if kind is datetime:
        return connection.ops.adapt_datetimefield_value(value)
    return int(value)


@dataclass(frozen=True)
class _Compiled:
    alias: str
    sql: str
    params: tuple[Any, ...]
    #: value name -> its places among the parameters
    slots: dict[str, tuple[int, ...]]
    for_update: bool
    model: Any
    #: every concrete field of the model and nothing else: `Statement.instances` may run
    whole_rows: bool


class Statement:
    """A SELECT: ``build(*key, **values)`` returns the queryset; ``kinds`` names each
    value's type (``int`` or ``datetime``). The key is what the SQL depends on besides
    the values (a tier filter, say): one SQL per key and database."""

    def __init__(self, build: Callable[..., Any], **kinds: type) -> None:
        unknown = {kind for kind in kinds.values() if kind not in _KINDS}
        if unknown:
            raise TypeError(f"Statement values are int or datetime, not {unknown}.")
        self.build = build
        self.kinds = kinds
        self._compiled: dict[Hashable, _Compiled] = {}

    def rows(self, *key: Hashable, **values: Any) -> list[tuple[Any, ...]]:
        """The rows, as the database returns them."""
        if not _bindable(values):
            return self._through_the_orm(key, values)
        compiled, params = self._bind(key, values)
        connection = connections[compiled.alias]
        with mark_for_rollback_on_error(using=compiled.alias), connection.cursor() as cursor:
            cursor.execute(compiled.sql, params)
            return list(cursor.fetchall()) if cursor.description else [(cursor.rowcount,)]

    def instances(self, *key: Hashable, **values: Any) -> list[Any]:
        """The rows as model instances, through ``Manager.raw`` (so Django's converters
        run); for a queryset of whole rows of one model."""
        if not _bindable(values):
            return list(self.build(*key, **values))
        compiled, params = self._bind(key, values)
        if not compiled.whole_rows:
            raise StatementError("instances() needs a queryset of whole model rows.")
        manager = compiled.model._default_manager.db_manager(compiled.alias)
        with mark_for_rollback_on_error(using=compiled.alias):
            return list(manager.raw(compiled.sql, params))

    def _through_the_orm(
        self, key: tuple[Hashable, ...], values: dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        return list(self.build(*key, **values))

    def _bind(
        self, key: tuple[Hashable, ...], values: dict[str, Any]
    ) -> tuple[_Compiled, list[Any]]:
        if set(values) != set(self.kinds):
            raise TypeError(f"Statement values are {sorted(self.kinds)}, got {sorted(values)}.")
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._compiled[key] = self._compile(key)
        connection = connections[compiled.alias]
        if compiled.for_update and connection.get_autocommit():
            raise TransactionManagementError(
                "select_for_update cannot be used outside of a transaction."
            )
        params = list(compiled.params)
        for name, places in compiled.slots.items():
            prepared = _prepare(self.kinds[name], values[name], connection)
            for place in places:
                params[place] = prepared
        return compiled, params

    def _sql(self, built: Any) -> tuple[QuerySet[Any], str, tuple[Any, ...]]:
        queryset: QuerySet[Any] = built
        text, params = queryset.query.get_compiler(using=queryset.db).as_sql()
        return queryset, text, tuple(params)

    def _compile(self, key: tuple[Hashable, ...]) -> _Compiled:
        builds = []
        for side in (0, 1):
            markers = {
                name: _marker(kind, side, number)
                for number, (name, kind) in enumerate(self.kinds.items())
            }
            queryset, text, params = self._sql(self.build(*key, **markers))
            connection = connections[queryset.db]
            prepared = {
                _prepare(self.kinds[name], marker, connection): name
                for name, marker in markers.items()
            }
            builds.append((queryset, text, params, prepared))
        (first, text, params, names), (_, other_text, other_params, other_names) = builds
        if text != other_text or len(params) != len(other_params):
            raise StatementError(f"The SQL changes with the values: {text}")
        slots: dict[str, list[int]] = {}
        for place, (mine, theirs) in enumerate(zip(params, other_params, strict=True)):
            name, other = _lookup(names, mine), _lookup(other_names, theirs)
            if mine == theirs and name is None:
                continue  # a constant of the query
            if name is None or name != other:
                raise StatementError(f"Parameter {place} is not one of the values: {text}")
            slots.setdefault(name, []).append(place)
        query = first.query
        return _Compiled(
            alias=str(first.db), sql=text, params=params,
            slots={name: tuple(places) for name, places in slots.items()},
            for_update=bool(query.select_for_update)
            and connections[first.db].features.has_select_for_update,
            model=first.model,
            whole_rows=not (
                query.values_select or query.annotations or query.select_related
                or query.deferred_loading != (frozenset(), True)
            ),
        )


class Update(Statement):
    """An UPDATE: ``build(*key, **values)`` returns (the queryset of the rows, the
    fields to set), as ``queryset.update(**fields)`` takes them; `run` returns how many
    rows it changed."""

    def run(self, *key: Hashable, **values: Any) -> int:
        return int(self.rows(*key, **values)[0][0])

    def _through_the_orm(
        self, key: tuple[Hashable, ...], values: dict[str, Any]
    ) -> list[tuple[Any, ...]]:
        queryset, fields = self.build(*key, **values)
        return [(queryset.update(**fields),)]

    def _sql(self, built: Any) -> tuple[QuerySet[Any], str, tuple[Any, ...]]:
        queryset, fields = built
        queryset = queryset.using(router.db_for_write(queryset.model))
        query = queryset.query.chain(sql.UpdateQuery)
        query.add_update_values(fields)
        if query.related_updates:
            raise StatementError("An Update sets fields of its own table only.")
        text, params = query.get_compiler(using=queryset.db).as_sql()
        return queryset, text, tuple(params)


def _bindable(values: dict[str, Any]) -> bool:
    """No None and no integer beyond a 64-bit column: Django knows what such a lookup
    means (``pk=None`` or a key that large matches no row), the SQL would not."""
    return all(
        value is not None and (not isinstance(value, int) or -(2**63) <= value < 2**63)
        for value in values.values()
    )


def _lookup(names: dict[Any, str], param: Any) -> str | None:
    try:
        return names.get(param)
    except TypeError:  # an unhashable parameter (a list for an array) is no marker
        return None


class Insert:
    """``bulk_create`` of new rows of one model: the same rows, values and primary keys
    set on the objects, with the SQL built once per number of rows a statement takes.
    Rows that already have a primary key, databases that cannot return the keys of a
    multi-row insert, and statements whose parameters are not one per row and field
    (Django sends PostgreSQL several rows as arrays, ``UNNEST``) go through
    ``bulk_create`` itself."""

    def __init__(self, model: type[Model]) -> None:
        meta = model._meta
        self.model = model
        self.fields = [
            field for field in meta.concrete_fields
            if not field.generated and not isinstance(field, AutoField)
        ]
        self._sql: dict[tuple[str, int], str] = {}

    def create(self, objs: list[Any]) -> None:
        if not objs:
            return
        alias = router.db_for_write(self.model)
        connection = connections[alias]
        meta = self.model._meta
        if (
            not connection.features.can_return_rows_from_bulk_insert
            or meta.db_returning_fields != [meta.pk]
            or any(obj._is_pk_set() for obj in objs)
        ):
            self.model._default_manager.db_manager(alias).bulk_create(objs)
            return
        size = max(connection.ops.bulk_batch_size(self.fields, objs), 1)
        with mark_for_rollback_on_error(using=alias), connection.cursor() as cursor:
            for start in range(0, len(objs), size):
                chunk = objs[start : start + size]
                text = self._sql.get((alias, len(chunk)))
                if text is None:
                    text = self._sql[(alias, len(chunk))] = self._build(alias, chunk)
                if not text:  # not a row of parameters per object: Django's own way
                    self.model._default_manager.db_manager(alias).bulk_create(chunk)
                    continue
                cursor.execute(text, self._values(chunk, connection))
                for obj, (key,) in zip(chunk, cursor.fetchall(), strict=True):
                    obj.pk = key
                    obj._state.adding = False
                    obj._state.db = alias

    def _values(self, chunk: list[Any], connection: BaseDatabaseWrapper) -> list[Any]:
        """Each row's values as the insert compiler prepares them (``pre_save``, then
        ``get_db_prep_save``)."""
        values = []
        for obj in chunk:
            for field in self.fields:
                value = field.pre_save(obj, add=True)
                if hasattr(value, "resolve_expression"):
                    raise StatementError(f"{field.name} holds an expression: use bulk_create.")
                values.append(field.get_db_prep_save(value, connection=connection))
        return values

    def _build(self, alias: str, chunk: list[Any]) -> str:
        """The INSERT's SQL, or "" when its parameters are not one per row and field."""
        meta = self.model._meta
        query = sql.InsertQuery(self.model)
        query.insert_values(self.fields, chunk)
        compiler = query.get_compiler(using=alias)
        compiler.returning_fields = [meta.pk]
        [(text, params)] = compiler.as_sql()
        return str(text) if len(params) == len(chunk) * len(self.fields) else ""
