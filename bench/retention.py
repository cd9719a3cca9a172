"""Retention: a long thread under a TTL, recalled every turn and purged every hour.

    .venv/bin/python bench/run.py --parts retention --output -     # through the suite
    .venv/bin/python bench/retention.py                             # JSON out

A 2,000-turn thread (the seeded generator, bench/conversation.py, asked for 2,000
turns) with a 7-day TTL (`Thread.ttl`) lives through 20 simulated days: its turns are
spread evenly in time (``now=`` passed to ``append`` and ``recall``), each is recalled
at a budget of 4,000 tokens (inline folds, receipts off), and
``services.purge_expired(now=...)`` runs every simulated hour. On SQLite.

What it measures:

* **refolds**: a summarizer call whose span holds an original that an earlier call was
  already sent. Each call's span is read from the ledger (``SummarizerCall.summary``)
  and that summary's ``SummarySource`` rows, right after the recall that made it
  (purge later deletes summaries, and the ledger row's link with them);
* **canaries**: a unique string planted in 20 originals spread over the first 13 days;
  the loopback stub here echoes every canary it is sent into its summary, so summaries
  carry them too. After the purge that follows each canary's expiry, every text and
  JSON column of every agentmemory table is searched for it: it must be in no row.
  Just before, the same search must find it (the search works);
* **contexts**: the economy's checks (gap, split pair, user message missing, summary
  missing), counting as "earlier" only originals not yet expired; and turns whose
  ``RecallResult.omitted`` is above 0.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import conversation as conv  # noqa: E402
from bench.common import describe_engine, median, number, percentile, setup_django, table  # noqa: E402
from bench.economy import (  # noqa: E402
    API_KEY,
    EDGE,
    MEMORY_DIR,
    Checks,
    Coverage,
    file_note,
    scratch_database,
    summarizer_settings,
)

TURNS = 2_000
DAYS = 20
TTL = timedelta(days=7)
BUDGET = 4_000
PURGE_EVERY = timedelta(hours=1)
CANARIES = 20
CANARY_FIRST, CANARY_EVERY = 32, 64  # turns 32, 96, ..., 1,248: all expire before day 20
REFOLD_TARGET = 0.3  # refold tokens (prompt + completion) / conversation tokens
#: A fixed clock (the run is deterministic), ahead of the wall clock: were any step to read
#: the wall clock instead of ``now``, nothing would look expired to it and a canary stay.
START = datetime(2030, 1, 7, tzinfo=UTC)
STEP = timedelta(days=DAYS) / TURNS
CANARY_PATTERN = re.compile(r"canary-[0-9a-f]{4}-\d{2}")


def canary(index: int) -> str:
    return f"canary-{(index * 40_503 + 0x5A17) % 0xFFFF:04x}-{index:02d}"


# ================================================================== the echoing stub


def echo_server() -> Any:
    """The loopback OpenAI-compatible stub, answering STUB_SUMMARY followed by every
    canary found in the prompt (so summaries carry what they were sent), the prompt
    counted exactly (o200k_base) as usage."""
    from tests.openai_server import OpenAIServer, Reply

    class EchoServer(OpenAIServer):
        def __init__(self) -> None:
            super().__init__()
            self.counted: list[int] = []
            self._counted_lock = threading.Lock()

        def _completion(self, reply: Any, body: Any) -> dict[str, Any]:
            messages = body.get("messages", []) if isinstance(body, dict) else []
            text = "".join(str(message.get("content") or "") for message in messages)
            prompt = sum(conv.count_tokens(str(m.get("content") or "")) for m in messages)
            found = sorted(set(CANARY_PATTERN.findall(text)))
            content = conv.STUB_SUMMARY + (f" References: {', '.join(found)}." if found else "")
            with self._counted_lock:
                self.counted.append(prompt)
            echoed = Reply(content, prompt_tokens=prompt,
                           completion_tokens=conv.count_tokens(content))
            return super()._completion(echoed, body)

    return EchoServer()


# ================================================================== the scan


def text_columns() -> list[tuple[Any, str]]:
    """Every text and JSON column of every agentmemory model: (model, field name)."""
    from django.apps import apps
    from django.db import models

    kinds = (models.CharField, models.TextField, models.JSONField)
    return [
        (model, field.name)
        for model in apps.get_app_config("agentmemory").get_models()
        if not model._meta.proxy  # a proxy reads its concrete model's rows again
        for field in model._meta.concrete_fields
        if isinstance(field, kinds)
    ]


def rows_holding(needle: str, columns: list[tuple[Any, str]]) -> dict[str, int]:
    """``{"Model.field": rows}`` for every column where ``needle`` occurs in some row."""
    from django.db.models import TextField
    from django.db.models.functions import Cast

    found = {}
    for model, name in columns:
        rows = model.objects.annotate(_text=Cast(name, TextField())).filter(
            _text__contains=needle
        ).count()
        if rows:
            found[f"{model.__name__}.{name}"] = rows
    return found


# ================================================================== the run


def plant(turn: conv.Turn, index: int) -> conv.Turn:
    """The turn with a canary in its user message (even) or its answer (odd)."""
    mark = f" Reference {canary(index)}."
    if index % 2 == 0:
        user = {**turn.user, "content": turn.user["content"] + mark}
        return conv.Turn(turn.number, user, turn.replies)
    answer = {**turn.replies[-1], "content": turn.replies[-1]["content"] + mark}
    return conv.Turn(turn.number, turn.user, [*turn.replies[:-1], answer])


class Ledger:
    """Every summarizer call of the thread, read right after the recall that made it:
    the originals its span held, and whether an earlier call had been sent any."""

    def __init__(self, thread: Any, tokens: dict[int, int]) -> None:
        self.thread = thread
        self.tokens = tokens  # token count of every original, by id
        self.last_id = 0
        self.sends: Counter[int] = Counter()  # times each original was sent
        self.last_sender: dict[int, int] = {}  # original -> summary of its latest call
        self.summaries: dict[int, dict[str, Any]] = {}  # id -> written, level, originals
        self.calls: list[dict[str, Any]] = []

    def read(self, turn: int) -> None:
        from agentmemory.models import EntryKind, SummarizerCall, SummarySource

        rows = list(
            SummarizerCall.objects.filter(thread=self.thread, pk__gt=self.last_id)
            .order_by("pk")
            .values("pk", "outcome", "prompt_tokens", "completion_tokens", "summary_id")
        )
        for row in rows:
            self.last_id = row["pk"]
            sources = list(
                SummarySource.objects.filter(summary_id=row["summary_id"]).values_list(
                    "entry_id", "entry__kind", "entry__coverage__level"
                )
            ) if row["summary_id"] else []
            originals = [pk for pk, kind, _ in sources if kind == EntryKind.MESSAGE]
            nested = [level for _, kind, level in sources if kind == EntryKind.SUMMARY]
            resent = [pk for pk in originals if self.sends[pk]]
            call = {
                **row, "turn": turn, "originals": len(originals), "resent": len(resent),
                "resent_tokens": sum(self.tokens[pk] for pk in resent),
                "kind": ("chunk" if not nested else "merge" if not originals else "mixed")
                if row["summary_id"] else "unattributed",
                "level": 1 + max(nested, default=0),
            }
            if resent:
                # The summary that last stood for most of what is sent again.
                previous = Counter(self.last_sender[pk] for pk in resent).most_common(1)[0][0]
                call["previous"] = {"summary": previous, **self.summaries[previous]}
            self.calls.append(call)
            for pk in originals:
                self.sends[pk] += 1
                self.last_sender[pk] = row["summary_id"]
            if row["summary_id"]:
                self.summaries[row["summary_id"]] = {
                    "written": turn, "level": call["level"], "originals": len(originals),
                }


def run_thread() -> dict[str, Any]:
    from agentmemory import services
    from agentmemory.models import EntryKind, MemoryEntry, Thread

    thread = Thread.objects.create(title="retention", ttl=TTL)
    columns = text_columns()
    coverage = Coverage()
    checks = Checks()
    tokens: dict[int, int] = {}
    ledger = Ledger(thread, tokens)
    alive: deque[tuple[datetime, int]] = deque()  # (expires_at, id) of originals, in order
    planted: dict[str, dict[str, Any]] = {}  # canary -> turn, expires_at, rows found
    omitted_reasons: Counter[str] = Counter()
    retired_seen: set[int] = set()
    retired: list[dict[str, Any]] = []
    recall_ms: list[float] = []
    append_s = 0.0
    purge_ms: list[float] = []
    purged_entries = 0
    next_purge = START + PURGE_EVERY
    canary_turns = {CANARY_FIRST + CANARY_EVERY * i: i for i in range(CANARIES)}

    def purge(until: datetime) -> None:
        nonlocal next_purge, purged_entries
        while next_purge <= until:
            due = [c for c, info in planted.items()
                   if "after" not in info and info["expires_at"] <= next_purge]
            for needle in due:  # the search finds what is there
                planted[needle]["before"] = rows_holding(needle, columns)
            began = time.perf_counter()
            purged_entries += services.purge_expired(now=next_purge).entries
            purge_ms.append((time.perf_counter() - began) * 1000)
            for needle in due:
                planted[needle]["after"] = rows_holding(needle, columns)
                planted[needle]["checked_at_hour"] = (next_purge - START) / PURGE_EVERY
            next_purge += PURGE_EVERY

    began = time.perf_counter()
    for index, turn in enumerate(conv.conversation(TURNS)):
        now = START + STEP * index
        purge(now)
        if turn.number in canary_turns:
            needle = canary(canary_turns[turn.number])
            turn = plant(turn, canary_turns[turn.number])
            planted[needle] = {"turn": turn.number, "expires_at": now + TTL}
        while alive and alive[0][0] <= now:
            alive.popleft()
        started = time.perf_counter()
        (user,) = services.append(thread, turn.user, now=now)
        append_s += time.perf_counter() - started
        started = time.perf_counter()
        result = services.recall(thread, BUDGET, now=now)
        recall_ms.append((time.perf_counter() - started) * 1000)
        ledger.read(turn.number)
        checks.check(result, turn.number, user.pk, turn.user["content"],
                     (pk for _, pk in alive), coverage)
        if result.omitted_reason:
            omitted_reasons[result.omitted_reason] += 1
        # Expired summaries are retired at the recall's ``now``.
        for pk, retired_at in MemoryEntry.objects.filter(
            thread=thread, kind=EntryKind.SUMMARY, retired_at__gte=now
        ).values_list("pk", "retired_at"):
            if pk in retired_seen:
                continue
            retired_seen.add(pk)
            stood_for = coverage.originals(pk)
            living = [i for expires, i in alive if i in stood_for and expires > now]
            retired.append({
                "summary": pk, "turn": turn.number, **ledger.summaries.get(pk, {}),
                "stood_for": len(stood_for), "surviving": len(living),
                "surviving_tokens": sum(tokens[i] for i in living),
                "retired_at": retired_at.isoformat(),
            })
        started = time.perf_counter()
        replies = services.append(thread, turn.replies, now=now)
        append_s += time.perf_counter() - started
        for entry in (user, *replies):
            tokens[entry.pk] = entry.token_count
            alive.append((entry.expires_at, entry.pk))
    purge(START + timedelta(days=DAYS))
    elapsed = time.perf_counter() - began
    return summarize(ledger, checks, planted, retired, {
        "turns": TURNS, "days": DAYS, "ttl_days": TTL.days, "budget": BUDGET,
        "purges": len(purge_ms), "purged_entries": purged_entries,
        "conversation_tokens": sum(tokens.values()), "messages": len(tokens),
        "omitted_reasons": dict(omitted_reasons),
        "recall_first": {"p50_ms": median(recall_ms[:EDGE]),
                         "p95_ms": percentile(recall_ms[:EDGE], 0.95)},
        "recall_last": {"p50_ms": median(recall_ms[-EDGE:]),
                        "p95_ms": percentile(recall_ms[-EDGE:], 0.95)},
        "purge_p50_ms": median(purge_ms), "purge_p95_ms": percentile(purge_ms, 0.95),
        "columns_scanned": len(columns), "elapsed_s": elapsed,
        "recall_s": sum(recall_ms) / 1000, "append_s": append_s,
        "purge_s": sum(purge_ms) / 1000,
        "rows_left": MemoryEntry.objects.filter(thread=thread).count(),
    })


def summarize(ledger: Ledger, checks: Checks, planted: dict[str, Any],
              retired: list[dict[str, Any]], out: dict[str, Any]) -> dict[str, Any]:
    calls = ledger.calls
    spent = [(c["prompt_tokens"] or 0) + (c["completion_tokens"] or 0) for c in calls]
    refolds = [c for c in calls if c["resent"]]
    by_kind: dict[str, dict[str, int]] = {}
    for call, cost in zip(calls, spent, strict=True):
        kind = by_kind.setdefault(call["kind"], {"calls": 0, "prompt": 0, "spent": 0})
        kind["calls"] += 1
        kind["prompt"] += call["prompt_tokens"] or 0
        kind["spent"] += cost
    first = min((c["turn"] for c in refolds), default=None)
    refold_spent = sum(cost for call, cost in zip(calls, spent, strict=True) if call["resent"])
    sends = Counter(ledger.sends.values())
    return {
        **out,
        "checks": checks.as_dict(),
        "calls": len(calls),
        "outcomes": dict(Counter(c["outcome"] for c in calls)),
        "by_kind": by_kind,
        "prompt_tokens": sum(c["prompt_tokens"] or 0 for c in calls),
        "spent_tokens": sum(spent),
        "refold_calls": len(refolds),
        "refold_prompt_tokens": sum(c["prompt_tokens"] or 0 for c in refolds),
        "refold_spent_tokens": refold_spent,
        "refold_resent_tokens": sum(c["resent_tokens"] for c in refolds),
        "refold_turns": len({c["turn"] for c in refolds}),
        "first_refold_turn": first,
        "calls_from_first_refold": sum(1 for c in calls if first and c["turn"] >= first),
        "sends_per_original": {str(k): v for k, v in sorted(sends.items())},
        "max_level": max((c["level"] for c in calls), default=0),
        "refolds": refolds,
        "retired": retired,
        "canaries": planted,
    }


def worker(args: argparse.Namespace) -> dict[str, Any]:
    database = scratch_database(args.db, args.pg_name)
    os.environ["OPENAI_API_KEY"] = API_KEY
    with echo_server() as server:
        setup_django(database.engine, database.name, summarizer_settings(server.base_url),
                     migrate=True)
        try:
            out = {"engine": describe_engine(), **run_thread(),
                   "memory_backed": database.name.startswith(MEMORY_DIR)}
            out["stub"] = {"calls": len(server.counted), "prompt_tokens": sum(server.counted)}
            return out
        finally:
            database.drop()


# ================================================================== the page


def section(results: dict[str, Any]) -> str:
    run = results.get("retention")
    if not run:
        return ""
    total = run["conversation_tokens"]
    ratio = run["refold_spent_tokens"] / total
    c = run["checks"]
    canaries = run["canaries"]
    leaked = {name: info["after"] for name, info in canaries.items() if info.get("after")}
    unseen = [name for name, info in canaries.items() if not info.get("before")]
    checked = sum(1 for info in canaries.values() if "after" in info)
    calls = [[
        kind, number(figure["calls"]), number(figure["prompt"]), number(figure["spent"]),
        f"{figure['spent'] / total:.2f}",
    ] for kind, figure in sorted(run["by_kind"].items())]
    calls.append(["refolds (chunks that re-sent an original)", number(run["refold_calls"]),
                  number(run["refold_prompt_tokens"]), number(run["refold_spent_tokens"]),
                  f"{ratio:.2f}"])
    calls.append(["all", number(run["calls"]), number(run["prompt_tokens"]),
                  number(run["spent_tokens"]), f"{run['spent_tokens'] / total:.2f}"])

    def verdict(ok: bool) -> str:
        return "pass" if ok else "**fail**"

    checks = [
        ["refold tokens ÷ conversation tokens", f"{ratio:.3f}", f"≤ {REFOLD_TARGET}",
         verdict(ratio <= REFOLD_TARGET)],
        ["canaries found after the purge that followed their expiry",
         f"{len(leaked)} of {checked}", "0", verdict(not leaked and checked == len(canaries))],
        ["turns with a gap", str(c["gap"]), "0", verdict(not c["gap"])],
        ["turns with a split tool pair", str(c["split"]), "0", verdict(not c["split"])],
        ["turns whose user message is missing", str(c["user_missing"]), "0",
         verdict(not c["user_missing"])],
        ["turns with history but no summary", str(c["summary_missing"]), "0",
         verdict(not c["summary_missing"])],
        ["turns with `RecallResult.omitted` > 0", str(c["omitted"]), "—", "—"],
    ]
    reasons = ", ".join(f"{k} {v}" for k, v in run["omitted_reasons"].items())
    parts = [f"""## Retention: a {run["turns"]:,}-turn thread under a {run["ttl_days"]}-day TTL

