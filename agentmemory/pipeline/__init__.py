"""The recall stages: load -> summarize -> [decay] -> pick by budget -> format.

Each stage is a small function over entries; `agentmemory.services.recall`
wires them. Only load and the summarize write-back touch the database.
"""
