"""Economy: what budget-driven recall pays the summarizer, and what its contexts hold.

    .venv/bin/python bench/run.py --parts economy --output -      # through the suite
    .venv/bin/python bench/economy.py --run 4000                   # one run, JSON out
    BENCH_ECONOMY_ENGINES=sqlite,postgres .venv/bin/python bench/run.py --parts economy

The seeded 1,000-turn conversation (bench/conversation.py) runs through
``services.recall`` at budgets of 1,000, 4,000, 16,000 and 128,000 tokens (the default
settings: budget-driven, inline folds, receipts off), each budget on its own thread,
and once more at 1,000 in the seeds' count-driven mode for comparison. At every turn the
user's message is appended, the context is recalled and checked, the replies are
appended. The summarizer is agentmemory's OpenAI backend with the official client,
aimed at the loopback stub (bench/common.py ``loopback_server``). Each run is a
subprocess with its own database and its own stub (so the stub counts that run alone),
two at a time.

Each context is checked against the thread's rows:

* **gap**: an earlier original neither verbatim in the context nor stood for (through
  nested summaries, by ``SummarySource`` rows) by a summary in it;
* **split pair**: a tool call without its result, or a result without its call;
* **user message missing**: the turn's user message is not the context's last user
  message, verbatim;
* **summary missing**: some earlier message is not verbatim and no summary is in the
  context at all.

The targets: calls ≤ 2 × conversation tokens ÷ B (folds are far apart), and summarizer
input ≤ conversation tokens + 250 tokens a call (each original is sent about once, plus
the instruction and the summaries a merge re-reads).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentmemory.conf import DEFAULTS  # noqa: E402
from bench import conversation as conv  # noqa: E402
from bench.common import (  # noqa: E402
    Database,
    describe_engine,
    loopback_server,
    median,
    number,
    percentile,
    setup_django,
    table,
)

BUDGETS = (1_000, 4_000, 16_000, 128_000)
#: The seeds' count-driven mode, run once at COUNT_BUDGET for comparison.
COUNT_MODE = {"LOAD_COUNT": 20, "TRIGGER_MIN_ENTRIES": 20, "FOLD_HIGH_WATER": None}
COUNT_BUDGET = 1_000
EDGE = 100  # turns timed at each end of the conversation
CALLS_PER_BUDGET = 2  # target: calls <= 2 x conversation tokens / B
OVERHEAD_PER_CALL = 250  # target: input <= conversation tokens + 250 x calls
API_KEY = "sk-agentmemory-bench-loopback"
#: SQLite's file goes here when it exists: a memory-backed file system, so a commit does
#: not wait for the disk (the machine's flush latency would dominate every figure).
MEMORY_DIR = "/dev/shm"


def scratch_database(engine: str, pg_name: str) -> Database:
    """A scratch database; SQLite's file on MEMORY_DIR when there is one."""
    if engine == "sqlite" and os.path.isdir(MEMORY_DIR):
        tempfile.tempdir = MEMORY_DIR
    return Database.create(engine, pg_name)


def summarizer_settings(base_url: str) -> dict[str, Any]:
    """The OpenAI backend at the loopback stub; inline recall, receipts off."""
    return {
        "SUMMARIZER": {
            "BACKEND": "agentmemory.summarizers.openai.OpenAISummarizer",
            "MODEL": "bench-stub",
            "OPTIONS": {"BASE_URL": base_url, "TIMEOUT": 10.0},
        },
        "RECALL_MODE": "inline",
        "RECEIPTS": False,
    }


# ================================================================== context checks


class Coverage:
    """Which originals a summary stands for, through nested summaries, read once per
    summary from its ``SummarySource`` rows (a summary's sources never change)."""

    def __init__(self) -> None:
        self._originals: dict[int, frozenset[int]] = {}

    def originals(self, summary_id: int) -> frozenset[int]:
        if summary_id not in self._originals:
            from agentmemory.models import EntryKind, SummarySource

            found: set[int] = set()
            rows = SummarySource.objects.filter(summary_id=summary_id).values_list(
                "entry_id", "entry__kind"
            )
            for entry_id, kind in rows:
                if kind == EntryKind.SUMMARY:
                    found |= self.originals(entry_id)
                else:
                    found.add(entry_id)
            self._originals[summary_id] = frozenset(found)
        return self._originals[summary_id]


