"""The Celery application; tasks are discovered in each Django app's tasks.py, and its
signal handlers (logging, log context, the production check) live in infra.celery_signals.

Every `config.*` import runs this module first (config/__init__.py), settings included, so
what it imports at the top must not read settings nor load models: django.conf's settings
object is lazy, and infra.celery_signals reads settings only when a signal is sent.
"""

import os

from celery import Celery

from infra.celery_signals import celery_signals_connect

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("breakpoint_manager")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
celery_signals_connect(app)
