"""The benchmark page's charts: the SVG writer's output is well-formed XML whose bars and
points follow the figures given, the charts are drawn from the figures the tables show,
and the page names exactly the charts a run's figures allow (and the checked-in ones)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from bench import charts, cost_report
from bench.svg import Bar, Panel, Series, bar_panels, line_chart, short, ticks

SVG = "{http://www.w3.org/2000/svg}"
DOCS = Path(__file__).resolve().parent.parent / "docs"


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return root


def marks(root: ET.Element, tag: str) -> list[ET.Element]:
    return [element for element in root.iter(f"{SVG}{tag}") if "data-value" in element.attrib]


def test_bars_follow_the_figures_each_panel_on_its_own_scale() -> None:
    svg = bar_panels("Cost & <ratio>", [
        Panel("B = 1,000", [Bar("a", 400, "#111"), Bar("b", 100, "#222"), Bar("c", 0, "#333")]),
        Panel("B = 4,000", [Bar("a", 7_000, "#111"), Bar("b", 3_500, "#222")]),
    ], unit="tokens")
    root = parse(svg)  # the title's & and < are escaped
    assert root.find(f"{SVG}title").text == "Cost & <ratio>"
    bars = marks(root, "rect")
    assert [(b.get("data-series"), float(b.get("data-value"))) for b in bars] == [
        ("a", 400), ("b", 100), ("c", 0), ("a", 7_000), ("b", 3_500)]
    heights = [float(b.get("height")) for b in bars]
    bases = {round(float(b.get("y")) + float(b.get("height")), 2) for b in bars}
    assert len(bases) == 1, "every bar stands on the same baseline"
    # Within a panel, heights are in proportion to the figures; the largest of each panel
    # is as tall as the other panel's largest.
    assert heights[1] / heights[0] == pytest.approx(100 / 400, abs=1e-3)
    assert heights[2] == 0
    assert heights[4] / heights[3] == pytest.approx(0.5, abs=1e-3)
    assert heights[0] == pytest.approx(heights[3])
    # Left to right in the order given, and each with its exact figure in its title.
    xs = [float(b.get("x")) for b in bars]
    assert xs == sorted(xs)
    assert bars[3].find(f"{SVG}title").text == "B = 4,000, a: 7,000 tokens"
    assert "7k" in [t.text for t in root.iter(f"{SVG}text")]


def test_points_follow_the_figures_on_a_logarithmic_x_axis() -> None:
    svg = line_chart("Recall", [
        Series("one", [(100, 2.0), (1_000, 4.0), (10_000, 3.0), (100_000, 8.0)], "#111"),
        Series("two", [(1_000, 1.0), (1_000_000, 1.0)], "#222", dashed=True),
    ], x_label="entries", y_label="ms")
    root = parse(svg)
    dots = marks(root, "circle")
    one = [(float(d.get("cx")), float(d.get("cy"))) for d in dots if d.get("data-series") == "one"]
    # Each tenfold step of x is the same distance to the right...
    steps = [b[0] - a[0] for a, b in zip(one, one[1:], strict=False)]
    assert steps == pytest.approx([steps[0]] * 3) and steps[0] > 0
    two = [float(d.get("cx")) for d in dots if d.get("data-series") == "two"]
    assert two[1] - two[0] == pytest.approx(3 * steps[0])
    # ...and y is linear from a zero baseline: 8 ms twice as high as 4 ms.
    base = one[0][1] + (one[0][1] - one[1][1])  # 0 ms, from the y of 2 ms and of 4 ms
    assert base - one[3][1] == pytest.approx(2 * (base - one[1][1]))
    lines = {line.get("data-series"): line for line in root.iter(f"{SVG}polyline")}
    assert lines["two"].get("stroke-dasharray") == "6 4"
    assert lines["one"].get("points").split()[0] == f"{one[0][0]:.2f},{one[0][1]:.2f}"


def test_axis_marks_and_short_figures() -> None:
    assert ticks(100, 1_000_000, log=True) == [100, 1_000, 10_000, 100_000, 1_000_000]
    assert ticks(150, 90_000, log=True) == [100, 1_000, 10_000, 100_000]
    assert ticks(0, 13.85, log=False) == [0, 5, 10, 15]
    assert ticks(0, 2.24, log=False)[-1] >= 2.24
    assert [short(v) for v in (678_561, 3_648_370, 153, 1_086_043, 12_500)] == [
        "679k", "3.65M", "153", "1.09M", "12.5k"]


# ------------------------------------------------------------------ from a run's figures


def cost_run(workload: str, budget: int, mode: str, contexts: float) -> dict[str, Any]:
    """A run of bench/cost.py as its report reads it; its cost is ``contexts`` plus the
    summarizer's 1,000 prompt and 50 completion tokens."""
    run: dict[str, Any] = {
        "workload": workload, "budget": budget, "mode": mode, "room": budget - 256,
        "elapsed_s": 1.0, "wall_s": 2.0, "still_due": 0,
        "stub": {"calls": 2, "prompt_tokens": 1_000, "completion_tokens": 50},
        "cost": {"contexts_cost": contexts, "cached_cost": 0.0, "context_mean": 500.0,
                 "cached_mean": 0.0, "breaks": 2},
    }
    if mode in ("inline", "background"):
        run.update(chunks=2, absorbing=0, merges=0,
                   checks={"gap": 0, "split": 0, "user_missing": 0, "first": {}})
    else:
        run.update(orphan_turns=0, not_verbatim=0)
    return run