@dataclass
class Checks:
    """Counts of turns whose context broke a rule, and the first turn of each."""

    gap: int = 0
    split: int = 0
    user_missing: int = 0
    summary_missing: int = 0
    omitted: int = 0
    first: dict[str, int] = field(default_factory=dict)

    def count(self, name: str, turn: int) -> None:
        setattr(self, name, getattr(self, name) + 1)
        self.first.setdefault(name, turn)

    def check(
        self,
        result: Any,
        turn: int,
        user_id: int,
        user_content: str,
        earlier: Iterable[int],
        coverage: Coverage,
    ) -> None:
        """``earlier``: ids of the originals before the turn's user message that the
        context must account for (all of them, or those not expired yet)."""
        messages = result.messages
        verbatim = {m.id for m in messages if m.kind != "summary"}
        summaries = [m.id for m in messages if m.kind == "summary"]
        missing = set(earlier) - verbatim
        if missing and not summaries:
            self.count("summary_missing", turn)
        for summary_id in summaries:
            missing -= coverage.originals(summary_id)
        if missing:
            self.count("gap", turn)
        users = [m for m in messages if m.role == "user"]
        if not users or users[-1].id != user_id or users[-1].content != user_content:
            self.count("user_missing", turn)
        if conv.orphan_tool_messages([as_message(m) for m in messages]):
            self.count("split", turn)
        if result.omitted:
            self.count("omitted", turn)

    def as_dict(self) -> dict[str, Any]:
        return {"gap": self.gap, "split": self.split, "user_missing": self.user_missing,
                "summary_missing": self.summary_missing, "omitted": self.omitted,
                "first": self.first}


def as_message(message: Any) -> dict[str, Any]:
    return {"role": message.role, "content": message.content, "tool_calls": message.tool_calls,
            "tool_call_id": message.tool_call_id, "tool_name": message.tool_name}


# ================================================================== the worker


