"""The OpenAPI schema of these endpoints, and the JSON 404 of any other path under them."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from django.urls import include, path
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from agentmemory.api.views.base import MemoryAPIView


@extend_schema(exclude=True)
class UnknownPath(MemoryAPIView):
    """Any other path under the API's prefix (an id that is not a number, a missing
    slash) answers the API's JSON 404, not the site's HTML page."""

    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        raise Http404("No such path in this API.")

    post = put = patch = delete = get


class MemorySchemaView(SpectacularAPIView):
    """The OpenAPI 3 schema of these endpoints alone, under whatever prefix they are mounted.

    Needs ``REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"] =
    "drf_spectacular.openapi.AutoSchema"`` (checked by agentmemory.W002).
    """

    custom_settings = {
        "TITLE": "agentmemory API",
        "DESCRIPTION": "Durable, explainable conversation memory for LLM agents.",
        "VERSION": __import__("agentmemory").__version__,
        "COMPONENT_SPLIT_REQUEST": True,
        "ENUM_NAME_OVERRIDES": {
            "TierEnum": "agentmemory.models.Tier",
            "RetainPolicyEnum": "agentmemory.models.RetainPolicy",
            "RoleEnum": "agentmemory.models.Role",
        },
        "POSTPROCESSING_HOOKS": [
            "drf_spectacular.hooks.postprocess_schema_enums",
            "agentmemory.api.schema.postprocess",
        ],
    }

    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        prefix = request.path.lstrip("/").removesuffix("schema/")
        self.patterns = [path(prefix, include("agentmemory.api.urls"))]
        return super().get(request, *args, **kwargs)
