"""Recovery: facts a summary dropped, found again through search and expand (issue 23).

    .venv/bin/python bench/run.py --parts recovery --output -     # through the suite
    .venv/bin/python bench/recovery.py --run dropping             # one run, JSON out
    .venv/bin/python bench/recovery.py --run dropping --seed 20261154   # another planting
    .venv/bin/python bench/recovery.py                            # every run, JSON out

Fifty unique facts (order codes such as ``ZX-48213``, amounts such as ``EUR 1,287.40``,
made-up surnames, dates) are planted at seeded turns of a 2,000-turn conversation (the
seeded generator, bench/conversation.py, asked for 2,000 turns), one sentence each,
appended to that turn's user message or to its answer. The sentence names a *topic*
(``the espresso machine``) beside the fact. No fact occurs anywhere else in the
conversation.

The conversation runs through agentmemory: at every turn the user's message is
appended, ``services.recall(thread, 4000)`` folds inline as it must, the replies are
appended; once more after the last turn. Twice, with two summarizers: the offline one
(``agentmemory.summarizers.offline``, which keeps the ids, amounts and dates it can
extract, within its size caps) and the OpenAI backend at the loopback stub answering
one fixed summary, which keeps no fact at all (``dropping``); and the dropping stub
again on a second planting (``SECOND_SEED``: other turns, topics, facts and sentences).
Each run is a subprocess with its own SQLite database on a memory-backed file where
there is one.

Then, for each fact, the query a model would write when the user asks about it again:
the topic's words and the words nearest the fact in its sentence, four words in all
(stop words left out of the neighbours; never the fact). What is counted:

* **in the final context**: the fact is in the text of the last recall;
* **in the top 5**: the message it was planted in is among ``services.search(thread,
  query, limit=5)``;
* **recovered within two tool calls**: the tools run as the model would call them
  (``agentmemory.tools.run``, each result within a quarter of the budget as
  ``chat_turn`` gives it): ``memory_search``; the fact is then found if that result
  already shows it, or if the hit is verbatim in the context; else, when the hit is
  folded, ``memory_expand`` with the handle and entry the hit names, and the fact must
  be in the page it returns (checked in the page's messages through
  ``services.expand_for_model``, and in the tool's text);
* **tool tokens returned**: the o200k_base tokens of the tools' results for that fact
  (``agentmemory.tokens.count_tokens``).

Beside it, the peers (bench/peers/recovery.py) on the same planted conversation at the
same room (4,000 less agentmemory's 256-token reserve), their summarizer the same fixed
loopback stub: how many facts their final context holds, and how many are still held
verbatim anywhere in what they keep after the conversation (the only place any tool
could return them from). LangChain, langmem and LlamaIndex run in ``.venv-peers``; the
OpenAI Agents SDK is the project's ``agents`` extra, so its session runs in the
project's interpreter (no Django in it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import conversation as conv  # noqa: E402
from bench.common import PEERS_PYTHON, median, number, table  # noqa: E402

TURNS = 2_000
BUDGET = 4_000
RESERVE_TOKENS = 256  # agentmemory's default reserve: the peers get the budget less it
ROOM = BUDGET - RESERVE_TOKENS
FACTS = 50
TOP = 5  # hits a search returns (the memory tool's default)
MAX_CALLS = 2  # the target: every fact within a search and an expand
#: Each tool result within this many tokens: a quarter of the budget, as chat_turn gives it.
TOOL_TOKENS = BUDGET // 4
SEED = conv.SEED + 23  # issue 23
#: A second planting: other turns, topics, facts and sentences, the same conversation.
SECOND_SEED = SEED + 1
SUMMARIZERS = ("offline", "dropping")
#: The runs: (name, summarizer, planting seed). The target is the dropping stub's, on
#: both plantings.
RUNS = (("offline", "offline", SEED), ("dropping", "dropping", SEED),
        ("dropping-second", "dropping", SECOND_SEED))
#: Peer libraries and the interpreter each runs in ("peers": .venv-peers).
PEERS = {
    "langchain": "peers", "langmem": "peers", "llamaindex-memory": "peers",
    "llamaindex": "peers", "agents-sdk": "project",
}
PARALLEL = 2
MEMORY_DIR = "/dev/shm"

# ================================================================== the facts (no Django)

#: Topics a later question names. A few are the conversation's own items (a standing
#: desk is ordered again and again there), so their words alone do not single a message out.
TOPICS = [
    "espresso machine", "garden shed", "piano stool", "aquarium pump", "kayak paddle",
    "sewing machine", "drone battery", "tent footprint", "violin case", "cat flap",
    "wine fridge", "telescope mount", "rowing machine", "baby monitor", "pizza oven",
    "ceiling fan", "snow chains", "roof box", "dog crate", "chess clock",
    "solar charger", "bread maker", "pressure washer", "camping stove", "fish tank",
    "hammock stand", "record player", "tile cutter", "ski boots", "bird feeder",
    "lawn mower", "water heater", "yoga mat", "glass teapot", "drum kit",
    "electric scooter", "laptop stand", "desk lamp", "storm shutter", "wool blanket",
    "standing desk", "coffee grinder", "rain jacket", "label printer", "hiking boots",
    "bike helmet", "monitor arms", "set of pans", "smoke alarm", "loft ladder",
]
TEMPLATES = {
    "order": [
        "Before I forget: the {topic} came under order {fact}, a separate purchase.",
        "For my records, order {fact} from the outlet store covered the {topic}.",
        "The {topic} I sent back had the order code {fact} on its receipt.",
    ],
    "amount": [
        "The insurer finally paid {fact} for the {topic}, after three letters.",
        "Repairing the {topic} cost me {fact} at the workshop.",
        "My neighbour still owes me {fact} for the {topic} we split.",
    ],
    "name": [
        "A neighbour named {fact} signed for the {topic} last time.",
        "A technician called {fact} serviced the {topic} in the autumn.",
        "Please address the {topic} paperwork to {fact}, my landlord.",
    ],
    "date": [
        "The warranty on the {topic} runs out on {fact}, I checked.",
        "I collected the {topic} from the repair shop on {fact}.",
        "The {topic} is booked for an inspection on {fact}.",
    ],
}
KINDS = tuple(TEMPLATES)
STOP = {"a", "an", "the", "i", "me", "my", "on", "for", "to", "of", "in", "at", "by", "was",
        "had", "its", "is", "we", "from", "after", "last", "still", "came", "under", "before",
        "forget", "that", "it"}
_WORD = re.compile(r"[A-Za-z]+")
SYLLABLES = ["var", "nok", "lis", "tre", "bu", "quen", "dal", "mo", "zu", "fen", "ska",
             "ov", "rin", "thal", "pe", "gor", "wyn", "ast"]


@dataclass(frozen=True)
class Fact:
    index: int
    kind: str  # order, amount, name or date
    value: str  # the fact itself, as planted
    turn: int
    role: str  # the message it was planted in: "user" or "assistant" (the turn's answer)
    topic: str
    sentence: str
    query: str  # what a model would search for: the topic and words beside the fact


def _value(kind: str, rng: random.Random) -> str:
    if kind == "order":
        letters = "".join(rng.choice("BCDFGHJKLMNPQRSTVWXZ") for _ in range(2))
        return f"{letters}-{rng.randrange(10_000, 100_000)}"
    if kind == "amount":
        return f"EUR {rng.randrange(1, 10)},{rng.randrange(1_000):03d}.{rng.randrange(100):02d}"
    if kind == "name":
        name = "".join(rng.choice(SYLLABLES) for _ in range(3))
        return name.capitalize()
    # Days 29 to 31: the generator's dates never go past the 28th.
    return f"2026-{rng.choice([1, 3, 5, 7, 8, 10, 12]):02d}-{rng.randrange(29, 32)}"


def _query(sentence: str, topic: str, fact: str, extra: int) -> str:
    """The topic's words and the ``extra`` content words nearest the fact (alternating
    sides, nearest first, stop words left out)."""
    before, after = sentence.split(fact)
    left = [w for w in _WORD.findall(before)]
    right = [w for w in _WORD.findall(after)]
    topic_words = set(topic.split())
    # Distance from the fact: alternate sides, nearest first.
    ordered: list[str] = []
    for step in range(max(len(left), len(right))):
        if step < len(left):
            ordered.append(left[-1 - step])
        if step < len(right):
            ordered.append(right[step])
    near = [w for w in ordered if w.lower() not in STOP and w not in topic_words]
    words = [*topic.split(), *dict.fromkeys(near).keys()][: len(topic.split()) + extra]
    return " ".join(words)


def facts(turns: int = TURNS, seed: int = SEED, count: int = FACTS) -> list[Fact]:
    """``count`` facts at distinct seeded turns, every value unique in the conversation."""
    rng = random.Random(seed)
    text = "\n".join(m["content"] for m in conv.messages(turns))
    chosen = sorted(rng.sample(range(1, turns + 1), count))
    topics = rng.sample(TOPICS, count)
    out, seen = [], set()
    for index, turn in enumerate(chosen):
        kind = KINDS[index % len(KINDS)]
        value = _value(kind, rng)
        while value in seen or value in text:
            value = _value(kind, rng)
        seen.add(value)
        topic = topics[index]
        sentence = rng.choice(TEMPLATES[kind]).format(topic=topic, fact=value)
        extra = 4 - len(topic.split())
        out.append(Fact(index, kind, value, turn, "user" if index % 2 == 0 else "assistant",
                        topic, sentence, _query(sentence, topic, value, extra)))
    return out


def conversation(turns: int = TURNS, planted: list[Fact] | None = None) -> Iterator[conv.Turn]:
    """The seeded conversation with each fact's sentence added to its message."""
    by_turn = {fact.turn: fact for fact in (facts(turns) if planted is None else planted)}
    for turn in conv.conversation(turns):
        fact = by_turn.get(turn.number)
        if fact is None:
            yield turn
        elif fact.role == "user":
            user = {**turn.user, "content": f"{turn.user['content']} {fact.sentence}"}
            yield conv.Turn(turn.number, user, turn.replies)
        else:
            answer = {**turn.replies[-1],
                      "content": f"{turn.replies[-1]['content']} {fact.sentence}"}
            yield conv.Turn(turn.number, turn.user, [*turn.replies[:-1], answer])


