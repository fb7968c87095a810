"""Liveness and readiness probes (no auth, no database session), and the middleware that
answers them (and the /metrics scrape) before the Host check."""

from collections.abc import Callable

import redis
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from breakpoints.waiting.hub import hub_state
from ops import metrics


@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Alive; with the long-polls this process holds and its wake-up listener's state
    (breakpoints.waiting.hub.hub_state: "up", "down" while it reconnects, "off" before
    the first long-poll or under WSGI, "not used" on SQLite)."""
    return JsonResponse({"status": "ok", **hub_state()})


def _check_database() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # noqa: BLE001 - any failure means not ready
        return f"{type(exc).__name__}: {exc}"
    return None


def _check_broker() -> str | None:
    if settings.REDIS_URL:
        try:
            client = redis.Redis.from_url(
                settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=1
            )
            client.ping()
        except Exception as exc:  # noqa: BLE001
            return f"{type(exc).__name__}: {exc}"
        return None
    queue = settings.BROKER_DIR / "queue"
    queue.mkdir(parents=True, exist_ok=True)
    return None


@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    failures = {
        name: error
        for name, check in (("database", _check_database), ("broker", _check_broker))
        if (error := check()) is not None
    }
    checks = {name: failures.get(name, "ok") for name in ("database", "broker")}
    if failures:
        response = JsonResponse({"status": "unavailable", "checks": checks}, status=503)
        response["Retry-After"] = "5"
        return response
    return JsonResponse({"status": "ok", "checks": checks})


class HealthProbeMiddleware:
    """Answer /healthz, /readyz and /metrics before anything checks the Host header.

    Load balancers, orchestrators and scrapers address a pod by IP; a probe must not fail
    on ALLOWED_HOSTS. Nothing else is served this way.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        probe = {
            "/healthz": healthz,
            "/readyz": readyz,
            "/metrics": metrics.metrics_view,
        }.get(request.path_info)
        if probe is not None:
            return probe(request)
        return self.get_response(request)
