"""The cost part's page: one table per workload and budget, and what the figures say.

    .venv/bin/python bench/cost_report.py /tmp/cost.json   # from bench/cost.py --all --out

Every sentence under the tables is written from the figures (bench/cost.py's runs); one
whose premise does not hold in a run is left out.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import conversation as conv  # noqa: E402
from bench import cost_model  # noqa: E402
from bench.common import image, number, table  # noqa: E402
from bench.cost import AGENTMEMORY_MODES, BUDGETS, PEERS, RESERVE_TOKENS, SUMMARY  # noqa: E402
from bench.cost_bound import cheapest  # noqa: E402
from bench.economy import CALLS_PER_BUDGET, OVERHEAD_PER_CALL  # noqa: E402

COST_TARGET = 0.8  # agentmemory's cost at most this share of LangChain's middleware's
CALLS_CEILING = 4  # calls never above this many × conversation tokens ÷ B
#: The chart of one workload's cost (bench/charts.py draws it from `cost_figures`).
COST_CHART = "cost-{workload}.svg"
NAMES = {"inline": "agentmemory, inline", "background": "agentmemory, background (caught up)",
         "langchain": "LangChain `SummarizationMiddleware`",
         "langmem": "langmem `summarize_messages`"}


@dataclass
class Priced:
    """One run's figures, as the table and the findings read them."""

    run: dict[str, Any]
    total: int  # the workload's tokens

    @property
    def calls(self) -> int:
        return int(self.run["stub"]["calls"])

    @property
    def summarizer(self) -> float:
        stub = self.run["stub"]
        return cost_model.summarizer_cost(stub["prompt_tokens"], stub["completion_tokens"])

    @property
    def contexts(self) -> float:
        return float(self.run["cost"]["contexts_cost"])

    @property
    def cost(self) -> float:
        return self.contexts + self.summarizer

    @property
    def cached_cost(self) -> float:
        return float(self.run["cost"]["cached_cost"])

    def mean(self, key: str) -> float:
        return float(self.run["cost"][f"{key}_mean"])

    @property
    def breaks(self) -> int:
        return int(self.run["cost"]["breaks"])

    @property
    def input_ratio(self) -> float:
        return self.run["stub"]["prompt_tokens"] / self.total

    @property
    def input_bound(self) -> float:
        return 1 + OVERHEAD_PER_CALL * self.calls / self.total

    def calls_bound(self, times: float = CALLS_PER_BUDGET) -> float:
        return times * self.total / self.run["budget"]


def priced_runs(measured: dict[str, Any], workload: str, budget: int) -> dict[str, Priced]:
    """The runs of one workload and budget that were made, by mode, in the tables' order."""
    totals = measured["conversation_tokens"]
    by_key = {(run["workload"], run["budget"], run["mode"]): run for run in measured["runs"]}
    return {mode: Priced(by_key[workload, budget, mode], totals[workload])
            for mode in (*AGENTMEMORY_MODES, *PEERS) if (workload, budget, mode) in by_key}


def cost_figures(results: dict[str, Any]) -> dict[str, dict[int, dict[str, float]]]:
    """Per workload and budget, each run's cost as its table gives it, by the name the
    tables give the library (runs that failed left out)."""
    measured = results.get("cost")
    figures: dict[str, dict[int, dict[str, float]]] = {}
    for workload in conv.WORKLOADS if measured else ():
        for budget in BUDGETS:
            costs = {NAMES[mode].replace("`", ""): p.cost
                     for mode, p in priced_runs(measured, workload, budget).items()
                     if "error" not in p.run}
            if costs:
                figures.setdefault(workload, {})[budget] = costs
    return figures


def section(results: dict[str, Any]) -> str:
    measured = results.get("cost")
    if not measured:
        return ""
    parts = [_intro(measured["conversation_tokens"])]
    charted = cost_figures(results)
    for workload in conv.WORKLOADS:
        found: list[str] = []
        for budget in BUDGETS:
            priced = priced_runs(measured, workload, budget)
            if not priced:
                continue
            parts.append(_table(workload, budget, priced, measured["skipped"]))
            found += findings(budget, priced)
        if workload in charted:
            parts.append(_chart(workload))
        if found:
            parts.append(f"What the {workload} tables say:\n\n"
                         + "\n".join(f"* {sentence}" for sentence in found))
    parts.append(_times(measured))
    parts.append(_agents_sdk(measured.get("agents_sdk", {})))
    return "\n\n".join(parts)


