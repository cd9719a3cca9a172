"""What the model (and its developer) can ask of the past: search the originals, and
expand a summary in the context into the messages it stands for. `asearch` is `search`
for async code."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connection
from django.utils import timezone

from agentmemory.conf import memory_settings
from agentmemory.exceptions import AgentMemoryConfigurationError, AgentMemoryError
from agentmemory.models import MemoryEntry, Role, Thread, key_of_handle, summary_handle
from agentmemory.pipeline.blocks import Block, blocks_of, entry_cost
from agentmemory.search.index import Candidate, Scope, lookup, snippets
from agentmemory.search.query import InvalidSearchQuery, parse_query
from agentmemory.search.schema import catch_up
from agentmemory.trust.quarantine import strip_invisible

__all__ = [
    "EVERY_THREAD",
    "MAX_SEARCH_LIMIT",
    "MIN_EXPAND_BUDGET",
    "Expansion",
    "InvalidSearchQuery",
    "SearchHit",
    "UnknownHandleError",
    "asearch",
    "expand_for_model",
    "search",
]

MAX_SEARCH_LIMIT = 50
#: The smallest page ``expand_for_model`` fills: room for a message and its framing.
MIN_EXPAND_BUDGET = 50


class _EveryThread:
    def __repr__(self) -> str:
        return "EVERY_THREAD"


#: The scope of a staff tool's search (the admin's search box): every thread of every
#: owner. Never the scope of a model or of an owner's request: those name the owner or
#: the thread, and an owner of None is refused, never read as every thread.
EVERY_THREAD = _EveryThread()


class UnknownHandleError(AgentMemoryError, LookupError):
    """No live summary of the thread has this handle (the turns its label shows, or its
    key)."""

    field = "handle"


@dataclass(frozen=True)
class SearchHit:
    """One original that matched, and where it is now: verbatim, or stood for by the
    summary ``covered_by`` (whose handle, its turns, ``memory_expand`` takes)."""

    entry_id: int
    thread_id: int
    turn: int
    position: int
    role: str
    snippet: str
    score: float
    covered_by_id: int | None
    covered_by_handle: str | None


def search(
    owner_or_thread: Any,
    query: str,
    *,
    limit: int = 10,
    roles: list[str] | tuple[str, ...] | None = None,
    before: datetime | None = None,
    after: datetime | None = None,
    now: datetime | None = None,
) -> list[SearchHit]:
    """The originals of one thread, or of every thread of one owner (a user), or with
    `EVERY_THREAD` of every thread, that hold every word and quoted phrase of ``query``,
    best match first, at most ``limit``. A message that repeats a better hit's words
    (the same text but for a few words: the same order status for another order) comes
    after the hits that say something else, so a short result is not one thing many
    times over; the score says how well each matched.

    Messages only (never summaries, never the memory tools' own results), not expired
    at ``now``; ``roles`` keeps those roles, ``after``/``before`` bound ``created_at``.
    Bad arguments raise `InvalidSearchQuery` naming the field; a database without a
    search index raises `AgentMemoryConfigurationError`.
    """
    terms = parse_query(query)
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_SEARCH_LIMIT:
        raise InvalidSearchQuery(
            f"must be an integer from 1 to {MAX_SEARCH_LIMIT}, got {limit!r}.", field="limit"
        )
    known = set(Role.values)
    if roles is not None and (not roles or not set(roles) <= known):
        raise InvalidSearchQuery(
            f"must be a non-empty list of {sorted(known)}, got {roles!r}.", field="roles"
        )
    if connection.vendor not in ("sqlite", "postgresql"):
        raise AgentMemoryConfigurationError(
            f"Memory search needs SQLite or PostgreSQL; this database is {connection.vendor}."
        )
    if isinstance(owner_or_thread, Thread):
        scope = Scope(owner_or_thread.pk, None, _roles(roles), after, before)
    elif owner_or_thread is EVERY_THREAD:
        scope = Scope(None, None, _roles(roles), after, before, every_thread=True)
    else:
        scope = Scope(None, getattr(owner_or_thread, "pk", None), _roles(roles), after, before)
        if scope.owner_id is None:
            raise InvalidSearchQuery("must be a Thread or a saved user.", field="owner")
    # A few more than asked: rows expired but not yet purged are dropped below.
    language = memory_settings.SEARCH_LANGUAGE
    catch_up(connection)  # the appends of a batch not yet full
    candidates = lookup(terms, scope, limit=limit * 2 + 10, distinct=limit, language=language)
    kept = _unexpired(candidates, now or timezone.now())[:limit]
    texts = snippets(terms, [c.entry_id for c, _ in kept], language=language)
    return [
        SearchHit(
            entry_id=c.entry_id,
            thread_id=row["thread_id"],
            turn=row["turn"],
            position=row["position"],
            role=row["role"],
            snippet=strip_invisible(texts.get(c.entry_id, "")),
            score=round(c.score, 6),
            covered_by_id=row["covered_by_id"],
            covered_by_handle=(
                summary_handle(key) if (key := row["covered_by__summary_key"]) else None
            ),
        )
        for c, row in kept
    ]


async def asearch(
    owner_or_thread: Any,
    query: str,
    *,
    limit: int = 10,
    roles: list[str] | tuple[str, ...] | None = None,
    before: datetime | None = None,
    after: datetime | None = None,
    now: datetime | None = None,
) -> list[SearchHit]:
    """`search` for async code: runs `search` itself on the thread Django's sync code
    shares, as `aappend` runs `append`. Same arguments, hits and errors."""
    return await sync_to_async(search, thread_sensitive=True)(
        owner_or_thread, query, limit=limit, roles=roles, before=before, after=after, now=now
    )


def _roles(roles: Any) -> tuple[str, ...] | None:
    return tuple(roles) if roles is not None else None


def _unexpired(candidates: list[Candidate], now: datetime) -> list[tuple[Candidate, Any]]:
    """The candidates whose entry is not expired at ``now``, each with its row."""
    rows = {
        row["pk"]: row
        for row in MemoryEntry.objects.filter(pk__in=[c.entry_id for c in candidates])
        .unexpired(now)
        .values("pk", "thread_id", "turn", "position", "role", "covered_by_id",
                "covered_by__summary_key")
    }
    return [(c, row) for c in candidates if (row := rows.get(c.entry_id)) is not None]


@dataclass(frozen=True)
class Expansion:
    """One page of what a summary stands for, one level down: messages, and nested
    summaries (each with its own handle, to be expanded in turn)."""

    handle: str
    summary_id: int
    page: int
    pages: int
    entries: list[MemoryEntry]
    tokens: int
    #: Messages whose content was cut to fit the page: their ids.
    cut: list[int] = field(default_factory=list)


def expand_for_model(
    thread: Thread, handle: str, *, budget_tokens: int, page: int = 1,
    entry_id: int | None = None,
) -> Expansion:
    """Page ``page`` of the entries the summary with ``handle`` directly stands for, in
    thread order, each page within ``budget_tokens`` (each entry counted as in a
    context). Pages are made of whole blocks, so a tool call and its results are never
    on different pages; a block larger than the budget has a page of its own, its
    messages' content cut to fit (`Expansion.cut` names them). With ``entry_id`` (a
    search hit's entry), the page that holds that entry, whatever ``page`` says. Raises
    `UnknownHandleError` when the thread has no live summary with that handle, and
    `InvalidSearchQuery` for a budget or page out of range."""
    if not isinstance(budget_tokens, int) or budget_tokens < MIN_EXPAND_BUDGET:
        raise InvalidSearchQuery(
            f"must be an integer of at least {MIN_EXPAND_BUDGET}, got {budget_tokens!r}.",
            field="budget_tokens",
        )
    summary = (
        MemoryEntry.objects.summaries().unretired()
        .filter(thread=thread, summary_key=key_of_handle(str(handle)[:64]))
        .first()
    )
    if summary is None:
        raise UnknownHandleError(
            f"Thread {thread.pk} has no summary with handle {str(handle)[:64]!r}: use the "
            "turns a summary's label in the context names, as 3-17."
        )
    children = list(
        MemoryEntry.objects.filter(summarized_in__summary=summary)
        .select_related("coverage")
        .order_by("position", "id")
    )
    pages = _pages(blocks_of(children).blocks, budget_tokens)
    if entry_id is not None:
        holding = [number for number, blocks in enumerate(pages, 1)
                   if any(e.pk == entry_id for block in blocks for e in block.entries)]
        if not holding:
            raise InvalidSearchQuery(
                f"entry {entry_id!r} is not one of the messages summary {handle!r} stands "
                "for directly.", field="entry",
            )
        page = holding[0]
    if not isinstance(page, int) or not 1 <= page <= max(len(pages), 1):
        raise InvalidSearchQuery(
            f"must be from 1 to {max(len(pages), 1)}, got {page!r}.", field="page"
        )
    entries, cut = _fit(pages[page - 1] if pages else [], budget_tokens)
    return Expansion(
        handle=summary_handle(summary.summary_key or ""), summary_id=summary.pk, page=page,
        pages=max(len(pages), 1), entries=entries,
        tokens=sum(entry_cost(entry) for entry in entries), cut=cut,
    )


def _pages(blocks: list[Block], budget: int) -> list[list[Block]]:
    pages: list[list[Block]] = []
    used = budget + 1
    for block in blocks:
        if used + block.tokens > budget:
            pages.append([])
            used = 0
        pages[-1].append(block)
        used += block.tokens
    return pages


def _fit(page: list[Block], budget: int) -> tuple[list[MemoryEntry], list[int]]:
    """The page's entries; a lone block over the budget has its messages cut, each to
    an equal share of the budget (by characters, at the entry's own chars per token)."""
    entries = [entry for block in page for entry in block.entries]
    if sum(entry_cost(entry) for entry in entries) <= budget:
        return entries, []
    share = max(budget // len(entries) - 1, 1)
    cut: list[int] = []
    for entry in entries:
        if entry.token_count > share:
            chars = max(len(entry.content) * share // max(entry.token_count, 1) - 40, 0)
            entry.content = (
                f"{entry.content[:chars]}… [cut to fit: the original is "
                f"{entry.token_count:,} tokens]"
            )
            entry.token_count = share
            cut.append(entry.pk)
    return entries, cut