def run_conversation(budget: int, label: str) -> dict[str, Any]:
    """The seeded conversation on a new thread, recalled at ``budget`` every turn."""
    from django.db.models import Count, Max, Sum

    from agentmemory import services
    from agentmemory.models import EntryKind, MemoryEntry, SummarizerCall, SummaryCoverage, Thread
    from agentmemory.pipeline.budget import context_room
    from agentmemory.pipeline.config import RecallConfig
    from agentmemory.tokens import count_tokens

    thread = Thread.objects.create(title=f"economy {label}")
    coverage = Coverage()
    checks = Checks()
    originals: list[int] = []
    conversation_tokens = 0
    recall_ms: list[float] = []
    context_tokens: list[int] = []
    summaries_in_context: list[int] = []
    declines: dict[str, int] = {}
    largest = (0, "")  # the largest context of the last EDGE turns: tokens, text
    began = time.perf_counter()
    for turn in conv.conversation():
        (user,) = services.append(thread, turn.user)
        started = time.perf_counter()
        result = services.recall(thread, budget)
        recall_ms.append((time.perf_counter() - started) * 1000)
        checks.check(result, turn.number, user.pk, turn.user["content"], originals, coverage)
        context_tokens.append(result.tokens)
        summaries_in_context.append(len(result.summaries_used))
        if turn.number > conv.TURNS - EDGE and result.tokens >= largest[0]:
            largest = (result.tokens, result.text)
        for reason in (result.decline, result.budget_decline):
            if reason:
                declines[reason] = declines.get(reason, 0) + 1
        replies = services.append(thread, turn.replies)
        originals += [user.pk, *(entry.pk for entry in replies)]
        conversation_tokens += user.token_count + sum(entry.token_count for entry in replies)
    elapsed = time.perf_counter() - began
    expected = conv.messages()
    stored = dict(MemoryEntry.objects.filter(pk__in=originals).values_list("pk", "content"))
    originals_kept = sum(1 for pk, message in zip(originals, expected, strict=True)
                         if stored.get(pk) == message["content"])
    started = time.perf_counter()
    count_tokens(largest[1])  # what counting that context's text alone takes
    count_ms = (time.perf_counter() - started) * 1000
    calls = SummarizerCall.objects.filter(thread=thread)
    levels = SummaryCoverage.objects.filter(summary__thread=thread)
    summary_tokens = list(
        MemoryEntry.objects.filter(thread=thread, kind=EntryKind.SUMMARY).values_list(
            "token_count", flat=True
        )
    )
    return {
        "label": label,
        "budget": budget,
        "turns": len(recall_ms),
        "conversation_tokens": conversation_tokens,
        "messages": len(originals),
        "originals_kept": originals_kept,  # rows still holding the original text verbatim
        "ledger_calls": calls.count(),
        "ledger_outcomes": dict(calls.values_list("outcome").annotate(n=Count("id")).order_by()),
        "ledger_prompt_tokens": calls.aggregate(n=Sum("prompt_tokens"))["n"] or 0,
        "summaries": levels.count(),
        "chunks": levels.filter(level=1).count(),
        "merges": levels.filter(level__gt=1).count(),
        "max_summaries_in_context": max(summaries_in_context),
        "max_level": levels.aggregate(n=Max("level"))["n"] or 0,
        "checks": checks.as_dict(),
        "declines": declines,
        "max_context_tokens": max(context_tokens),
        "context_first_median": median(context_tokens[:EDGE]),
        "context_last_median": median(context_tokens[-EDGE:]),
        "largest_last_context": largest[0],
        "count_largest_context_ms": count_ms,
        "room": context_room(budget, RecallConfig.build()),
        "summary_tokens_median": median(summary_tokens) if summary_tokens else None,
        "recall_first": {"p50_ms": median(recall_ms[:EDGE]),
                         "p95_ms": percentile(recall_ms[:EDGE], 0.95)},
        "recall_last": {"p50_ms": median(recall_ms[-EDGE:]),
                        "p95_ms": percentile(recall_ms[-EDGE:], 0.95)},
        "elapsed_s": elapsed,
    }


#: The runs, longest first (so two at a time finish together): a budget, or "count".
RUNS = ("128000", "16000", "1000", "4000", "count")
#: Engines the suite runs this part on; PostgreSQL gives the same figures (the run is
#: deterministic) at twice the time, so it is asked for: BENCH_ECONOMY_ENGINES.
ENGINES = tuple(os.environ.get("BENCH_ECONOMY_ENGINES", "sqlite").split(","))
PARALLEL = 2


def worker(engine: str, pg_name: str, run: str) -> dict[str, Any]:
    """One run on a scratch database of its own, with its own loopback stub."""
    database = scratch_database(engine, pg_name)
    os.environ["OPENAI_API_KEY"] = API_KEY
    settings = summarizer_settings("")
    with loopback_server() as server:
        settings["SUMMARIZER"]["OPTIONS"]["BASE_URL"] = server.base_url
        if run == "count":
            settings.update(COUNT_MODE)
        setup_django(database.engine, database.name, settings, migrate=True)
        try:
            if run == "count":
                out = run_conversation(COUNT_BUDGET, "count-driven")
            else:
                out = run_conversation(int(run), f"budget {int(run):,}")
            out["stub"] = server.totals()
            out["engine"] = describe_engine()
            out["memory_backed"] = database.name.startswith(MEMORY_DIR)
            return out
        finally:
            database.drop()


