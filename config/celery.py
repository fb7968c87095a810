"""The Celery application; tasks are discovered in each Django app's tasks.py.

Every `config.*` import runs this module first (config/__init__.py), settings included, so
what it imports at the top must not read settings nor load models: django.conf's settings
object is lazy, config.startup and infra.logging read settings only when called.
"""

import logging
import logging.config
import os

from celery import Celery
from celery.signals import (
    beat_init,
    before_task_publish,
    setup_logging,
    task_postrun,
    task_prerun,
    worker_init,
)
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from config.startup import require_production_settings
from infra.logging import (
    context_adopt,
    context_restore,
    current_context,
    current_request_id,
    log_context,
)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("breakpoint_manager")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

logger = logging.getLogger(__name__)


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
    try:
        require_production_settings(serves_http=False)
    except ImproperlyConfigured as exc:
        # Celery only logs an exception from a signal handler; this one must stop it.
        raise SystemExit(f"celery: {exc}") from exc


# --- Log context: a task's log lines carry the request id of the request that enqueued it

LOG_CONTEXT_HEADER = "bpm_log_context"
_task_log_tokens: dict[str, tuple] = {}


@setup_logging.connect
def _use_django_logging(**kwargs) -> None:
    """Keep Django's LOGGING (JSON in production) instead of Celery's own root handler."""
    logging.config.dictConfig(settings.LOGGING)


@before_task_publish.connect
def _publish_log_context(headers: dict | None = None, **kwargs) -> None:
    context = current_context()
    if headers is not None and context.get("request_id", "-") != "-":
        headers[LOG_CONTEXT_HEADER] = context


@task_prerun.connect
def _adopt_log_context(task_id: str | None = None, task=None, **kwargs) -> None:
    request = getattr(task, "request", None)
    context = request.get(LOG_CONTEXT_HEADER) if request is not None else None
    if not context and request is not None:
        context = (request.get("headers") or {}).get(LOG_CONTEXT_HEADER)
    if not isinstance(context, dict) or task_id is None:
        return  # an eager task keeps the context of its caller
    _task_log_tokens[task_id] = context_adopt(context)


@task_postrun.connect
def _drop_log_context(task_id: str | None = None, **kwargs) -> None:
    tokens = _task_log_tokens.pop(task_id or "", None)
    if tokens is None:
        return
    try:
        context_restore(tokens)
    except ValueError:  # run in another context than prerun's: just clear it
        current_request_id.set("-")
        log_context.set({})