def found(texts: list[str], planted: list[Fact]) -> list[int]:
    """Indexes of the facts that occur verbatim in any of ``texts``."""
    whole = "\n".join(texts)
    return [fact.index for fact in planted if fact.value in whole]


# ================================================================== agentmemory (Django)


def summarizer_settings(name: str, base_url: str) -> dict[str, Any]:
    if name == "offline":
        summarizer: dict[str, Any] = {
            "BACKEND": "agentmemory.summarizers.offline.OfflineSummarizer",
            "MODEL": "offline-extractive-1",
        }
    else:
        summarizer = {"BACKEND": "agentmemory.summarizers.openai.OpenAISummarizer",
                      "MODEL": "bench-stub",
                      "OPTIONS": {"BASE_URL": base_url, "TIMEOUT": 10.0}}
    return {"SUMMARIZER": summarizer, "RECALL_MODE": "inline", "RECEIPTS": False}


def run_thread(summarizer: str, seed: int = SEED) -> dict[str, Any]:
    """The planted conversation recalled at every turn, then every fact looked for."""
    from agentmemory import services
    from agentmemory.models import EntryKind, MemoryEntry, SummarizerCall, Thread

    planted = facts(seed=seed)
    thread = Thread.objects.create(title=f"recovery {summarizer}")
    holder: dict[int, int] = {}  # fact index -> the entry it was planted in
    by_turn = {fact.turn: fact for fact in planted}
    recall_ms: list[float] = []
    began = time.perf_counter()
    for turn in conversation(TURNS, planted):
        (user,) = services.append(thread, turn.user)
        started = time.perf_counter()
        services.recall(thread, BUDGET)
        recall_ms.append((time.perf_counter() - started) * 1000)
        replies = services.append(thread, turn.replies)
        fact = by_turn.get(turn.number)
        if fact is not None:
            holder[fact.index] = user.pk if fact.role == "user" else replies[-1].pk
    final = services.recall(thread, BUDGET)
    elapsed = time.perf_counter() - began
    in_context = found([final.text], planted)
    verbatim_ids = {m.id for m in final.messages if m.kind != "summary"}
    summaries = list(MemoryEntry.objects.filter(thread=thread, kind=EntryKind.SUMMARY)
                     .values_list("content", flat=True))
    searched = time.perf_counter()
    per_fact = [look_for(thread, fact, holder[fact.index], verbatim_ids, fact.index in in_context)
                for fact in planted]
    search_s = time.perf_counter() - searched
    originals = MemoryEntry.objects.filter(thread=thread, kind=EntryKind.MESSAGE)
    return {
        "summarizer": summarizer, "seed": seed,
        "turns": TURNS, "budget": BUDGET, "facts": len(planted),
        "messages": originals.count(),
        "conversation_tokens": sum(originals.values_list("token_count", flat=True)),
        "summarizer_calls": SummarizerCall.objects.filter(thread=thread).count(),
        "summaries": len(summaries),
        "in_summaries": len(found(summaries, planted)),
        "final_context_tokens": final.tokens,
        "final_summaries": len(final.summaries_used),
        "in_context": in_context,
        "per_fact": per_fact,
        "tool_path": TOOL_PATH,
        "recall_p50_ms": median(recall_ms),
        "elapsed_s": elapsed,
        "search_s": search_s,
    }


