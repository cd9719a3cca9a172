"""Memory search and expand for the model (issue 23), on the database under test.

Search finds originals by words and quoted phrases through the full-text index of
the initial migration (FTS5 on SQLite, a GIN index on PostgreSQL), only in the caller's
threads; erasure and expiry take entries out of it; hostile query text is a typed
error. Expand pages a summary's direct sources within a budget without parting a
tool call from its results.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.db import close_old_connections, connection
from django.test import override_settings
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentmemory import services
from agentmemory.models import MemoryEntry, Thread, summary_handle
from agentmemory.search.index import FTS_TABLE
from agentmemory.search.query import InvalidSearchQuery
from tests.helpers import add_turns

pytestmark = pytest.mark.django_db


def owner(name: str = "ada") -> object:
    return get_user_model().objects.create_user(name)


def say(thread: Thread, *texts: str, role: str = "user") -> list[MemoryEntry]:
    return services.append(thread, [{"role": role, "content": text} for text in texts])


def test_words_must_all_match_and_the_better_match_ranks_first() -> None:
    thread = Thread.objects.create(owner=owner())
    weak, strong, _ = say(
        thread,
        "The parcel for the refund went out on Monday with several other items, a long "
        "message about many unrelated things such as weather and opening hours.",
        "Refund parcel: the refund for the parcel is approved.",
        "Nothing about it here.",
    )
    hits = services.search(thread, "refund parcel")
    assert [hit.entry_id for hit in hits] == [strong.pk, weak.pk]
    assert hits[0].score > hits[1].score
    assert "**" in hits[0].snippet and "refund" in hits[0].snippet.lower()
    assert services.search(thread, "refund zebra") == []


def test_a_message_unlike_the_repeats_comes_before_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Thirty status updates in the same words (numbers, a status and a carrier aside)
    outrank, by their words alone, the one message that says something else about the
    kettle order; it is among the first five all the same, and every repeat still
    follows. Without the near-duplicate rule it is not in the first five."""
    from agentmemory.search import rank

    thread = Thread.objects.create(owner=owner())
    statuses = ["is in transit", "is held at customs", "is out for delivery"]
    carriers = ["DHL", "UPS", "GLS"]
    repeats = say(thread, *[
        f"Order #{40000 + n} (a kettle) {statuses[n % 3]}. I have asked {carriers[n // 3 % 3]} "
        "to prioritise it." for n in range(30)
    ])
    (other,) = say(thread, "About the refund that was approved a week ago, for my own "
                           "records: that order, from the outlet store, was the kettle.")
    top = [h.entry_id for h in services.search(thread, "kettle order", limit=5)]
    assert other.pk in top
    assert len(set(top) & {entry.pk for entry in repeats}) == 4
    every = [h.entry_id for h in services.search(thread, "kettle order", limit=50)]
    assert sorted(every) == sorted([other.pk, *[entry.pk for entry in repeats]])
    monkeypatch.setattr(rank, "SIMILAR", 1.01)  # nothing is a near-duplicate
    assert other.pk not in [h.entry_id for h in services.search(thread, "kettle order",
                                                               limit=5)]


def test_bm25_counts_a_word_most_messages_hold_and_its_inflections() -> None:
    """Lucene's IDF stays above zero for a word more than half the messages hold (FTS5's
    bm25() clamps it to about zero, so its repetitions counted for nothing), and a
    term's frequency counts its inflections, as FTS5's porter stemmer matched them."""
    from agentmemory.search import rank
    from agentmemory.search.query import parse_query

    assert rank.idf(100, 90) > 0.1
    twice, once = "kettle order ordered", "kettle order arrived"  # as long as each other
    better, worse = rank.bm25(parse_query("kettle orders"), [twice, once], 100, [2, 90])
    assert better - worse > 0.03  # FTS5's clamped IDF: 4e-7
    assert rank.probe(("orders",)) == rank.probe(("ordered",)) == "order"
    assert rank.probe(("two", "working", "days")) == "two working day"


@pytest.mark.skipif(connection.vendor != "sqlite", reason="FTS5's statements")
def test_sqlite_search_reads_a_bounded_part_of_the_index() -> None:
    """No statement of a search calls FTS5's bm25() (it reads every match of every term
    in the whole index), and each one that matches is bounded: by a LIMIT, or by a rowid
    range FTS5 applies inside its doclists."""
    from django.test.utils import CaptureQueriesContext

    thread = Thread.objects.create(owner=owner())
    say(thread, *[f"kettle order number {n}" for n in range(40)])
    with CaptureQueriesContext(connection) as captured:
        assert services.search(thread, 'kettle "order number"')
    matching = [q["sql"] for q in captured.captured_queries if " MATCH " in q["sql"]]
    assert len(matching) == 3
    assert not any("bm25(" in sql for sql in matching)
    for sql in matching:
        for clause in sql.split(" MATCH ")[1:]:
            assert "LIMIT" in clause or "rowid >" in clause, sql


