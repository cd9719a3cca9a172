"""One progress reporter for every agentmemory command: done/total, rate, time left.

On a terminal the status line is redrawn in place (``\\r``), at most ten times a second,
and ends with a newline when the work is done. Anywhere else (a pipe, a log file, cron's
mail) it writes plain lines, one per checkpoint (the commands make one per batch), so
the log of a long run says how far it got without a control character in it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from django.core.management.base import OutputWrapper


class Progress:
    """``done`` of ``total`` ``unit``, with named counts beside it (``folded 3, calls 4``).

    The status is shown as soon as it is made (the total, before the first item);
    ``advance`` after each item, ``finish`` at the end. Off a terminal a plain line is
    written each ``every`` items, and at each ``checkpoint`` (for work whose items come
    in batches). With ``enabled`` False (``-v 0``) nothing is written. A total that
    turns out short (rows derived from the counted ones) grows to what was done.
    """

    #: Seconds between two redraws on a terminal.
    REDRAW_EVERY = 0.1

    def __init__(
        self,
        out: OutputWrapper,
        total: int,
        unit: str,
        *,
        label: str,
        counts: tuple[str, ...] = (),
        enabled: bool = True,
        every: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.out, self.total, self.unit, self.label = out, total, unit, label
        self.enabled, self.every = enabled, every
        self.tty = enabled and out.isatty()
        self.done = 0
        self.counts = dict.fromkeys(counts, 0)
        self._clock = clock
        self._started = clock()
        self._drawn_at: float | None = None
        self._width = 0
        self._written_at_done = -1
        self._next_line = every or 0
        self.checkpoint()  # the total, before the first item

    def advance(self, done: int = 1, **counts: int) -> None:
        self.done += done
        self.total = max(self.total, self.done)
        for name, value in counts.items():
            self.counts[name] = self.counts.get(name, 0) + value
        if self.tty:
            if self._drawn_at is None or self._clock() - self._drawn_at >= self.REDRAW_EVERY:
                self._draw()
        elif self.every and self.done >= self._next_line:
            self.checkpoint()
            self._next_line = (self.done // self.every + 1) * self.every

    def checkpoint(self) -> None:
        """The end of a batch: a redraw on a terminal, a plain line anywhere else."""
        if self.tty:
            self._draw()
        elif self.enabled and self._written_at_done != self.done:
            self.out.write(self.status())
            self._written_at_done = self.done

    def note(self, text: str) -> None:
        """A line of its own (``-v 2`` details), above the status line on a terminal."""
        if not self.enabled:
            return
        if self.tty:
            self.out.write("\r" + text.ljust(self._width))
            self._width = 0
            self._draw()
        else:
            self.out.write(text)

    def finish(self) -> None:
        """The last status: on a terminal the line is kept (a newline follows it)."""
        if self.tty:
            self._draw()
            self.out.write("")
            self._width = 0
        else:
            self.checkpoint()

    def status(self) -> str:
        elapsed = self._clock() - self._started
        share = f" ({100 * self.done // self.total}%)" if self.total else ""
        line = f"{self.label}: {self.done}/{self.total} {self.unit}{share}"
        if self.done and elapsed > 0:
            rate = self.done / elapsed
            line += f", {rate:.1f}/s, {duration((self.total - self.done) / rate)} left"
        if self.counts:
            line += "; " + ", ".join(
                f"{name.replace('_', ' ')} {value}" for name, value in self.counts.items()
            )
        return line

    def _draw(self) -> None:
        line = self.status()
        # Spaces over what a longer line before left on the screen.
        self.out.write("\r" + line.ljust(self._width), ending="")
        self.out.flush()
        self._width = len(line)
        self._drawn_at = self._clock()


def duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``."""
    whole = int(round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
