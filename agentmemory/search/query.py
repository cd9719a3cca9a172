"""The query language of memory search: plain words and "quoted phrases", nothing else.

Both engines are sent only what this module built from the parsed terms (each term
quoted for FTS5, each through ``phraseto_tsquery`` on PostgreSQL), so no query
text reaches an engine's own parser: FTS5 operators, column filters and brackets are
punctuation here, which separates words the way the index's tokenizer does.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from dataclasses import dataclass

from agentmemory.exceptions import AgentMemoryError

#: Longest query text accepted, in characters, and most terms (words and phrases).
MAX_QUERY_CHARS = 500
MAX_TERMS = 16

# A word as both tokenizers see one: letters and digits (FTS5 unicode61 and PostgreSQL's
# parser both split on everything else).
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


class InvalidSearchQuery(AgentMemoryError, ValueError):
    """A search or expand argument that cannot be used; ``field`` names it (``q``: query
    text that is not words and quoted phrases)."""

    def __init__(self, message: str, *, field: str = "q") -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class SearchQuery:
    """Parsed query text: each term is a tuple of words (one word, or a phrase)."""

    terms: tuple[tuple[str, ...], ...]

    @property
    def words(self) -> list[str]:
        return [word for term in self.terms for word in term]


def parse_query(text: object) -> SearchQuery:
    """Words and double-quoted phrases, all of which must match. Raises
    `InvalidSearchQuery` for anything else: not text, empty, too long, a control
    character (NUL included), an unbalanced quote, no word at all, too many terms."""
    if not isinstance(text, str):
        raise InvalidSearchQuery(f"must be text, got {type(text).__name__}.")
    if len(text) > MAX_QUERY_CHARS:
        raise InvalidSearchQuery(
            f"must be at most {MAX_QUERY_CHARS} characters, got {len(text)}."
        )
    for char in text:
        if unicodedata.category(char) in ("Cc", "Cs") and char not in "\t\n\r":
            raise InvalidSearchQuery(
                f"must not hold control characters, got U+{ord(char):04X}."
            )
    if text.count('"') % 2:
        raise InvalidSearchQuery('has an unbalanced double quote: close the phrase with ".')
    terms: list[tuple[str, ...]] = []
    for index, part in enumerate(text.split('"')):
        words = [word.casefold() for word in _WORD.findall(part)]
        if index % 2:  # inside quotes: one phrase
            if words:
                terms.append(tuple(words))
        else:
            terms.extend((word,) for word in words)
    if not terms:
        raise InvalidSearchQuery("must hold at least one word (letters or digits).")
    if len(terms) > MAX_TERMS:
        raise InvalidSearchQuery(
            f"must hold at most {MAX_TERMS} words and phrases, got {len(terms)}."
        )
    return SearchQuery(tuple(dict.fromkeys(terms)))


def _escaped(code: int) -> str:
    # ECMA patterns (without the u flag) have no escape beyond U+FFFF that Python's re
    # reads alike: such a character is written as itself.
    return f"\\u{code:04x}" if code < 0x10000 else chr(code)


@functools.cache
def query_pattern() -> str:
    """A regular expression that matches exactly the text `parse_query` accepts, but for
    the length (a schema's ``maxLength``): for an OpenAPI schema, whose fuzzers and
    validators then agree with the parser. Word characters are listed as code point
    ranges, since ``\\w`` means ASCII in ECMA patterns and Unicode in Python's. A word
    ends only where the next character is not one (``(?!...)``), so a text that fails
    is not tried again split into more words."""
    ranges: list[tuple[int, int]] = []
    for code in range(sys.maxunicode + 1):
        if _WORD.match(chr(code)):
            if ranges and ranges[-1][1] == code - 1:
                ranges[-1] = (ranges[-1][0], code)
            else:
                ranges.append((code, code))
    letters = "".join(
        _escaped(first) if first == last else f"{_escaped(first)}-{_escaped(last)}"
        for first, last in ranges
    )
    controls = "\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f-\\u009f"
    word, other, quoted = f"[{letters}]", f'[^{letters}"{controls}]', f'[^"{controls}]'
    gap = f'(?:{other}|"{other}*")*'  # separators, and quotes holding no word
    term = f'(?:{word}+(?!{word})|"{other}*{word}{quoted}*")'
    return f"^{gap}(?:{term}{gap}){{1,{MAX_TERMS}}}$"
