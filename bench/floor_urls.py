"""The example project's URLs and bench/floor_views.py's (bench/api.py)."""

from django.urls import path

from bench import floor_views
from example_project.urls import urlpatterns as example

urlpatterns = [
    *example,
    path("bench/floor/threads/<int:thread_id>/recall/", floor_views.recall),
    path("bench/floor/threads/<int:thread_id>/entries/", floor_views.append),
]
