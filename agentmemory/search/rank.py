"""Ranking a bounded pool of matches in Python: BM25 over the pool, distinct hits first.

Both functions take what the index read (`agentmemory.search.index`), never the database.

* `bm25` scores the SQLite pool (every match holds every term). FTS5's own ``bm25()``
  counts, for each term, every row of the index that holds it (its IDF) on every call:
  a word most of a million messages hold costs a read of its whole doclist, though the
  pool is a thousand rows. Here a term's rarity is counted among the index's newest
  `IDF_WINDOW` rows (a sample of the same text), and its frequency in a message is
  counted in the message's text. The IDF is Lucene's, ``ln(1 + (N - n + 0.5) / (n +
  0.5))``, which stays above zero for a word more than half the messages hold (FTS5's
  clamps it to ~0, so such a word's repetitions count for nothing).
* `distinct_first` puts near-duplicates after the distinct hits. A conversation says
  the same thing again and again (an order status in the same words, numbers aside);
  the best match of each such run is worth a place in a short result, its repeats are
  not, and a message that says something else with the same words would otherwise sit
  behind all of them. Nothing is left out: repeats follow, in rank order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

from agentmemory.search.query import SearchQuery

#: BM25's usual constants: term frequency saturation and length normalisation.
K1, B = 1.2, 0.75
#: The newest rows of the index a term's rarity (its IDF) is counted in.
IDF_WINDOW = 10_000
#: Two messages that share at least this share of their words (Jaccard, over the first
#: `SIMILAR_CHARS` characters, numbers aside) say the same thing: the worse-ranked one
#: waits. Slot values changed (a status, a carrier, a city) keep a message above it; a
#: sentence added to a template's words (another fact said in passing) takes it below.
SIMILAR, SIMILAR_CHARS = 2 / 3, 600

# ASCII letters lowercased, every other ASCII byte a space but NUL (which separates the
# texts of a batch); bytes of other scripts are kept as letters of words.
_COMPARABLE = bytes(
    byte if byte >= 0x80 or byte == 0 else ord(chr(byte).lower()) if chr(byte).isalpha()
    else 0x20 for byte in range(256)
)
#: Texts made comparable at once.
_BATCH = 100
# What the porter stemmer of FTS5 strips from a word that matched a term's stem: the
# term's text without it is counted in a message ("order" counts "orders", "ordered").
_SUFFIX = re.compile(r"(?:ing|ed|es|s|ly)$")


def probe(term: tuple[str, ...]) -> str:
    """The text counted in a message for one term (a word, or a phrase's words)."""
    *head, last = term
    stem = _SUFFIX.sub("", last)
    return " ".join([*head, stem if len(stem) >= 3 else last])


def idf(rows: int, holding: int) -> float:
    return math.log(1 + (rows - holding + 0.5) / (holding + 0.5))


def bm25(query: SearchQuery, texts: Sequence[str], window: int,
         holding: Sequence[int]) -> list[float]:
    """A score for each of ``texts`` (higher is better): ``holding[i]`` of the
    ``window`` newest indexed rows hold term ``i``. A term that matched but whose text is
    not found as such (punctuation inside a phrase, another inflection) counts once."""
    probes = [probe(term) for term in query.terms]
    weights = [idf(max(window, count), count) for count in holding]
    lengths = [len(text) for text in texts]
    average = max(sum(lengths) / max(len(lengths), 1), 1.0)
    scores = []
    for text, length in zip(texts, lengths, strict=True):
        folded = text.casefold()
        norm = K1 * (1 - B + B * length / average)
        score = 0.0
        for weight, counted in zip(weights, probes, strict=True):
            frequency = max(folded.count(counted), 1)
            score += weight * frequency * (K1 + 1) / (frequency + norm)
        scores.append(score)
    return scores


def comparable(texts: Sequence[str]) -> list[bytes]:
    """What messages are compared by, for each of ``texts``: the first `SIMILAR_CHARS`
    characters as UTF-8, digits left out, ASCII letters lowercased, every other ASCII
    byte a space. Numbers are set aside: an order status for another order, on another
    date, says the same thing. One pass of a byte table over all of them."""
    cut = [text[:SIMILAR_CHARS].replace("\x00", " ") for text in texts]
    joined = "\x00".join(cut).encode("utf-8", "replace")
    return joined.translate(_COMPARABLE, b"0123456789").split(b"\x00")


def similar(one: frozenset[bytes], other: frozenset[bytes]) -> bool:
    """Whether the Jaccard index of two word sets is at least `SIMILAR`."""
    mine, theirs = len(one), len(other)
    if mine < SIMILAR * theirs or theirs < SIMILAR * mine:  # it is at most the ratio
        return False
    shared = len(one & other)  # shared / (mine + theirs - shared) >= SIMILAR
    return shared * (1 + SIMILAR) >= SIMILAR * (mine + theirs)


def distinct_first(ranked: Sequence[int], text_of: Callable[[int], str],
                   want: int) -> list[int]:
    """``ranked`` (ids, best first) with up to ``want`` distinct ones first, each not
    `similar` to any distinct one before it, then the rest in rank order. Stops looking
    once it has ``want``. A text seen before (a template's repeat, numbers aside) waits
    without being compared again, so a pool of a few templates is read in one pass."""
    firsts: list[int] = []
    kept: list[frozenset[bytes]] = []
    waiting: list[int] = []
    seen: set[bytes] = set()
    scanned = 0
    while scanned < len(ranked) and len(firsts) < want:
        batch = ranked[scanned:scanned + _BATCH]
        for pk, text in zip(batch, comparable([text_of(pk) for pk in batch]), strict=True):
            if len(firsts) >= want:
                break
            scanned += 1
            if text in seen:
                waiting.append(pk)
                continue
            seen.add(text)
            mine = frozenset(text.split())
            for theirs in kept:
                if similar(mine, theirs):
                    waiting.append(pk)
                    break
            else:
                firsts.append(pk)
                kept.append(mine)
    return [*firsts, *waiting, *ranked[scanned:]]
