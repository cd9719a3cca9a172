"""The API's content negotiation (`api.views.base.UnstatedAcceptNegotiation`, and the
recall's `ContextFormatNegotiation` built on it) picks the same renderer and media type
as DRF's own, or refuses as DRF does, over random requests: ``Accept`` headers stated
or not (``*/*``, exact, wildcard, with parameters and quality, unknown, empty), query
strings with and without a format, format suffixes and renderer lists; and the API's
views use it.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.http import Http404
from django.test import RequestFactory
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework import renderers
from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.request import Request

from agentmemory.api.views.base import (
    ContextFormatNegotiation,
    MemoryAPIView,
    UnstatedAcceptNegotiation,
    _NoURLFormatOverride,
)
from agentmemory.api.views.entries import EntryList
from agentmemory.api.views.recall import Recall

RENDERERS = [renderers.JSONRenderer(), renderers.BrowsableAPIRenderer(),
             renderers.StaticHTMLRenderer(), renderers.TemplateHTMLRenderer()]
ACCEPTS = [None, "*/*", "", " ", "application/json", "text/html", "application/*",
           "text/*;q=0.5, */*;q=0.1", "application/json; indent=4", "image/png",
           "*/*; charset=utf-8", "text/html, application/json;q=0.9", "nonsense"]
QUERIES = ["", "format=json", "format=api", "format=html", "format=xml", "page=2",
           "page=2&format=json", "format=", "format"]


class DRFContextFormat(DefaultContentNegotiation):
    """DRF's own negotiation under the recall's settings: the twin of ContextFormatNegotiation."""

    settings = _NoURLFormatOverride()  # type: ignore[assignment]


def answer(negotiation: Any, request: Request, chosen: list[Any], suffix: str | None) -> Any:
    try:
        renderer, media_type = negotiation.select_renderer(request, chosen, suffix)
    except NotAcceptable as exc:
        return "406", [type(r) for r in exc.available_renderers or []]
    except Http404:  # a format no renderer has
        return "404"
    return renderer, media_type


@settings(max_examples=400, deadline=None)
@given(
    accept=st.sampled_from(ACCEPTS),
    query=st.sampled_from(QUERIES),
    suffix=st.sampled_from([None, "", "json", "api", "html"]),
    chosen=st.lists(st.sampled_from(RENDERERS), min_size=0, max_size=4, unique=True),
)
def test_the_same_renderer_and_media_type_as_drf(
    accept: str | None, query: str, suffix: str | None, chosen: list[Any],
) -> None:
    headers = {} if accept is None else {"HTTP_ACCEPT": accept}
    for ours, drf in ((UnstatedAcceptNegotiation(), DefaultContentNegotiation()),
                      (ContextFormatNegotiation(), DRFContextFormat())):
        # A request each: DRF keeps the parsed header on the request.
        mine = Request(RequestFactory().post(f"/?{query}", **headers))
        theirs = Request(RequestFactory().post(f"/?{query}", **headers))
        assert answer(ours, mine, chosen, suffix) == answer(drf, theirs, chosen, suffix)


def test_the_shortcut_is_taken_only_where_nothing_is_stated() -> None:
    """The cases the shortcut answers are the ones the property test covers: a request
    with nothing stated never parses its Accept header; one that states any does."""
    plain = Request(RequestFactory().post("/"))
    UnstatedAcceptNegotiation().select_renderer(plain, RENDERERS)
    assert getattr(plain, "_parsed_accept_list", None) is None
    stated = Request(RequestFactory().post("/", HTTP_ACCEPT="application/json"))
    UnstatedAcceptNegotiation().select_renderer(stated, RENDERERS)
    assert stated._parsed_accept_list  # type: ignore[attr-defined]


@pytest.mark.parametrize("view", [MemoryAPIView, EntryList])
def test_the_api_views_negotiate_with_it(view: type[MemoryAPIView]) -> None:
    assert view().get_content_negotiator().__class__ is UnstatedAcceptNegotiation
    assert Recall().get_content_negotiator().__class__ is ContextFormatNegotiation
