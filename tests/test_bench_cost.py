"""The cost benchmark's pricing rule (bench/cost_model.py): OpenAI's cached-prefix rule
and the shared prefix of two contexts, as properties."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bench import cost_model
from bench.cost_bound import cheapest_of
from bench.cost_model import CACHE_MIN, CACHE_STEP, cached_tokens, shared_prefix, turn_cost


def encode(text: str) -> tuple[int, ...]:
    """A stand-in tokenizer, one token a byte: what matters is a deterministic encoding."""
    return tuple(text.encode())


contexts = st.integers(min_value=0, max_value=300_000)
texts = st.lists(st.text(alphabet="abc ", max_size=40), max_size=12)


@st.composite
def shared_and_context(draw: st.DrawFn) -> tuple[int, int]:
    context = draw(contexts)
    return draw(st.integers(min_value=0, max_value=context)), context


@given(shared_and_context())
def test_cached_is_at_most_the_shared_prefix(pair: tuple[int, int]) -> None:
    shared, context = pair
    assert 0 <= cached_tokens(shared, context) <= shared


@given(st.integers(min_value=0, max_value=CACHE_MIN - 1), contexts)
def test_nothing_is_cached_below_the_minimum(shared: int, context: int) -> None:
    assert cached_tokens(shared, context) == 0


@given(shared_and_context())
def test_cached_grows_in_steps_above_the_minimum(pair: tuple[int, int]) -> None:
    shared, context = pair
    cached = cached_tokens(shared, context)
    if shared >= CACHE_MIN:
        assert cached >= CACHE_MIN
        assert (cached - CACHE_MIN) % CACHE_STEP == 0
        assert shared - cached < CACHE_STEP


@given(st.integers(min_value=0, max_value=300_000), contexts)
def test_cached_never_exceeds_the_context(shared: int, context: int) -> None:
    assert cached_tokens(shared, context) <= context


@given(shared_and_context())
def test_a_turn_costs_at_most_its_context(pair: tuple[int, int]) -> None:
    shared, context = pair
    cost = turn_cost(context, cached_tokens(shared, context))
    assert cost_model.CACHED_PRICE * context <= cost <= context


@given(texts)
def test_identical_contexts_share_everything(messages: list[str]) -> None:
    total = sum(len(encode(text)) for text in messages)
    shared = shared_prefix(messages, messages, encode)
    assert shared == total
    if total >= CACHE_MIN:
        assert total - cached_tokens(shared, total) < CACHE_STEP


@given(texts, texts)
def test_the_shared_prefix_is_within_both_contexts(before: list[str], now: list[str]) -> None:
    shared = shared_prefix(before, now, encode)
    assert shared <= sum(len(encode(text)) for text in before)
    assert shared <= sum(len(encode(text)) for text in now)


@given(texts, texts)
def test_an_appended_context_shares_all_of_the_previous(before: list[str], more: list[str]) -> None:
    assert shared_prefix(before, before + more, encode) == sum(len(encode(t)) for t in before)


def test_the_first_differing_message_counts_its_common_leading_tokens() -> None:
    before = ["system: summary", "user: hello there", "assistant: hi"]
    now = ["system: summary", "user: hello you", "assistant: hi"]
    assert shared_prefix(before, now, encode) == len("system: summary") + len("user: hello ")


def test_identical_contexts_above_the_minimum_cost_a_tenth() -> None:
    context = CACHE_MIN + 10 * CACHE_STEP
    assert turn_cost(context, cached_tokens(context, context)) == context * 0.1


def test_the_meter_prices_each_turn_against_the_one_before() -> None:
    meter = cost_model.Meter(encode)
    first = [{"role": "user", "content": "x" * 2_000}]
    meter.turn(first)
    meter.turn([*first, {"role": "assistant", "content": "ok"}])
    assert meter.shared == [0, len(encode("user: " + "x" * 2_000))]
    assert meter.cached[0] == 0 and meter.cached[1] == CACHE_MIN + 7 * CACHE_STEP
    assert meter.cost[0] == meter.context[0]
    meter.turn([{"role": "user", "content": "y"}])
    assert meter.breaks == 1
    assert meter.as_dict()["breaks"] == 1 and "context" not in meter.as_dict()


def test_chat_messages_come_back_in_the_append_shape() -> None:
    chat = [
        {"role": "system", "content": "a summary"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "{\"ok\": true}"},
    ]
    shaped = cost_model.from_chat(chat)
    assert shaped[1]["tool_calls"] == [{"id": "c1", "name": "lookup", "arguments": "{}"}]
    assert shaped[1]["content"] == ""
    assert shaped[2]["tool_name"] == "lookup"


def brute_force(turns: list[tuple[int, int]], room: int, summary: float, fixed: float) -> float:
    """Every schedule of folds (a fold at turn i stands for every turn before it)."""
    best = float("inf")
    for mask in range(1 << len(turns)):
        cost, last = 0.0, -1
        for i, (user, _) in enumerate(turns):
            if mask >> i & 1:
                cost += fixed
                last = i
            held = sum(whole for _, whole in turns[max(last, 0):i])
            context = (summary if last >= 0 else 0) + held + user
            if context > room:
                break
            cost += context
        else:
            best = min(best, cost)
    return best


@given(st.lists(st.tuples(st.integers(1, 60), st.integers(0, 400)), min_size=1, max_size=10),
       st.integers(150, 900), st.integers(20, 200), st.integers(0, 900))
def test_the_cheapest_schedule_is_the_least_of_every_schedule(
    turns: list[tuple[int, int]], room: int, summary: int, fixed: int
) -> None:
    """bench/cost_bound.py: the floor the cost report sets under a run at a room nothing
    of is cached is the least cost over every schedule of folds, found exhaustively."""
    shaped = [(user, user + replies) for user, replies in turns]
    assert cheapest_of(shaped, room, summary, fixed) == brute_force(shaped, room, summary, fixed)