A thread of {run["turns"]:,} turns (the seeded generator asked for {run["turns"]:,};
{run["messages"]:,} messages, {total:,} tokens) with a `Thread.ttl` of {run["ttl_days"]}
days lives through {run["days"]} simulated days: turns are spread evenly in time (`now=`
passed to `append` and `recall`), each is recalled at a budget of {run["budget"]:,} tokens
(inline folds, receipts off), and `services.purge_expired(now=...)` runs every simulated
hour ({run["purges"]} purges; {run["purged_entries"]:,} rows purged, {run["rows_left"]:,}
left at the end). {file_note(run)}; the summarizer is the OpenAI backend at
a loopback stub that answers the fixed summary followed by every canary its prompt holds
(`bench/retention.py`).

A **refold** is a call whose span holds an original that an earlier call was already
sent (the ledger row's summary and its `SummarySource` rows, read right after the
recall that made it). **Canaries**: a unique string planted in {len(canaries)} originals
over the first 13 days; after the purge that follows each one's expiry, every text and
JSON column of every agentmemory table ({run["columns_scanned"]} columns) is searched
for it.

{table(["summarizer calls", "calls", "prompt tokens", "prompt + completion",
        "÷ conversation"], calls)}

{table(["check", "figure", "target", ""], checks, "lrrl")}

