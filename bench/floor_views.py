"""The least a Django view does for the API's recall and append: bench/api.py's floor.

Served by the same gunicorn as the example project (``bench.floor_settings``: the
example's settings and middleware, these URLs added), so a request to either pays the
same server, middleware and connection; what is left is the app's own work.

* ``POST /bench/floor/threads/<id>/recall/`` with ``{"budget_tokens": B}``: the load
  statements a background recall of that thread at B sends (its first page, any later
  page, the count of visible rows it left unread; captured once per process from one
  real recall), run on Django's connection; the newest rows summed by their stored
  token counts up to the room; their contents joined (`bench.floor.newest_within`, the
  in-process floor's own code); the text and its row count as JSON.
* ``POST /bench/floor/threads/<id>/entries/``: one INSERT of a message row (its SQL
  built once per process by Django's compiler, the position the only value that
  changes), answered 201.

No authentication, no validation, no receipt, no fold decision: a floor, not an API.
"""

from __future__ import annotations

import itertools
import json
import os
from typing import Any

from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from bench.floor import load_statements, newest_within

#: (thread, budget) -> the load statements and the room, per process.
_LOADS: dict[tuple[int, int], tuple[list[tuple[str, Any]], int]] = {}
#: thread -> the INSERT's SQL, its parameters and the position's place among them.
_INSERTS: dict[int, tuple[str, list[Any], int]] = {}
#: Positions no other writer of the floor's threads uses: this process's own range.
_POSITIONS = itertools.count(1_000_000 + os.getpid() * 100_000)


def _load(thread_id: int, budget: int) -> tuple[list[tuple[str, Any]], int]:
    if (thread_id, budget) not in _LOADS:
        from agentmemory import services
        from agentmemory.models import Thread
        from agentmemory.pipeline.budget import context_room
        from agentmemory.pipeline.config import RecallConfig

        thread = Thread.objects.get(pk=thread_id)
        statements = load_statements(
            lambda: services.recall(thread, budget, mode="background"))
        _LOADS[thread_id, budget] = statements, context_room(budget, RecallConfig.build())
    return _LOADS[thread_id, budget]


@csrf_exempt
def recall(request: HttpRequest, thread_id: int) -> JsonResponse:
    budget = int(json.loads(request.body)["budget_tokens"])
    statements, room = _load(thread_id, budget)
    with connection.cursor() as cursor:
        text, count = newest_within(cursor, statements, room)
    return JsonResponse({"text": text, "messages": count})


def _insert(thread_id: int) -> tuple[str, list[Any], int]:
    if thread_id not in _INSERTS:
        from django.db.models import sql as queries
        from django.utils import timezone

        from agentmemory.models import EntryKind, MemoryEntry

        now = timezone.now()
        entry = MemoryEntry(thread_id=thread_id, kind=EntryKind.MESSAGE, role="user",
                            content="Where is my parcel? It was due on Friday.", turn=1,
                            position=0, token_count=12, created_at=now)
        fields = [f for f in MemoryEntry._meta.concrete_fields if not f.primary_key]
        query = queries.InsertQuery(MemoryEntry)
        query.insert_values(fields, [entry])
        [(sql, params)] = query.get_compiler(connection=connection).as_sql()
        at = [f.name for f in fields].index("position")
        _INSERTS[thread_id] = sql, list(params), at
    return _INSERTS[thread_id]


@csrf_exempt
def append(request: HttpRequest, thread_id: int) -> JsonResponse:
    json.loads(request.body)
    sql, params, at = _insert(thread_id)
    params = list(params)
    params[at] = next(_POSITIONS)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
    return JsonResponse({"thread": thread_id}, status=201)
