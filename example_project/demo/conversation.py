"""The demo's data: a fixed customer-support conversation, generated turn by turn.

Everything here is a pure function of the turn number, so every run of
``manage.py agentmemory_demo`` writes the same messages.
"""

from __future__ import annotations

import json
from datetime import date, timedelta
from typing import Any

Message = dict[str, Any]

#: The demo's login (created by the command, for a local demo only) and its threads.
DEMO_USERNAME = "admin"
DEMO_PASSWORD = "admin"
DEMO_CLIENT_KEY = "demo-support-chat"
DEMO_TITLE = "Demo: Northwind Outfitters support chat"
WINDOW_CLIENT_KEY = "demo-agent-run"
WINDOW_TITLE = "Demo: an agent run whose live window is compacted"

ITEMS = (
    ("trail running shoes", "89.00"),
    ("waterproof shell jacket", "149.50"),
    ("merino base layer", "64.00"),
    ("insulated water bottle", "27.95"),
    ("40 L hiking backpack", "119.00"),
    ("fleece gloves", "22.50"),
    ("camping stove", "74.99"),
)
CARRIERS = ("UPS", "DHL", "Royal Mail")
START = date(2025, 3, 3)


def order(number: int) -> tuple[str, str, str, date]:
    item, amount = ITEMS[number % len(ITEMS)]
    return f"NW-{48210 + number * 7}", item, amount, START + timedelta(days=number)


def call(number: int, index: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"call_{number:03d}_{index}", "name": name, "arguments": json.dumps(arguments)}


def tool(answered: dict[str, Any], result: dict[str, Any]) -> Message:
    return {
        "role": "tool",
        "tool_name": answered["name"],
        "tool_call_id": answered["id"],
        "content": json.dumps(result),
    }


def steps(number: int) -> list[list[Message]]:
    """Turn ``number`` as the agent lives it: the user's message, then each tool call
    with its result, then the answer; the agent calls its model after each step."""
    request, reply = turn(number)
    grouped: list[list[Message]] = [[request]]
    for message in reply:
        if message["role"] == "tool":
            grouped[-1].append(message)
        else:
            grouped.append([message])
    return grouped


def turn(number: int) -> tuple[Message, list[Message]]:
    """The user's message of turn ``number`` and the agent's reply (tool calls included)."""
    order_id, item, amount, day = order(number)
    scenario = number % 7
    if scenario == 1:
        user = f"Hi, where is my order {order_id}? It was supposed to arrive on {day:%d %B}."
        carrier = CARRIERS[number % len(CARRIERS)]
        lookup = call(number, 1, "lookup_order", {"order_id": order_id})
        eta = day + timedelta(days=2)
        return user_message(user), [
            assistant_message("", [lookup]),
            tool(lookup, {"order_id": order_id, "status": "in_transit", "carrier": carrier,
                          "tracking": f"TRK{900100 + number}", "eta": eta.isoformat()}),
            assistant_message(f"Order {order_id} is in transit with {carrier} (tracking "
                              f"TRK{900100 + number}); the new estimate is {eta:%d %B}."),
        ]
    if scenario == 2:
        user = f"The {item} from order {order_id} arrived damaged. Can I get a refund?"
        lookup = call(number, 1, "lookup_order", {"order_id": order_id})
        refund = call(number, 2, "issue_refund",
                      {"order_id": order_id, "amount": amount, "reason": "damaged"})
        due = day + timedelta(days=7)
        return user_message(user), [
            assistant_message("", [lookup]),
            tool(lookup, {"order_id": order_id, "status": "delivered", "items": [
                {"sku": f"SKU-{3000 + number}", "name": item, "price": amount}]}),
            assistant_message("", [refund]),
            tool(refund, {"refund_id": f"RF-{7100 + number}", "status": "approved",
                          "amount": amount, "expected_by": due.isoformat()}),
            assistant_message(f"I've refunded {amount} EUR for the damaged {item} (refund "
                              f"RF-{7100 + number}). It should reach your card by {due:%d %B}."),
        ]
    if scenario == 3:
        address = f"{10 + number} Harbour Lane, Bristol BS1 4RE"
        user = f"Can you change the delivery address for {order_id} to {address}?"
        update = call(number, 1, "update_shipping_address",
                      {"order_id": order_id, "address": address})
        return user_message(user), [
            assistant_message("", [update]),
            tool(update, {"order_id": order_id, "updated": True, "address": address}),
            assistant_message(f"Done: {order_id} will now be delivered to {address}."),
        ]
    if scenario == 4:
        user = f"I'd like to return the {item} from order {order_id}, it's the wrong size."
        label = call(number, 1, "create_return_label", {"order_id": order_id, "item": item})
        drop_off = day + timedelta(days=14)
        return user_message(user), [
            assistant_message("", [label]),
            tool(label, {"rma": f"RMA-{5500 + number}", "drop_off_by": drop_off.isoformat(),
                         "label_url": f"https://returns.example.com/RMA-{5500 + number}.pdf"}),
            assistant_message(f"Your return RMA-{5500 + number} is open. Print the label from the "
                              f"link I sent and drop the parcel off by {drop_off:%d %B}."),
        ]
    if scenario == 5:
        user = "How long do refunds usually take to show up on my card statement?"
        return user_message(user), [
            assistant_message("Card refunds usually appear within 5 to 10 business days after we "
                              "approve them; bank transfers can take a little longer."),
        ]
    if scenario == 6:
        code = f"SPRING{10 + number % 3 * 5}"
        user = f"My discount code {code} didn't apply to order {order_id}."
        coupon = call(number, 1, "apply_coupon", {"order_id": order_id, "code": code})
        return user_message(user), [
            assistant_message("", [coupon]),
            tool(coupon, {"order_id": order_id, "code": code, "applied": True,
                          "credited": f"{number % 3 * 5 + 10}%"}),
            assistant_message(f"{code} is now applied to {order_id}; the difference goes back to "
                              "your original payment method."),
        ]
    user = f"This is the second parcel that went missing ({order_id}). I want to talk to a person."
    ticket = call(number, 1, "open_ticket",
                  {"order_id": order_id, "priority": "high", "topic": "missing parcel"})
    return user_message(user), [
        assistant_message("", [ticket]),
        tool(ticket, {"ticket_id": f"T-{20400 + number}", "queue": "escalations",
                      "sla_hours": 24}),
        assistant_message(f"I'm sorry about this. Ticket T-{20400 + number} is with our "
                          "escalations team, and a person will contact you within 24 hours."),
    ]


def user_message(content: str) -> Message:
    return {"role": "user", "content": content}


def assistant_message(content: str, tool_calls: list[dict[str, Any]] | None = None) -> Message:
    message: Message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return message