Recall p50 / p95: {run["recall_first"]["p50_ms"]:.1f} / {run["recall_first"]["p95_ms"]:.1f} ms
over the first {EDGE} turns, {run["recall_last"]["p50_ms"]:.1f} /
{run["recall_last"]["p95_ms"]:.1f} ms over the last {EDGE}; an hourly purge
{run["purge_p50_ms"]:.1f} / {run["purge_p95_ms"]:.1f} ms. The run took
{run["elapsed_s"]:.0f} s: recall {run["recall_s"]:.0f} s, appends {run["append_s"]:.0f} s,
purges {run["purge_s"]:.0f} s, the rest the checks.{
        f" Turns that left entries out: {reasons}." if reasons else ""}"""]
    parts.append("\n".join(f"* {finding}" for finding in findings(run, leaked, unseen)))
    return "\n\n".join(parts)


def findings(run: dict[str, Any], leaked: dict[str, Any], unseen: list[str]) -> list[str]:
    """Sentences written from the figures; one whose premise fails is left out."""
    found = []
    total = run["conversation_tokens"]
    refolds = run["refolds"]
    sends = {int(k): v for k, v in run["sends_per_original"].items()}
    ratio = run["refold_spent_tokens"] / total
    if refolds:
        after = [c["turn"] - c["previous"]["written"] for c in refolds]
        span_turns = run["turns"] - run["first_refold_turn"] + 1
        found.append(
            f"{'**The refold target fails**' if ratio > REFOLD_TARGET else 'Refolds'}: "
            f"{run['refold_spent_tokens']:,} tokens, {ratio:.2f} × the conversation "
            f"(target {REFOLD_TARGET}). From the first expiry on (turn "
            f"{run['first_refold_turn']:,}), {run['refold_turns']:,} of those {span_turns:,} "
            f"turns refolded: {len(refolds):,} calls re-sent "
            f"{run['refold_resent_tokens']:,} tokens of originals, a median of "
            f"{median(after):.0f} turn(s) after the summary that last stood for them was "
            f"written. An original went to the summarizer up to {max(sends)} times "
            f"({sum(v for k, v in sends.items() if k > 1):,} of {run['messages']:,} more "
            "than once).")
    else:
        found.append("No call re-sent an original: expiry never made recall fold the same "
                     "history twice.")
    chunks = [r for r in run["retired"] if r.get("level") == 1 and r["surviving"]]
    if chunks:
        survivors = [r["surviving_tokens"] for r in chunks]
        found.append(
            f"{len(chunks):,} chunk summaries expired with the earliest original they stood "
            f"for and left their surviving originals verbatim (a median of "
            f"{median(survivors):,.0f} tokens, up to {max(survivors):,}); "
            + (f"{len(refolds):,} calls sent some of them again, when the context could "
               "not hold them beside the newest turns; the rest were left to expire."
               if refolds else "none was sent again: each was left to expire."))
    merges = run["by_kind"].get("merge")
    above = sum(1 for r in run["retired"] if (r.get("level") or 0) > 1)
    if merges and merges["spent"] > run["refold_spent_tokens"]:
        found.append(
            f"Merges are not refolds by the definition above, yet they are the larger "
            f"cost: {merges['calls']:,} calls, {merges['spent']:,} tokens "
            f"({merges['spent'] / total:.2f} × the conversation). Every summary above an "
            f"expired one expires with it ({above:,} of level 2 or more were retired), so "
            "its other children come back and are merged again.")
    first, last = run["recall_first"]["p50_ms"], run["recall_last"]["p50_ms"]
    if refolds and last > 2 * first:
        turns_after = run["turns"] - run["first_refold_turn"] + 1
        before = run["calls"] - run["calls_from_first_refold"]
        found.append(
            f"Recall p50 grows from {first:.1f} ms (first {EDGE} turns) to {last:.1f} ms "
            f"(last {EDGE}) although the context stays within the budget: from turn "
            f"{run['first_refold_turn']:,} on, recall made "
            f"{run['calls_from_first_refold'] / turns_after:.1f} summarizer calls a turn, "
            f"against {before / (run['first_refold_turn'] - 1):.2f} before.")
    if leaked:
        found.append("**Canaries outlived their purge**: " + "; ".join(
            f"{name} in {where}" for name, where in leaked.items()) + ".")
    elif run["canaries"]:
        carried = sum(1 for info in run["canaries"].values()
                      if sum(info.get("before", {}).values()) > 1)
        found.append(
            f"No canary survived the purge after its expiry ({len(run['canaries'])} "
            "checked). Just before that purge the same search found each one (in its "
            f"original, and for {carried} of them in summaries too, which the stub had "
            "echoed them into).")
    if unseen:
        found.append(f"**The search did not find {len(unseen)} canaries before their purge** "
                     f"({', '.join(unseen)}): the check proves nothing for them.")
    return found


def measure() -> dict[str, Any]:
    """The run, in a subprocess of its own (a fresh Django on its own database)."""
    print("[bench] retention on sqlite", file=sys.stderr, flush=True)
    handle, out = tempfile.mkstemp(suffix=".json")
    os.close(handle)
    try:
        subprocess.run([sys.executable, str(Path(__file__)), "--out", out], check=True,
                       cwd=ROOT)
        return dict(json.loads(Path(out).read_text()))
    finally:
        os.unlink(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--pg-name", default="agentmemory_bench")
    parser.add_argument("--out", default="", help="JSON file (default: print)")
    args = parser.parse_args()
    result = json.dumps(worker(args), indent=1, default=str)
    if args.out:
        Path(args.out).write_text(result)
    else:
        print(result)


if __name__ == "__main__":
    main()
