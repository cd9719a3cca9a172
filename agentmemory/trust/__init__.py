"""Trust and cost: what a summary may be trusted with, and what it cost.

One module per concept: ``ledger`` (summarizer calls, quotas, fold signals),
``receipts`` (writing what a recall showed), ``replay`` (reading it back), ``savings``
(what folding saved), ``signing`` (keyed fingerprints of summaries and spans),
``facts`` (the fact-retention gate) and ``quarantine`` (injection flags and invisible
characters).
"""