def test_a_quoted_phrase_matches_the_words_in_that_order_only() -> None:
    thread = Thread.objects.create(owner=owner())
    together, apart = say(thread, "the blue box arrived", "a box, painted blue, arrived")
    assert [h.entry_id for h in services.search(thread, '"blue box"')] == [together.pk]
    assert {h.entry_id for h in services.search(thread, "blue box")} == {together.pk, apart.pk}


def test_only_the_callers_threads_are_searched() -> None:
    ada, bob = owner("ada"), owner("bob")
    mine = Thread.objects.create(owner=ada)
    other = Thread.objects.create(owner=ada)
    theirs = Thread.objects.create(owner=bob)
    (a,) = say(mine, "order ORD-55 is late")
    (b,) = say(other, "order ORD-55 shipped")
    say(theirs, "order ORD-55 belongs to bob")
    assert {h.entry_id for h in services.search(ada, "ORD 55")} == {a.pk, b.pk}
    assert [h.entry_id for h in services.search(mine, "ORD 55")] == [a.pk]
    assert {h.thread_id for h in services.search(bob, "ORD 55")} == {theirs.pk}


def test_roles_and_time_bounds_filter_hits() -> None:
    thread = Thread.objects.create(owner=owner())
    now = timezone.now()
    services.append(thread, [{"role": "user", "content": "where is invoice 7"}],
                    now=now - timedelta(days=2))
    services.append(thread, [{"role": "assistant", "content": "invoice 7 was paid"}], now=now)
    assert [h.role for h in services.search(thread, "invoice", roles=["assistant"])] == [
        "assistant"]
    assert [h.role for h in services.search(thread, "invoice",
                                            before=now - timedelta(days=1))] == ["user"]
    assert [h.role for h in services.search(thread, "invoice",
                                            after=now - timedelta(days=1))] == ["assistant"]


def test_a_hit_says_which_summary_covers_it_now() -> None:
    thread = Thread.objects.create(owner=owner())
    add_turns(thread, 12)
    result = services.recall(thread, 700, mode="inline")
    assert result.summaries_used
    hits = services.search(thread, '"order 1 for Ada"')
    assert len(hits) == 1
    covered = MemoryEntry.objects.get(pk=hits[0].entry_id).covered_by
    assert covered is not None
    assert hits[0].covered_by_id == covered.pk
    assert hits[0].covered_by_handle == summary_handle(covered.summary_key)
    newest = services.search(thread, '"order 12 for Ada"')[0]
    assert newest.covered_by_id is None and newest.covered_by_handle is None


def test_summaries_and_memory_tool_results_are_not_indexed() -> None:
    thread = Thread.objects.create(owner=owner())
    services.append(thread, [
        {"role": "user", "content": "find the zanzibar shipment"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "m1", "name": "memory_search", "arguments": json.dumps({"query": "x"})}]},
        {"role": "tool", "tool_name": "memory_search", "tool_call_id": "m1",
         "content": "retrieved memory: zanzibar shipment left on 3 May"},
        {"role": "assistant", "content": "It left on 3 May."},
    ])
    hits = services.search(thread, "zanzibar")
    assert [h.role for h in hits] == ["user"]


@pytest.mark.parametrize("text", [
    '"unbalanced', 'a "b" "c', "nul\x00byte", "", "   ", "***", "\x07", "x" * 501,
    " ".join(f"w{i}" for i in range(17)), 42,
])
def test_query_text_that_is_not_words_and_phrases_is_a_typed_error(text: object) -> None:
    thread = Thread.objects.create(owner=owner())
    with pytest.raises(InvalidSearchQuery) as caught:
        services.search(thread, text)  # type: ignore[arg-type]
    assert caught.value.field == "q"


