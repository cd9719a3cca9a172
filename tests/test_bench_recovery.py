"""The recovery and search benchmarks' own logic (bench/recovery.py, bench/search_speed.py):
the planted facts, the queries a model would write, the tallies and verdicts."""

from __future__ import annotations

import re

from bench import conversation as conv
from bench import recovery, search_speed

PLANTED = recovery.facts()


def test_fifty_facts_at_distinct_turns_each_value_once_in_the_conversation() -> None:
    assert len(PLANTED) == recovery.FACTS
    assert len({fact.turn for fact in PLANTED}) == recovery.FACTS
    assert {fact.kind for fact in PLANTED} == set(recovery.KINDS)
    text = "\n".join(m["content"] for t in recovery.conversation(planted=PLANTED)
                     for m in t.messages)
    for fact in PLANTED:
        assert text.count(fact.value) == 1, fact


def test_each_sentence_lands_in_its_turns_message_and_nothing_else_changes() -> None:
    by_turn = {fact.turn: fact for fact in PLANTED}
    plain = list(conv.conversation(recovery.TURNS))
    planted = list(recovery.conversation(planted=PLANTED))
    assert len(plain) == len(planted) == recovery.TURNS
    for before, after in zip(plain, planted, strict=True):
        fact = by_turn.get(before.number)
        if fact is None:
            assert before == after
            continue
        changed = after.user if fact.role == "user" else after.replies[-1]
        original = before.user if fact.role == "user" else before.replies[-1]
        assert changed["content"] == f"{original['content']} {fact.sentence}"


def test_a_query_is_two_to_four_words_of_its_sentence_never_the_fact() -> None:
    for fact in PLANTED:
        words = fact.query.split()
        assert 2 <= len(words) <= 4, fact
        assert fact.topic in fact.query
        sentence_words = set(re.findall(r"[A-Za-z]+", fact.sentence))
        assert set(words) <= sentence_words, fact
        fact_words = set(re.findall(r"[^\W_]+", fact.value))
        assert not fact_words & set(words), fact


def test_the_same_seed_plants_the_same_facts() -> None:
    assert recovery.facts() == PLANTED


def test_found_is_verbatim_only() -> None:
    fact = PLANTED[0]
    assert recovery.found([f"x {fact.value} y"], PLANTED) == [fact.index]
    assert recovery.found([fact.value[:-1], fact.value.lower()], PLANTED) == []


def row(index: int, calls: int | None, tokens: int, rank: int | None = 1) -> dict[str, object]:
    return {"index": index, "calls": calls, "tool_tokens": tokens, "rank": rank,
            "topic_rank": rank, "where": "", "folded": False}


def test_the_tally_counts_two_calls_at_most_as_recovered() -> None:
    run = {"in_context": [0], "per_fact": [row(0, 1, 100), row(1, 2, 900), row(2, 3, 2_000),
                                           row(3, None, 50, rank=None)]}
    t = recovery.tally(run)
    assert (t["in_context"], t["top5"], t["recovered"], t["one_call"]) == (1, 3, 2, 1)
    assert [missed["index"] for missed in t["missed"]] == [2, 3]
    assert t["tokens_max"] == 2_000 and t["tokens_total"] == 3_050


def test_rare_order_numbers_are_taken_from_user_messages_spread_over_the_thread() -> None:
    taken = conv.messages(200)
    orders = search_speed._orders(taken)
    assert len(orders) == search_speed.RARE
    assert len(set(orders)) == search_speed.RARE
    users = " ".join(m["content"] for m in taken if m["role"] == "user")
    assert all(f"#{order}" in users for order in orders)


def appends(with_ms: float, without_ms: float) -> dict[str, object]:
    sizes = {"database": 2**20, "index": 2**19, "entry_table": 2**19}
    return {"engine": "PostgreSQL 15", "memory_backed": False, "calls": 200, "rows": 100_000,
            "rounds": 3, "wall_s": 1.0,
            "with": {"wall_ms": [with_ms] * 3, "cpu_ms": [1.0] * 3, "database": sizes},
            "without": {"wall_ms": [without_ms] * 3, "cpu_ms": [1.0] * 3,
                        "database": {**sizes, "index": 0}}}


def test_the_append_share_is_measured_against_the_indexed_append() -> None:
    passing = search_speed._appends_table({"postgres": {"appends": [appends(1.0, 0.9)]}})
    assert "10.0%: pass" in passing
    failing = search_speed._appends_table({"postgres": {"appends": [appends(1.0, 0.8)]}})
    assert "20.0%: **fail**" in failing
