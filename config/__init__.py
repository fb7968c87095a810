"""Wiring only: settings (and env, their parsing), URLs, the ASGI and WSGI entry points,
the Celery app and the production-settings check they run at start."""

from config.celery import app as celery_app

__all__ = ["celery_app"]
