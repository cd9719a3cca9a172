"""The benchmark's o200k_base counts, remembered by text.

The libraries count the whole history again at every turn, and the benchmark counts
every context; the same message's text is tokenized thousands of times by a pure-Python
tokenizer. Counting each distinct text once gives the same figures in a fraction of
the time, so the peers can run at rooms of 16,000 tokens as well as 744.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from bench import conversation as conv

CACHED_TEXTS = 1 << 16  # distinct texts remembered (messages, and spans joined for counting)


@lru_cache(maxsize=CACHED_TEXTS)
def encode(text: str) -> tuple[int, ...]:
    """o200k_base tokens of ``text``, as ``encode_ordinary`` gives them (a tuple: shared)."""
    return tuple(conv._encoding().encode_ordinary(text))


def count_tokens(text: str) -> int:
    return len(encode(text))


def message_tokens(message: dict[str, Any]) -> int:
    """``conversation.message_tokens``, remembered."""
    return count_tokens(conv.render(message))
