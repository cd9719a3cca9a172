"""The request serializers' text check (`api.serializers.base.NoSurrogates`) refuses
exactly what DRF's own surrogate check refuses, with its message and code, over random
text; the message fields use it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rest_framework.exceptions import ValidationError
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from agentmemory.api.serializers.base import NoSurrogates
from agentmemory.api.serializers.entries import MessageSerializer, ToolCallSerializer

#: ASCII, Latin-1, the planes around the surrogates, and lone surrogates themselves.
texts = st.text(st.one_of(
    st.characters(max_codepoint=0x7F),
    st.characters(min_codepoint=0x80, max_codepoint=0xFF),
    st.characters(min_codepoint=0xD700, max_codepoint=0xE0FF),
    st.characters(min_codepoint=0x1F600, max_codepoint=0x1F64F),
), max_size=60)


def outcome(check: object, value: str) -> tuple[str, str] | None:
    try:
        check(value)  # type: ignore[operator]
    except ValidationError as exc:
        [detail] = exc.detail  # type: ignore[misc]
        return str(detail), detail.code
    return None


@given(value=texts)
def test_it_refuses_what_drf_refuses_with_its_message(value: str) -> None:
    assert outcome(NoSurrogates(), value) == outcome(ProhibitSurrogateCharactersValidator(),
                                                     value)


def test_a_surrogate_is_named_by_its_first_code_point() -> None:
    assert outcome(NoSurrogates(), "ok \udfff then \ud800") == (
        "Surrogate characters are not allowed: U+DFFF.", "surrogate_characters_not_allowed")


@pytest.mark.parametrize(("serializer", "fields"), [
    (MessageSerializer, ["content", "tool_name", "tool_call_id"]),
    (ToolCallSerializer, ["id", "name"]),
])
def test_the_message_fields_use_it(serializer: type, fields: list[str]) -> None:
    for name in fields:
        checks = serializer(data={}).fields[name].validators
        assert any(type(check) is NoSurrogates for check in checks), name
        assert not any(type(check) is ProhibitSurrogateCharactersValidator for check in checks)
    refused = MessageSerializer(data={"role": "user", "content": "hi \ud83d there"})
    assert not refused.is_valid()
    assert refused.errors["content"] == ["Surrogate characters are not allowed: U+D83D."]
