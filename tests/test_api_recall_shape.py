"""A recalled message over REST (issue 24): `RecalledMessageSerializer` builds its dict
directly; over random messages (tool calls with nested arguments, text outside ASCII,
empty fields) it equals DRF's own field-by-field representation of the declared fields,
which is what the schema shows.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework import serializers

from agentmemory.api.serializers.recall import RecalledMessageSerializer
from agentmemory.pipeline.recall import RecalledMessage

text = st.text(max_size=40)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text,
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(text, children, max_size=3),
    max_leaves=8,
)
calls = st.lists(st.dictionaries(text, json_values, max_size=4), max_size=3)
messages = st.builds(
    RecalledMessage, id=st.integers(1, 2**62), kind=st.sampled_from(["message", "summary"]),
    role=st.sampled_from(["user", "assistant", "tool", "system"]), content=text,
    turn=st.integers(0, 10**6), tokens=st.integers(0, 10**6), tool_calls=calls,
    tool_name=text, tool_call_id=text,
)


def declared(message: RecalledMessage) -> dict[str, Any]:
    """DRF's generic pass over the serializer's declared fields."""
    serializer = RecalledMessageSerializer()
    return serializers.Serializer.to_representation(serializer, message)


@settings(max_examples=300, deadline=None)
@given(message=messages)
def test_a_recalled_message_is_what_its_declared_fields_represent(
    message: RecalledMessage,
) -> None:
    built = RecalledMessageSerializer(message).data
    assert dict(built) == declared(message)
    assert list(built) == list(RecalledMessageSerializer().fields)
