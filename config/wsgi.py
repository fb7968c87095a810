"""WSGI entry point (gunicorn)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

application = get_wsgi_application()

from infra.startup import require_production_settings  # noqa: E402 - after Django setup

require_production_settings(serves_http=True)
