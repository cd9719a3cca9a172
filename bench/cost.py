"""Cost: what a conversation costs the agent, one model call a turn, at the cached price.

    .venv/bin/python bench/run.py --parts cost --output -     # through the suite
    .venv/bin/python bench/cost.py --workload chatty-tools --budget 1000 --mode inline
    .venv/bin/python bench/cost.py --workload parcel-support --budget 4000 --mode langchain
    .venv/bin/python bench/cost.py --all --out /tmp/cost.json   # every run, no page
    .venv/bin/python bench/cost_report.py /tmp/cost.json        # the page from those runs

Both seeded workloads (bench/conversation.py: ``parcel-support``, and ``chatty-tools``:
short turns and long tool results) run at budgets of 1,000, 4,000, 16,000 and 128,000
tokens through agentmemory, inline and in background mode with the worker caught up,
and through the peers at the same room (bench/peers/: LangChain's
``SummarizationMiddleware`` keeping half the room, langmem's ``summarize_messages``).
Every turn's context, as the library hands it to the model, is priced by
bench/cost_model.py; the summarizer's tokens are what the loopback stub counted, its
every answer the ~150-token :data:`SUMMARY`. Each run is a subprocess with its own
database and its own stub, two at a time. The page is bench/cost_report.py.

**Background, caught up**: ``RECALL_MODE`` "background", the thread's ``fold_budget``
the run's budget, and a Celery app in eager mode (``tests/celery_app.py``) made current:
each append's fold request (``fold_if_due`` on commit) runs the ``fold_thread`` task at
once, so every fold due after an append is done before the next recall, through the
same path a worker takes. Each turn also asks ``services.fold_due`` before recalling;
those still due are counted (a caught-up worker leaves 0).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import conversation as conv  # noqa: E402
from bench import cost_model, economy  # noqa: E402
from bench.common import describe_engine, loopback_server, run_peer, setup_django  # noqa: E402
from bench.peers import counting  # noqa: E402

BUDGETS = (1_000, 4_000, 16_000, 128_000)
AGENTMEMORY_MODES = ("inline", "background")
PEERS = ("langchain", "langmem")
MODES = (*AGENTMEMORY_MODES, *PEERS)
RESERVE_TOKENS = 256  # agentmemory's default reserve: the peers get the budget less it
PARALLEL = 2

#: What the loopback stub answers every summarizer request with, for every library.
SUMMARY = (
    "Summary of the conversation so far. The customer, account c-1042, has written about "
    "a run of parcel orders: several were late or held at customs, one arrived damaged "
    "and was refunded to the card, and two deliveries were moved to the Lisbon office. "
    "The agent looked the orders up with its tools (order history, tracking, refund "
    "status, service logs) and reported carriers, delivery dates and amounts; a payment "
    "that failed at checkout was retried once and went through, so nothing was charged "
    "twice. Between those, the customer asked about opening hours, discount codes, "
    "stock and shipping to the islands, and the agent answered each. Still open: the "
    "newest orders the customer named, any refund not yet approved, and a reserved item "
    "waiting for confirmation."
)


def conversation_tokens(workload: str) -> int:
    """The workload's tokens as every library's contexts are counted (conversation.render)."""
    return sum(counting.message_tokens(m) for m in conv.messages(workload=workload))


# ================================================================== one run


def run_agentmemory(
    workload: str, budget: int, mode: str, per_turn: bool = False
) -> dict[str, Any]:
    """The workload on a new thread, recalled at ``budget`` every turn (Django set up)."""
    from agentmemory import services
    from agentmemory.models import Thread

    background = mode == "background"
    thread = Thread.objects.create(title=f"cost {workload} {budget} {mode}",
                                   fold_budget=budget if background else None)
    coverage, checks = economy.Coverage(), economy.Checks()
    meter = cost_model.Meter(counting.encode)
    originals: list[int] = []
    still_due = 0
    summary_messages: list[int] = []  # the tokens of every summary message handed over
    declines: dict[str, int] = {}
    began = time.perf_counter()
    for turn in conv.conversation(workload=workload):
        (user,) = services.append(thread, turn.user)
        if background and services.fold_due(thread):
            still_due += 1
        result = services.recall(thread, budget)
        checks.check(result, turn.number, user.pk, turn.user["content"], originals, coverage)
        context = cost_model.from_chat(result.as_chat_messages())
        meter.turn(context)
        summary_messages += [counting.message_tokens(m) for m in context if m["role"] == "system"]
        for reason in (result.decline, result.budget_decline):
            if reason:
                declines[reason] = declines.get(reason, 0) + 1
        replies = services.append(thread, turn.replies)
        originals += [user.pk, *(entry.pk for entry in replies)]
    elapsed = time.perf_counter() - began
    return {
        "checks": checks.as_dict(),
        "declines": declines,
        "still_due": still_due,
        "summary_message_mean": sum(summary_messages) / max(1, len(summary_messages)),
        "cost": meter.as_dict(per_turn),
        "elapsed_s": elapsed,
        "engine": describe_engine(),
    }


def worker(
    workload: str, budget: int, mode: str, per_turn: bool = False,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One run with its own loopback stub (and, for agentmemory, its own database);
    ``per_turn``: agentmemory's context, shared and cached tokens of every turn as well;
    ``overrides``: AGENTMEMORY settings over the defaults (agentmemory's runs)."""
    began = time.perf_counter()
    with loopback_server(SUMMARY) as server:
        if mode in PEERS:
            room = budget - RESERVE_TOKENS
            extra = ["--workload", workload]
            if mode == "langchain":
                extra += ["--keep-tokens", str(room // 2)]
            out = run_peer(mode, server.base_url, room, *extra)
            if "error" not in out:
                out = {key: out[key] for key in ("settings", "versions", "cost", "not_verbatim",
                                                 "orphan_turns", "originals_kept", "elapsed_s")}
        else:
            out = _agentmemory_worker(server.base_url, workload, budget, mode, per_turn,
                                      overrides or {})
            out.update(call_kinds(server.chat_requests))
        out["stub"] = server.totals()
    out.update(workload=workload, budget=budget, mode=mode, wall_s=time.perf_counter() - began)
    if "cost" in out:
        stub = out["stub"]
        summarizer = cost_model.summarizer_cost(stub["prompt_tokens"], stub["completion_tokens"])
        out["total_cost"] = out["cost"]["contexts_cost"] + summarizer
    return out


def call_kinds(requests: list[Any]) -> dict[str, int]:
    """agentmemory's calls by what their transcript held, as the stub received them:
    ``chunks`` read messages only, ``absorbing`` read messages and earlier summaries in
    one call, ``merges`` read earlier summaries only (a second call for one fold)."""
    from agentmemory.transcript import CONTINUATION, TRANSCRIPT_CLOSE, TRANSCRIPT_OPEN

    kinds = {"chunks": 0, "absorbing": 0, "merges": 0}
    for request in requests:
        text = str(request.messages[-1].get("content", "")) if request.messages else ""
        heads = [line for line in text.splitlines()
                 if line not in (TRANSCRIPT_OPEN, TRANSCRIPT_CLOSE)
                 and not line.startswith(CONTINUATION)]
        summaries = sum(head.startswith("earlier summary:") for head in heads)
        if summaries == 0:
            kinds["chunks"] += 1
        elif summaries == len(heads):
            kinds["merges"] += 1
        else:
            kinds["absorbing"] += 1
    return kinds


def _agentmemory_worker(
    base_url: str, workload: str, budget: int, mode: str, per_turn: bool,
    overrides: dict[str, Any],
) -> dict[str, Any]:
    database = economy.scratch_database("sqlite", "")
    os.environ["OPENAI_API_KEY"] = economy.API_KEY
    settings = economy.summarizer_settings(base_url)
    settings["RECALL_MODE"] = mode
    settings.update(overrides)
    setup_django(database.engine, database.name, settings, migrate=True)
    try:
        if mode == "background":
            from tests.celery_app import make_app

            make_app(task_always_eager=True, task_eager_propagates=True).set_current()
        from agentmemory.pipeline.budget import context_room
        from agentmemory.pipeline.config import RecallConfig

        out = run_agentmemory(workload, budget, mode, per_turn)
        out["room"] = context_room(budget, RecallConfig.build())
        return out
    finally:
        database.drop()


# ================================================================== every run


def plan(skip_peers: bool) -> tuple[list[tuple[str, int, str]], dict[str, Any]]:
    """The runs, longest first, and why any was left out: a peer is not run at a room the
    whole workload fits (nothing can fold there, so it would be the history verbatim)."""
    totals = {workload: conversation_tokens(workload) for workload in conv.WORKLOADS}
    jobs, skipped = [], {}
    for budget in sorted(BUDGETS, reverse=True):
        for workload in conv.WORKLOADS:
            jobs += [(workload, budget, mode) for mode in AGENTMEMORY_MODES]
    for budget in sorted(BUDGETS, reverse=True):
        for workload in conv.WORKLOADS:
            for library in PEERS:
                if skip_peers:
                    skipped[f"{workload} {budget} {library}"] = "--skip-peers"
                elif totals[workload] <= budget - RESERVE_TOKENS:
                    skipped[f"{workload} {budget} {library}"] = (
                        f"the whole workload ({totals[workload]:,} tokens) fits the room "
                        f"({budget - RESERVE_TOKENS:,}): nothing folds")
                else:
                    jobs.append((workload, budget, library))
    return jobs, {"conversation_tokens": totals, "skipped": skipped}


def measure(skip_peers: bool = False) -> dict[str, Any]:
    """Every run, PARALLEL subprocesses at a time: ``{"runs": [...], ...}``."""
    jobs, results = plan(skip_peers)
    began = time.perf_counter()
    runs: list[dict[str, Any]] = []
    running: list[tuple[subprocess.Popen[bytes], tuple[str, int, str], str]] = []
    try:
        while jobs or running:
            while jobs and len(running) < PARALLEL:
                job = jobs.pop(0)
                print(f"[bench] cost {job[0]} {job[1]:,} {job[2]}", file=sys.stderr, flush=True)
                handle, out = tempfile.mkstemp(suffix=".json")
                os.close(handle)
                command = [sys.executable, str(Path(__file__)), "--workload", job[0],
                           "--budget", str(job[1]), "--mode", job[2], "--out", out]
                running.append((subprocess.Popen(command, cwd=ROOT), job, out))
            time.sleep(0.2)
            for entry in [entry for entry in running if entry[0].poll() is not None]:
                process, job, out = entry
                running.remove(entry)
                if process.returncode:
                    raise SystemExit(f"cost {job} failed (exit {process.returncode})")
                runs.append(json.loads(Path(out).read_text()))
                os.unlink(out)
    finally:
        for process, _, out in running:  # a run failed, or the part was interrupted
            process.terminate()
            process.wait()
            os.unlink(out)
    results.update(runs=runs, elapsed_s=time.perf_counter() - began,
                   agents_sdk=agents_sdk_probe())
    return results


def agents_sdk_probe() -> dict[str, Any]:
    """Whether the installed OpenAI Agents SDK has a compaction session, what it calls, and
    whether the loopback stub answers that call."""
    import importlib.metadata
    import urllib.error
    import urllib.request

    try:
        version = importlib.metadata.version("openai-agents")
        from agents.memory import (
            OpenAIResponsesCompactionSession,
            openai_responses_compaction_session,
        )
    except ImportError as exc:
        return {"installed": False, "reason": str(exc)}
    import inspect

    source = inspect.getsource(OpenAIResponsesCompactionSession)
    threshold = getattr(openai_responses_compaction_session, "DEFAULT_COMPACTION_THRESHOLD", None)
    with loopback_server(SUMMARY) as server:
        request = urllib.request.Request(f"{server.base_url}/responses/compact", data=b"{}",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                status = answer.status
        except urllib.error.HTTPError as exc:
            status = exc.code
    return {"installed": True, "version": version,
            "session": "agents.memory.OpenAIResponsesCompactionSession",
            "calls_compact": "responses.compact(" in source, "stub_status": status,
            "threshold": threshold}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--all", action="store_true",
                        help="every run of the part (what bench/run.py --parts cost measures)")
    parser.add_argument("--skip-peers", action="store_true", help="with --all")
    parser.add_argument("--workload", choices=conv.WORKLOADS)
    parser.add_argument("--budget", type=int)
    parser.add_argument("--mode", choices=MODES)
    parser.add_argument("--per-turn", action="store_true",
                        help="agentmemory: every turn's context, shared and cached tokens too")
    parser.add_argument("--settings", default="{}",
                        help='one run: AGENTMEMORY settings over the defaults, as JSON, e.g. '
                        '\'{"FOLD_HIGH_WATER": 0.5}\'')
    parser.add_argument("--out", default="", help="JSON file (default: print)")
    args = parser.parse_args()
    if args.all:
        result = json.dumps({"cost": measure(args.skip_peers)}, indent=1)
    elif args.workload and args.budget and args.mode:
        result = json.dumps(worker(args.workload, args.budget, args.mode, args.per_turn,
                                   json.loads(args.settings)), indent=1)
    else:
        parser.error("give --workload, --budget and --mode (one run), or --all")
    if args.out:
        Path(args.out).write_text(result)
    else:
        print(result)


if __name__ == "__main__":
    main()
