"""Run the seeded conversation through one peer library's summarizing memory.

    .venv-peers/bin/python bench/peers/run.py --library langchain \
        --base-url http://127.0.0.1:PORT/v1 --budget 744

Runs in ``.venv-peers`` (``make bench-peers``), never in the project's environment; the
summarizer model each library is given is its own OpenAI-compatible client aimed at
the loopback server that ``bench/run.py`` started, which answers every request with the
same fixed text. Prints one JSON line: what the library did to the conversation.

Every turn follows an agent's order: the user's message is added, the library builds
the context the model would get (summarizing when it decides to), that context is
checked, and the assistant's replies (tool call, tool result, answer) are added.
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

from bench import conversation as conv  # noqa: E402
from bench import cost_model  # noqa: E402
from bench.peers import counting  # noqa: E402

ADAPTERS = {
    "langchain": "bench.peers.langchain_middleware",
    "langmem": "bench.peers.langmem_summarize",
    "llamaindex": "bench.peers.llamaindex_buffer",
}


def run(
    library: str, base_url: str, budget: int, *, workload: str = "parcel-support",
    keep_tokens: int | None = None,
) -> dict[str, Any]:
    adapter = importlib.import_module(ADAPTERS[library])
    options = {} if keep_tokens is None else {"keep_tokens": keep_tokens}
    memory = adapter.Memory(base_url=base_url, budget=budget, **options)
    not_verbatim = orphan_turns = 0
    examples: list[dict[str, Any]] = []  # the first turns whose new message was not verbatim
    context_tokens: list[int] = []
    meter = cost_model.Meter(counting.encode)  # what each turn's model call would cost
    began = time.perf_counter()
    for turn in conv.conversation(workload=workload):
        memory.add(turn.user)
        context = memory.context()
        meter.turn(context)
        last = context[-1] if context else None
        if last is None or last["role"] != "user" or last["content"] != turn.user["content"]:
            not_verbatim += 1
            if len(examples) < 3:
                examples.append({"turn": turn.number, "last_role": last and last["role"],
                                 "context_messages": len(context)})
        if conv.orphan_tool_messages(context):
            orphan_turns += 1
        context_tokens.append(sum(counting.message_tokens(message) for message in context))
        for reply in turn.replies:
            memory.add(reply)
    elapsed = time.perf_counter() - began
    return {
        "library": library,
        "component": adapter.COMPONENT,
        "settings": memory.settings,
        "versions": {name: importlib.metadata.version(name) for name in adapter.PACKAGES},
        "turns": len(context_tokens),
        "context_tokens": context_tokens,
        "originals_kept": memory.originals_kept(),
        "originals_where": adapter.ORIGINALS,
        "not_verbatim": not_verbatim,
        "not_verbatim_examples": examples,
        "orphan_turns": orphan_turns,
        "workload": workload,
        "cost": meter.as_dict(),
        "elapsed_s": elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", choices=sorted(ADAPTERS), required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--budget", type=int, required=True,
                        help="the context room in tokens, as agentmemory's recall gets it")
    parser.add_argument("--workload", choices=conv.WORKLOADS, default="parcel-support")
    parser.add_argument("--keep-tokens", type=int, default=None,
                        help="langchain only: keep=(\"tokens\", N) instead of 5 messages")
    args = parser.parse_args()
    if args.keep_tokens is not None and args.library != "langchain":
        parser.error("--keep-tokens is an option of the langchain adapter only")
    print(json.dumps(run(args.library, args.base_url, args.budget, workload=args.workload,
                         keep_tokens=args.keep_tokens)))


if __name__ == "__main__":
    main()