def measure(engines: Iterable[str], pg_name: str) -> dict[str, Any]:
    """Every run on every engine of ENGINES asked for, PARALLEL subprocesses at a time;
    ``{engine: {"engine": description, "runs": [...]}}``, runs in table order."""
    jobs = [(engine, run) for engine in engines if engine in ENGINES for run in RUNS]
    began = time.perf_counter()
    done: dict[tuple[str, str], dict[str, Any]] = {}
    running: list[tuple[subprocess.Popen[bytes], str, str, str]] = []
    while jobs or running:
        while jobs and len(running) < PARALLEL:
            engine, run = jobs.pop(0)
            print(f"[bench] economy {run} on {engine}", file=sys.stderr, flush=True)
            handle, out = tempfile.mkstemp(suffix=".json")
            os.close(handle)
            command = [sys.executable, str(Path(__file__)), "--db", engine, "--run", run,
                       "--pg-name", f"{pg_name}_economy_{run}", "--out", out]
            running.append((subprocess.Popen(command, cwd=ROOT), engine, run, out))
        time.sleep(0.2)
        for job in [job for job in running if job[0].poll() is not None]:
            process, engine, run, out = job
            running.remove(job)
            if process.returncode:
                raise SystemExit(f"economy {run} on {engine} failed (exit {process.returncode})")
            done[engine, run] = json.loads(Path(out).read_text())
            os.unlink(out)
    order = [str(budget) for budget in BUDGETS] + ["count"]
    results: dict[str, Any] = {}
    for engine in engines:
        runs = [done[engine, run] for run in order if (engine, run) in done]
        if runs:
            results[engine] = {"engine": runs[0]["engine"], "runs": runs,
                               "elapsed_s": time.perf_counter() - began}
    return results


# ================================================================== the page


def file_note(run: dict[str, Any]) -> str:
    """Where the run's SQLite file was, for the page."""
    if run.get("memory_backed"):
        return "SQLite on a memory-backed file, so commits do not wait for the disk"
    return "SQLite on a temporary file"


def targets(run: dict[str, Any]) -> dict[str, Any]:
    """Both targets of one run: the bound, the figure, and whether it holds."""
    total, calls = run["conversation_tokens"], run["stub"]["calls"]
    ratio = run["stub"]["prompt_tokens"] / total
    calls_bound = CALLS_PER_BUDGET * total / run["budget"]
    input_bound = 1 + OVERHEAD_PER_CALL * calls / total
    return {"calls": calls, "calls_bound": calls_bound, "calls_ok": calls <= calls_bound,
            "input": ratio, "input_bound": input_bound, "input_ok": ratio <= input_bound}


