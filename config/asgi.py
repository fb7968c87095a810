"""ASGI entry point (gunicorn with uvicorn workers, and `make run`).

The status paths are served by a thin async handler that holds waiting agents without a
thread each (breakpoints/waiting/asgi.py); every other request goes to Django.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

django_application = get_asgi_application()

from breakpoints.waiting.asgi import WaitingApp  # noqa: E402 - needs Django set up first

application = WaitingApp(django_application)
