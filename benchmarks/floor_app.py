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
included, answered as {"results": [...]}: `/floor/list/sync` and `/floor/list/async`
(through the ORM's `.values()`), and `/floor/list/raw` (raw SQL through Django's
connection, the same token check, columns and page).

The write floors do a create's and a release's rows in raw SQL through
Django's connection, in sync views (the floor of what the stack can do, not of what the
ORM does): `POST /floor/create` verifies an agent token by its hash, reads the JSON body
({title?, payload: {question?, ...}, tags?, runId?, ttlSeconds?}) and, in ONE
transaction, inserts the breakpoint row (waiting), its audit event (`created`) and its
outbox row (a pending delivery whose body is the breakpoint's JSON), then answers 201
with that JSON. `POST /floor/release/<id>` verifies a personal token (active user),
reads the JSON body ({comment?, release: true}) and, in ONE transaction, moves the row
with a conditional UPDATE (waiting -> released, its result), inserts the feedback row,
the audit event (`released`) and the outbox row, and answers 201 {feedback, status,
result}; 409 when the breakpoint is not waiting, 404 when there is none.

Environment: DATABASE_URL (PostgreSQL); FLOOR_DB_POOL_MAX > 0 uses Django's native
connection pool of that size per process (as ASGI needs), else persistent connections
(CONN_MAX_AGE=60, as sync workers use).
"""

import hashlib
import json
import logging
import os
import secrets
from datetime import timedelta

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
from django.db import connection, models, transaction  # noqa: E402
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


# --- raw SQL: the list, the create and the release -------------------------------------

_RAW_LIST_SQL = (
    f"SELECT {', '.join(_LIST_COLUMNS)} FROM breakpoints_breakpoint "
    "WHERE status = 'waiting' AND NOT (expires_at IS NOT NULL AND expires_at <= %s) "
    "ORDER BY created_at DESC, id DESC LIMIT %s"
)
_JSON_COLUMNS = {"payload", "tags", "result", "auto_approval", "experts", "votes"}
_INVALID = {"error": {"code": "invalid", "message": "A JSON object with a payload object."}}
_NOT_WAITING = {"error": {"code": "invalid_state", "message": "Breakpoint is not waiting."}}


def _bearer_hash(request: HttpRequest) -> str | None:
    scheme, _, raw = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not raw:
        return None
    return hashlib.sha256(raw.strip().encode()).hexdigest()


def _raw_one(sql: str, params: list) -> tuple | None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def _raw_agent(request: HttpRequest) -> str | None:
    digest = _bearer_hash(request)
    row = digest and _raw_one(
        "SELECT agent_id FROM breakpoints_apitoken WHERE token_hash = %s "
        "AND revoked_at IS NULL AND kind = 'agent' LIMIT 1",
        [digest],
    )
    return row[0] if row else None


def _raw_user(request: HttpRequest) -> tuple[int, str] | None:
    digest = _bearer_hash(request)
    row = digest and _raw_one(
        "SELECT u.id, u.username FROM breakpoints_apitoken t JOIN auth_user u ON u.id = "
        "t.user_id WHERE t.token_hash = %s AND t.revoked_at IS NULL AND t.kind = 'user' "
        "AND u.is_active LIMIT 1",
        [digest],
    )
    return (row[0], row[1]) if row else None


def _json_body(request: HttpRequest) -> dict | None:
    try:
        body = json.loads(request.body)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def list_raw(request: HttpRequest) -> JsonResponse:
    if _raw_user(request) is None:
        return JsonResponse(_UNAUTHORIZED, status=401)
    size = min(max(int(request.GET.get("pageSize", "20")), 1), 200)
    with connection.cursor() as cursor:
        cursor.execute(_RAW_LIST_SQL, [timezone.now(), size])
        names = [column[0] for column in cursor.description]
        rows = cursor.fetchall()
    results = [
        {
            name: json.loads(value) if name in _JSON_COLUMNS and isinstance(value, str) else value
            for name, value in zip(names, row, strict=True)
        }
        for row in rows
    ]
    return JsonResponse({"results": results})


def _outbox_write(cursor, breakpoint_id: str, event: str, now, data: dict) -> None:
    body = {"type": f"breakpoint.{event}", "timestamp": now.isoformat(), "data": data}
    cursor.execute(
        "INSERT INTO breakpoints_webhookdelivery (id, channel, target, reply, breakpoint_id, "
        "event_type, body, status, attempts, next_attempt_at, last_error, created_at) "
        "VALUES (%s, 'webhook', '{}', '{}', %s, %s, %s, 'pending', 0, %s, '', %s)",
        [
            "msg_" + secrets.token_urlsafe(18),
            breakpoint_id,
            event,
            json.dumps(body, default=str),
            now,
            now,
        ],
    )


def _event_write(cursor, breakpoint_id: str, event: str, actor: str, now, meta: dict) -> None:
    cursor.execute(
        "INSERT INTO audit_event (breakpoint_id, type, actor, timestamp, metadata) "
        "VALUES (%s, %s, %s, %s, %s)",
        [breakpoint_id, event, actor, now, json.dumps(meta)],
    )


def _created_json(body: dict, payload: dict, agent_id: str, now) -> dict:
    ttl = body.get("ttlSeconds")
    title = body.get("title") or payload.get("title")
    return {
        "breakpointId": "bp-" + secrets.token_hex(16),
        "status": "waiting",
        "agentId": agent_id,
        "runId": body.get("runId"),
        "title": title,
        "key": payload.get("breakpointId") or "floor",
        "question": payload.get("question"),
        "payload": payload,
        "tags": body.get("tags") or [],
        "ttlSeconds": ttl,
        "expiresAt": (now + timedelta(seconds=ttl)).isoformat() if ttl else None,
        "createdAt": now.isoformat(),
        "updatedAt": now.isoformat(),
    }


def create_sync(request: HttpRequest) -> JsonResponse:
    agent_id = _raw_agent(request)
    if agent_id is None:
        return JsonResponse(_UNAUTHORIZED, status=401)
    body = _json_body(request)
    if body is None or not isinstance(body.get("payload"), dict):
        return JsonResponse(_INVALID, status=400)
    now = timezone.now()
    bp = _created_json(body, body["payload"], agent_id, now)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO breakpoints_breakpoint (id, status, agent_id, run_id, title, key, "
            "question, payload, tags, ttl_seconds, expires_at, created_at, updated_at, "
            "experts, strategy, votes, on_timeout, reminders_sent, escalate_to, "
            "prevent_self_review) VALUES (%s, 'waiting', %s, %s, %s, %s, %s, %s, %s, %s, %s, "
            "%s, %s, '[]', 'single', '[]', 'expire', 0, '', false)",
            [
                bp["breakpointId"],
                agent_id,
                bp["runId"],
                bp["title"],
                bp["key"],
                bp["question"],
                json.dumps(bp["payload"]),
                json.dumps(bp["tags"]),
                bp["ttlSeconds"],
                now + timedelta(seconds=bp["ttlSeconds"]) if bp["ttlSeconds"] else None,
                now,
                now,
            ],
        )
        meta = {"statusTo": "waiting", "key": bp["key"]}
        _event_write(cursor, bp["breakpointId"], "created", f"agent:{agent_id}", now, meta)
        _outbox_write(cursor, bp["breakpointId"], "created", now, bp)
    return JsonResponse(bp, status=201)


_RELEASE_SQL = (
    "UPDATE breakpoints_breakpoint SET status = 'released', result = %s, released_at = %s, "
    "updated_at = %s WHERE id = %s AND status = 'waiting' RETURNING agent_id, run_id, key"
)


def release_sync(request: HttpRequest, breakpoint_id: str) -> JsonResponse:
    user = _raw_user(request)
    if user is None:
        return JsonResponse(_UNAUTHORIZED, status=401)
    body = _json_body(request)
    if body is None or body.get("release") is not True:
        return JsonResponse(_INVALID, status=400)
    now, comment = timezone.now(), str(body.get("comment") or "")
    result = {"approved": True, "response": comment, "respondedBy": user[1], "at": now}
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_RELEASE_SQL, [json.dumps(result, default=str), now, now, breakpoint_id])
        moved = cursor.fetchone()
        if moved is None:
            cursor.execute("SELECT 1 FROM breakpoints_breakpoint WHERE id = %s", [breakpoint_id])
            found = cursor.fetchone() is not None
            return JsonResponse(_NOT_WAITING if found else _NOT_FOUND, status=409 if found else 404)
        cursor.execute(
            "INSERT INTO reviews_feedback (breakpoint_id, author, author_user_id, comment, "
            "releases, approved, via, created_at) VALUES (%s, %s, %s, %s, true, true, 'api', "
            "%s) RETURNING id",
            [breakpoint_id, user[1], user[0], comment, now],
        )
        feedback = {"id": str(cursor.fetchone()[0]), "author": user[1], "comment": comment}
        meta = {"statusFrom": "waiting", "statusTo": "released", "approved": True}
        _event_write(cursor, breakpoint_id, "released", user[1], now, meta)
        data = {"breakpointId": breakpoint_id, "agentId": moved[0], "runId": moved[1]}
        data.update(key=moved[2], status="released", result=result)
        _outbox_write(cursor, breakpoint_id, "released", now, data)
    answer = {"feedback": {**feedback, "createdAt": now}, "status": "released", "result": result}
    return JsonResponse(answer, status=201)


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True})


urlpatterns = [
    path("floor/sync/<str:breakpoint_id>", status_sync),
    path("floor/async/<str:breakpoint_id>", status_async),
    path("floor/list/sync", list_sync),
    path("floor/list/async", list_async),
    path("floor/list/raw", list_raw),
    path("floor/create", create_sync),
    path("floor/release/<str:breakpoint_id>", release_sync),
    path("healthz", healthz),
]

wsgi_application = get_wsgi_application()
asgi_application = get_asgi_application()