def section(results: dict[str, Any]) -> str:
    engines = results.get("economy", {})
    if not engines:
        return ""
    first = next(iter(engines.values()))
    total = first["runs"][0]["conversation_tokens"]
    parts = [f"""## Economy: budget-driven recall at four budgets

The seeded conversation ({conv.TURNS:,} turns, {total:,} tokens) runs through
`services.recall(thread, B)` with the default settings (budget-driven load, inline
folds: fold once the context would outgrow {DEFAULTS["FOLD_HIGH_WATER"]} × the room, down to
a verbatim tail of {DEFAULTS["FOLD_LOW_WATER"]} × the room; summaries within
{DEFAULTS["SUMMARY_SHARE"]} × the room, a fold absorbing the newest past it in the same
call; receipts off), one
thread per budget, and once in the seeds' count-driven mode (`LOAD_COUNT` 20,
`TRIGGER_MIN_ENTRIES` 20, `FOLD_HIGH_WATER` None) at B = {COUNT_BUDGET:,}. The summarizer
is the OpenAI backend at the loopback stub, which counts every prompt exactly. At each
turn the user's message is appended, the context recalled and checked, the replies
appended (`bench/economy.py`). Each run is a subprocess with its own database
({file_note(first["runs"][0])}) and its own stub, two runs at a time.

* **calls** (chunks + merges: summaries of messages, and of summaries) against the
  target {CALLS_PER_BUDGET} × conversation tokens ÷ B.
* **input ÷ conversation**: what the stub counted, against the target 1 +
  {OVERHEAD_PER_CALL} × calls ÷ conversation tokens (each original sent about once, plus
  {OVERHEAD_PER_CALL} tokens a call for the instruction and the summaries a merge re-reads).
* **gap**: turns whose context left out an earlier original that no summary in it
  stands for (through nested summaries, by the `SummarySource` rows); **split**: a tool
  call without its result or the reverse; **user missing**: the turn's user message not
  the context's last user message verbatim; **no summary**: an earlier message not
  verbatim and no summary in the context. Each should be 0.
* **recall ms**: p50 / p95 of `services.recall` over the first and the last {EDGE} turns
  (an inline fold's calls to the stub included)."""]
    for run_set in engines.values():
        rows = []
        for run in run_set["runs"]:
            t, c = targets(run), run["checks"]
            rows.append([
                run["label"], number(run["room"]),
                f"{t['calls']:,} ({run['chunks']:,} + {run['merges']:,})",
                f"≤ {t['calls_bound']:,.1f}: {'pass' if t['calls_ok'] else '**fail**'}",
                number(run["stub"]["prompt_tokens"]),
                f"{t['input']:.3f} (≤ {t['input_bound']:.3f}: "
                f"{'pass' if t['input_ok'] else '**fail**'})",
                str(c["gap"]), str(c["split"]), str(c["user_missing"]),
                str(c["summary_missing"]), str(run["max_level"]),
                number(run["max_context_tokens"]),
                f"{run['recall_first']['p50_ms']:.1f} / {run['recall_first']['p95_ms']:.1f}",
                f"{run['recall_last']['p50_ms']:.1f} / {run['recall_last']['p95_ms']:.1f}",
            ])
        seconds = ", ".join(f"{run['label']} {run['elapsed_s']:.0f} s" for run in run_set["runs"])
        parts.append(f"### {run_set['engine']}\n\n" + table(
            ["run", "room", "calls (chunks + merges)", "calls target", "input tokens",
             "input ÷ conversation (target)", "gap", "split", "user missing", "no summary",
             "max level", "max context tokens", "recall ms, first 100",
             "recall ms, last 100"], rows, "lrrlrlrrrrrrrr",
        ) + f"\n\nEach run took (wall clock, two at a time): {seconds}; the part "
            f"{run_set.get('elapsed_s', 0):.0f} s.")
    if len(engines) > 1:
        keys = ("stub", "checks", "max_level", "max_context_tokens", "summaries")
        same = all(
            [{k: run[k] for k in keys} for run in run_set["runs"]]
            == [{k: run[k] for k in keys} for run in first["runs"]]
            for run_set in engines.values()
        )
        parts.append("The databases gave identical calls, prompts and checks." if same else
                     "The databases gave DIFFERENT calls, prompts or checks: the run is "
                     "meant to be deterministic, so this is a bug.")
    parts.append("\n".join(f"* {finding}" for finding in findings(first["runs"])))
    return "\n\n".join(parts)


