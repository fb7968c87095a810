"""The floor: a bare Django app doing the status poll's work, to measure the project against.

    gunicorn floor_app:asgi_application -k uvicorn_worker.UvicornWorker  (from benchmarks/)
    gunicorn floor_app:wsgi_application                                  (sync workers)

Its own minimal settings and URLconf: no installed apps, no middleware, no DRF, no
connection health checks. A request hashes its bearer token with SHA-256, reads the
token's row from the project's ApiToken table by that hash (active agent tokens only),
then reads one breakpoint's status columns by primary key, scoped to that agent, and
answers {status, updatedAt, result} as JSON (401 / 404 otherwise). Two views do that:
`/floor/sync/<id>` (a plain function view) and `/floor/async/<id>` (an async view with
the ORM's async API); http_bench.py measures both and takes the faster as the floor.

The list floor does a reviewer's list the same way: a personal token (active user)
verified by its hash, then one page of `?status=waiting` (waiting and not past expiresAt),
newest first, `pageSize` rows (default 20) of every column the API's list shows, payload
included, answered as {"results": [...]}: `/floor/list/sync` and `/floor/list/async`.

Environment: DATABASE_URL (PostgreSQL); FLOOR_DB_POOL_MAX > 0 uses Django's native
connection pool of that size per process (as ASGI needs), else persistent connections
(CONN_MAX_AGE=60, as sync workers use).
"""

import hashlib
import logging
import os

import dj_database_url
import django
from django.conf import settings

_pool_max = int(os.environ.get("FLOOR_DB_POOL_MAX", "0"))
_database = dj_database_url.parse(os.environ["DATABASE_URL"], conn_max_age=0 if _pool_max else 60)
if _pool_max:
    _database["OPTIONS"] = {"pool": {"min_size": 1, "max_size": _pool_max, "timeout": 10}}

if not settings.configured:
    settings.configure(
        DEBUG=False,
        SECRET_KEY="floor-benchmark-only",
        ALLOWED_HOSTS=["127.0.0.1", "localhost"],
        INSTALLED_APPS=[],
        MIDDLEWARE=[],
        ROOT_URLCONF=__name__,
        DATABASES={"default": _database},
        USE_TZ=True,
        TIME_ZONE="UTC",
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        LOGGING_CONFIG=None,
    )
    django.setup()
    # No logging set up (LOGGING_CONFIG None): a 401/404 must not print a warning each.
    logging.getLogger("django.request").setLevel(logging.ERROR)

from django.core.asgi import get_asgi_application  # noqa: E402 - after settings
from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.db import models  # noqa: E402
from django.http import HttpRequest, JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402
from django.utils import timezone  # noqa: E402


class FloorToken(models.Model):
    """The project's ApiToken table, read-only (the columns the lookup needs)."""

    kind = models.CharField(max_length=8)
    agent_id = models.CharField(max_length=128, null=True)
    token_hash = models.CharField(max_length=64)
    revoked_at = models.DateTimeField(null=True)

    class Meta:
        app_label = "floor"
        managed = False
        db_table = "breakpoints_apitoken"

    def __str__(self) -> str:
        return f"token of {self.agent_id}"


class FloorBreakpoint(models.Model):
    """The project's Breakpoint table, read-only (the status columns)."""

    id = models.CharField(primary_key=True, max_length=40)
    status = models.CharField(max_length=16)
    agent_id = models.CharField(max_length=128)
    updated_at = models.DateTimeField()
    result = models.JSONField(null=True)

    class Meta:
        app_label = "floor"
        managed = False
        db_table = "breakpoints_breakpoint"

    def __str__(self) -> str:
        return f"{self.id} ({self.status})"