def _intro(totals: dict[str, int]) -> str:
    sizes = " and ".join(f"`{w}` ({totals[w]:,} tokens)" for w in conv.WORKLOADS)
    budgets = ", ".join(f"{b:,}" for b in BUDGETS)
    floor = f"floor((shared − {cost_model.CACHE_MIN:,}) ÷ {cost_model.CACHE_STEP})"
    return f"""## Cost: each turn's model call at the cached price, plus the summarizer

What a conversation costs an agent that makes one model call a turn (bench/cost.py,
priced by bench/cost_model.py). Two seeded workloads of {conv.TURNS:,} turns
(bench/conversation.py), {sizes}: the economy's conversation, and short chit-chat
turns with, about one turn in five, a tool round whose result is 300 to 900 tokens of
JSON. The budgets are {budgets}.

* **agentmemory** recalls with `services.recall(thread, B)` at the default settings,
  **inline** (the recall folds when it must) and in **background** mode with the worker
  caught up: `RECALL_MODE` "background", the thread's `fold_budget` = B, and a Celery
  app in eager mode, so each append's fold request runs the `fold_thread` task before
  the next recall (a worker that is never behind). Each turn asks `services.fold_due`
  before its recall; a turn that found one still due would be reported below.
* **the peers** get the same room, B − {RESERVE_TOKENS}: LangChain's
  `SummarizationMiddleware` (trigger = the room, keep = half the room, in tokens) and
  langmem's `summarize_messages` (max_tokens = the room). The loopback stub answers
  every summarizer request with the same {_summary_tokens()}-token summary.
* **context**: what the library hands the model each turn (agentmemory:
  `result.as_chat_messages()`), each message counted as `render()` shows it
  (o200k_base, the same rule for every library). **cached**: OpenAI's rule on the prefix
  shared with the previous turn's context (identical leading messages whole, then the
  common leading tokens of the first message that differs): nothing below
  {cost_model.CACHE_MIN:,} tokens, then {cost_model.CACHE_MIN:,} + {cost_model.CACHE_STEP}
  × {floor}.
* **cost**, in uncached input tokens: Σ over turns of (context − cached +
  {cost_model.CACHED_PRICE} × cached), plus the summarizer's input and
  {cost_model.OUTPUT_PRICE:.0f} × its output (the stub's counts); **÷ LangChain**
  against the target ≤ {COST_TARGET} for agentmemory.
* **calls** (agentmemory: chunks + absorbing + merges, by what the stub was sent: messages
  only, messages with the earlier summaries they absorb in the same call, summaries only)
  against ≤ {CALLS_PER_BUDGET} × conversation ÷ B, never above {CALLS_CEILING} ×;
  **input ÷ conversation** against ≤ 1 + {OVERHEAD_PER_CALL} × calls ÷ conversation
  (the conversation counted as the contexts are).
* **prefix breaks**: turns whose context does not begin with the whole previous one (a
  fold rewrote it); **gap / split / user missing** as in the economy part for
  agentmemory (checked against its rows); for the peers, split tool pairs and turns
  whose context did not end with the user's new message."""


def _chart(workload: str) -> str:
    return (image(COST_CHART.format(workload=workload),
                  f"The {workload} workload's cost per conversation, one panel per budget")
            + f"\n\n*The {workload} tables as bars: the cost of the {conv.TURNS:,} turns by "
            "library and mode, one panel per budget, each on its own scale from zero (the "
            "figures are the tables' cost column).*")


def _summary_tokens() -> int:
    return conv.count_tokens(SUMMARY)


def _verdict(ok: bool) -> str:
    return "pass" if ok else "**fail**"


