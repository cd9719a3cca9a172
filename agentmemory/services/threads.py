"""A thread's policy as functions of the Python API (the `Thread` methods hold it)."""

from __future__ import annotations

from datetime import timedelta

from agentmemory.models import Thread


def thread_ttl(thread: Thread) -> timedelta | None:
    """The thread's TTL for written entries, or the project default."""
    return thread.effective_ttl()


def thread_write_tier(thread: Thread) -> str:
    """The tier of entries written without one: the thread's, or the project default."""
    return thread.effective_write_tier()


def thread_fold_budget(thread: Thread) -> int:
    """The recall budget background folds keep the thread within."""
    return thread.effective_fold_budget()
