"""The benchmark page's charts, drawn from the figures the suite gathers (the same ones its
tables show) by the plain SVG writer in bench/svg.py, into docs/img/ beside the page.

    .venv/bin/python bench/charts.py artifacts/benchmarks.json   # redraw from a run's figures

`charts(results)` is every chart a run's figures allow, by file name; the page's sections
name the same files (`bench.cost_report.COST_CHART`, `LATENCY_CHART`) under the same
conditions, and tests/test_bench_charts.py holds the two together.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import cost_report  # noqa: E402
from bench.common import IMAGES, image  # noqa: E402
from bench.svg import Bar, Panel, Series, bar_panels, line_chart  # noqa: E402

LATENCY_CHART = "recall-latency.svg"
#: One colour per library and mode, the same in every chart.
COLOURS = {
    "agentmemory, inline": "#b8860b",
    "agentmemory, background (caught up)": "#e3c15a",
    "LangChain SummarizationMiddleware": "#3d62a8",
    "langmem summarize_messages": "#8a4fa6",
}
ENGINE_COLOURS = ("#3d62a8", "#3c8a57", "#b04a3c", "#777777")


def cost_chart(workload: str, by_budget: dict[int, dict[str, float]]) -> str:
    return bar_panels(
        f"{workload}: cost of the conversation, by budget",
        [Panel(f"B = {budget:,}", [Bar(name, cost, COLOURS.get(name, "#777777"))
                                  for name, cost in costs.items()])
         for budget, costs in sorted(by_budget.items())],
        unit="uncached input tokens",
        note="Each turn's context at the cached price plus the summarizer, in uncached input "
             "tokens; each panel on its own scale from zero.",
    )


def latency_series(results: dict[str, Any]) -> list[Series]:
    """Recall p50 against the thread's length: the never-folded threads of the sizes part
    and the folded ones of the folded part, a colour per database."""
    series = []
    for index, run in enumerate(results.get("sizes", {}).values()):
        points = sorted((int(size), row["recall"]["p50_ms"]) for size, row in run["sizes"].items())
        series.append(Series(f"{run['engine']}: never folded", points,
                             ENGINE_COLOURS[index % len(ENGINE_COLOURS)], dashed=True))
    engines = list(results.get("sizes", {}))
    for engine, run in results.get("folded", {}).items():
        index = engines.index(engine) if engine in engines else len(engines)
        points = sorted((int(size), row["p50_ms"]) for size, row in run["sizes"].items())
        series.append(Series(f"{run['engine']}: folded", points,
                             ENGINE_COLOURS[index % len(ENGINE_COLOURS)]))
    return series


def latency_chart(series: list[Series]) -> str:
    return line_chart(
        "Recall p50 against the thread's length", series,
        x_label="entries in the thread (logarithmic)", y_label="recall p50, ms",
        note="services.recall(thread, 4000, mode=\"background\"); dashed: never folded (a "
             "backlog), solid: folded but for the newest 40.",
    )


def latency_image(results: dict[str, Any]) -> str:
    """The latency chart's Markdown, with its caption; "" when neither part ran."""
    if not latency_series(results):
        return ""
    return (image(LATENCY_CHART, "Recall p50 against the thread's length, never folded and "
                  "folded, on each database")
            + "\n\n*The recall p50 columns of the two sections above against the thread's "
            "length, on a logarithmic scale: a line that stays level is a recall that does not "
            "grow with the thread.*")


def charts(results: dict[str, Any]) -> dict[str, str]:
    """Every chart ``results`` allow: file name -> SVG text."""
    drawn = {
        cost_report.COST_CHART.format(workload=workload): cost_chart(workload, by_budget)
        for workload, by_budget in cost_report.cost_figures(results).items()
    }
    series = latency_series(results)
    if series:
        drawn[LATENCY_CHART] = latency_chart(series)
    return drawn


def write(results: dict[str, Any], page: Path) -> list[Path]:
    """Write the charts beside ``page`` (its IMAGES/ folder); return their paths."""
    folder = page.parent / IMAGES
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, svg in charts(results).items():
        (folder / name).write_text(svg)
        written.append(folder / name)
    return written


if __name__ == "__main__":
    raw = json.loads(Path(sys.argv[1]).read_text())
    for path in write(raw, Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"):
        print(path)
