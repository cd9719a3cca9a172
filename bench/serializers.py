"""The API's serializer work for one append, against DRF's own, interleaved in one run.

    .venv/bin/python bench/serializers.py [--rounds 40] [--calls 200]
                                          [--write docs/benchmarks.md]

In process, on a scratch SQLite database (nothing here reads it after the entries are
written). Cases, each against DRF's own way of doing the same work on the same values:

* **an append's answer**: ``EntrySerializer(entries, many=True).data`` for one appended
  message and for a batch of 40 (`api.serializers.base.ColumnReads`: fields built once,
  each column read straight into its field), against the same ``Meta`` with its fields
  built once only (`SharedFields`: DRF's walk through each field's source) and against
  a plain ModelSerializer of that ``Meta`` (DRF's own: fields built for every instance);
* **a text's surrogate check**: `api.serializers.base.NoSurrogates` against DRF's
  ``ProhibitSurrogateCharactersValidator`` on a 130-character message, a 21,700-character
  ASCII tool output and a 21,700-character one with accents.

Each round times a batch of ``--calls`` calls of every case, each way in turn (in reverse
order every other round); a figure is a batch's time a call. Prints a Markdown table:
p50 / p95 µs of each way, and each other way ÷ ours at p50.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import (  # noqa: E402
    machine,
    median,
    percentile,
    setup_django,
    table,
    write_section,
)

MARK_START = "<!-- bench/serializers.py: start -->"
MARK_END = "<!-- bench/serializers.py: end -->"

SHORT = ("Message 5: where is order 5? It was placed last week and the parcel never arrived;"
         " please check the carrier as well.")
ASCII_OUTPUT = "The parcel left the depot at 9:14, due Friday; tracking 1Z999AA10123456784.\n"
ACCENTED_OUTPUT = "Ünïcödé text, tool output line\n"


WAYS = ("ours", "fields built once only", "DRF's own")


def cases() -> list[tuple[str, dict[str, Callable[[], Any]]]]:
    """(case, {way: call}) for every case."""
    from rest_framework import serializers
    from rest_framework.validators import ProhibitSurrogateCharactersValidator

    from agentmemory import services
    from agentmemory.api.serializers.base import NoSurrogates, SharedFields
    from agentmemory.api.serializers.entries import EntrySerializer
    from agentmemory.models import Thread

    shared_only = type("SharedOnlyEntrySerializer", (SharedFields, serializers.ModelSerializer),
                       {"Meta": EntrySerializer.Meta})
    drf_own = type("DRFEntrySerializer", (serializers.ModelSerializer,),
                   {"Meta": EntrySerializer.Meta})
    one = services.append(Thread.objects.create(), {"role": "user", "content": SHORT})
    batch = services.append(Thread.objects.create(), [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"{SHORT} ({n})",
         "metadata": {"n": n}} for n in range(40)])
    found: list[tuple[str, dict[str, Callable[[], Any]]]] = []
    for label, entries in (("1 entry", one), ("40 entries", batch)):
        ways = {way: (lambda kind=kind, entries=entries: kind(entries, many=True).data)
                for way, kind in zip(WAYS, (EntrySerializer, shared_only, drf_own),
                                     strict=True)}
        answers = [call() for call in ways.values()]
        assert all(answer == answers[0] for answer in answers), label  # else: meaningless
        found.append((f"an append's answer, {label}", ways))
    ours_check, drf_check = NoSurrogates(), ProhibitSurrogateCharactersValidator()
    for label, text in (("130 characters", SHORT[:130]),
                        ("21,700 characters, ASCII", (ASCII_OUTPUT * 300)[:21_700]),
                        ("21,700 characters, accented", (ACCENTED_OUTPUT * 700)[:21_700])):
        found.append((f"surrogate check, {label}", {
            "ours": lambda text=text: ours_check(text),
            "DRF's own": lambda text=text: drf_check(text)}))
    return found


def batch_time(call: Callable[[], Any], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - started) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--write", metavar="PAGE", help="replace this section of PAGE")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        setup_django("sqlite", str(Path(scratch) / "serializers.sqlite3"), migrate=True)
        measured = cases()
        samples: dict[tuple[str, str], list[float]] = {}
        for round_number in range(-3, args.rounds):  # three warm-up rounds, not reported
            forward = round_number % 2 == 0
            for label, ways in measured if forward else measured[::-1]:
                for way, call in list(ways.items())[:: 1 if forward else -1]:
                    spent = batch_time(call, args.calls)
                    if round_number >= 0:
                        samples.setdefault((label, way), []).append(spent)
    rows = []
    for label, _ in measured:
        ours = median(samples[label, "ours"])
        row = [label]
        for way in WAYS:
            found = samples.get((label, way))
            row.append("—" if found is None else
                       f"{median(found) * 1e6:.1f} / {percentile(found, 0.95) * 1e6:.1f}")
        for way in WAYS[1:]:
            found = samples.get((label, way))
            row.append("—" if found is None else f"×{median(found) / ours:.2f}")
        rows.append(row)
    headers = ["case", *(f"{way}, µs p50 / p95" for way in WAYS),
               *(f"{way} ÷ ours" for way in WAYS[1:])]
    m = machine()
    block = "\n".join([
        MARK_START,
        "## The API's serializer work",
        "",
        "`bench/serializers.py`, in process: an append's answer (`EntrySerializer`: fields "
        "built once, each column read straight into its field) against the same `Meta` "
        "with its fields built once only and against DRF's own `ModelSerializer`; a "
        "message's surrogate check (`NoSurrogates`) against DRF's "
        "`ProhibitSurrogateCharactersValidator`. The answers are checked equal first. "
        f"{args.rounds} rounds of {args.calls} calls a way, taking turns; a figure is a "
        f"batch's time a call. Machine: {m['nproc']} CPUs, {m['cpu']}.",
        "",
        table(headers, rows),
        MARK_END,
    ])
    if args.write:
        write_section(Path(args.write), block, MARK_START, MARK_END)
        print(f"[bench/serializers] wrote {args.write}", file=sys.stderr)
    else:
        print(block)


if __name__ == "__main__":
    main()
