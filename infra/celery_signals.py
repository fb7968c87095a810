"""What the Celery processes do around the app's tasks, connected to Celery's signals by
`celery_signals_connect(app)` (config/celery.py): Django's logging kept, a task's log lines
carrying the request id of the request that enqueued it, the embedded broker's folders
made, and a worker or beat refusing an incomplete production environment.

Connected while config.celery is imported, which every `config.*` import runs first: so
nothing here reads settings or loads models until a signal is sent.
"""

import logging
import logging.config
import os
from typing import Any

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

from infra.logging import (
    context_adopt,
    context_restore,
    current_context,
    current_request_id,
    log_context,
)
from infra.startup import require_production_settings

# The task message header carrying the enqueuing request's log context.
LOG_CONTEXT_HEADER = "bpm_log_context"
# task id -> the context tokens its prerun set, restored at its postrun.
_task_log_tokens: dict[str, tuple] = {}


def _prepare_embedded_broker(sender: Celery, **kwargs: Any) -> None:
    """The filesystem transport needs its folders to exist before anyone publishes."""
    options = sender.conf.broker_transport_options or {}
    for key in ("data_folder_in", "data_folder_out", "control_folder"):
        if options.get(key):
            os.makedirs(options[key], exist_ok=True)


def _refuse_incomplete_production(**kwargs: Any) -> None:
    try:
        require_production_settings(serves_http=False)
    except ImproperlyConfigured as exc:
        # Celery only logs an exception from a signal handler; this one must stop it.
        raise SystemExit(f"celery: {exc}") from exc


def _use_django_logging(**kwargs: Any) -> None:
    """Keep Django's LOGGING (JSON in production) instead of Celery's own root handler."""
    logging.config.dictConfig(settings.LOGGING)


def _publish_log_context(headers: dict | None = None, **kwargs: Any) -> None:
    context = current_context()
    if headers is not None and context.get("request_id", "-") != "-":
        headers[LOG_CONTEXT_HEADER] = context


def _adopt_log_context(task_id: str | None = None, task: Any = None, **kwargs: Any) -> None:
    request = getattr(task, "request", None)
    context = request.get(LOG_CONTEXT_HEADER) if request is not None else None
    if not context and request is not None:
        context = (request.get("headers") or {}).get(LOG_CONTEXT_HEADER)
    if not isinstance(context, dict) or task_id is None:
        return  # an eager task keeps the context of its caller
    _task_log_tokens[task_id] = context_adopt(context)


def _drop_log_context(task_id: str | None = None, **kwargs: Any) -> None:
    tokens = _task_log_tokens.pop(task_id or "", None)
    if tokens is None:
        return
    try:
        context_restore(tokens)
    except ValueError:  # run in another context than prerun's: just clear it
        current_request_id.set("-")
        log_context.set({})


def celery_signals_connect(app: Celery) -> None:
    """Connect the handlers above: `app`'s own configure signal and Celery's process-wide
    ones (a receiver of setup_logging also stops Celery from configuring logging itself)."""
    app.on_after_configure.connect(_prepare_embedded_broker)
    worker_init.connect(_refuse_incomplete_production)
    beat_init.connect(_refuse_incomplete_production)
    setup_logging.connect(_use_django_logging)
    before_task_publish.connect(_publish_log_context)
    task_prerun.connect(_adopt_log_context)
    task_postrun.connect(_drop_log_context)
