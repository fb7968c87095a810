"""Checks the serving processes run before they start: a production setting that would
fail quietly later (webhooks never delivered, every request a 400) stops them at once.

The web entry points (config/asgi.py, config/wsgi.py) and the Celery worker and beat
(infra.celery_signals) call `require_production_settings`; management commands and the test suite do not, so an
operator can still migrate or inspect with a partial environment.
"""

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


def production_problems(*, serves_http: bool) -> list[str]:
    """What is missing for production (DEBUG off); nothing when DEBUG is on."""
    if settings.DEBUG:
        return []
    problems = []
    if not settings.REDIS_URL and not settings.BPM_EMBEDDED_BROKER:
        problems.append(
            "REDIS_URL is not set: with DEBUG off the broker must be Redis, or webhooks "
            "would sit in a folder of this machine that other containers never see. Set "
            "REDIS_URL, or BPM_EMBEDDED_BROKER=1 to use the embedded broker on purpose "
            "(one machine only)."
        )
    if serves_http and not settings.ALLOWED_HOSTS:
        problems.append(
            "ALLOWED_HOSTS is not set: with DEBUG off every request would be refused. Set "
            "it to the comma-separated host names clients use (health probes answer on "
            "any Host)."
        )
    return problems


def require_production_settings(*, serves_http: bool) -> None:
    """Raise ImproperlyConfigured listing every production_problems(), if any."""
    problems = production_problems(serves_http=serves_http)
    if problems:
        raise ImproperlyConfigured("Refusing to start:\n- " + "\n- ".join(problems))
