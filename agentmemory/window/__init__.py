"""Live-window compaction and the folded-span lookup (SPEC laws 3, 4, 6, 8, 9, 10, 12).

An agent run grows its own window; `compact` folds the oldest part into one
summary message whose frame tells the truth, records the fold as a FoldedSpan, and
`folded_span_for` finds that record again from the message alone.
"""
