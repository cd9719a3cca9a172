"""The REST API (DRF). Mount with ``path("api/memory/", include("agentmemory.api.urls"))``.

The core never imports this package. Without the ``api`` extra, importing it raises
MissingExtraError naming the extra, so a URLconf that mounts it fails with the fix.
"""

from agentmemory.extras import require

require("agentmemory's REST API (agentmemory.api)", "rest_framework", "drf_spectacular")
