"""The recovery and search benchmarks' own logic (bench/recovery.py, bench/search_speed.py):
the planted facts, the queries a model would write, the tallies and verdicts."""

from __future__ import annotations

import re

import pytest

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


def appends(with_ms: float, without_ms: float, again_ms: float | None = None) -> dict[str, object]:
    sizes = {"database": 2**20, "index": 2**19, "entry_table": 2**19}
    again = with_ms if again_ms is None else again_ms
    return {"engine": "PostgreSQL 15", "memory_backed": False, "calls": 200, "rows": 100_000,
            "warm": 50, "blocks": 3, "wall_s": 1.0,
            "with": {"wall_ms": [with_ms] * 3, "cpu_ms": [1.0] * 3, "database": sizes},
            "without": {"wall_ms": [without_ms] * 3, "cpu_ms": [1.0] * 3,
                        "database": {**sizes, "index": 0}},
            "with, again": {"wall_ms": [again] * 3, "cpu_ms": [1.0] * 3}}


def test_the_append_share_is_measured_against_the_indexed_append() -> None:
    passing = search_speed._appends_table({"postgres": {"appends": [appends(1.0, 0.9)]}})
    assert "10.0%: pass" in passing and "+0.0%" in passing
    failing = search_speed._appends_table({"postgres": {"appends": [appends(1.0, 0.8)]}})
    assert "20.0%: **fail**" in failing


def test_the_a_a_control_is_the_same_database_timed_again() -> None:
    table = search_speed._appends_table({"postgres": {"appends": [appends(1.0, 0.9, 0.95)]}})
    assert "10.0%: pass | +5.0%" in table


def test_the_second_planting_is_another_fifty_facts_in_the_same_conversation() -> None:
    second = recovery.facts(seed=recovery.SECOND_SEED)
    assert len(second) == recovery.FACTS and len({fact.turn for fact in second}) == recovery.FACTS
    assert [fact.turn for fact in second] != [fact.turn for fact in PLANTED]
    assert [fact.query for fact in second] != [fact.query for fact in PLANTED]
    text = "\n".join(m["content"] for t in recovery.conversation(planted=second)
                     for m in t.messages)
    assert all(text.count(fact.value) == 1 for fact in second)
    assert {name for name, _, seed in recovery.RUNS if seed == recovery.SECOND_SEED} == {
        "dropping-second"}


def test_a_part_run_alone_replaces_only_its_sections_of_the_page() -> None:
    from bench.run import splice

    page = ("# Benchmarks\n\nintro 1\n\n## Recall: old\n\nkeep\n\n## Recovery: old\n\nold "
            "figures\n\n### Beside the peers\n\nold peers\n\n## Search: of 1 to 2\n\nold\n")
    partial = "# Benchmarks\n\nintro 2\n\n## Search: of 1 to 3\n\nnew\n"
    assert splice(page, partial) == page.replace("## Search: of 1 to 2\n\nold",
                                                 "## Search: of 1 to 3\n\nnew")
    both = splice(page, partial + "\n## Recovery: new\n\nnew figures\n")
    assert "old figures" not in both and "old peers" not in both and "keep" in both
    assert "intro 1" in both and "intro 2" not in both
    with pytest.raises(SystemExit, match="Nope"):
        splice(page, "# Benchmarks\n\n## Nope: x\n")


def test_a_part_run_leaves_the_sections_of_the_parts_it_skipped() -> None:
    """A run of some parts renders every section, the skipped parts' from no figures (the
    peers' table as dashes): only the sections of the parts it ran replace the page's."""
    from bench.run import splice

    page = ("# Benchmarks\n\nintro\n\n## The seeded conversation\n\nold turns\n\n"
            "## The same conversation through peer libraries\n\nold peers\n\n"
            "## Economy: budget-driven recall\n\nold economy\n")
    partial = ("# Benchmarks\n\nintro 2\n\n## The seeded conversation\n\nnew turns\n\n"
               "## The same conversation through peer libraries\n\n—\n\n"
               "## Economy: budget-driven recall\n\nnew economy\n")
    spliced = splice(page, partial, ["conversation", "economy"])
    assert "new turns" in spliced and "new economy" in spliced and "old peers" in spliced
    assert "—" not in spliced and "old turns" not in spliced
    assert "—" in splice(page, partial)  # without the parts: every section (the old way)
    with pytest.raises(SystemExit, match="SECTION_PARTS"):
        splice(page, partial + "\n## Nope: x\n", ["conversation"])


def test_a_part_run_keeps_where_the_api_section_opens() -> None:
    """bench/api.py's section opens with a marker at the end of the section before it:
    replacing that section keeps the marker, and so the API's figures."""
    from bench.api import MARK_END, MARK_START
    from bench.run import splice

    page = (f"# Benchmarks\n\nintro\n\n## What the figures say\n\n* old\n\n{MARK_START}\n"
            f"## The REST API's request path\n\nfigures\n{MARK_END}\n")
    partial = "# Benchmarks\n\nintro 2\n\n## What the figures say\n\n* new\n"
    spliced = splice(page, partial, ["sizes"])
    assert spliced == page.replace("* old", "* new")


def test_the_sections_the_scripts_write_themselves_outlive_a_rewrite() -> None:
    """bench/api.py's and bench/serializers.py's sections, at the page's end, stay when
    bench/run.py writes the page whole or splices a part into it."""
    from bench import api, serializers
    from bench.run import _keep_api_section, splice

    own = (f"{api.MARK_START}\n## The REST API's request path\n\napi figures\n"
           f"{api.MARK_END}\n\n{serializers.MARK_START}\n## The API's serializer work\n\n"
           f"serializer figures\n{serializers.MARK_END}\n")
    page = f"# Benchmarks\n\nintro\n\n## What the figures say\n\n* old\n\n{own}"
    whole = _keep_api_section(page, "# Benchmarks\n\nintro 2\n\n## What the figures say\n")
    assert whole.endswith(own) and whole.count(api.MARK_START) == 1
    partial = "# Benchmarks\n\nintro 2\n\n## What the figures say\n\n* new\n"
    assert splice(page, partial, ["sizes"]) == page.replace("* old", "* new")


def test_every_section_of_the_page_has_its_part() -> None:
    from bench.api import MARK_START
    from bench.run import OUTPUT, PARTS, SECTION_PARTS, _heading, _sections

    page = OUTPUT.read_text(encoding="utf-8").split(MARK_START, 1)[0]
    headings = {_heading(section) for section in _sections(page)[1:]}
    assert headings <= set(SECTION_PARTS), headings - set(SECTION_PARTS)
    assert set(SECTION_PARTS.values()) <= set(PARTS)