def results() -> dict[str, Any]:
    runs = [cost_run("parcel-support", 1_000, "inline", 600_000),
            cost_run("parcel-support", 1_000, "langchain", 1_000_000),
            cost_run("parcel-support", 4_000, "inline", 500_000),
            {"workload": "parcel-support", "budget": 4_000, "mode": "langmem", "error": "boom",
             "wall_s": 0.0, "elapsed_s": 0.0}]
    return {
        "cost": {"conversation_tokens": {"parcel-support": 90_000, "chatty-tools": 160_000},
                 "runs": runs, "skipped": {}, "elapsed_s": 10.0},
        "sizes": {"sqlite": {"engine": "SQLite", "sizes": {
            str(n): {"recall": {"p50_ms": p50}} for n, p50 in ((100, 2.0), (1_000, 2.5))}}},
        "folded": {"sqlite": {"engine": "SQLite", "sizes": {
            str(n): {"p50_ms": p50} for n, p50 in ((1_000, 2.2), (1_000_000, 2.3))}}},
    }


def test_the_cost_chart_draws_the_tables_cost_column() -> None:
    figures = cost_report.cost_figures(results())
    # The failed langmem run has no bar; chatty-tools had no run and has no chart.
    assert figures == {"parcel-support": {
        1_000: {"agentmemory, inline": 600_000 + 1_000 + 4 * 50,
                "LangChain SummarizationMiddleware": 1_000_000 + 1_000 + 4 * 50},
        4_000: {"agentmemory, inline": 500_000 + 1_000 + 4 * 50}}}
    section = cost_report.section(results())
    assert "| 601,200 |" in section.replace(" | 0.601 (pass)", "")  # the table's cost cell
    drawn = charts.charts(results())
    bars = marks(parse(drawn["cost-parcel-support.svg"]), "rect")
    assert [float(bar.get("data-value")) for bar in bars] == [601_200, 1_001_200, 501_200]


def test_the_page_names_exactly_the_charts_the_figures_allow(tmp_path: Path) -> None:
    figures = results()
    named = set(re.findall(r"\]\(img/([^)]+\.svg)\)", cost_report.section(figures)
                           + charts.latency_image(figures)))
    written = charts.write(figures, tmp_path / "benchmarks.md")
    assert named == set(charts.charts(figures)) == {path.name for path in written}
    assert named == {"cost-parcel-support.svg", "recall-latency.svg"}
    for path in written:
        parse(path.read_text())
    series = {s.name: s.points for s in charts.latency_series(figures)}
    assert series == {"SQLite: never folded": [(100, 2.0), (1_000, 2.5)],
                      "SQLite: folded": [(1_000, 2.2), (1_000_000, 2.3)]}
    assert charts.charts({}) == {} and charts.latency_image({}) == ""


def test_the_checked_in_page_shows_its_charts_and_they_are_well_formed() -> None:
    page = (DOCS / "benchmarks.md").read_text()
    named = re.findall(r"\]\(img/([^)]+\.svg)\)", page)
    assert set(named) >= {"cost-parcel-support.svg", "cost-chatty-tools.svg",
                          "recall-latency.svg"}
    for name in named:
        root = parse((DOCS / "img" / name).read_text())
        assert marks(root, "rect") or marks(root, "circle"), name
