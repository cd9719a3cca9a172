"""Codes said in words where people read them: every decline and context reason has its
words beside `DeclineReason` (one mapping), and a receipt's page, the receipt and latch
lists and their filters show those words and the settings in force, not codes and JSON."""

from __future__ import annotations

import dataclasses
from html import unescape

import pytest
from django.test import Client, override_settings
from django.urls import reverse

from agentmemory import services
from agentmemory.admin.receipts import SETTING_WORDS, settings_in_words
from agentmemory.folding.reasons import (
    EXPLANATIONS,
    LABELS,
    ContextReason,
    DeclineReason,
    in_words,
    label,
)
from agentmemory.models import FoldLatch, FoldPurpose, RecallReceipt, Thread
from agentmemory.pipeline.config import RecallConfig
from agentmemory.trust.receipts import config_record
from tests.helpers import turn_messages

pytestmark = pytest.mark.django_db


def test_every_reason_has_a_label_and_an_explanation() -> None:
    codes = {*DeclineReason.values, *ContextReason.values}
    assert set(EXPLANATIONS) == codes == set(LABELS)
    assert in_words("not-worth-a-call").startswith("Not worth a call: too few entries")
    assert in_words("fold-pending").startswith("A fold is on its way: older entries")
    assert in_words("from-a-later-version") == label("from-a-later-version")


def test_the_pipeline_says_its_reasons_with_the_codes_that_have_words() -> None:
    from agentmemory.pipeline import budget, recall

    said = {budget.BELOW_MINIMUM, budget.NEWEST_TURN_TOO_LARGE, budget.OVER_BUDGET,
            budget.MAX_ENTRIES, budget.UNPAIRED_TOOL_MESSAGE, budget.DECAYED,
            recall.FOLD_PENDING}
    assert said == set(ContextReason)


def test_every_setting_a_receipt_records_has_words() -> None:
    record = config_record(RecallConfig.build())
    assert set(record) <= set(SETTING_WORDS)
    fields = {field.name for field in dataclasses.fields(RecallConfig)} - {"instruction"}
    assert fields == set(SETTING_WORDS)
    words = dict(settings_in_words(record))
    assert words["RECALL_MODE"] == "inline: a due fold happens inside the recall"
    assert words["LOAD_COUNT"] == "load as much as the room can show, and fold by tokens"
    assert words["FOLD_HIGH_WATER"] == "fold when the context would take more than 60% of the room"
    assert words["DECAY"] == "no decay stage"
    # A receipt written by another version: an unknown option, a value of another shape.
    assert settings_in_words({"future_knob": 3, "decay": "weekly"}) == [
        ("future_knob", "3"), ("DECAY", "'weekly'")]


def declined_receipt() -> RecallReceipt:
    thread = Thread.objects.create(title="short")
    services.append(thread, turn_messages(1))
    with override_settings(AGENTMEMORY={"RECEIPTS": True}):
        result = services.recall(thread, 100_000, load_count=4, trigger_min_entries=2,
                                 preserve_recent=3, min_fold_entries=3, max_entries=3)
    # The newest turn (four messages) is over max_entries: no context, and no fold.
    assert result.decline == DeclineReason.NOT_WORTH_A_CALL
    assert result.budget_decline == ContextReason.NEWEST_TURN_TOO_LARGE
    assert result.omitted == 4
    return RecallReceipt.objects.get(pk=result.receipt_id)


def test_a_receipts_page_says_what_happened_and_the_settings_in_words(root: Client) -> None:
    receipt = declined_receipt()
    body = unescape(root.get(
        reverse("admin:agentmemory_recallreceipt_change", args=[receipt.pk])
    ).content.decode())
    assert f"<dt>The context was declined</dt><dd>{in_words('newest-turn-too-large')}" in body
    assert f"<dt>No fold</dt><dd>{in_words('not-worth-a-call')}" in body
    assert "<dt>4 visible entries left out</dt><dd>for that reason</dd>" in body
    assert "<code>MAX_ENTRIES</code></dt><dd>at most 3 entries</dd>" in body
    assert "<code>LOAD_COUNT</code></dt><dd>load the newest 4 entries, and fold by counts" in body
    assert '"load_count"' not in body and "not-worth-a-call" not in body


def test_the_receipt_list_and_its_filters_show_labels(root: Client) -> None:
    declined_receipt()
    body = unescape(root.get(reverse("admin:agentmemory_recallreceipt_changelist"))
                    .content.decode())
    cell = body.split('class="field-declined"')[1].split("</td>")[0]
    assert f'title="{in_words("not-worth-a-call")}">not worth a call</div>' in cell
    assert ">the newest turn is too large</div>" in cell
    assert "?decline=not-worth-a-call" in body and ">not worth a call</a>" in body
    assert ">not-worth-a-call<" not in body


def test_a_latch_says_its_reason_in_words(root: Client) -> None:
    thread = Thread.objects.create(title="latched")
    latch = FoldLatch.objects.create(thread=thread, purpose=FoldPurpose.RECALL_FOLD,
                                     span_key="k", reason=DeclineReason.NOT_SMALLER,
                                     entry_count=4, model="m")
    listed = unescape(root.get(reverse("admin:agentmemory_foldlatch_changelist"))
                      .content.decode())
    assert f'title="{in_words("not-smaller")}">not smaller than its span</span>' in listed
    shown = unescape(root.get(reverse("admin:agentmemory_foldlatch_change", args=[latch.pk]))
                     .content.decode())
    assert in_words("not-smaller") in shown
