"""The demo site's front page: where to go once `make demo` is serving."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from agentmemory.models import Thread
from example_project.demo.conversation import DEMO_CLIENT_KEY, DEMO_USERNAME, WINDOW_CLIENT_KEY


def home(request: HttpRequest) -> HttpResponse:
    owner = f"owner__{get_user_model().USERNAME_FIELD}"
    thread = Thread.objects.filter(client_key=DEMO_CLIENT_KEY, **{owner: DEMO_USERNAME}).first()
    api = (
        reverse("agentmemory-api:summary-list", args=[thread.pk])
        if thread is not None
        else reverse("agentmemory-api:thread-list")
    )
    window = Thread.objects.filter(
        client_key=WINDOW_CLIENT_KEY, **{owner: DEMO_USERNAME}
    ).first()
    context = {
        "thread": thread,
        "window_thread": window,
        "demo_username": DEMO_USERNAME,
        "api_url": api,
    }
    return render(request, "home.html", context)