def _tools() -> Any:
    """``agentmemory.tools.run``, or None before the memory tools landed."""
    try:
        from agentmemory import tools
    except ImportError:
        return None
    return getattr(tools, "run", None)


TOOL_PATH = "agentmemory.tools.run"


def look_for(thread: Any, fact: Fact, entry_id: int, verbatim_ids: set[int],
             in_context: bool) -> dict[str, Any]:
    """Search for ``fact`` as a model would, and expand the hit when it is folded.

    The model stops at the first result that shows the fact; the expand of a folded hit
    is made (and counted apart) even when the search result already showed it, so every
    folded hit's second call is checked too."""
    from agentmemory import services
    from agentmemory.tokens import count_tokens

    run = _tools()
    began = time.perf_counter()
    hits = services.search(thread, fact.query, limit=TOP)
    search_ms = (time.perf_counter() - began) * 1000
    rank = next((n for n, hit in enumerate(hits, 1) if hit.entry_id == entry_id), None)
    alone = services.search(thread, fact.topic, limit=TOP)
    wider = services.search(thread, fact.query, limit=50)
    out: dict[str, Any] = {
        "index": fact.index, "kind": fact.kind, "query": fact.query, "in_context": in_context,
        "rank": rank, "hits": len(hits),
        "topic_rank": next((n for n, hit in enumerate(alone, 1) if hit.entry_id == entry_id),
                           None),
        "rank_of_50": next((n for n, hit in enumerate(wider, 1) if hit.entry_id == entry_id),
                           None),
        "calls": None, "tool_tokens": 0, "where": "", "folded": None, "expand_ok": None,
        "search_ms": search_ms,
    }
    if run is not None:
        text = run(thread, "memory_search", {"query": fact.query, "limit": TOP},
                   max_tokens=TOOL_TOKENS)
    else:  # what the tool would return: the hits' snippets
        text = "\n".join(hit.snippet for hit in hits)
    out["tool_tokens"] = out["search_tokens"] = count_tokens(text)
    if rank is None:
        out["where"] = "not in the top 5"
        return out
    hit = hits[rank - 1]
    out["folded"] = hit.covered_by_handle is not None
    if fact.value in text:
        out.update(calls=1, where="in the search result")
    elif not out["folded"]:
        out.update(calls=1 if entry_id in verbatim_ids else None,
                   where="verbatim in the context" if entry_id in verbatim_ids
                   else "uncovered, but not in the context")
    if not out["folded"]:
        return out
    budget = TOOL_TOKENS - 60  # the tool keeps about 60 tokens for its framing
    began = time.perf_counter()
    expansion = services.expand_for_model(thread, hit.covered_by_handle, budget_tokens=budget,
                                          entry_id=entry_id)
    out["expand_ms"] = (time.perf_counter() - began) * 1000
    in_page = any(fact.value in entry.content for entry in expansion.entries)
    if run is not None:
        text = run(thread, "memory_expand", {"handle": hit.covered_by_handle, "page": None,
                                             "entry": entry_id, "thread": None},
                   max_tokens=TOOL_TOKENS)
    else:
        text = "\n".join(entry.content for entry in expansion.entries)
    out.update(expand_tokens=count_tokens(text), pages=expansion.pages,
               cut=entry_id in expansion.cut, expand_ok=in_page and fact.value in text)
    if out["calls"] is None:
        if out["expand_ok"]:
            out.update(calls=2, where="in the expanded page",
                       tool_tokens=out["search_tokens"] + out["expand_tokens"])
        else:
            out["where"] = ("cut from the expanded page" if out["cut"]
                            else "not in the expanded page")
    return out