@pytest.mark.parametrize("text", [
    "NEAR(alpha beta)", "alpha OR beta", "NOT alpha", "col:value", "alpha* ^beta",
    "(alpha AND beta)", "'alpha'", "alpha - beta", "{alpha beta}", "alpha + beta",
    "alpha:*", "!alpha & beta | col", "alpha <-> beta", "alpha <near> beta",
])
def test_engine_operators_are_plain_punctuation(text: str) -> None:
    # Every word of these queries is in the message (PostgreSQL drops its stop words,
    # "or", "and", "not", from both sides), so each is one plain match.
    thread = Thread.objects.create(owner=owner())
    (entry,) = say(thread, "near alpha beta or not col value and the rest")
    assert [h.entry_id for h in services.search(thread, text)] == [entry.pk]


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=80))
def test_any_text_gives_hits_or_a_typed_error_never_another(text: str) -> None:
    thread = Thread.objects.get_or_create(title="hostile")[0]
    if not thread.entries.exists():
        say(thread, 'near "quoted" text with * and ( brackets ) and col:on NOT here')
    try:
        hits = services.search(thread, text)
    except InvalidSearchQuery as exc:
        assert exc.field == "q"
    else:
        assert all(h.thread_id == thread.pk for h in hits)


@pytest.mark.parametrize("field, kwargs", [
    ("limit", {"limit": 0}), ("limit", {"limit": 51}), ("limit", {"limit": "5"}),
    ("roles", {"roles": []}), ("roles", {"roles": ["robot"]}),
])
def test_bad_options_name_their_field(field: str, kwargs: dict[str, object]) -> None:
    thread = Thread.objects.create(owner=owner())
    with pytest.raises(InvalidSearchQuery) as caught:
        services.search(thread, "word", **kwargs)  # type: ignore[arg-type]
    assert caught.value.field == field


UNIQUE = "qqzxwordcanary41"


