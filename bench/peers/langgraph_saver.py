"""LangGraph's ``SqliteSaver`` with LangChain's ``SummarizationMiddleware``: the read a
turn pays before its model call, for bench/floor.py.

    .venv-peers/bin/python bench/peers/langgraph_saver.py < request.json

The request (JSON on stdin): ``{"path": file, "rounds": N, "budgets": {B: [message,
...]}}``, each budget's messages the context agentmemory recalled at B (a summary first,
as a user message, then the newest messages). For each budget, an agent's state as the
middleware leaves it at that room (a summary and the newest messages that fit) is
checkpointed by a one-node graph compiled with the saver on its own thread; then, timed
N times: ``SqliteSaver.get_tuple`` of that thread's latest checkpoint (the state read
and decoded) and the middleware's ``before_model`` on its messages (counting their
tokens with its default counter; under its trigger it returns no update, so no model is
called). Prints one JSON line: p50 and p95 in ms per budget, and the versions.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from langchain.agents.middleware import SummarizationMiddleware  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.graph import START, MessagesState, StateGraph  # noqa: E402

from bench.peers import lc  # noqa: E402


def checkpointed(saver: SqliteSaver, thread: str, messages: list[dict[str, Any]]) -> None:
    graph = StateGraph(MessagesState)
    graph.add_node("noop", lambda state: {})
    graph.add_edge(START, "noop")
    compiled = graph.compile(checkpointer=saver)
    state = [lc.to_langchain(message, n) for n, message in enumerate(messages)]
    compiled.update_state({"configurable": {"thread_id": thread}}, {"messages": state})


def main() -> None:
    request = json.load(sys.stdin)
    connection = sqlite3.connect(request["path"], check_same_thread=False)
    saver = SqliteSaver(connection)
    out: dict[str, Any] = {"versions": {name: version(name) for name in (
        "langgraph", "langgraph-checkpoint-sqlite", "langchain")}, "budgets": {}}
    for budget, messages in request["budgets"].items():
        thread = f"budget-{budget}"
        checkpointed(saver, thread, messages)
        middleware = SummarizationMiddleware(
            model=lc.stub_model("http://127.0.0.1:9/v1"),  # never called under the trigger
            trigger=("tokens", int(budget)), keep=("messages", 5))
        config = {"configurable": {"thread_id": thread}}

        def read(config: dict[str, Any] = config, middleware: Any = middleware,
                 budget: str = budget) -> int:
            saved = saver.get_tuple(config)
            assert saved is not None
            state = saved.checkpoint["channel_values"]["messages"]
            if middleware.before_model({"messages": state}, None):
                raise SystemExit(f"the state at {budget} is over the middleware's trigger")
            return len(state)

        held = read()
        samples = []
        for _ in range(request["rounds"]):
            began = time.perf_counter()
            read()
            samples.append((time.perf_counter() - began) * 1000)
        samples.sort()
        out["budgets"][budget] = {
            "messages": held, "p50_ms": statistics.median(samples),
            "p95_ms": samples[min(len(samples) - 1, int(0.95 * len(samples)))]}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