def worker(summarizer: str, seed: int = SEED) -> dict[str, Any]:
    """One run on a scratch SQLite database of its own (and, dropping, its own stub)."""
    global TOOL_PATH
    from bench.common import Database, describe_engine, loopback_server, setup_django

    if os.path.isdir(MEMORY_DIR):
        tempfile.tempdir = MEMORY_DIR
    database = Database.create("sqlite")
    os.environ["OPENAI_API_KEY"] = "sk-agentmemory-bench-loopback"
    with loopback_server() as server:
        setup_django(database.engine, database.name,
                     summarizer_settings(summarizer, server.base_url), migrate=True)
        if _tools() is None:
            TOOL_PATH = "services (agentmemory.tools.run not there yet)"
        try:
            out = run_thread(summarizer, seed)
            out["engine"] = describe_engine()
            out["memory_backed"] = database.name.startswith(MEMORY_DIR)
            out["stub_calls"] = server.totals()["calls"]
            return out
        finally:
            database.drop()


# ================================================================== the suite


def peer_command(library: str, base_url: str) -> list[str]:
    python = str(PEERS_PYTHON) if PEERS[library] == "peers" else sys.executable
    return [python, str(ROOT / "bench" / "peers" / "recovery.py"), "--library", library,
            "--base-url", base_url, "--budget", str(ROOM), "--turns", str(TURNS)]


