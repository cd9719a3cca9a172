"""The example project's settings with bench/floor_views.py's URLs added (bench/api.py)."""

from example_project.settings import *  # noqa: F403

ROOT_URLCONF = "bench.floor_urls"
