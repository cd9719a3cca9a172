"""The fact-retention gate: a summary that drops the amount that mattered is caught.

THE REQUIRED TEST: a span with an order number and an amount whose summary omits the
amount is gated (:func:`test_a_summary_that_drops_the_amount_is_declined_out_loud_and_latched`).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as examples
from hypothesis import strategies as st

from agentmemory import services, signals
from agentmemory.checks import check_settings
from agentmemory.models import (
    CallOutcome,
    EntryKind,
    FoldedSpan,
    FoldLatch,
    FoldPurpose,
    MemoryEntry,
    SummarizerCall,
    Thread,
)
from agentmemory.summarizers import testing
from agentmemory.transcript import CONTINUATION, SUMMARY_LABEL_PREFIX
from agentmemory.trust.facts import (
    _PATTERNS,
    LOST_FACTS_FLAG,
    Fact,
    _normal,
    check_facts,
    extract_facts,
    missing_facts_note,
)
from agentmemory.window.compact import compact
from agentmemory.window.frame import WINDOW_FRAME_PREFIX
from bench import fact_gate as fact_gate_bench
from bench.conversation import conversation
from tests.helpers import (
    AMOUNT,
    DROPS_AMOUNT,
    KEEPS_FACTS,
    ORDER,
    PLAIN,
    capture,
    make_thread,
    recording_settings,
)

BIG = 100_000
#: A fold of the six oldest of eight loaded entries, the newest two kept verbatim.
SMALL_FOLD = {"trigger_min_entries": 6, "preserve_recent": 2, "min_fold_entries": 2}

SPAN = [
    "Hello, I need some help with a refund for an order that I cancelled right after "
    "placing it, because I picked the wrong size by mistake.",
    f"My order {ORDER} was charged {AMOUNT} even though I cancelled it on the same day, "
    "and the money has not come back to my account yet.",
    "I would like the money returned to the card that was used for the purchase, not as "
    "store credit, because I do not shop here very often.",
    "The confirmation message said the cancellation went through, so I do not understand "
    "why the charge is still showing on my statement.",
    "Could you also make sure that I am not charged again when the replacement in the "
    "right size ships next week?",
    "Thank you, and please let me know once the refund has been started so that I can keep "
    "an eye on my statement.",
]
KEPT = [
    "Is there anything else you need from me to process this?",
    "Great, I will wait for your confirmation then.",
]
GATE_DECLINE = {"THRESHOLD": 0.9, "ACTION": "decline"}
GATE_APPEND = {"THRESHOLD": 0.9, "ACTION": "append"}


def refund_thread() -> tuple[Thread, list[MemoryEntry]]:
    thread = make_thread()
    entries = services.append(thread, [{"role": "user", "content": c} for c in SPAN + KEPT])
    return thread, entries


def summaries(thread: Thread) -> list[MemoryEntry]:
    return list(MemoryEntry.objects.filter(thread=thread, kind=EntryKind.SUMMARY))


def test_the_span_carries_exactly_an_order_number_and_an_amount() -> None:
    facts = extract_facts(SPAN)
    assert [(fact.kind, fact.text) for fact in facts] == [("amount", AMOUNT), ("id", ORDER)]
    check = check_facts(SPAN, DROPS_AMOUNT)
    assert check.score == 0.5
    assert [fact.text for fact in check.missing] == [AMOUNT]
    assert check_facts(SPAN, KEEPS_FACTS).score == 1.0


# ------------------------------------------------------------------ extraction (table-driven)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The refund of $1,250.00 was approved.", [("amount", "$1,250.00")]),
        ("It came to 30 dollars in the end.", [("amount", "30 dollars")]),
        ("The invoice says 1250 EUR, not 1150.", [("amount", "1250 EUR"), ("number", "1150")]),
        ("Charged €49.90 twice", [("amount", "€49.90")]),
        ("We shipped 4417 parcels and 12,500 boxes.", [("number", "4417"), ("number", "12,500")]),
        ("It left on 2026-03-14 and arrived 3/18/2026.",
         [("date", "2026-03-14"), ("date", "3/18/2026")]),
        ("The parcel was scanned at 2026-03-14T09:30.", [("date", "2026-03-14T09:30")]),
        ("Order ORD-48213 and invoice INV-2026-0042.",
         [("id", "ORD-48213"), ("id", "INV-2026-0042")]),
        ("Ticket #48213 is open.", [("id", "#48213")]),
        ("Trace 123e4567-e89b-12d3-a456-426614174000 failed.",
         [("id", "123e4567-e89b-12d3-a456-426614174000")]),
        ("Write to ada.lovelace+orders@example.co.uk today.",
         [("email", "ada.lovelace+orders@example.co.uk")]),
        ("See https://shop.example.com/orders/48213?tab=refund.",
         [("url", "https://shop.example.com/orders/48213?tab=refund")]),
        ("The log is /var/log/shop/error.log and ./config/settings.py.",
         [("path", "/var/log/shop/error.log"), ("path", "./config/settings.py")]),
        ('The customer "Ada Lovelace" signed it.', [("quoted", "Ada Lovelace")]),
        ("Her colleague “Charles Babbage” agreed.", [("quoted", "Charles Babbage")]),
        ("Hello, thanks for your help with the parcel, it was kind of you.", []),
        ("I waited 5 days.", []),  # one digit is not a fact worth a gate
    ],
)
def test_extract_facts_finds_the_specifics(text: str, expected: list[tuple[str, str]]) -> None:
    assert [(fact.kind, fact.text) for fact in extract_facts([text])] == expected


def _facts_by_substitution(texts: list[str]) -> list[Fact]:
    """`extract_facts` as first written: every pattern's matches found, then removed
    from the text with ``pattern.sub(" ", ...)`` before the next pattern runs."""
    found: dict[tuple[str, str], Fact] = {}
    for text in texts:
        rest = text
        for kind, pattern in _PATTERNS:
            for match in pattern.finditer(rest):
                if kind == "quoted":
                    value = (match["q"] or match["c"] or "").strip()
                    if match["key"] or not 2 <= len(value) <= 60:
                        continue
                else:
                    value = next((g for g in match.groups() if g), None) or match.group(0)
                value = value.strip().rstrip(".,;:")
                found.setdefault((kind, _normal(kind, value)), Fact(kind, value))
            rest = pattern.sub(" ", rest)
    return list(found.values())


#: Pieces that each pattern takes, run together or apart in random texts.
FACT_PIECES = st.sampled_from([
    "order #4412", "$1,250.00", "12,50 EUR", "2026-10-31", "3/4/26", "ana@example.org",
    "https://x.example/a?b=1", "/srv/app/config.yaml", "ORD-77-B", '"Porto"', '"k": 1',
    "“Lisbon”", "42", "1.234,56", " ", "\n", ".", "word", '"', "#", "-", "/", "@",
])


@examples(max_examples=300, deadline=None)
@given(texts=st.lists(st.lists(FACT_PIECES, max_size=12).map("".join), max_size=3))
def test_extract_facts_finds_what_removing_each_match_by_substitution_finds(
    texts: list[str],
) -> None:
    """One scan per pattern rebuilds the text as `pattern.sub` did: the same facts, in
    the same order, whatever the texts hold next to each other."""
    assert extract_facts(texts) == _facts_by_substitution(texts)


def test_extract_facts_lists_each_fact_once_in_order_of_first_appearance() -> None:
    facts = extract_facts(["Order ORD-1 for $5.00.", "Again: ord-1, and 5.00 USD.", "Mail a@b.io"])
    assert [(fact.kind, fact.text) for fact in facts] == [
        ("amount", "$5.00"), ("id", "ORD-1"), ("email", "a@b.io")
    ]


@pytest.mark.parametrize(
    ("span", "summary", "missing"),
    [
        ("Refund $1,250.00 now.", "A refund of 1250.00 dollars was asked for.", []),
        ("Refund $1,250.00 now.", "A refund of $1,250 was asked for.", []),
        ("Refund $1,250.00 now.", "A refund of $1,250.50 was asked for.", ["$1,250.00"]),
        ("Refund $1,250.00 now.", "Refunds: 1.1250.00 and 2.1250 units.", ["$1,250.00"]),
        ("Refund $1,250.00 now.", "A refund of $11,250.00 was asked for.", ["$1,250.00"]),
        ("Ticket #48213 is open.", "Ticket 48213 is still open.", []),
        ("We shipped 12,500 boxes.", "12500 boxes went out.", []),
        ("Mail ADA@Example.com.", "They mailed ada@example.com.", []),
        ("Order ORD-48213 is late.", "Order ord-48213 is late.", []),
        ("Order ORD-48213 is late.", "An order is late.", ["ORD-48213"]),
    ],
)
def test_check_facts_accepts_other_spellings_and_no_near_misses(
    span: str, summary: str, missing: list[str]
) -> None:
    assert [fact.text for fact in check_facts([span], summary).missing] == missing


@pytest.mark.parametrize(
    ("span", "summary", "missing"),
    [
        ("Refund 12,50 EUR now.", "A refund of 12,50 EUR.", []),
        ("Refund 12,50 EUR now.", "A refund of 12.50 EUR.", []),
        ("Refund €12,50 now.", "12.50 euros go back.", []),
        ("Refund 0,99 EUR now.", "Refund 0.99 EUR.", []),
        ("Pay 1.234,56 EUR today.", "1234.56 EUR were paid.", []),
        ("Pay 1.234,56 EUR today.", "$1,234.56 was paid.", []),
        ("Pay 1.250.000,00 EUR.", "1,250,000 EUR.", []),
        ("Refund 12,50 EUR now.", "A refund of 1250 EUR.", ["12,50 EUR"]),
        ("Refund 12,50 EUR now.", "A refund of 12,05 EUR.", ["12,50 EUR"]),
        ("Refund 12,00 EUR now.", "A refund of 12,01 EUR.", ["12,00 EUR"]),
        ("Pay 1.234,56 EUR today.", "234,56 EUR were paid.", ["1.234,56 EUR"]),
    ],
)
def test_decimal_comma_amounts_are_facts_the_gate_matches(
    span: str, summary: str, missing: list[str]
) -> None:
    [fact] = extract_facts([span])
    assert fact.kind == "amount" and fact.text in span
    assert [fact.text for fact in check_facts([span], summary).missing] == missing


def written(value: Decimal, style: str) -> str:
    """``value`` (two decimals) as one convention writes it."""
    english = f"{value:,.2f}"
    return {
        "english": english,
        "german": english.replace(",", " ").replace(".", ",").replace(" ", "."),
        "comma": f"{value:.2f}".replace(".", ","),
        "dot": f"{value:.2f}",
    }[style]


STYLES = st.sampled_from(["english", "german", "comma", "dot"])
CURRENCIES = st.sampled_from(["{} EUR", "€{}", "{} USD", "${}", "{} euros", "£{}"])


@examples(max_examples=300, deadline=None)
@given(
    cents=st.integers(1, 10**11),
    span_style=STYLES,
    summary_style=STYLES,
    span_currency=CURRENCIES,
    summary_currency=CURRENCIES,
)
def test_an_amount_in_any_convention_is_kept_by_the_same_value_only(
    cents: int, span_style: str, summary_style: str, span_currency: str, summary_currency: str
) -> None:
    value = Decimal(cents) / 100
    amount = span_currency.format(written(value, span_style))
    span = f"The customer was charged {amount} twice."
    [fact] = extract_facts([span])
    assert (fact.kind, fact.text) == ("amount", amount)
    same = summary_currency.format(written(value, summary_style))
    assert check_facts([span], f"Charged {same} twice.").missing == []
    other = summary_currency.format(written(value + Decimal("0.01"), summary_style))
    assert check_facts([span], f"Charged {other} twice.").missing == [fact]


# ------------------------------------------------------------------ recall folds


@pytest.mark.django_db
def test_a_summary_that_drops_the_amount_is_declined_out_loud_and_latched(settings: Any) -> None:
    settings.AGENTMEMORY = recording_settings(DROPS_AMOUNT, FACT_GATE=GATE_DECLINE)
    thread, entries = refund_thread()

    with capture(signals.fold_declined) as declined, capture(signals.fold_completed) as done:
        first = services.recall(thread, BIG, **SMALL_FOLD)

    assert len(testing.calls) == 1
    assert first.decline == "lost-facts"
    assert first.folded_summary_id is None and first.summaries_used == []
    assert [m.id for m in first.messages] == [e.pk for e in entries]  # verbatim
    assert AMOUNT in first.text
    assert summaries(thread) == []
    assert done == []
    assert [(d["reason"], d["purpose"], d["latched"]) for d in declined] == [
        ("lost-facts", FoldPurpose.RECALL_FOLD, False)
    ]
    assert declined[0]["thread"] == thread
    (call,) = SummarizerCall.objects.filter(thread=thread)
    assert call.outcome == CallOutcome.REFUSED_LOST_FACTS == "refused-lost-facts"
    assert call.entry_count == 6 and call.summary_id is None
    latch = FoldLatch.objects.get(thread=thread)
    assert latch.reason == "lost-facts"
    assert latch.purpose == FoldPurpose.RECALL_FOLD
    assert latch.entry_count == 6

    with capture(signals.fold_declined) as again:
        second = services.recall(thread, BIG, **SMALL_FOLD)

    assert len(testing.calls) == 1  # the latched span is never asked again
    assert SummarizerCall.objects.filter(thread=thread).count() == 1
    assert second.decline == "lost-facts"
    assert [m.id for m in second.messages] == [e.pk for e in entries]
    assert [(d["reason"], d["latched"]) for d in again] == [("lost-facts", True)]


@pytest.mark.django_db
def test_a_grown_span_backs_off_until_it_has_doubled(settings: Any) -> None:
    settings.AGENTMEMORY = recording_settings(DROPS_AMOUNT, FACT_GATE=GATE_DECLINE)
    thread, entries = refund_thread()
    services.recall(thread, BIG, **SMALL_FOLD)
    services.append(thread, {"role": "user", "content": "One more thing before you go."})

    with capture(signals.fold_declined) as declined:
        grown = services.recall(thread, BIG, **SMALL_FOLD)

    assert len(testing.calls) == 1  # a new key, but the same start
    assert grown.decline == "lost-facts"
    assert [(d["reason"], d["latched"]) for d in declined] == [("lost-facts", True)]
    latch = FoldLatch.objects.get(thread=thread)
    assert (latch.start_key, latch.span_tokens) == (
        str(entries[0].pk), sum(entry.token_count for entry in entries[:6])
    )


@pytest.mark.django_db
def test_a_summary_that_keeps_the_facts_passes_the_gate(settings: Any) -> None:
    settings.AGENTMEMORY = recording_settings(KEEPS_FACTS, FACT_GATE=GATE_DECLINE)
    thread, entries = refund_thread()

    result = services.recall(thread, BIG, **SMALL_FOLD)

    assert result.folded_summary_id is not None and result.decline is None
    (summary,) = summaries(thread)
    assert summary.coverage.fact_score == 1.0
    assert summary.coverage.missing_facts == []
    assert not FoldLatch.objects.exists()
    assert [m.id for m in result.messages] == [summary.pk, entries[6].pk, entries[7].pk]


@pytest.mark.django_db
def test_with_action_append_the_missing_facts_are_listed_after_the_model_text(
    settings: Any,
) -> None:
    settings.AGENTMEMORY = recording_settings(DROPS_AMOUNT, FACT_GATE=GATE_APPEND)
    thread, entries = refund_thread()

    result = services.recall(thread, BIG, **SMALL_FOLD)

    assert result.decline is None and result.folded_summary_id is not None
    (summary,) = summaries(thread)
    label, model_text, note = summary.content.split("\n")
    assert label.startswith(SUMMARY_LABEL_PREFIX)
    assert model_text == CONTINUATION + DROPS_AMOUNT  # the model's words, as data
    assert note == missing_facts_note([f.text for f in check_facts(SPAN, DROPS_AMOUNT).missing])
    assert note.startswith("[facts from the originals") and AMOUNT in note
    assert summary.coverage.fact_score == 0.5
    assert summary.coverage.missing_facts == [AMOUNT]
    assert AMOUNT in result.text  # the recalled context still carries the amount
    assert [m.id for m in result.messages] == [summary.pk, entries[6].pk, entries[7].pk]
    assert not FoldLatch.objects.exists()
    assert SummarizerCall.objects.get(thread=thread).outcome == CallOutcome.FOLDED


@pytest.mark.django_db
def test_without_a_threshold_nothing_is_measured_or_gated(settings: Any) -> None:
    settings.AGENTMEMORY = recording_settings(DROPS_AMOUNT, FACT_GATE={"THRESHOLD": None})

    result = services.recall(refund_thread()[0], BIG, **SMALL_FOLD)

    assert result.decline is None and result.folded_summary_id is not None
    summary = MemoryEntry.objects.get(pk=result.folded_summary_id)
    label, model_text = summary.content.split("\n")
    assert label.startswith(SUMMARY_LABEL_PREFIX) and model_text == CONTINUATION + DROPS_AMOUNT
    assert summary.coverage.fact_score is None
    assert summary.coverage.missing_facts == []
    assert not FoldLatch.objects.exists()


@pytest.mark.django_db
def test_a_threshold_below_the_score_lets_the_summary_through(settings: Any) -> None:
    settings.AGENTMEMORY = recording_settings(
        DROPS_AMOUNT, FACT_GATE={"THRESHOLD": 0.5, "ACTION": "decline"}
    )
    result = services.recall(refund_thread()[0], BIG, **SMALL_FOLD)
    assert result.decline is None and result.folded_summary_id is not None


# ------------------------------------------------------------------ the default: flag


def order_numbers(count: int) -> list[str]:
    return [f"ORD-{48213 + 7 * n}" for n in range(count)]


ORDERS_SPAN = [
    f"Where is my order {order}? It was due last week and the tracking page has not "
    "changed since the day it shipped."
    for order in order_numbers(6)
]


@pytest.mark.django_db
def test_a_new_project_flags_a_summary_that_drops_every_order_number(settings: Any) -> None:
    """Issue 27's case: a settings dict that names only the summarizer, and a summary
    that keeps none of the span's order numbers. It is stored as written and recalled,
    and flagged for review with what it dropped."""
    settings.AGENTMEMORY = recording_settings(PLAIN)
    assert set(settings.AGENTMEMORY) == {"SUMMARIZER"}
    thread = make_thread()
    entries = services.append(
        thread, [{"role": "user", "content": c} for c in ORDERS_SPAN + KEPT]
    )

    result = services.recall(thread, BIG, **SMALL_FOLD)

    assert result.decline is None and result.folded_summary_id is not None
    (summary,) = summaries(thread)
    label, model_text = summary.content.split("\n")  # no note: the text is the model's
    assert label.startswith(SUMMARY_LABEL_PREFIX) and model_text == CONTINUATION + PLAIN
    assert summary.coverage.fact_score == 0.0
    assert summary.coverage.missing_facts == order_numbers(6)
    assert summary.coverage.injection_flags == [LOST_FACTS_FLAG] == ["lost-facts"]
    assert list(MemoryEntry.objects.needs_review()) == [summary]
    assert summary.held_at is None
    assert [m.id for m in result.messages] == [summary.pk, entries[6].pk, entries[7].pk]
    (call,) = SummarizerCall.objects.filter(thread=thread)
    assert call.outcome == CallOutcome.FOLDED and len(testing.calls) == 1


@pytest.mark.django_db
def test_the_default_threshold_flags_below_half_of_the_facts_not_at_half(settings: Any) -> None:
    settings.AGENTMEMORY = recording_settings(DROPS_AMOUNT)

    result = services.recall(refund_thread()[0], BIG, **SMALL_FOLD)

    summary = MemoryEntry.objects.get(pk=result.folded_summary_id)
    assert summary.coverage.fact_score == 0.5
    assert summary.coverage.missing_facts == [AMOUNT]  # measured, and shown in the admin
    assert summary.coverage.injection_flags == []
    assert not MemoryEntry.objects.needs_review().exists()


@pytest.mark.django_db
def test_with_hold_flagged_a_lossy_summary_waits_for_review(settings: Any) -> None:
    settings.AGENTMEMORY = recording_settings(PLAIN, HOLD_FLAGGED=True)
    thread, entries = refund_thread()

    result = services.recall(thread, BIG, **SMALL_FOLD)

    (summary,) = summaries(thread)
    assert summary.held_at is not None
    assert summary.coverage.injection_flags == [LOST_FACTS_FLAG]
    assert [m.id for m in result.messages] == [e.pk for e in entries]  # verbatim
    assert AMOUNT in result.text and ORDER in result.text


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("gate", "reply", "flags", "note"),
    [
        ({"THRESHOLD": 0.9}, DROPS_AMOUNT, [LOST_FACTS_FLAG], False),  # ACTION: flag
        ({"ACTION": "append"}, PLAIN, [], True),  # THRESHOLD: 0.5
        ({"ACTION": "append"}, DROPS_AMOUNT, [], False),
    ],
)
def test_a_key_left_out_of_the_gate_takes_its_default(
    settings: Any, gate: dict[str, Any], reply: str, flags: list[str], note: bool
) -> None:
    settings.AGENTMEMORY = recording_settings(reply, FACT_GATE=gate)

    result = services.recall(refund_thread()[0], BIG, **SMALL_FOLD)

    summary = MemoryEntry.objects.get(pk=result.folded_summary_id)
    assert summary.coverage.injection_flags == flags
    assert summary.content.endswith(missing_facts_note(summary.coverage.missing_facts)) is note


@pytest.mark.django_db
def test_window_compaction_flags_a_lossy_span_by_default(settings: Any) -> None:
    settings.AGENTMEMORY = window_settings(PLAIN)

    result = compact(make_thread(), refund_window())

    assert result.span is not None and result.refusal is None
    assert result.span.content.split("\n")[1:] == [CONTINUATION + PLAIN]
    assert result.span.fact_score == 0.0
    assert result.span.injection_flags == [LOST_FACTS_FLAG]


@pytest.mark.django_db
def test_the_default_gate_costs_no_call_and_no_token(settings: Any) -> None:
    """Flagging changes nothing a model reads: the same conversation folded with the
    gate off and with the default sends the summarizer the same prompts, stores the same
    summaries and recalls the same contexts; only the flags differ. (Its time per fold
    is measured by bench/fact_gate.py.)"""

    def folded(gate: dict[str, Any] | None) -> tuple[Any, ...]:
        settings.AGENTMEMORY = recording_settings(
            PLAIN, **({} if gate is None else {"FACT_GATE": gate})
        )
        before = len(testing.calls)
        thread = make_thread()
        contexts = []
        for turn in conversation(turns=30):
            services.append(thread, turn.user)
            contexts.append(services.recall(thread, 1_500).text)
            services.append(thread, turn.replies)
        rows = list(
            MemoryEntry.objects.filter(thread=thread).summaries().order_by("position")
            .values_list("content", "token_count", "coverage__injection_flags")
        )
        calls = list(SummarizerCall.objects.filter(thread=thread).order_by("pk")
                     .values_list("outcome", "prompt_tokens", "completion_tokens"))
        return testing.calls[before:], rows, calls, contexts

    off = folded({"THRESHOLD": None})
    default = folded(None)

    prompts, rows, calls, contexts = default
    assert len(calls) >= 3 and len(rows) >= 1
    assert prompts == off[0] and calls == off[2] and contexts == off[3]
    assert [row[:2] for row in rows] == [row[:2] for row in off[1]]
    assert {tuple(row[2]) for row in rows} == {(LOST_FACTS_FLAG,)}
    assert {tuple(row[2]) for row in off[1]} == {()}


@pytest.mark.django_db
def test_the_gate_benchmark_measures_what_the_docs_quote() -> None:
    """bench/fact_gate.py, whose figures docs/settings.md and docs/concepts.md state."""
    off = fact_gate_bench.run("parcel-support", 40, "no specifics", "off")
    default = fact_gate_bench.run("parcel-support", 40, "no specifics", "default")
    assert off["calls"] == default["calls"] >= 1
    assert (off["summary_tokens"], off["context"]) == (
        default["summary_tokens"], default["context"]
    )
    assert (off["flagged"], default["flagged"]) == (0, default["summaries"])
    assert off["gate_ms"] == [] and len(default["gate_ms"]) == default["calls"]


@pytest.mark.parametrize(
    "gate",
    [
        {"THRESHOLD": 1.5},
        {"THRESHOLD": "high"},
        {"THRESHOLD": 0.9, "ACTION": "drop"},
        {"ACTION": "hold"},
        {"THRESHOLD": 0.9, "WHEN": "always"},
        "0.9",
    ],
)
def test_a_bad_fact_gate_setting_fails_the_check(settings: Any, gate: Any) -> None:
    settings.AGENTMEMORY = {"FACT_GATE": gate}
    errors = [e for e in check_settings() if e.id == "agentmemory.E013"]
    assert errors and "FACT_GATE" in errors[0].msg


# ------------------------------------------------------------------ window compaction

REQUEST = {"role": "user", "content": "Sort out the refund this customer is asking about."}


def refund_window() -> list[dict[str, Any]]:
    roles = ("assistant", "user")
    body = SPAN + KEPT
    return [REQUEST] + [{"role": roles[i % 2], "content": text} for i, text in enumerate(body)]


def window_settings(reply: str, **extra: Any) -> dict[str, Any]:
    return recording_settings(
        reply,
        WINDOW={"CLASS": "agentmemory.window.seams.SlidingWindow",
                "OPTIONS": {"MAX_MESSAGES": 4}},
        **extra,
    )


@pytest.mark.django_db
def test_window_compaction_obeys_the_same_gate_and_latches(settings: Any) -> None:
    settings.AGENTMEMORY = window_settings(DROPS_AMOUNT, FACT_GATE=GATE_DECLINE)
    thread = make_thread()
    window = refund_window()

    with capture(signals.fold_declined) as declined:
        first = compact(thread, window)
        second = compact(thread, window)

    assert first.refusal == second.refusal == "lost-facts"
    assert first.span is None and first.window == window == second.window
    assert len(testing.calls) == 1
    assert [(d["reason"], d["purpose"], d["latched"]) for d in declined] == [
        ("lost-facts", FoldPurpose.WINDOW_FOLD, False),
        ("lost-facts", FoldPurpose.WINDOW_FOLD, True),
    ]
    (call,) = SummarizerCall.objects.filter(thread=thread)
    assert call.outcome == CallOutcome.REFUSED_LOST_FACTS
    # 7: the seam's cut lands inside a turn and moves forward to the next one
    assert call.purpose == FoldPurpose.WINDOW_FOLD and call.entry_count == 7
    latch = FoldLatch.objects.get(thread=thread)
    assert (latch.reason, latch.purpose) == ("lost-facts", FoldPurpose.WINDOW_FOLD)
    assert not FoldedSpan.objects.exists()


@pytest.mark.django_db
def test_window_compaction_with_action_append_lists_the_missing_amount(settings: Any) -> None:
    settings.AGENTMEMORY = window_settings(DROPS_AMOUNT, FACT_GATE=GATE_APPEND)
    thread = make_thread()

    result = compact(thread, refund_window())

    span = result.span
    assert span is not None and result.refusal is None
    label, model_text, note = span.content.split("\n")
    assert label.startswith(WINDOW_FRAME_PREFIX) and model_text == CONTINUATION + DROPS_AMOUNT
    assert note == missing_facts_note([f.text for f in check_facts(SPAN, DROPS_AMOUNT).missing])
    assert span.fact_score == 0.5 and span.missing_facts == [AMOUNT]
    assert result.window[1] == {"role": "user", "content": span.content}


@pytest.mark.django_db
def test_window_compaction_without_a_threshold_measures_nothing(settings: Any) -> None:
    settings.AGENTMEMORY = window_settings(DROPS_AMOUNT, FACT_GATE={"THRESHOLD": None})
    result = compact(make_thread(), refund_window())
    assert result.span is not None
    assert result.span.content.split("\n")[1:] == [CONTINUATION + DROPS_AMOUNT]
    assert result.span.fact_score is None and result.span.missing_facts == []


@pytest.mark.django_db
def test_a_swallowed_summary_message_brings_its_facts_but_not_its_frame(settings: Any) -> None:
    settings.AGENTMEMORY = window_settings(KEEPS_FACTS, FACT_GATE=GATE_DECLINE)
    thread = make_thread()
    first = compact(thread, refund_window(), iteration=12)
    assert first.span is not None and first.span.fact_score == 1.0
    later = first.window + [
        {"role": ("assistant", "user")[n % 2],
         "content": "The customer wrote again about the same refund and asked politely for "
         "news, without adding anything new to what was already said before."}
        for n in range(6)
    ]

    second = compact(thread, later, iteration=13)

    # The frame's own words (iteration 12, the model, the count) are not facts of the
    # conversation; the summary it framed carried the amount and the order, and so does
    # the new one.
    assert second.refusal is None and second.span is not None
    assert second.span.fact_score == 1.0 and second.span.missing_facts == []
    assert list(second.span.nested_spans.all()) == [first.span]