def _table(workload: str, budget: int, priced: dict[str, Priced],
           skipped: dict[str, str]) -> str:
    langchain = priced.get("langchain")
    rows = []
    for mode, p in priced.items():
        run = p.run
        if "error" in run:
            rows.append([NAMES[mode], f"not run: {run['error']}"] + ["—"] * 9)
            continue
        calls = f"{p.calls:,}"
        if mode in AGENTMEMORY_MODES:
            calls += f" ({run['chunks']:,} + {run['absorbing']:,} + {run['merges']:,})"
        bound = p.calls_bound()
        calls_verdict = ("pass" if p.calls <= bound else "within 4 ×" if
                         p.calls <= p.calls_bound(CALLS_CEILING) else "**fail**")
        ratio = "—"
        if langchain and "error" not in langchain.run:
            share = p.cost / langchain.cost
            ratio = f"{share:.3f}" + (f" ({_verdict(share <= COST_TARGET)})"
                                      if mode in AGENTMEMORY_MODES else "")
        if mode in AGENTMEMORY_MODES:
            c = run["checks"]
            checks = f"{c['gap']} / {c['split']} / {c['user_missing']}"
        else:
            checks = f"— / {run['orphan_turns']} / {run['not_verbatim']}"
        rows.append([
            NAMES[mode], calls, f"≤ {bound:,.1f}: {calls_verdict}",
            f"{p.input_ratio:.3f} (≤ {p.input_bound:.3f}: "
            f"{_verdict(p.input_ratio <= p.input_bound)})",
            number(p.mean("context")), number(p.mean("cached")), f"{p.breaks:,}",
            number(p.cost), ratio, checks, number(run["elapsed_s"], 1),
        ])
    left_out = [f"{NAMES[key.rsplit(' ', 1)[1]]}: {why}" for key, why in skipped.items()
                if key.startswith(f"{workload} {budget} ")]
    note = ("\n\nNot run: " + "; ".join(left_out) + ".") if left_out else ""
    rooms = sorted({p.run["room"] for p in priced.values() if "room" in p.run})
    room = (f" (room: agentmemory {', '.join(map(number, rooms))}, the peers "
            f"{number(budget - RESERVE_TOKENS)})" if rooms else "")
    return f"### {workload}, budget {budget:,}{room}\n\n" + table(
        ["library, mode", "calls (chunks + absorbing + merges)", "calls target",
         "input ÷ conversation",
         "mean context", "mean cached", "prefix breaks", "cost", "÷ LangChain",
         "gap / split / user missing", "run s"], rows, "lrlrrrrrrrr") + note


def findings(budget: int, priced: dict[str, Priced]) -> list[str]:
    """Sentences for one workload and budget, from its figures."""
    found = []
    langchain = priced.get("langchain")
    ok = {mode: p for mode, p in priced.items() if "error" not in p.run}
    for mode in AGENTMEMORY_MODES:
        p = ok.get(mode)
        if p is None:
            continue
        name = f"B = {budget:,}, {mode}"
        parts = [
            f"the contexts are {100 * (p.contexts - p.cached_cost) / p.cost:.0f}% of the cost "
            f"uncached and {100 * p.cached_cost / p.cost:.0f}% cached, the summarizer "
            f"{100 * p.summarizer / p.cost:.0f}%"]
        if langchain and "error" not in langchain.run:
            share = p.cost / langchain.cost
            parts.insert(0, f"{number(p.cost)} against LangChain's {number(langchain.cost)} "
                            f"(× {share:.3f}: {'within' if share <= COST_TARGET else '**over**'} "
                            f"the {COST_TARGET} target), with a mean context of "
                            f"{number(p.mean('context'))} tokens against "
                            f"{number(langchain.mean('context'))}")
        found.append(f"{name}: " + "; ".join(parts) + ".")
        if langchain and "error" not in langchain.run and p.cost > COST_TARGET * langchain.cost:
            found += _floor(name, p, langchain)
        if p.calls > p.calls_bound():
            extra = p.calls - p.calls_bound()
            per_call = p.summarizer / p.calls
            text = (f"{name}: **{p.calls:,} calls, over {CALLS_PER_BUDGET} × conversation ÷ B "
                    f"= {p.calls_bound():,.1f}**"
                    + (f" (and over {CALLS_CEILING} ×, {p.calls_bound(CALLS_CEILING):,.1f})"
                       if p.calls > p.calls_bound(CALLS_CEILING) else
                       f", within {CALLS_CEILING} ×") +
                    f". The {extra:,.1f} calls above the target cost about "
                    f"{number(extra * per_call)} at the mean call's {number(per_call)}, "
                    f"{100 * extra * per_call / p.cost:.0f}% of the total")
            if langchain and "error" not in langchain.run:
                saving = langchain.cost - p.cost
                text += (f"; the run costs {number(saving)} less than LangChain's middleware, "
                         "so the earlier folds went with a cheaper conversation"
                         if saving > 0 else
                         f"; the run costs {number(-saving)} more than LangChain's middleware, "
                         "so the earlier folds did not buy a cheaper conversation")
            found.append(text + ".")
        if p.input_ratio > p.input_bound:
            found.append(f"{name}: **summarizer input {p.input_ratio:.3f} × the conversation**, "
                         f"over its target {p.input_bound:.3f}.")
        c = p.run["checks"]
        broken = [f"{c[key]} turns with {label} (the first at turn {c['first'][key]})"
                  for key, label in (("gap", "a gap"), ("split", "a split tool pair"),
                                     ("user_missing", "the user message missing"))
                  if c[key]]
        if broken:
            found.append(f"{name}: **" + ", ".join(broken) + "**.")
        if p.run.get("still_due"):
            found.append(f"{name}: {p.run['still_due']:,} turns found a fold still due before "
                         "the recall: the eager worker was not caught up.")
        folds = p.calls
        if p.breaks > folds:
            found.append(f"{name}: {p.breaks:,} prefix breaks for {folds:,} summarizer calls: "
                         "some contexts changed from their start without a fold.")
    inline, background = ok.get("inline"), ok.get("background")
    if inline and background and inline.cost:
        change = background.cost / inline.cost - 1
        found.append(f"B = {budget:,}: background mode costs {100 * change:+.1f}% against inline "
                     f"({background.calls:,} calls against {inline.calls:,}).")
    return found


