"""What the default fact gate costs: the seeded conversations folded with it and without.

    .venv/bin/python bench/fact_gate.py               # 300 turns of each workload, SQLite
    .venv/bin/python bench/fact_gate.py --turns 100

Each workload of bench/conversation.py is recalled at a budget of 4,000 before every
turn, inline, with ``FACT_GATE`` off (``THRESHOLD`` None), with the default
(``THRESHOLD`` 0.5, ``ACTION`` "flag") and with ``ACTION`` "append", by two
summarizers: the offline one (the default, which lists the specifics it finds) and one
that answers a fixed text with no specifics at all (bench/conversation.py's
``STUB_SUMMARY``, the lossy summary the gate is there to catch). It prints, per run:
summarizer calls, the tokens the calls were sent and returned (unknown for the callable
backend), the tokens of every summary written, the mean context handed to the model per
turn, how many summaries were flagged, the gate's own time per fold (the fact
extraction and the search of the summary, timed around ``check_facts`` where the fold
calls it) and a fold's whole time as the ledger records it (``duration_ms``: the call,
the checks and the write). Then the gate alone on the largest span one call may read
(``FOLD_INPUT_LIMIT``). The figures of docs/settings.md and docs/concepts.md ("The fact
gate") come from here.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import conversation as conv  # noqa: E402
from bench.common import Database, percentile, setup_django, table  # noqa: E402

BUDGET = 4_000
GATES: dict[str, dict[str, Any]] = {
    "off": {"THRESHOLD": None},
    "default": {"THRESHOLD": 0.5, "ACTION": "flag"},
    "append": {"THRESHOLD": 0.5, "ACTION": "append"},
}
SUMMARIZERS: dict[str, dict[str, Any]] = {
    "offline": {
        "BACKEND": "agentmemory.summarizers.offline.OfflineSummarizer",
        "MODEL": "offline-extractive-1",
    },
    "no specifics": {
        "BACKEND": "agentmemory.summarizers.callable.CallableSummarizer",
        "MODEL": "bench-no-specifics",
        "OPTIONS": {"FUNCTION": "bench.fact_gate.no_specifics"},
    },
}


def no_specifics(messages: Any) -> str:
    """A summary that keeps the gist and drops every id, amount and date."""
    del messages
    return conv.STUB_SUMMARY


def run(workload: str, turns: int, summarizer: str, gate: str) -> dict[str, Any]:
    """One conversation on a new thread under ``SUMMARIZER`` and ``FACT_GATE``."""
    from django.test import override_settings

    from agentmemory import services
    from agentmemory.folding import attempt
    from agentmemory.models import MemoryEntry, SummarizerCall, Thread
    from agentmemory.trust.facts import LOST_FACTS_FLAG

    spent: list[float] = []
    check = attempt.check_facts

    def timed(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return check(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - began)

    settings = {"SUMMARIZER": SUMMARIZERS[summarizer], "FACT_GATE": GATES[gate]}
    attempt.check_facts = timed  # type: ignore[assignment]
    try:
        with override_settings(AGENTMEMORY=settings):
            thread = Thread.objects.create(title=f"{workload} {summarizer} {gate}")
            contexts = []
            for turn in conv.conversation(turns=turns, workload=workload):
                services.append(thread, turn.user)
                contexts.append(services.recall(thread, BUDGET).tokens)
                services.append(thread, turn.replies)
    finally:
        attempt.check_facts = check  # type: ignore[assignment]
    calls = list(SummarizerCall.objects.filter(thread=thread))
    summaries = MemoryEntry.objects.filter(thread=thread).summaries().select_related("coverage")
    return {
        "calls": len(calls),
        "sent": tokens([row.prompt_tokens for row in calls]),
        "returned": tokens([row.completion_tokens for row in calls]),
        "fold_ms": [row.duration_ms for row in calls],
        "summary_tokens": sum(summary.token_count for summary in summaries),
        "context": statistics.mean(contexts),
        "summaries": len(summaries),
        "flagged": sum(LOST_FACTS_FLAG in s.coverage.injection_flags for s in summaries),
        "gate_ms": [seconds * 1000 for seconds in spent],
    }


def tokens(counts: list[int | None]) -> str:
    """The calls' total, or "unknown" when the backend reports none (the callable one)."""
    known = [count for count in counts if count is not None]
    return f"{sum(known):,}" if known else "unknown"


def largest_span() -> tuple[int, int, list[float]]:
    """The gate on the largest span one call reads (``FOLD_INPUT_LIMIT`` tokens of the
    chatty-tools workload) against a summary with no specifics: the facts found, the
    span's tokens, and the time of five checks in milliseconds."""
    from agentmemory.conf import DEFAULTS
    from agentmemory.trust.facts import check_facts

    limit, texts, size = DEFAULTS["FOLD_INPUT_LIMIT"], [], 0
    for message in conv.messages(workload="chatty-tools"):
        if size + conv.message_tokens(message) > limit:
            break
        size += conv.message_tokens(message)
        texts.append(conv.render(message))
    times, facts = [], 0
    for _ in range(5):
        began = time.perf_counter()
        facts = len(check_facts(texts, conv.STUB_SUMMARY).facts)
        times.append((time.perf_counter() - began) * 1000)
    return facts, size, times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    turns = parser.parse_args().turns
    database = Database.create("sqlite")
    setup_django("sqlite", database.name, migrate=True)
    rows = []
    try:
        for workload in ("parcel-support", "chatty-tools"):
            for summarizer in SUMMARIZERS:
                for gate in GATES:
                    r = run(workload, turns, summarizer, gate)
                    ms = r["gate_ms"]
                    rows.append([
                        workload, summarizer, gate, r["calls"], r["sent"], r["returned"],
                        f"{r['summary_tokens']:,}",
                        f"{r['context']:,.0f}", f"{r['flagged']} of {r['summaries']}",
                        f"{percentile(ms, 0.5):.1f} / {percentile(ms, 0.95):.1f}" if ms else "-",
                        percentile(r["fold_ms"], 0.5),
                    ])
    finally:
        database.drop()
    print(f"{turns} turns of each workload, budget {BUDGET:,}, inline, SQLite\n")
    print(table(
        ["workload", "summarizer", "gate", "calls", "tokens sent", "tokens returned",
         "summaries written, tokens", "context per turn", "flagged", "gate ms per fold p50 / p95",
         "fold ms p50"],
        rows, "lllrrrrrrrr",
    ))
    facts, size, times = largest_span()
    print(f"\nThe largest span one call reads ({size:,} tokens, FOLD_INPUT_LIMIT): {facts:,} "
          f"facts, checked in {statistics.median(times):.0f} ms (median of 5).")


if __name__ == "__main__":
    main()
