"""A small SVG writer for the benchmark page's charts: plain Python, nothing to install.

Two charts, both drawn from figures the suite already gathers (bench/charts.py picks
them): panels of bars, each panel on its own scale from zero (small multiples), and
lines over a logarithmic or linear x axis. Every mark carries its figure in a ``<title>``
(shown on hover, read by screen readers) and in ``data-value``; text is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

FONT = "font-family:system-ui,-apple-system,'Segoe UI',Roboto,Helvetica,Arial,sans-serif"
INK, QUIET, GRID = "#222", "#666", "#ddd"


def short(value: float) -> str:
    """A figure in three significant digits or so: 678,561 -> 679k, 3,648,370 -> 3.65M."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            scaled = value / size
            return f"{scaled:.3g}{suffix}" if scaled < 100 else f"{scaled:.0f}{suffix}"
    return f"{value:.3g}"


class Svg:
    """An SVG document built element by element."""

    def __init__(self, width: int, height: int, title: str, desc: str = "") -> None:
        self.width, self.height = width, height
        self.parts = [f"<title>{escape(title)}</title>"]
        if desc:
            self.parts.append(f"<desc>{escape(desc)}</desc>")
        self.parts.append(f'<rect width="{width}" height="{height}" fill="#fff"/>')

    def add(self, tag: str, title: str = "", text: str = "", **attrs: object) -> None:
        """One element: ``attrs`` with ``_`` for ``-`` (``font_size``), numbers rounded;
        ``title`` a tooltip, ``text`` its content."""
        written = " ".join(
            f"{name.rstrip('_').replace('_', '-')}={quoteattr(_number(value))}"
            for name, value in attrs.items() if value is not None
        )
        inner = (f"<title>{escape(title)}</title>" if title else "") + escape(text)
        self.parts.append(f"<{tag} {written}>{inner}</{tag}>" if inner else f"<{tag} {written}/>")

    def text(self, x: float, y: float, text: str, *, size: float = 12, anchor: str = "start",
             colour: str = INK, weight: str = "normal", rotate: float = 0) -> None:
        self.add("text", text=text, x=x, y=y, font_size=size, text_anchor=anchor, fill=colour,
                 font_weight=weight, style=FONT,
                 transform=f"rotate({rotate:g} {x:.2f} {y:.2f})" if rotate else None)

    def render(self) -> str:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" '
                f'height="{self.height}" viewBox="0 0 {self.width} {self.height}" role="img">\n'
                + "\n".join(self.parts) + "\n</svg>\n")


