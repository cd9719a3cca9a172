"""The statements every append and every request to a thread makes, in plain SQL.

Django builds a query's SQL anew on every call, and for these small statements that
costs more than the database spends running them (the fold decision's aggregate: 3.7 ms
to build, 0.15 ms to run). Each is written here once per database, its table and column
names read from the models' ``_meta`` (a renamed column is renamed here too), its values
prepared as the fields prepare them; the recall's load is its sibling,
`agentmemory.pipeline.rows`. Each states a queryset (or, for the one-statement append,
the two statements it joins), and tests/test_sql.py and tests/test_append_statement.py
hold the two to each other on SQLite and PostgreSQL. The append's (`appends`, and
`one_statement` for the last two):

* `advance_counters`: the append's row lock and counters, one ``UPDATE ... RETURNING``
  (a ``select_for_update()`` of the thread row, then its ``update()``);
* `insert_entries`: the append's rows (``bulk_create``);
* `append_in_one_statement`: the two above as one statement (`append_schema.body`), on
  PostgreSQL outside a transaction: the body of a function that keeps its plan where
  connections outlive a request, else sent itself;
* `append_owned_in_one_statement`: the same, only of the owner's thread, taking the
  rows' tier and expiry from the thread row it locks (an ``owned_thread``, then the
  append).

The reads (`reads`), their shared helpers in `base`:

* `visible_tally`: the fold decision's aggregate over `load._visible_rows`;
* `owned_thread`: ``Thread.objects.owned_by(owner).filter(pk=...)``;
* `fold_on_its_way`: ``Thread.objects.fold_on_its_way(now).filter(pk=...)``.
"""

from __future__ import annotations

from agentmemory.sql.appends import advance_counters, insert_entries, set_turn
from agentmemory.sql.base import BIGINT
from agentmemory.sql.one_statement import (
    OWNED_READS,
    OwnedAppend,
    append_in_one_statement,
    append_owned_in_one_statement,
    can_append_in_one_statement,
)
from agentmemory.sql.reads import fold_on_its_way, owned_thread, visible_tally

__all__ = [
    "BIGINT",
    "OWNED_READS",
    "OwnedAppend",
    "advance_counters",
    "append_in_one_statement",
    "append_owned_in_one_statement",
    "can_append_in_one_statement",
    "fold_on_its_way",
    "insert_entries",
    "owned_thread",
    "set_turn",
    "visible_tally",
]