def findings(runs: list[dict[str, Any]]) -> list[str]:
    """Sentences written from the figures; one whose premise fails is left out."""
    found = []
    budget_runs = [run for run in runs if run["label"] != "count-driven"]
    count_run = next((run for run in runs if run["label"] == "count-driven"), None)
    checked = [(run, targets(run)) for run in budget_runs]
    if all(t["calls_ok"] and t["input_ok"] for _, t in checked):
        found.append("Budget-driven recall meets both targets at every budget.")
    for run, t in checked:
        if t["calls_ok"]:
            continue
        per_chunk = run["conversation_tokens"] / max(1, run["chunks"])
        text = (f"**B = {run['budget']:,}: the calls target fails**, {t['calls']:,} calls "
                f"against {t['calls_bound']:.1f} ({run['chunks']:,} chunks, "
                f"{run['merges']:,} merges). ")
        if run["chunks"] > t["calls_bound"]:
            text += (f"The chunks alone exceed it: a chunk took {per_chunk:,.0f} tokens of "
                     f"conversation on average, less than the B ÷ {CALLS_PER_BUDGET} = "
                     f"{run['budget'] / CALLS_PER_BUDGET:,.0f} the target assumes (it folds "
                     f"the room less the verbatim tail and the summaries, of a room of "
                     f"{run['room']:,} for B = {run['budget']:,}).")
        else:
            text += (f"The chunks alone are within it; the {run['merges']:,} merges take "
                     "the total over.")
        found.append(text)
    for run, t in checked:
        if not t["input_ok"]:
            found.append(f"**B = {run['budget']:,}: the input target fails**, "
                         f"{t['input']:.3f} × the conversation against {t['input_bound']:.3f}.")
    for run in budget_runs:
        share = run["room"] * 0.25
        size = run["summary_tokens_median"]
        if run["chunks"] > 4 and run["max_level"] >= run["chunks"] // 2 and size:
            found.append(
                f"**B = {run['budget']:,}: nesting grew with the history, not its log**: "
                f"{run['merges']:,} merges for {run['chunks']:,} chunks and a deepest summary "
                f"of level {run['max_level']}. The summary share (0.25 × {run['room']:,} = "
                f"{share:,.0f} tokens) holds fewer than two summaries of {size:,.0f} tokens, "
                "so every new chunk summary is merged at once with the one summary there is: "
                "a chain, one level a chunk, rather than a balanced tree.")
    broken = {name: [run for run in budget_runs if run["checks"][name]]
              for name in ("gap", "split", "user_missing", "summary_missing")}
    if not any(broken.values()):
        found.append("No budget-driven context had a gap, a split tool pair, a missing user "
                     "message or a missing summary, at any budget.")
    for name, failing in broken.items():
        for run in failing:
            found.append(f"**B = {run['budget']:,}: {run['checks'][name]} turns broke the "
                         f"'{name}' check** (the first at turn {run['checks']['first'][name]}).")
    for run in budget_runs:
        if not run["stub"]["calls"]:
            found.append(f"B = {run['budget']:,}: the whole conversation fits the room, so "
                         "recall never called the summarizer and every context is the whole "
                         "history verbatim.")
    for run in budget_runs:
        first, last = run["recall_first"]["p50_ms"], run["recall_last"]["p50_ms"]
        if last > 2 * first:
            found.append(
                f"B = {run['budget']:,}: recall p50 grows from {first:.1f} ms (first {EDGE} "
                f"turns) to {last:.1f} ms (last {EDGE}), and so does the context: a median "
                f"of {run['context_first_median']:,.0f} tokens over the first {EDGE} turns, "
                f"{run['context_last_median']:,.0f} over the last. Counting the tokens of "
                f"the largest of the last contexts ({run['largest_last_context']:,} tokens) "
                f"alone takes {run['count_largest_context_ms']:.0f} ms. Recall time follows "
                "the context's size, which the budget bounds, not the thread's.")
    if count_run:
        budget = next((run for run in budget_runs if run["budget"] == COUNT_BUDGET), None)
        c = count_run["checks"]
        if budget:
            found.append(
                f"At B = {COUNT_BUDGET:,} the count-driven mode made "
                f"{count_run['stub']['calls']} calls reading "
                f"{targets(count_run)['input']:.2f} × the conversation, against "
                f"{budget['stub']['calls']} and {targets(budget)['input']:.2f} budget-driven; "
                f"its contexts had a gap in {c['gap']} turns (the first at turn "
                f"{c['first'].get('gap', '—')}) and left entries out in {c['omitted']}, "
                f"the budget-driven ones in {budget['checks']['gap']} and "
                f"{budget['checks']['omitted']}.")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--pg-name", default="agentmemory_bench")
    parser.add_argument("--run", choices=RUNS, required=True)
    parser.add_argument("--out", default="", help="JSON file (default: print)")
    args = parser.parse_args()
    result = json.dumps(worker(args.db, args.pg_name, args.run), indent=1)
    if args.out:
        Path(args.out).write_text(result)
    else:
        print(result)


if __name__ == "__main__":
    main()
