"""The Python API as a package: every public name importable from `agentmemory.services`,
and what a call that raises leaves behind (docs/python-api.md)."""

from __future__ import annotations

import ast
import importlib
import inspect
from datetime import timedelta
from typing import Any

import pytest

from agentmemory import services
from agentmemory.exceptions import TransientSummarizerError
from agentmemory.models import CallOutcome, EntryKind, MemoryEntry, SummarizerCall, Thread
from agentmemory.pipeline.budget import context_room
from agentmemory.pipeline.config import RecallConfig
from agentmemory.summarizers import get_summarizer
from tests.helpers import add_turns

MODULES = (
    "threads", "appends", "recalls", "background", "summaries", "integrity", "retention", "search",
    "pictures",
)


def test_every_public_function_and_class_of_the_modules_is_exported() -> None:
    for name in MODULES:
        module = importlib.import_module(f"agentmemory.services.{name}")
        own = {
            attr for attr, value in vars(module).items()
            if not attr.startswith("_")
            and (inspect.isfunction(value) or inspect.isclass(value))
            and value.__module__ == module.__name__
        }
        assert own <= set(services.__all__), (name, own - set(services.__all__))
    assert len(services.__all__) == len(set(services.__all__)), "a name is listed twice"


def imported_from() -> dict[str, str]:
    """Each name ``agentmemory/services/__init__.py`` imports, and the module it names."""
    tree = ast.parse(inspect.getsource(services))
    return {
        alias.asname or alias.name: node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module and node.module != "__future__"
        for alias in node.names
    }


def test_every_exported_name_is_the_very_object_its_module_defines() -> None:
    """``services.X`` is the object the module it is imported from holds, and a function
    or class is that of the module that defines it: not a submodule of the same name,
    not something bound over it later, not a wrapper with another home."""
    sources = imported_from()
    # Every import is listed and every listed name imported, each from one module.
    assert sorted(sources) == sorted(services.__all__)
    for name in services.__all__:
        exported = getattr(services, name)
        assert exported is getattr(importlib.import_module(sources[name]), name), name
        if inspect.isfunction(exported) or inspect.isclass(exported):
            home = importlib.import_module(exported.__module__)
            assert exported.__qualname__ == name, (name, exported.__qualname__)
            assert getattr(home, name) is exported, (name, exported.__module__)


CALLS: list[int] = []


def fold_once_then_fail(messages: list[dict[str, str]]) -> str:
    CALLS.append(len(messages))
    if len(CALLS) > 1:
        raise TransientSummarizerError("the provider is away")
    return "The customer asked about orders; they are in transit with DHL."


@pytest.mark.django_db
def test_a_call_that_raises_keeps_what_its_earlier_transactions_committed(
    settings: Any,
) -> None:
    """`fold_while_due` folds span by span, each fold its own transaction: a transient error on
    the second call raises, after the first summary and both ledger rows committed."""
    CALLS.clear()
    settings.AGENTMEMORY = {
        "SUMMARIZER": {
            "BACKEND": "agentmemory.summarizers.callable.CallableSummarizer",
            "MODEL": "test-model",
            "OPTIONS": {"FUNCTION": f"{__name__}.fold_once_then_fail"},
        },
        # A fold reads at most this much: the history takes more than one.
        "FOLD_INPUT_LIMIT": 2000,
    }
    thread = Thread.objects.create(title="raises mid-way")
    add_turns(thread, 40)
    config = RecallConfig.build(mode="inline")
    with pytest.raises(TransientSummarizerError):
        services.fold_while_due(
            thread, config, context_room(300, config), get_summarizer(),
            raise_transient=True, max_folds=None,
        )
    assert len(CALLS) == 2
    assert MemoryEntry.objects.filter(thread=thread, kind=EntryKind.SUMMARY).count() == 1
    outcomes = list(
        SummarizerCall.objects.filter(thread=thread).order_by("pk").values_list(
            "outcome", flat=True
        )
    )
    assert outcomes[0] == CallOutcome.FOLDED and len(outcomes) == 2
    assert outcomes[1] == CallOutcome.FAILED


@pytest.mark.django_db
def test_a_budget_driven_fold_makes_at_most_folds_per_task_folds(settings: Any) -> None:
    """`fold` folds toward the budget, FOLDS_PER_TASK folds at most per call: what is
    still due after them is the next call's (or the background's)."""
    settings.AGENTMEMORY = {"FOLDS_PER_TASK": 1, "FOLD_INPUT_LIMIT": 2000}
    thread = Thread.objects.create(title="bounded fold")
    add_turns(thread, 40)
    outcome = services.fold(thread, budget_tokens=300)
    assert outcome.folded
    assert MemoryEntry.objects.filter(thread=thread, kind=EntryKind.SUMMARY).count() == 1
    assert services.fold(thread, budget_tokens=300).folded  # it was still due


def test_a_threads_policy_is_its_own_or_the_projects(settings: Any) -> None:
    settings.AGENTMEMORY = {"DEFAULT_TTL": 60, "WRITE_TIER": "warm", "FOLD_BUDGET": 900}
    thread = Thread(title="policy")
    assert thread.effective_ttl() == services.thread_ttl(thread) == timedelta(seconds=60)
    assert thread.effective_write_tier() == services.thread_write_tier(thread) == "warm"
    assert thread.effective_fold_budget() == services.thread_fold_budget(thread) == 900
    thread.ttl, thread.write_tier, thread.fold_budget = timedelta(days=1), "cold", 300
    assert services.thread_ttl(thread) == timedelta(days=1)
    assert services.thread_write_tier(thread) == "cold"
    assert services.thread_fold_budget(thread) == 300
