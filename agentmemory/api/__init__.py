"""The REST API (DRF). Mount with ``path("api/memory/", include("agentmemory.api.urls"))``.

The core never imports this package.
"""
