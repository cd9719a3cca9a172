"""The planted conversation of bench/recovery.py through one peer library: which facts
its final context holds, and which are still held verbatim anywhere it keeps text.

    .venv-peers/bin/python bench/peers/recovery.py --library langchain \
        --base-url http://127.0.0.1:PORT/v1 --budget 3744
    .venv/bin/python bench/peers/recovery.py --library agents-sdk --base-url ... --budget 3744

Every turn follows an agent's order, as bench/peers/run.py does: the user's message is
added, the library builds the model's context (summarizing when it decides to), the
replies are added; the context is built once more after the last turn. The Agents SDK
session does nothing when read, so its context is read once, at the end. Prints one
JSON line.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from bench import recovery  # noqa: E402
from bench.peers import counting  # noqa: E402

ADAPTERS = {
    "langchain": "bench.peers.langchain_middleware",
    "langmem": "bench.peers.langmem_summarize",
    "llamaindex": "bench.peers.llamaindex_buffer",
    "llamaindex-memory": "bench.peers.llamaindex_memory",
    "agents-sdk": "bench.peers.agents_session",
}
#: Where each library keeps text after the conversation, and the tool it offers over it.
WHERE = {
    "langchain": "the agent state's messages (the summary and the kept tail; the rest "
                 "removed with `RemoveMessage(REMOVE_ALL_MESSAGES)`)",
    "langmem": "the caller's own full message list (the function is stateless) and the "
               "`RunningSummary`",
    "llamaindex": "the chat store (`get_all()`): the summary written over the originals, "
                  "and the tail",
    "llamaindex-memory": "the SQL chat store: flushed messages stay there, archived, beside "
                         "the active ones (`get_all()`); and the fact block's facts",
    "agents-sdk": "the session's SQLite table: every item",
}
TOOL = {
    "langchain": "none: nothing of LangChain's reads removed messages back",
    "langmem": "none over the message list: langmem's memory tools search a store of "
               "memories the agent saved, not the conversation",
    "llamaindex": "none",
    "llamaindex-memory": "none: `get()` reads only active messages and the blocks; nothing "
                         "searches the archived ones",
    "agents-sdk": "none: no search; the Runner sends every item with each turn",
}
PER_TURN_CONTEXT = {"agents-sdk": False}


def held(library: str, memory: Any) -> list[str]:
    """Every text the library (or, for langmem, its documented caller) keeps."""
    if hasattr(memory, "held"):
        return memory.held()
    if library == "llamaindex":
        return [message.content or "" for message in memory.buffer.get_all()]
    texts = [str(message.content) for message in memory.messages]
    summary = getattr(memory, "running_summary", None)
    if summary is not None:
        texts.append(summary.summary)
    return texts


def run(library: str, base_url: str, budget: int, turns: int) -> dict[str, Any]:
    adapter = importlib.import_module(ADAPTERS[library])
    memory = adapter.Memory(base_url=base_url, budget=budget)
    planted = recovery.facts(turns)
    per_turn = PER_TURN_CONTEXT.get(library, True)
    began = time.perf_counter()
    for turn in recovery.conversation(turns, planted):
        memory.add(turn.user)
        if per_turn:
            memory.context()
        for reply in turn.replies:
            memory.add(reply)
    context = memory.context()
    elapsed = time.perf_counter() - began
    return {
        "library": library,
        "component": adapter.COMPONENT,
        "settings": memory.settings,
        "versions": {name: importlib.metadata.version(name) for name in adapter.PACKAGES},
        "in_context": recovery.found([m["content"] or "" for m in context], planted),
        "final_context_tokens": sum(counting.message_tokens(m) for m in context),
        "held": recovery.found(held(library, memory), planted),
        "held_where": WHERE[library],
        "tool": TOOL[library],
        "elapsed_s": elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", choices=sorted(ADAPTERS), required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--budget", type=int, required=True, help="the context room in tokens")
    parser.add_argument("--turns", type=int, default=recovery.TURNS)
    args = parser.parse_args()
    print(json.dumps(run(args.library, args.base_url, args.budget, args.turns)))


if __name__ == "__main__":
    main()
