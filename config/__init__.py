"""Wiring only: settings (read from the environment by django-environ, infra.environment),
URLs, the ASGI and WSGI entry points and the Celery app."""

from config.celery import app as celery_app

__all__ = ["celery_app"]
