"""The authored frame of a window summary message, and the fingerprints that join it.

Law 9: the frame says how many messages were folded, at which iteration, by which
model, and where the originals went, read from the resolved retention policy. Law 8:
a span is found from a hash of the whole message, never from its position.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agentmemory.models import MemoryEntry, RetainPolicy
from agentmemory.transcript import WINDOW_FRAME_PREFIX

if TYPE_CHECKING:
    from agentmemory.window.seams import WindowMessage


def retention_sentence(retain: str) -> str:
    if retain == RetainPolicy.CONVERSATION:
        return (
            "The folded messages are kept word for word with this conversation and can be "
            "shown on request."
        )
    return (
        "The folded messages were not kept; this summary is all that carries them forward."
    )


def frame_label(
    *, message_count: int, iteration: int, model: str, retain: str, fold: str = ""
) -> str:
    """The authored frame. ``fold`` (the span's key, shortened) makes two folds with the
    same shape and the same summary text two different messages, so a lookup can tell
    them apart (law 8)."""
    reference = f" (fold {fold})" if fold else ""
    return (
        f"{WINDOW_FRAME_PREFIX}: {message_count} earlier messages were folded at iteration "
        f"{iteration} into the summary below, written by the model {model}. "
        f"{retention_sentence(retain)}{reference}]"
    )


def fold_reference(span_key: str) -> str:
    """The part of a span's key its frame carries: 64 bits, unique within a thread."""
    return span_key[:16]


def summary_fingerprint(content: str) -> str:
    """The join key of one summary message: a hash of all of its content."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def span_fingerprint(messages: Sequence[WindowMessage]) -> str:
    """The key of a span: every field of each message (tool calls included), in order.

    It is the replay key (law 12) as well as the latch key, so two spans that differ
    only in a tool call's arguments or ids must not share it: the second would be
    handed the first one's summary and originals.
    """
    payload = json.dumps([message.as_dict() for message in messages], sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def message_digest(
    role: str, content: str, tool_calls: Sequence[Mapping[str, Any]], tool_call_id: str
) -> str:
    """The derivation key of one message: what a window message and a stored entry that
    are the same message share (tool_name left out: a window may omit it)."""
    payload = json.dumps([role, content, list(tool_calls), tool_call_id], sort_keys=True)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def looks_like_frame(content: str) -> bool:
    """Only that the text *looks* like a frame; `folded_span_for` says if it is one."""
    return content.startswith(WINDOW_FRAME_PREFIX)


def message_digests(messages: Sequence[WindowMessage]) -> list[str]:
    """The digest of each message, in order: what `record_sources` writes and the
    span's signature covers."""
    return [message_digest(m.role, m.content, m.tool_calls, m.tool_call_id) for m in messages]


def entry_digest(entry: MemoryEntry) -> str:
    return message_digest(entry.role, entry.content, entry.tool_calls, entry.tool_call_id)
