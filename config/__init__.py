"""Project configuration: settings, URLs, the Celery app and the API error contract."""

from config.celery import app as celery_app

__all__ = ["celery_app"]