class FloorListRow(models.Model):
    """The project's Breakpoint table, read-only: the columns the API's list shows."""

    id = models.CharField(primary_key=True, max_length=40)
    status = models.CharField(max_length=16)
    agent_id = models.CharField(max_length=128)
    run_id = models.CharField(max_length=128, null=True)
    title = models.CharField(max_length=200, null=True)
    key = models.CharField(max_length=200)
    question = models.TextField(null=True)
    payload = models.JSONField()
    tags = models.JSONField()
    ttl_seconds = models.IntegerField(null=True)
    expires_at = models.DateTimeField(null=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    released_at = models.DateTimeField(null=True)
    expired_at = models.DateTimeField(null=True)
    cancelled_at = models.DateTimeField(null=True)
    result = models.JSONField(null=True)
    auto_approval = models.JSONField(null=True)
    strategy = models.CharField(max_length=32)
    experts = models.JSONField()
    votes = models.JSONField()

    class Meta:
        app_label = "floor"
        managed = False
        db_table = "breakpoints_breakpoint"

    def __str__(self) -> str:
        return f"{self.id} ({self.status})"


class FloorUser(models.Model):
    """Django's auth_user, read-only: whether a person is active."""

    is_active = models.BooleanField()

    class Meta:
        app_label = "floor"
        managed = False
        db_table = "auth_user"

    def __str__(self) -> str:
        return f"user {self.pk}"


class FloorUserToken(models.Model):
    """The project's ApiToken table, read-only: a personal token and its person."""

    kind = models.CharField(max_length=8)
    token_hash = models.CharField(max_length=64)
    revoked_at = models.DateTimeField(null=True)
    user = models.ForeignKey(FloorUser, null=True, on_delete=models.DO_NOTHING)

    class Meta:
        app_label = "floor"
        managed = False
        db_table = "breakpoints_apitoken"

    def __str__(self) -> str:
        return f"token of user {self.user_id}"


_LIST_COLUMNS = [field.attname for field in FloorListRow._meta.concrete_fields]
_UNAUTHORIZED = {"error": {"code": "not_authenticated", "message": "Invalid token."}}
_NOT_FOUND = {"error": {"code": "not_found", "message": "Breakpoint not found."}}


def _token_query(request: HttpRequest):
    scheme, _, raw = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not raw:
        return None
    digest = hashlib.sha256(raw.strip().encode()).hexdigest()
    return FloorToken.objects.filter(
        token_hash=digest, revoked_at__isnull=True, kind="agent"
    ).values_list("agent_id", flat=True)


def _status_query(breakpoint_id: str, agent_id: str):
    return (
        FloorBreakpoint.objects.filter(pk=breakpoint_id, agent_id=agent_id)
        .order_by()
        .values("status", "updated_at", "result")
    )


def _answer(row: dict | None) -> JsonResponse:
    if row is None:
        return JsonResponse(_NOT_FOUND, status=404)
    return JsonResponse(
        {"status": row["status"], "updatedAt": row["updated_at"], "result": row["result"]}
    )


# Slices, not .first(): first() would add an ORDER BY to these one-row lookups.


def status_sync(request: HttpRequest, breakpoint_id: str) -> JsonResponse:
    tokens = _token_query(request)
    agent_id = next(iter(tokens[:1]), None) if tokens is not None else None
    if agent_id is None:
        return JsonResponse(_UNAUTHORIZED, status=401)
    return _answer(next(iter(_status_query(breakpoint_id, agent_id)[:1]), None))


async def _one(queryset):
    async for row in queryset[:1]:
        return row
    return None


async def status_async(request: HttpRequest, breakpoint_id: str) -> JsonResponse:
    tokens = _token_query(request)
    agent_id = await _one(tokens) if tokens is not None else None
    if agent_id is None:
        return JsonResponse(_UNAUTHORIZED, status=401)
    return _answer(await _one(_status_query(breakpoint_id, agent_id)))


def _user_token_query(request: HttpRequest):
    """The active personal token's user id, by the bearer's SHA-256 (joined to auth_user)."""
    scheme, _, raw = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not raw:
        return None
    digest = hashlib.sha256(raw.strip().encode()).hexdigest()
    return FloorUserToken.objects.filter(
        token_hash=digest, revoked_at__isnull=True, kind="user", user__is_active=True
    ).values_list("user_id", flat=True)


def _page_query(request: HttpRequest):
    """?status=waiting (the default here): waiting and not past expiresAt, newest first."""
    size = min(max(int(request.GET.get("pageSize", "20")), 1), 200)
    rows = FloorListRow.objects.filter(status="waiting").exclude(expires_at__lte=timezone.now())
    return rows.order_by("-created_at", "-id").values(*_LIST_COLUMNS)[:size]


def list_sync(request: HttpRequest) -> JsonResponse:
    users = _user_token_query(request)
    if users is None or next(iter(users[:1]), None) is None:
        return JsonResponse(_UNAUTHORIZED, status=401)
    return JsonResponse({"results": list(_page_query(request))})


async def list_async(request: HttpRequest) -> JsonResponse:
    users = _user_token_query(request)
    if users is None or await _one(users) is None:
        return JsonResponse(_UNAUTHORIZED, status=401)
    return JsonResponse({"results": [row async for row in _page_query(request)]})


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True})


urlpatterns = [
    path("floor/sync/<str:breakpoint_id>", status_sync),
    path("floor/async/<str:breakpoint_id>", status_async),
    path("floor/list/sync", list_sync),
    path("floor/list/async", list_async),
    path("healthz", healthz),
]

wsgi_application = get_wsgi_application()
asgi_application = get_asgi_application()
