"""What a fold is planned over (`policy.fold_view`, issue 24): a budget-driven history
that the count shows is longer than the row cap goes straight to its oldest slice,
without reading the newest rows. Over random threads (summaries from inline folds,
entries expired, held, retired, tiered) and rooms around their size, the entries and
``complete`` are those of the rule as written before: load the newest rows up to the
row cap, and take the oldest slice when that load is incomplete.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from agentmemory.models import Thread
from agentmemory.pipeline import policy
from agentmemory.pipeline.config import RecallConfig
from agentmemory.pipeline.load import Loaded, load_oldest, load_visible
from tests.test_context_rows import BUILT, FOLDS, TOUCHES, build
from tests.test_recall_contract import turns

pytestmark = pytest.mark.django_db


def reference(thread: Thread, config: RecallConfig, now: datetime, room: int
              ) -> tuple[list[int], bool]:
    loaded = load_visible(thread, config, now, room)
    if not loaded.complete:
        loaded = load_oldest(thread, config, now, config.input_limit)
    return [entry.pk for entry in loaded.entries], loaded.complete


@BUILT
@given(
    conversation=turns(),
    folds=FOLDS,
    touches=TOUCHES,
    tiers=st.sampled_from([None, ("hot", "cold"), ("warm", "cold")]),  # with the summaries
    room=st.integers(min_value=1, max_value=120),
    stale=st.booleans(),
)
def test_the_fold_view_is_the_rule_it_shortcuts(
    conversation: Any, folds: list[int], touches: list[tuple[int, str]],
    tiers: tuple[str, ...] | None, room: int, stale: bool,
) -> None:
    thread = Thread.objects.get(pk=build(conversation, folds, touches).pk)
    if stale:  # loaded before the appends: its counter says "may not", the load decides
        thread.last_position = 0
    config = RecallConfig.build(tiers=list(tiers) if tiers is not None else None)
    assert config.budget_driven
    now = timezone.now()
    newest_reads: list[int] = []

    def load(thread: Thread, config: RecallConfig, now: datetime, room: int) -> Loaded:
        newest_reads.append(room)
        return load_visible(thread, config, now, room)

    _, entries, complete = policy.fold_view(thread, config, now, room, load=load)
    expected, expected_complete = reference(thread, config, now, room)
    assert ([entry.pk for entry in entries], complete) == (expected, expected_complete)
    if not stale and not load_visible(thread, config, now, room).complete:
        assert newest_reads == [], "a history longer than the row cap read its newest rows"
