"""The recall stages: load -> summarize -> [decay] -> pick by budget -> format.

Each stage is a small function over entries; `agentmemory.pipeline.recall.recall_context`
wires them (it is `agentmemory.services.recall`). Load reads; `intact` retires the
tampered and expired summaries it finds; summarize writes back a fold; recall writes
the receipt (with RECEIPTS). Decay, budget and format touch no database.
"""
