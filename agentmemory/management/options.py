"""What the agentmemory commands share: exit codes, options, naming a user, progress.

Exit codes (docs/operations.md): 0 the work is done, or there was none; `FAILED` (1)
some items could not be done (a fold the summarizer failed, a fold the broker did not
take) or were found wrong (a tampered row); `USAGE` (2) bad usage, as argparse answers
it, and an argument that names nothing (no such user or thread). Django prints a
`CommandError`'s message on stderr and exits with its ``returncode``.
"""

from __future__ import annotations

import argparse
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError, CommandParser, OutputWrapper

from agentmemory.management.progress import Progress

FAILED, USAGE = 1, 2

#: Threads (or rows) read per query.
BATCH_SIZE = 500


def usage_error(message: str) -> CommandError:
    return CommandError(message, returncode=USAGE)


def failed(message: str) -> CommandError:
    return CommandError(message, returncode=FAILED)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number above 0")
    return value


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value


def add_dry_run(parser: CommandParser, what: str) -> None:
    parser.add_argument(
        "--dry-run", action="store_true", help=f"Write nothing: count {what} and exit."
    )


def add_batch_size(parser: CommandParser, default: int | None = BATCH_SIZE) -> None:
    parser.add_argument(
        "--batch-size", type=positive_int, default=default,
        help=f"Rows read (and, for a purge, deleted) per query (default: {default}).",
    )


def add_user(parser: Any, help_text: str) -> None:
    parser.add_argument("--user", metavar="USERNAME_OR_ID", help=help_text)


def user_of(value: str) -> tuple[int, str]:
    """The id and username of the user ``value`` names: a username (the user model's
    USERNAME_FIELD), an id, or ``id:42``. A value that is one user's username and
    another's id is refused rather than guessed: it names two people."""
    model = get_user_model()
    field = model.USERNAME_FIELD
    users = model._default_manager.values_list("pk", field)
    if value.startswith("id:"):
        pk = value.removeprefix("id:")
        found = users.filter(pk=int(pk)).first() if pk.isdigit() else None
        if found is None:
            raise usage_error(f"No user with id {pk!r}.")
        return int(found[0]), str(found[1])
    by_name = users.filter(**{field: value}).first()
    by_id = users.filter(pk=int(value)).first() if value.isdigit() else None
    if by_name is not None and by_id is not None and by_name != by_id:
        raise usage_error(
            f"--user {value} is the {field} of user {by_name[0]} and the id of user "
            f"{by_id[1]!r}: say --user id:{value} for the id."
        )
    found = by_name or by_id
    if found is None:
        raise usage_error(f"No user with {field} or id {value!r}.")
    return int(found[0]), str(found[1])


def progress(
    out: OutputWrapper, options: dict[str, Any], label: str, total: int, unit: str,
    *counts: str, every: int | None = None,
) -> Progress:
    """The command's progress reporter, off at ``-v 0``: on a terminal one line redrawn,
    elsewhere a plain line each ``every`` items."""
    return Progress(
        out, total, unit, label=label, counts=counts, enabled=options["verbosity"] >= 1,
        every=every,
    )


def many(count: int, noun: str) -> str:
    """``1 thread``, ``2 threads``, ``3 entries``, ``2 batches``."""
    if count == 1:
        return f"1 {noun}"
    if noun.endswith("y"):
        return f"{count} {noun[:-1]}ies"
    return f"{count} {noun}es" if noun.endswith("ch") else f"{count} {noun}s"


def tally(reasons: dict[str, int]) -> str:
    """``not-smaller 2, quota-exceeded 1``."""
    return ", ".join(f"{reason} {count}" for reason, count in sorted(reasons.items()))