def _floor(name: str, p: Priced, langchain: Priced) -> list[str]:
    """Where no prefix is cached, the cheapest fold schedule (bench/cost_bound.py) with the
    run's own summary message and call: how far under its cost any policy could go."""
    run, stub = p.run, p.run["stub"]
    if run["room"] >= cost_model.CACHE_MIN or not p.calls or "summary_message_mean" not in run:
        return []
    fixed = ((stub["prompt_tokens"] - p.total) / p.calls
             + cost_model.OUTPUT_PRICE * stub["completion_tokens"] / p.calls)
    summary = run["summary_message_mean"]
    floor = cheapest(run["workload"], run["room"], summary, fixed) + p.total
    share = floor / langchain.cost
    verdict = ("no such schedule gets under the target with these summaries and calls"
               if share > COST_TARGET else "a schedule under the target exists")
    return [f"{name}: nothing of a {number(run['room'])}-token room is ever cached, so the "
            "cheapest schedule of folds into one rolling summary (all a room this size holds), "
            "chosen knowing the whole conversation in advance "
            f"(bench/cost_bound.py, with this run's summary message of {summary:,.0f} tokens "
            f"and a call's fixed part of {fixed:,.0f}: instruction, absorbed summary and "
            f"{cost_model.OUTPUT_PRICE:.0f} × the answer), costs {number(floor)}, × {share:.3f} "
            f"of LangChain's: {verdict}; this run is {100 * (p.cost / floor - 1):.1f}% above "
            "that floor."]


def _times(measured: dict[str, Any]) -> str:
    runs = sorted(measured["runs"], key=lambda run: -run["wall_s"])
    listed = ", ".join(f"{run['workload']} {run['budget']:,} {run['mode']} {run['wall_s']:.0f} s"
                       for run in runs)
    text = (f"Each run took (wall clock of its process, two at a time, longest first): "
            f"{listed}; the part {measured['elapsed_s']:.0f} s.")
    ours = [run for run in runs if run["mode"] in AGENTMEMORY_MODES and "cost" in run]
    large = [run for run in ours if run["budget"] == max(BUDGETS)]
    small = [run for run in ours if run["budget"] != max(BUDGETS)]
    if large and small:
        def span(values: list[float]) -> str:
            return f"{min(values):,.0f}-{max(values):,.0f}"

        text += (f" agentmemory's runs at B = {max(BUDGETS):,} took "
                 f"{span([r['elapsed_s'] for r in large])} s for their {conv.TURNS:,} turns "
                 f"(a mean context of {span([r['cost']['context_mean'] for r in large])} "
                 f"tokens), the others at most {max(r['elapsed_s'] for r in small):.0f} s (at "
                 f"most {max(r['cost']['context_mean'] for r in small):,.0f}): a recall's time "
                 "follows the size of the context it loads, counts and formats.")
    background = [run for run in ours if run["mode"] == "background"]
    if background and not any(run["still_due"] for run in background):
        text += (" In background mode no turn found a fold still due before its recall: the "
                 "eager worker was caught up at every turn.")
    return text


def _agents_sdk(probe: dict[str, Any]) -> str:
    head = "### The OpenAI Agents SDK\n\n"
    if not probe.get("installed"):
        return head + ("Not compared: `openai-agents` is not installed in the project's "
                       f"environment ({probe.get('reason', 'not probed')}).")
    compact = ("it calls the Responses API's server-side `responses.compact`"
               if probe["calls_compact"] else "it does not call `responses.compact`")
    return head + (
        f"`openai-agents` {probe['version']} has a compacting session, "
        f"`{probe['session']}`, but it is not in these tables: {compact}, whose answer "
        "is the provider's own compaction items (the user's messages kept, the rest replaced "
        "by an item of `encrypted_content`), so what it keeps and what the model is charged "
        "for it are decided on the provider's side, where no client can count them; and the "
        "loopback stub serves Chat Completions only (it answered "
        f"`POST /v1/responses/compact` with {probe['stub_status']}). A stub that invented "
        "both would measure itself, not the SDK. Its default trigger is a count of items "
        f"({probe['threshold']} candidates), not tokens.")


if __name__ == "__main__":
    print(section(json.loads(Path(sys.argv[1]).read_text())))
