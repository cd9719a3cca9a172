"""Signals sent by agentmemory. Every fold and every decline is sent, never silent.

``fold_completed``: a summary was written (also one held for review). Arguments:
``thread``, ``summary``, ``purpose``, ``model``, ``prompt_tokens``,
``completion_tokens``, ``entry_count``.

``fold_declined``: a fold was considered and not made. Arguments: ``thread``,
``purpose``, ``reason`` (``not-worth-a-call``, ``summarizer-failed``,
``summarizer-unavailable`` (its circuit is open), ``not-smaller``,
``lost-facts``, ``quota-exceeded``, ``already-folded``, and for latched spans also
``unfolded`` and ``tampered``; a window fold may also refuse ``tampered``),
``model``, ``prompt_tokens``, ``completion_tokens`` (None when no call was made),
``latched`` (True when a persistent latch answered without a call), ``error`` (the
exception class name for ``summarizer-failed``, else ``""``).

Both are sent with ``sender`` = the summarizer class.

``fold_parked``: a thread's fold died (its process was killed holding the lease)
``FOLD_MAX_DEATHS`` times in a row and will not be tried again until the sweep after
``FOLD_PARK_BACKOFF`` seconds, or a person unparks it. Arguments: ``thread``,
``deaths``, ``until``. Sent with ``sender`` = the Thread model.

``summarizer_circuit``: the circuit of a summarizer backend and model opened (after
``CIRCUIT_FAILURES`` failed calls in a row, or a failed probe) or closed (a call
succeeded again). Arguments: ``backend``, ``model``, ``state`` (``open`` or
``closed``), ``until`` (when an open circuit lets one call probe; None when closed),
``failures``, ``error`` (the last failure, redacted). Sent with ``sender`` = the
SummarizerCircuit model.

``summary_tampered``: a stored summary or folded span no longer matches its keyed
fingerprint (someone edited the row). Arguments: ``thread``, ``summary`` (or None),
``span`` (or None). Sent with ``sender`` = the model class. The summary is retired and
its originals are recalled verbatim; the span is no longer returned by lookups.
"""

from __future__ import annotations

from django.dispatch import Signal

fold_completed = Signal()
fold_declined = Signal()
summary_tampered = Signal()
fold_parked = Signal()
summarizer_circuit = Signal()