def index_holds(term: str) -> bool:
    """Whether the SQLite index's own storage still holds ``term`` (in any segment, a
    deleted row's included): the bytes of its data blocks."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {FTS_TABLE}_data WHERE instr(block, ?) > 0",
                       [term.encode()])
        return bool(cursor.fetchone()[0])


@pytest.mark.parametrize("how", ["entry", "thread", "user", "expiry"])
def test_erasure_and_expiry_take_an_entry_out_of_the_index(how: str) -> None:
    user = owner()
    thread = Thread.objects.create(owner=user, ttl=timedelta(days=2))
    keep = Thread.objects.create(owner=user)
    start = timezone.now() - timedelta(days=1)
    later = timezone.now() + timedelta(days=2)
    (secret,) = services.append(thread, [{"role": "user", "content": f"code {UNIQUE} here"}],
                                now=start)
    say(keep, *[f"filler message number {n} about parcels" for n in range(30)])
    assert [h.entry_id for h in services.search(user, UNIQUE)] == [secret.pk]
    sqlite = connection.vendor == "sqlite"
    if sqlite:
        assert index_holds(UNIQUE)  # the scan below can see the term
    # Expired, it is invisible at once, before any purge.
    if how == "expiry":
        assert services.search(user, UNIQUE, now=later) == []
        services.purge_expired(now=later)
    elif how == "entry":
        services.erase_entry(secret)
    elif how == "thread":
        services.erase_thread(thread)
    else:
        services.erase_user(user.pk)  # type: ignore[attr-defined]
    assert services.search(user, UNIQUE) == []
    if sqlite:
        assert not index_holds(UNIQUE)
    if how != "user":
        assert len(services.search(keep, "filler parcels", limit=50)) == 30


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_erasures_and_folds_stay_searchable() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers need PostgreSQL (SQLite's test database locks)")
    user = owner()
    threads = [Thread.objects.create(owner=user) for _ in range(4)]
    doomed = say(threads[0], *[f"doomed note {n}" for n in range(20)])
    folding = Thread.objects.create(owner=user)
    add_turns(folding, 30)
    barrier = threading.Barrier(len(threads) + 2)
    folds: list[int] = []
    spans: dict[str, tuple[float, float]] = {}
    errors: list[BaseException] = []

    def write(thread: Thread, index: int) -> None:
        try:
            barrier.wait(timeout=10)
            began = time.monotonic()
            for n in range(25):
                say(thread, f"worker {index} wrote kumquat line {n}")
            spans[f"write-{index}"] = (began, time.monotonic())
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            close_old_connections()

    def erase() -> None:
        try:
            barrier.wait(timeout=10)
            began = time.monotonic()
            for entry in doomed:
                services.erase_entry(entry)
            spans["erase"] = (began, time.monotonic())
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            close_old_connections()

    def fold() -> None:
        try:
            barrier.wait(timeout=10)
            began = time.monotonic()
            for budget in (3000, 2000, 1200, 800):
                result = services.recall(folding, budget, mode="inline")
                folds.extend(result.summaries_used)
            spans["fold"] = (began, time.monotonic())
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            close_old_connections()

    workers = [threading.Thread(target=write, args=(t, i)) for i, t in enumerate(threads[1:])]
    workers += [threading.Thread(target=erase), threading.Thread(target=fold)]
    for worker in workers:
        worker.start()
    barrier.wait(timeout=10)
    for worker in workers:
        worker.join(timeout=60)
    assert errors == []
    # The work overlapped: every worker was still at it when the last one began.
    assert max(s for s, _ in spans.values()) < min(e for _, e in spans.values()), spans
    found = services.search(user, "kumquat", limit=50)
    assert len(found) == 50
    per_thread = {t.pk: len(services.search(t, "kumquat", limit=50)) for t in threads[1:]}
    assert per_thread == {t.pk: 25 for t in threads[1:]}
    assert services.search(user, "doomed note") == []
    # Every folded original is still found, with the summary that covers it now.
    assert folds
    hits = services.search(folding, '"order 1 for Ada"')
    assert len(hits) == 1 and hits[0].covered_by_id is not None
    assert len(services.search(folding, "Lovelace", limit=50)) == 30


# ------------------------------------------------------------------ expand_for_model


def folded_thread(turns: int = 16) -> tuple[Thread, MemoryEntry]:
    thread = Thread.objects.create(owner=owner())
    add_turns(thread, turns)
    result = services.recall(thread, 700, mode="inline")
    summary = MemoryEntry.objects.get(pk=result.summaries_used[0])
    return thread, summary


def test_expand_returns_the_direct_sources_page_by_page_within_the_budget() -> None:
    thread, summary = folded_thread()
    sources = services.expand(summary)
    first = services.expand_for_model(thread, summary.summary_key, budget_tokens=200)
    assert first.pages > 1 and first.page == 1
    seen = list(first.entries)
    for page in range(2, first.pages + 1):
        more = services.expand_for_model(thread, summary.summary_key, budget_tokens=200,
                                         page=page)
        assert more.tokens <= 200 or len(more.entries) <= 4
        seen += more.entries
    assert [e.pk for e in seen] == [e.pk for e in sources]
    assert first.tokens <= 200
    # The handle a label shows is the summary's turns; its whole key finds it too.
    turns = f"{summary.coverage.from_turn}-{summary.coverage.to_turn}"
    assert summary.content.startswith(f"[summary of earlier turns {turns} by a model, ")
    by_turns = services.expand_for_model(thread, turns, budget_tokens=200)
    assert (by_turns.summary_id, by_turns.handle, by_turns.entries) == (
        summary.pk, turns, first.entries)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(budget=st.integers(min_value=50, max_value=2000))
def test_no_page_parts_a_tool_call_from_its_results(budget: int) -> None:
    thread = Thread.objects.filter(title="expand-pairs").first()
    if thread is None:
        thread = Thread.objects.create(title="expand-pairs")
        add_turns(thread, 14)
        services.recall(thread, 700, mode="inline")
    summary = MemoryEntry.objects.summaries().filter(thread=thread).first()
    assert summary is not None
    expansion = services.expand_for_model(thread, summary.summary_key, budget_tokens=budget)
    for page in range(1, expansion.pages + 1):
        entries = services.expand_for_model(thread, summary.summary_key,
                                            budget_tokens=budget, page=page).entries
        calls = {c["id"] for e in entries for c in e.tool_calls or []}
        results = {e.tool_call_id for e in entries if e.role == "tool"}
        assert calls == results
        if not expansion.cut:
            assert sum(e.token_count + 1 for e in entries) <= budget


def test_an_unknown_handle_or_page_is_a_typed_error() -> None:
    thread, summary = folded_thread()
    with pytest.raises(services.UnknownHandleError):
        services.expand_for_model(thread, "msg-summary-999-1000", budget_tokens=500)
    other = Thread.objects.create(owner=owner("eve"))
    with pytest.raises(services.UnknownHandleError):
        services.expand_for_model(other, summary.summary_key, budget_tokens=500)
    with pytest.raises(InvalidSearchQuery) as caught:
        services.expand_for_model(thread, summary.summary_key, budget_tokens=500, page=99)
    assert caught.value.field == "page"
    with pytest.raises(InvalidSearchQuery) as caught:
        services.expand_for_model(thread, summary.summary_key, budget_tokens=10)
    assert caught.value.field == "budget_tokens"


def test_a_block_larger_than_the_budget_is_cut_to_fit_and_says_so() -> None:
    thread = Thread.objects.create(owner=owner())
    big = "word " * 3000
    services.append(thread, [{"role": "user", "content": big}])
    add_turns(thread, 6, start=2)
    with override_settings(AGENTMEMORY={"FOLD_LOW_WATER": 0.05}):
        result = services.recall(thread, 2500, mode="inline")
    summary = MemoryEntry.objects.get(pk=result.summaries_used[0])
    expansion = services.expand_for_model(thread, summary.summary_key, budget_tokens=300)
    assert expansion.cut
    cut = next(e for e in expansion.entries if e.pk in expansion.cut)
    assert "cut to fit" in cut.content
    assert MemoryEntry.objects.get(pk=cut.pk).content == big  # the stored original is whole


def test_expand_finds_the_page_that_holds_a_hit() -> None:
    thread, summary = folded_thread()
    sources = services.expand(summary)
    last = sources[-1]
    page = services.expand_for_model(thread, summary.summary_key, budget_tokens=120,
                                     entry_id=last.pk)
    assert page.pages > 1 and page.page == page.pages
    assert last.pk in [e.pk for e in page.entries]
    elsewhere = MemoryEntry.objects.exclude(pk__in=[e.pk for e in sources]).first()
    assert elsewhere is not None
    with pytest.raises(InvalidSearchQuery) as caught:
        services.expand_for_model(thread, summary.summary_key, budget_tokens=120,
                                  entry_id=elsewhere.pk)
    assert caught.value.field == "entry"


def test_no_owner_is_never_every_owner_and_every_thread_is_asked_by_name() -> None:
    ada, bob = owner("ada"), owner("bob")
    hits = [say(Thread.objects.create(owner=user), "order ORD-77 is late")[0].pk
            for user in (ada, bob, None)]
    for nobody in (None, AnonymousUser(), "ada"):
        with pytest.raises(InvalidSearchQuery) as caught:
            services.search(nobody, "ORD 77")
        assert caught.value.field == "owner"
    assert sorted(h.entry_id for h in services.search(services.EVERY_THREAD, "ORD 77")) == hits


def test_time_bounds_compare_instants_in_any_offset_strictly() -> None:
    thread = Thread.objects.create(owner=owner())
    at = timezone.now().replace(microsecond=0)
    (entry,) = services.append(thread, [{"role": "user", "content": "invoice 9"}], now=at)
    plus5 = timezone.get_fixed_timezone(5 * 60)
    assert services.search(thread, "invoice", after=(at - timedelta(hours=1)).astimezone(plus5))
    assert services.search(thread, "invoice", before=(at + timedelta(hours=1)).astimezone(plus5))
    assert not services.search(thread, "invoice", after=(at + timedelta(hours=1)).astimezone(plus5))
    # Stored text on SQLite, a timestamp on PostgreSQL: at the bound, neither before nor after.
    assert services.search(thread, "invoice", before=at) == []
    assert services.search(thread, "invoice", after=at) == []
    assert [h.entry_id for h in services.search(thread, "invoice", before=at
                                                + timedelta(microseconds=1))] == [entry.pk]


def test_only_the_newest_matches_in_scope_are_ranked(monkeypatch: pytest.MonkeyPatch) -> None:
    """A common word is ranked among its newest RANKED_MATCHES matches in the scope, so
    a search's time does not grow with the history; matches of another owner never
    take a place among them."""
    from agentmemory.search import index

    monkeypatch.setattr(index, "RANKED_MATCHES", 20)
    user, other = owner("ann"), owner("ben")
    thread = Thread.objects.create(owner=user)
    (oldest_best,) = say(thread, "kettle kettle kettle kettle")
    say(thread, *[f"a long message about many things and one kettle, number {n}"
                  for n in range(30)])
    (newest_best,) = say(thread, "kettle kettle")
    theirs = Thread.objects.create(owner=other)
    say(theirs, *["kettle" for _ in range(40)])  # newer than all of the user's
    hits = services.search(user, "kettle", limit=50)
    assert len(hits) == 20
    assert hits[0].entry_id == newest_best.pk
    assert oldest_best.pk not in {h.entry_id for h in hits}
    assert {h.thread_id for h in hits} == {thread.pk}
    # A rarer second word finds the old one: its matches are few.
    assert [h.entry_id for h in services.search(user, '"kettle kettle kettle"')][0] == \
        oldest_best.pk
