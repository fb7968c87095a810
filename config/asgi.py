"""ASGI entry point (gunicorn with uvicorn workers, and `make run`).

The status paths are served by a thin async handler that holds waiting agents without a
thread each (breakpoints/waiting/asgi.py). Every other request goes to Django, run as a
WSGI application on a fixed pool of BPM_WEB_THREADS threads (web.asgi_wsgi): Django's own
ASGI handler starts a thread per request, which measured several times slower for these
sync views. Django is reached through web.asgi_body, which reads the body whole first and
gives chunked request bodies a Content-Length (Django's WSGI handler reads only as much as
that says).
"""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

django_wsgi = get_wsgi_application()

from django.conf import settings  # noqa: E402 - after Django is set up

from breakpoints.waiting.asgi import WaitingApp  # noqa: E402
from infra.logging import redact_server_access_logs  # noqa: E402
from infra.startup import require_production_settings  # noqa: E402
from web.asgi_body import BufferedBodyApp  # noqa: E402
from web.asgi_cors import CorsHeadersApp  # noqa: E402
from web.asgi_wsgi import DjangoApp  # noqa: E402
from web.heap import startup_heap_freeze  # noqa: E402
from web.openfiles import raise_open_file_limit  # noqa: E402

# Every waiting agent is an open socket: room for BPM_MAX_WAITERS of them, or a warning
# (an info line under DEBUG).
raise_open_file_limit(settings.BPM_MAX_WAITERS, development=settings.DEBUG)
# uvicorn's and gunicorn's access lines print paths: no email decision token in them.
redact_server_access_logs()
django_app = DjangoApp(django_wsgi, workers=settings.BPM_WEB_THREADS)
# The server's lifespan startup refuses an incomplete production environment.
# CorsHeadersApp: the status handler's own answers get the CORS headers Django's get.
application = CorsHeadersApp(
    WaitingApp(
        BufferedBodyApp(django_app),
        on_startup=lambda: require_production_settings(serves_http=True),
    )
)

startup_heap_freeze()