def _number(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return str(value)


@dataclass(frozen=True)
class Bar:
    label: str  # the series, as the legend names it
    value: float
    colour: str


@dataclass(frozen=True)
class Panel:
    title: str
    bars: Sequence[Bar]


def bar_panels(title: str, panels: Sequence[Panel], unit: str, *, width: int = 820,
               height: int = 330, note: str = "") -> str:
    """Panels side by side, each its bars from zero to its own largest (the tallest bar
    reaches the panel's top), the figure over each bar; one legend for all."""
    svg = Svg(width, height, title, note)
    svg.text(12, 22, title, size=15, weight="600")
    if note:
        svg.text(12, 40, note, size=11, colour=QUIET)
    top, base = 74, height - 68  # the tallest bar's top, the baseline
    gap, pad = 18, 12
    inner = (width - 2 * pad - gap * (len(panels) - 1)) / max(len(panels), 1)
    for index, panel in enumerate(panels):
        left = pad + index * (inner + gap)
        svg.add("line", x1=left, x2=left + inner, y1=base, y2=base, stroke=QUIET)
        svg.text(left + inner / 2, base + 18, panel.title, size=12, anchor="middle")
        largest = max((bar.value for bar in panel.bars), default=0) or 1
        slot = inner / max(len(panel.bars), 1)
        for number, bar in enumerate(panel.bars):
            tall = (base - top) * bar.value / largest
            x = left + number * slot + slot * 0.12
            svg.add("rect", title=f"{panel.title}, {bar.label}: {bar.value:,.0f} {unit}",
                    x=x, y=base - tall, width=slot * 0.76, height=tall, fill=bar.colour,
                    data_value=f"{bar.value:g}", data_series=bar.label)
            svg.text(x + slot * 0.38, base - tall - 5, short(bar.value), size=10,
                     anchor="middle", colour=INK)
    _legend(svg, [(bar.label, bar.colour, "box") for bar in _series_of(panels)], height - 30)
    return svg.render()


def _series_of(panels: Sequence[Panel]) -> list[Bar]:
    seen: dict[str, Bar] = {}
    for panel in panels:
        for bar in panel.bars:
            seen.setdefault(bar.label, bar)
    return list(seen.values())


def _legend(svg: Svg, keys: Sequence[tuple[str, str, str]], y: float) -> None:
    """A key per series (``box`` for bars, ``line`` or ``dash`` for lines) from the left, a
    second row (16 px lower) when one is full."""
    x = 12.0
    for name, colour, style in keys:
        needed = 34 + 6 * len(name)
        if x > 12 and x + needed > svg.width:
            x, y = 12.0, y + 16
        if style == "box":
            svg.add("rect", x=x, y=y - 10, width=12, height=12, fill=colour)
        else:
            svg.add("line", x1=x - 2, x2=x + 16, y1=y - 4, y2=y - 4, stroke=colour,
                    stroke_width=2, stroke_dasharray="6 4" if style == "dash" else None)
        svg.text(x + 21, y, name, size=11)
        x += needed


@dataclass(frozen=True)
class Series:
    name: str
    points: Sequence[tuple[float, float]]  # (x, y), x ascending
    colour: str
    dashed: bool = False


def ticks(low: float, high: float, log: bool) -> list[float]:
    """Axis marks: the powers of ten from ``low`` to ``high`` (log), else 0 to a round top
    in four or five steps (that top is the last mark)."""
    if log:
        first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
        return [10.0 ** power for power in range(first, last + 1)]
    step = 10 ** math.floor(math.log10(high / 4)) if high > 0 else 1
    for factor in (1, 2, 2.5, 5, 10):
        if high / (step * factor) <= 5:
            step *= factor
            break
    return [step * n for n in range(math.ceil(high / step - 1e-9) + 1)]


def line_chart(title: str, series: Sequence[Series], *, x_label: str, y_label: str,
               log_x: bool = True, width: int = 820, height: int = 360, note: str = "") -> str:
    """Lines with a dot at each figure, over a grid: x logarithmic (or linear), y linear
    from zero to a round top."""
    svg = Svg(width, height, title, note)
    svg.text(12, 22, title, size=15, weight="600")
    if note:
        svg.text(12, 40, note, size=11, colour=QUIET)
    left, right, top, bottom = 64, width - 40, 60, height - 84
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points]
    x_marks = ticks(min(xs, default=1), max(xs, default=10), log_x)
    y_marks = ticks(0, max(ys, default=1), log=False)
    x_low, x_high, y_high = x_marks[0], x_marks[-1], y_marks[-1] or 1

    def px(x: float) -> float:
        if log_x:
            share = (math.log10(x) - math.log10(x_low)) / (math.log10(x_high) - math.log10(x_low))
        else:
            share = (x - x_low) / ((x_high - x_low) or 1)
        return left + share * (right - left)

    def py(y: float) -> float:
        return bottom - (bottom - top) * y / y_high

    for mark in y_marks:
        svg.add("line", x1=left, x2=right, y1=py(mark), y2=py(mark), stroke=GRID)
        svg.text(left - 6, py(mark) + 4, f"{mark:g}", size=11, anchor="end", colour=QUIET)
    for mark in x_marks:
        svg.add("line", x1=px(mark), x2=px(mark), y1=top, y2=bottom, stroke=GRID)
        svg.text(px(mark), bottom + 16, f"{mark:,.0f}", size=11, anchor="middle", colour=QUIET)
    svg.text((left + right) / 2, bottom + 34, x_label, size=12, anchor="middle")
    svg.text(16, (top + bottom) / 2, y_label, size=12, anchor="middle", rotate=-90)
    for s in series:
        svg.add("polyline", points=" ".join(f"{px(x):.2f},{py(y):.2f}" for x, y in s.points),
                fill="none", stroke=s.colour, stroke_width=2,
                stroke_dasharray="6 4" if s.dashed else None, data_series=s.name)
        for x, y in s.points:
            svg.add("circle", title=f"{s.name}: {y:g} at {x:,.0f}", cx=px(x), cy=py(y), r=3.5,
                    fill=s.colour, data_x=f"{x:g}", data_value=f"{y:g}", data_series=s.name)
    _legend(svg, [(s.name, s.colour, "dash" if s.dashed else "line") for s in series],
            height - 28)
    return svg.render()
