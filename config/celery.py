"""The Celery application; tasks are discovered in each Django app's tasks.py."""

import os

from celery import Celery
from celery.signals import beat_init, worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("breakpoint_manager")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _prepare_embedded_broker(sender: Celery, **kwargs) -> None:
    """The filesystem transport needs its folders to exist before anyone publishes."""
    options = sender.conf.broker_transport_options or {}
    for key in ("data_folder_in", "data_folder_out", "control_folder"):
        if options.get(key):
            os.makedirs(options[key], exist_ok=True)


@worker_init.connect
@beat_init.connect
def _refuse_incomplete_production(**kwargs) -> None:
    from django.core.exceptions import ImproperlyConfigured

    from config.startup import require_production_settings

    try:
        require_production_settings(serves_http=False)
    except ImproperlyConfigured as exc:
        # Celery only logs an exception from a signal handler; this one must stop it.
        raise SystemExit(f"celery: {exc}") from exc
