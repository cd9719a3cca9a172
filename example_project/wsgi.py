import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
application = get_wsgi_application()

# The token encoding takes a few tenths of a second of CPU to load: load it as the worker starts
# (with gunicorn --preload, once, in the master), not in the first append it serves.
from agentmemory.tokens import get_counter  # noqa: E402

get_counter()