def measure(skip_peers: bool = False) -> dict[str, Any]:
    """Both agentmemory runs and every peer (unless ``skip_peers``), PARALLEL
    subprocesses at a time."""
    from bench.common import loopback_server

    began = time.perf_counter()
    results: dict[str, Any] = {"runs": {}, "peers": {}}
    with loopback_server() as server:
        jobs: list[tuple[str, str, list[str]]] = [
            ("run", name, [sys.executable, str(Path(__file__)), "--run", summarizer,
                           "--seed", str(seed)])
            for name, summarizer, seed in RUNS
        ]
        for library in () if skip_peers else PEERS:
            if PEERS[library] == "peers" and not PEERS_PYTHON.exists():
                results["peers"][library] = {
                    "error": f"{PEERS_PYTHON} is missing; run `make bench-peers`"}
                continue
            jobs.append(("peer", library, peer_command(library, server.base_url)))
        env = {**os.environ, "OPENAI_API_KEY": "sk-agentmemory-bench-loopback",
               "LANGSMITH_TRACING": "false", "LANGCHAIN_TRACING_V2": "false"}
        running: list[tuple[subprocess.Popen[str], str, str, float]] = []
        try:
            while jobs or running:
                while jobs and len(running) < PARALLEL:
                    kind, name, command = jobs.pop(0)
                    print(f"[bench] recovery: {name}", file=sys.stderr, flush=True)
                    process = subprocess.Popen(command, cwd=ROOT, env=env, text=True,
                                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                    running.append((process, kind, name, time.perf_counter()))
                time.sleep(0.2)
                for job in [job for job in running if job[0].poll() is not None]:
                    running.remove(job)
                    process, kind, name, started = job
                    stdout, stderr = process.communicate()
                    lines = stdout.strip().splitlines()
                    if kind == "run":
                        if process.returncode or not lines:
                            raise SystemExit(f"recovery {name} failed:\n{stderr}")
                        results["runs"][name] = json.loads(lines[-1])
                    elif process.returncode or not lines:
                        reason = (stderr.strip().splitlines() or ["no output"])[-1]
                        results["peers"][name] = {
                            "error": f"exit {process.returncode}: {reason}"}
                    else:
                        results["peers"][name] = {**json.loads(lines[-1]),
                                                  "wall_s": time.perf_counter() - started}
        finally:
            for process, *_ in running:  # a run failed, or the part was interrupted
                process.terminate()
                process.wait()
    results["facts"] = [asdict(fact) for fact in facts()]
    results["second_facts"] = [asdict(fact) for fact in facts(seed=SECOND_SEED)]
    results["elapsed_s"] = time.perf_counter() - began
    return results


# ================================================================== the page


def tally(run: dict[str, Any]) -> dict[str, Any]:
    """The figures of one agentmemory run's table row."""
    rows = run["per_fact"]
    recovered = [row for row in rows if row["calls"] is not None and row["calls"] <= MAX_CALLS]
    tokens = [row["tool_tokens"] for row in rows]
    return {
        "in_context": len(run["in_context"]),
        "top5": sum(1 for row in rows if row["rank"] is not None),
        "topic_top5": sum(1 for row in rows if row["topic_rank"] is not None),
        "recovered": len(recovered),
        "one_call": sum(1 for row in recovered if row["calls"] == 1),
        "tokens_median": median(tokens), "tokens_max": max(tokens),
        "tokens_total": sum(tokens),
        "missed": [row for row in rows if row not in recovered],
    }


def _verdict(ok: bool) -> str:
    return "pass" if ok else "**fail**"


def section(results: dict[str, Any]) -> str:
    measured = results.get("recovery")
    if not measured or not measured.get("runs"):
        return ""
    runs = measured["runs"]
    first = runs.get("offline") or next(iter(runs.values()))  # the first planting
    total = first["facts"]
    kinds = ", ".join(sorted({fact["kind"] for fact in measured["facts"]}))
    rows = []
    for name, summarizer, seed in RUNS:
        run = runs.get(name)
        if run is None:
            continue
        t = tally(run)
        target = (f"{t['recovered']} of {total}: {_verdict(t['recovered'] == total)}"
                  if summarizer == "dropping" else "—")
        rows.append([
            "offline (`summarizers.offline`)" if summarizer == "offline"
            else "dropping (loopback stub, one fixed summary)"
            + ("" if seed == SEED else f", the second planting (seed `{seed}`)"),
            number(run["summarizer_calls"]), f"{run['in_summaries']}",
            f"{t['in_context']}", f"{t['top5']} ({t['topic_top5']})",
            f"{t['recovered']} ({t['one_call']} in one call)", target,
            f"{t['tokens_median']:,.0f} / {t['tokens_max']:,}",
            number(run["elapsed_s"], 0),
        ])
    example = next((fact for fact in measured["facts"] if fact["kind"] == "amount"), None)
    example_text = (f" For example, turn {example['turn']:,} got *{example['sentence']}* and "
                    f"its query is `{example['query']}`." if example else "")
    parts = [f"""## Recovery: dropped facts found again through search and expand

{total} unique facts ({kinds}: order codes such as `ZX-48213`, amounts such as
`EUR 1,287.40`, made-up surnames, dates past the 28th, which the generator never
writes) are planted at seeded turns of the {first["turns"]:,}-turn conversation (the seeded
generator asked for {first["turns"]:,} turns; {first["messages"]:,} messages,
{first["conversation_tokens"]:,} tokens), one sentence each, in the turn's user message or its
answer; no fact occurs anywhere else. Every turn is recalled at a budget of
{first["budget"]:,} (inline folds, receipts off), and once more after the last turn
({"SQLite on a memory-backed file" if first.get("memory_backed") else "SQLite"}, one
subprocess a run; `bench/recovery.py`). The planting's seed is `{SEED}`; the dropping
stub runs again on a second planting (seed `{SECOND_SEED}`: other turns, topics, facts
and sentences in the same conversation).

For each fact the query is what a model would write when the user asks about it again:
the topic the sentence names and the words nearest the fact, four words in all (stop
words left out of the neighbours; never the fact).{example_text} {
    _conversation_topics()} of the {len(TOPICS)} topics are items the conversation itself
orders again and again (a standing desk, hiking boots...), whose words alone do not
single a message out.

* **in summaries**: facts found in the text of any summary the run wrote.
* **in the final context**: facts in the text of the last recall.
* **top 5**: facts whose message is among `services.search(thread, query, limit=5)`;
  in brackets, with the topic's words alone for a query (2 or 3 words). The search puts
  a message that repeats a better hit's words (two thirds of them, numbers aside) after
  the hits that say something else (`agentmemory.search.rank.distinct_first`).
* **recovered within two calls**: through the memory tools as a model calls them
  (`{first["tool_path"]}`, each result within a quarter of the budget, {TOOL_TOKENS:,}
  tokens, as `chat_turn` gives it): `memory_search`; found if its result already shows
  the fact or the hit is verbatim in the context; else `memory_expand` with the handle
  and entry the hit names, and the fact must be in the messages of the page returned.
* **tool tokens**: the o200k_base tokens of the tools' results for one fact (the search,
  and the expand when there was one), median / max.

{table(["summarizer", "summarizer calls", f"in summaries (of {total})",
        f"in the final context (of {total})", f"top 5 (of {total})",
        f"recovered within two calls (of {total})", "target: all, dropping",
        "tool tokens a fact, median / max", "run s (two at a time)"], rows, "lrrrrrlrr")}"""]
    parts.append(_peers_table(measured, total))
    parts.append("\n".join(f"* {finding}" for finding in findings(measured)))
    parts.append(f"The part took {measured['elapsed_s']:.0f} s ({PARALLEL} processes at a "
                 f"time) at the source measured, {results.get('source', 'unknown')}.")
    return "\n\n".join(part for part in parts if part)


def _peers_table(measured: dict[str, Any], total: int) -> str:
    peers = measured.get("peers", {})
    if not peers:
        return ""
    rows = []
    for library in PEERS:
        outcome = peers.get(library)
        if outcome is None:
            continue
        if "error" in outcome:
            rows.append([library, "—", "—", "—", f"not run: {outcome['error']}", "—"])
            continue
        package = next(iter(outcome["versions"]))
        rows.append([
            f"{package} {outcome['versions'][package]}: {outcome['component']}",
            outcome["settings"], f"{len(outcome['in_context'])}",
            f"{len(outcome['held'])}: {outcome['held_where']}", outcome["tool"],
            number(outcome["final_context_tokens"]),
        ])
    dropping = measured["runs"].get("dropping")
    if dropping:
        t = tally(dropping)
        rows.insert(0, [
            "django-agentmemory (dropping stub)", f"`services.recall(thread, {BUDGET:,})`",
            f"{t['in_context']}",
            f"{total}: every original kept as a row (law 1), covered by its summary",
            f"`memory_search` + `memory_expand`: {t['recovered']} of {total} within two "
            "calls", number(dropping["final_context_tokens"]),
        ])
    times = ", ".join(f"{name} {outcome['wall_s']:.0f}" for name, outcome in peers.items()
                      if "wall_s" in outcome)
    return f"""### Beside the peers: what they still hold

The same planted conversation through the peers (`bench/peers/recovery.py`), each at
the room agentmemory's recall gets at {BUDGET:,} ({ROOM:,} tokens), each summarizer
the loopback stub answering one fixed summary, so none of them keeps a fact in a summary
either. Every turn: the user's message added, the context built, the replies added.
*Held verbatim* counts the facts found anywhere in what the library keeps after the
conversation (its state, its store, its summaries, the list its caller keeps), the only
place a tool could return them from; *a tool to return them* says whether the library
offers one.

{table(["library", "settings", f"in the final context (of {total})",
        f"held verbatim after the conversation (of {total}), where",
        "a tool to return them", "final context tokens"], rows, "llrllr")}

Each peer process, imports included, took (s): {times or "—"}."""


def findings(measured: dict[str, Any]) -> list[str]:
    """Sentences written from the figures; one whose premise fails is left out."""
    found_ = []
    for name, run in measured["runs"].items():
        t = tally(run)
        planted = (measured["second_facts"] if run.get("seed") == SECOND_SEED
                   else measured["facts"])
        facts_ = {fact["index"]: fact for fact in planted}
        for row in t["missed"]:
            fact = facts_[row["index"]]
            ranked = (f"its message ranked {row['rank_of_50']} of 50" if row.get("rank_of_50")
                      else "its message not even in the top 50")
            found_.append(
                f"**{name}: fact {row['index']} ({fact['kind']}, turn {fact['turn']:,}) was "
                f"not recovered within two calls**: {row['where']}, {ranked}; the query "
                f"`{row['query']}` is words the conversation's own messages hold together "
                f"again and again (the planted sentence: *{fact['sentence']}*).")
        over = [row for row in run["per_fact"]
                if max(row.get("search_tokens", 0), row.get("expand_tokens") or 0) > TOOL_TOKENS]
        if over:
            largest = max(max(row.get("search_tokens", 0), row.get("expand_tokens") or 0)
                          for row in over)
            found_.append(
                f"{name}: {len(over)} tool results were longer than the {TOOL_TOKENS:,} "
                f"tokens asked for (`max_tokens`), up to {largest:,}, counted with "
                "`agentmemory.tokens.count_tokens` on the text returned.")
        folded = [row for row in run["per_fact"] if row["folded"]]
        if folded:
            pages = [row["pages"] for row in folded]
            ok = sum(1 for row in folded if row["expand_ok"])
            needed = sum(1 for row in folded if row["calls"] == 2)
            found_.append(
                f"{name}: {len(folded)} hits were folded. The expand of each (made even when "
                f"the search result had shown the fact already; {needed} needed it) returned "
                f"the fact in {ok} of {len(folded)}: the summary a hit names stood for "
                f"{min(pages)} to {max(pages)} pages of {TOOL_TOKENS - 60:,} tokens, and the "
                "hit's entry opened the page holding it. `expand_for_model` took "
                f"{median([row['expand_ms'] for row in folded]):.0f} ms (p50) there, "
                f"`services.search` {median([row['search_ms'] for row in run['per_fact']]):.1f}"
                " ms.")

    offline, dropping = measured["runs"].get("offline"), measured["runs"].get("dropping")
    if offline and dropping:
        found_.append(
            f"The offline summarizer's summaries held {offline['in_summaries']} of the facts "
            f"at some point and its final context {len(offline['in_context'])}; the dropping "
            f"stub's summaries none, its final context {len(dropping['in_context'])} (those "
            "in the verbatim tail). Search does not depend on the summary: the originals "
            "are indexed whatever the summary kept.")
    return found_


def _conversation_topics() -> int:
    """Topics that are also items of the conversation's own orders."""
    return sum(1 for topic in TOPICS if any(item.endswith(topic) for item in conv.ITEMS))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", choices=SUMMARIZERS, help="one agentmemory run")
    parser.add_argument("--seed", type=int, default=SEED, help="--run: the planting's seed")
    parser.add_argument("--out", default="", help="JSON file (default: print)")
    args = parser.parse_args()
    result = json.dumps(worker(args.run, args.seed) if args.run else measure(), default=str)
    if args.out:
        Path(args.out).write_text(result)
    else:
        print(result)


if __name__ == "__main__":
    main()
