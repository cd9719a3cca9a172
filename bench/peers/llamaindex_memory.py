"""LlamaIndex: ``Memory``, the chat memory that flushes what overflows to memory blocks.

A FIFO of recent messages in a SQL chat store (LlamaIndex's default: SQLite in memory);
once it holds more than ``chat_history_token_ratio`` (0.7) of ``token_limit``, the
oldest messages are archived in the same store and handed to the memory blocks. The
block here is ``FactExtractionMemoryBlock``, whose LLM (LlamaIndex's own OpenAI class,
aimed at the loopback server) extracts the facts that ``Memory.get()`` puts into the
system message. The tokenizer is the benchmark's o200k_base encoding.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.memory import FactExtractionMemoryBlock
from llama_index.core.memory import Memory as LlamaMemory
from llama_index.llms.openai import OpenAI

from bench.peers import counting
from bench.peers.llamaindex_buffer import STUB_KEY, to_dict, to_llamaindex

COMPONENT = "`llama_index.core.memory.Memory` with a `FactExtractionMemoryBlock`"
PACKAGES = ("llama-index-core", "llama-index-llms-openai")


class Memory:
    def __init__(self, *, base_url: str, budget: int) -> None:
        llm = OpenAI(model="gpt-4o-mini", api_base=base_url, api_key=STUB_KEY,
                     temperature=0, max_retries=0, timeout=10)
        self.block = FactExtractionMemoryBlock(name="facts", llm=llm)
        self.memory = LlamaMemory.from_defaults(
            token_limit=budget, memory_blocks=[self.block], tokenizer_fn=counting.encode,
        )
        self.settings = (f"token_limit={budget}, chat_history_token_ratio="
                         f"{self.memory.chat_history_token_ratio}, token_flush_size="
                         f"{self.memory.token_flush_size} (defaults)")
        self.added = 0

    def add(self, message: dict[str, Any]) -> None:
        self.memory.put(to_llamaindex(message, self.added))
        self.added += 1

    def context(self) -> list[dict[str, Any]]:
        return [to_dict(message) for message in self.memory.get()]

    def held(self) -> list[str]:
        """Every text the memory keeps: the chat store (active and archived), the facts."""
        return [message.content or "" for message in self.memory.get_all()] + list(
            self.block.facts)
