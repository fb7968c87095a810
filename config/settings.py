"""Settings for Breakpoint Manager, read from the environment (twelve-factor).

Development defaults apply only when DEBUG is on; production refuses to start
without SECRET_KEY.
"""

import os
from pathlib import Path
from typing import Any

from celery.schedules import crontab
from django.core.exceptions import ImproperlyConfigured
from kombu import Exchange, Queue

from core import tasknames
from infra.environment import Env
from infra.logging import logging_settings

# django-environ's reader, strict: a bad value names its variable (infra/environment.py).
env = Env()

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env.str("BPM_VAR_DIR", default=str(BASE_DIR / "var")))

DEBUG = env.bool("DEBUG", default=False)

SECRET_KEY = env.str("SECRET_KEY", default="")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off.")
    SECRET_KEY = "django-insecure-development-only-key"  # noqa: S105 - DEBUG only

ALLOWED_HOSTS = env.list(
    "ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"] if DEBUG else []
)
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    # The console first: its templates (console/templates/admin/) override the admin's own
    # (admin/base_site.html, admin/login.html), found in the apps in this order.
    "console",
    "console.apps.ConsoleAdminConfig",  # django.contrib.admin, with the console site
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "axes",
    "corsheaders",
    "accounts",
    "audit",
    "policies",
    "notifications",
    "grants",
    "breakpoints",
    "channels",
    "triggers",
    "sso",
]

MIDDLEWARE = [
    "web.middleware.RequestIDMiddleware",
    "ops.metrics.RequestMetricsMiddleware",
    # Before anything that answers (413, 401, 404): a preflight needs no token, and a
    # browser can read every answer to an allowed origin, errors included.
    "corsheaders.middleware.CorsMiddleware",
    "ops.health.HealthProbeMiddleware",
    "web.middleware.BodySizeLimitMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "web.middleware.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # After the probes (/readyz checks the database itself) and static files (no database).
    "web.middleware.DatabaseOutageMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Sessions signed in through the identity provider re-check their groups (sso/).
    "sso.middleware.SessionRecheckMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "web.middleware.LogContextMiddleware",
    "axes.middleware.AxesMiddleware",  # last: it answers a locked-out login
]

# Console logins go through django-axes: after BPM_LOGIN_FAILURE_LIMIT failed attempts for
# one username from one address, that pair is locked out for BPM_LOGIN_LOCKOUT_MINUTES
# (a success resets the count; admins unlock early under "Access attempts").
# With single sign-on on (sso/), the identity provider signs people in; under
# BPM_OIDC_ONLY a password signs in superusers alone (sso.backends.PasswordGate).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "sso.backends.PasswordGate",
    "django.contrib.auth.backends.ModelBackend",
    "sso.backends.OidcBackend",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "console.context_processors.console",
                "sso.context_processors.sign_in",
            ],
        },
    },
]

# PostgreSQL through a bounded per-process pool (or SQLite): see infra/environment.py.
# Under ASGI every request runs its sync work on a thread of its own, so persistent
# per-thread connections would leak: a bounded per-process pool hands each request a
# connection and takes it back at the end. Connections = processes x DATABASE_POOL_MAX.
# The pool is as large as a web process's threads (BPM_WEB_THREADS + BPM_WAIT_THREADS),
# so a request waits for the pool only while a connection is being opened: a short
# timeout is a database that does not answer, and becomes a quick 503 (web/outage.py).
DATABASES = {
    "default": env.database(
        "DATABASE_URL",
        default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        pool_min=env.int("DATABASE_POOL_MIN", default=1),
        pool_max=env.int("DATABASE_POOL_MAX", default=12),
        pool_timeout=env.float("DATABASE_POOL_TIMEOUT", default=2.0),
        connect_timeout=env.int("DATABASE_CONNECT_TIMEOUT", default=5),
        # "transaction": DATABASE_URL is PgBouncer (or another pooler) in transaction mode.
        pooler=env.str("DATABASE_POOLER", default=""),
    )
}
# The wake-up listener's own connection (PostgreSQL LISTEN lives in a session, which a pooler
# in transaction mode does not keep): straight to PostgreSQL. Unset: DATABASE_URL's.
DATABASE_LISTEN_URL = env.str("DATABASE_LISTEN_URL", default="")
# SQLite (make run's default) ignores the covering indexes' INCLUDE columns, a speed-up that
# only PostgreSQL needs: its check (models.W040) would greet every first run with a warning.
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    SILENCED_SYSTEM_CHECKS = ["models.W040"]
# After the pool could not hand out a connection, a web process answers 503 at once for
# this long instead of each request waiting DATABASE_POOL_TIMEOUT (web/outage.py).
BPM_DATABASE_FAIL_FAST_SECONDS = env.float("BPM_DATABASE_FAIL_FAST_SECONDS", default=2.0)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env.str("STATIC_ROOT", default=str(BASE_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage"
        )
    },
}

LOGIN_URL = "admin:login"

# --- Security (production) ---------------------------------------------------
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=False)
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=not DEBUG)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
# Load balancers probe over plain HTTP.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

# --- Breakpoint Manager ------------------------------------------------------
BPM_MAX_BODY_BYTES = env.int("BPM_MAX_BODY_BYTES", default=5 * 1024 * 1024)
# Bodies are read before Django takes a thread (web/asgi_body.py): 408 past the deadline,
# 429 beyond the bodies one address may have arriving at once (per web process).
BPM_BODY_READ_SECONDS = env.float("BPM_BODY_READ_SECONDS", default=10.0)
BPM_MAX_UPLOADS_PER_ADDRESS = env.int("BPM_MAX_UPLOADS_PER_ADDRESS", default=4)
BPM_TTL_SWEEP_SECONDS = env.int("BPM_TTL_SWEEP_SECONDS", default=10)
BPM_RETENTION_DAYS = env.int("BPM_RETENTION_DAYS", default=90)
# The longest a reviewer's grant may last (expiresInSeconds), in seconds: a day by default.
BPM_GRANT_MAX_SECONDS = env.int("BPM_GRANT_MAX_SECONDS", default=24 * 60 * 60)
# Seconds one page (review page, decision page, email) may spend converting markdown and
# highlighting code; each file gets half. What runs out is shown as escaped text.
BPM_RENDER_BUDGET_SECONDS = env.float("BPM_RENDER_BUDGET_SECONDS", default=0.5)
# Trigger rules (triggers/expressions.py): steps one JMESPath expression may take on one
# event, seconds one rule may spend on one event (its conditions and templates, in the
# worker and in the dry run), and the largest event (compact JSON) rules are evaluated on.
BPM_TRIGGER_EXPRESSION_STEPS = env.int("BPM_TRIGGER_EXPRESSION_STEPS", default=1_000_000)
BPM_TRIGGER_RULE_SECONDS = env.float("BPM_TRIGGER_RULE_SECONDS", default=1.0)
BPM_TRIGGER_MAX_EVENT_BYTES = env.int("BPM_TRIGGER_MAX_EVENT_BYTES", default=1024 * 1024)
# Events of one source waiting for evaluation (stored, not yet evaluated) past which the
# source's endpoint answers 429 with Retry-After (triggers.services.ingest).
BPM_TRIGGER_MAX_PENDING_EVENTS = env.int("BPM_TRIGGER_MAX_PENDING_EVENTS", default=1000)
# Checking a proposal or a release's values against an agent's form (breakpoints.payload.form_schema):
# steps (a keyword applied to a value) and seconds one check may spend; past either, 400.
BPM_FORM_VALIDATION_STEPS = env.int("BPM_FORM_VALIDATION_STEPS", default=50_000)
BPM_FORM_VALIDATION_SECONDS = env.float("BPM_FORM_VALIDATION_SECONDS", default=0.5)
BPM_WEBHOOK_ALLOWED_HOSTS = env.list("BPM_WEBHOOK_ALLOWED_HOSTS", default=[])
BPM_IDEMPOTENCY_WINDOW_SECONDS = 24 * 60 * 60
BPM_OUTBOX_SWEEP_SECONDS = env.int("BPM_OUTBOX_SWEEP_SECONDS", default=15)
BPM_WEBHOOK_RETRY_BASE_SECONDS = env.float("BPM_WEBHOOK_RETRY_BASE_SECONDS", default=15.0)
BPM_WEBHOOK_LEASE_SECONDS = env.int("BPM_WEBHOOK_LEASE_SECONDS", default=60)
# Attempts in flight at once to one subscription (or one channel): a slow receiver holds
# at most this many worker slots (notifications/targets.py).
BPM_WEBHOOK_TARGET_CONCURRENCY = max(1, env.int("BPM_WEBHOOK_TARGET_CONCURRENCY", default=1))
BPM_PROJECT_OWNERS = env.list(
    "BPM_PROJECT_OWNERS", default=[]
)  # usernames that payload.expert "owner" names

# CORS for browser-based tools (django-cors-headers), off unless origins are listed:
# /api/ only, Bearer tokens only (no cookies cross-origin). The status handler in front of
# Django (breakpoints/waiting/) gets the same headers through web.asgi_cors.
BPM_CORS_ORIGINS = env.origins("BPM_CORS_ORIGINS")
CORS_ALLOWED_ORIGINS = BPM_CORS_ORIGINS
CORS_URLS_REGEX = r"^/api/"
CORS_ALLOW_CREDENTIALS = False
CORS_ALLOW_HEADERS = ("authorization", "content-type", "idempotency-key", "x-request-id")
CORS_EXPOSE_HEADERS = ("X-Request-ID", "Retry-After")

# Waiting (long-poll). See breakpoints/waiting/.
BPM_MAX_WAIT_SECONDS = 60
BPM_MAX_WAIT_IDS = 100  # ids in one GET /api/breakpoints/status?id=...
BPM_MAX_WAITERS = env.int("BPM_MAX_WAITERS", default=20_000)  # per web process; more get 503
BPM_MAX_WAITS_PER_TOKEN = env.int(
    "BPM_MAX_WAITS_PER_TOKEN", default=1_000
)  # per process; more get 429
# Safety re-check of every waiter, in case a notification was lost (PostgreSQL LISTEN).
BPM_WAIT_RECHECK_SECONDS = env.float("BPM_WAIT_RECHECK_SECONDS", default=15.0)
# Without LISTEN/NOTIFY (SQLite, or while the listener reconnects) waiters re-check this often.
BPM_WAIT_FALLBACK_RECHECK_SECONDS = env.float("BPM_WAIT_FALLBACK_RECHECK_SECONDS", default=0.5)
BPM_WAIT_THREADS = env.int(
    "BPM_WAIT_THREADS", default=4
)  # threads for the waiting path's short queries
# Threads per web process for every other request (Django runs them like gunicorn's gthread).
BPM_WEB_THREADS = env.int("BPM_WEB_THREADS", default=8)
# A verified token is trusted this long in each process: revocation takes effect within it.
BPM_TOKEN_CACHE_SECONDS = env.float("BPM_TOKEN_CACHE_SECONDS", default=5.0)

# --- Approvals an auditor can trust: no self-review, signed receipts (docs/receipts.md) ---
# Refuse a decision by the person a breakpoint names in requestedBy, on every channel
# (a notification route's defaults or payload.preventSelfReview can ask for it per breakpoint).
BPM_PREVENT_SELF_REVIEW = env.bool("BPM_PREVENT_SELF_REVIEW", default=False)
# Keys that sign receipts: a JSON list of private Ed25519 JWKs with a kid, or a file path
# (core/receipt_keys.py). Unset: one key of the data directory's own (VAR_DIR).
BPM_RECEIPT_KEYS = env.str("BPM_RECEIPT_KEYS", default="")

# --- Channels: Slack, email, JIRA, Teams, push (channels/) ---------------------------------
# The notification channels, in the order routes' errors, the API and the console list
# them: one object each (core.channels.ChannelProvider), loaded when first asked.
BPM_CHANNELS = [
    "channels.slack.channel.SlackChannel",
    "channels.email.channel.EmailChannel",
    "channels.jira.channel.JiraChannel",
    "channels.teams.channel.TeamsChannel",
    "channels.push.channel.PushChannel",
]
# Links in messages and mails point here (the console's address as people reach it).
# Unset, it follows BPM_PORT (the port `make run` serves on).
BPM_PUBLIC_URL = env.str(
    "BPM_PUBLIC_URL", default=f"http://127.0.0.1:{env.int('BPM_PORT', default=8000)}"
)
SLACK_BOT_TOKEN = env.str("SLACK_BOT_TOKEN", default="")  # empty: Slack is off
SLACK_SIGNING_SECRET = env.str("SLACK_SIGNING_SECRET", default="")
# slack-sdk's base URL; tests and demos point it at a stand-in on 127.0.0.1.
SLACK_API_URL = env.str("SLACK_API_URL", default="https://slack.com/api/")
EMAIL_URL = env.str("EMAIL_URL", default="")
globals().update(env.email("EMAIL_URL"))
if not EMAIL_URL and DEBUG:
    EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="breakpoints@localhost")
# Email the routed experts (and routes' address lists): on when mail is configured.
BPM_NOTIFY_EMAIL = env.bool("BPM_NOTIFY_EMAIL", default=bool(EMAIL_URL) or DEBUG)
# How long a mailed decision link works (it also stops once the breakpoint is decided).
BPM_EMAIL_LINK_MAX_AGE_SECONDS = env.int("BPM_EMAIL_LINK_MAX_AGE_SECONDS", default=7 * 24 * 60 * 60)
JIRA_URL = env.str("JIRA_URL", default="")  # empty: JIRA is off
JIRA_USER = env.str("JIRA_USER", default="")
JIRA_TOKEN = env.str("JIRA_TOKEN", default="")
JIRA_WEBHOOK_SECRET = env.str(
    "JIRA_WEBHOOK_SECRET", default=""
)  # empty: the JIRA webhook is refused
JIRA_APPROVED_STATUS = env.str("JIRA_APPROVED_STATUS", default="Approved")
JIRA_REJECTED_STATUS = env.str("JIRA_REJECTED_STATUS", default="Rejected")
JIRA_DONE_TRANSITION = env.str("JIRA_DONE_TRANSITION", default="Done")
JIRA_WONT_DO_TRANSITION = env.str("JIRA_WONT_DO_TRANSITION", default="Won't Do")
# Applied to an issue whose move to the approved or rejected status was refused (channels/jira)
JIRA_REFUSED_TRANSITION = env.str("JIRA_REFUSED_TRANSITION", default="To Do")
# Microsoft Teams (channels/teams, docs/teams.md): the bot's Entra app registration.
TEAMS_APP_ID = env.str("TEAMS_APP_ID", default="")  # empty: Teams is off
TEAMS_APP_PASSWORD = env.str("TEAMS_APP_PASSWORD", default="")  # the app's client secret
TEAMS_TENANT_ID = env.str("TEAMS_TENANT_ID", default="")  # set: only its users may decide
# Where the Bot Framework publishes the keys that sign its requests to the bot.
TEAMS_OPENID_METADATA_URL = env.str(
    "TEAMS_OPENID_METADATA_URL",
    default="https://login.botframework.com/v1/.well-known/openidconfiguration",
)
# Where the bot gets its own token ({tenant}: TEAMS_TENANT_ID, else botframework.com).
TEAMS_TOKEN_URL = env.str(
    "TEAMS_TOKEN_URL", default="https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token"
)
# The Bot Framework connector the cards are sent to; tests point it at a stand-in.
TEAMS_SERVICE_URL = env.str("TEAMS_SERVICE_URL", default="https://smba.trafficmanager.net/teams/")
# Web Push to reviewers' devices (channels/push, docs/push.md): the VAPID private
# key, base64url (`manage.py generate_vapid_key` makes one); empty: push is off.
BPM_VAPID_PRIVATE_KEY = env.str("BPM_VAPID_PRIVATE_KEY", default="")
# Who runs this service, for the push services (RFC 8292): mailto: or https: URL.
BPM_VAPID_SUBJECT = env.str("BPM_VAPID_SUBJECT", default="") or f"mailto:{DEFAULT_FROM_EMAIL}"
# The push services a device's subscription may name (a host, or a parent domain of it):
# the browsers' own. The service sends to no other host (https only; http for loopback).
BPM_PUSH_SERVICES = env.list(
    "BPM_PUSH_SERVICES",
    default=[
        "fcm.googleapis.com",  # Chrome, Edge on Android, Opera
        "push.services.mozilla.com",  # Firefox
        "notify.windows.com",  # Edge on Windows
        "push.apple.com",  # Safari
    ],
)
# How long a push service keeps a push for a device that is offline (its TTL header).
BPM_PUSH_TTL_SECONDS = env.int("BPM_PUSH_TTL_SECONDS", default=60 * 60)

# --- Single sign-on: OpenID Connect (sso/, docs/sso.md) -------------------------------------
BPM_OIDC_ISSUER = env.str("BPM_OIDC_ISSUER", default="")  # empty: single sign-on is off
BPM_OIDC_CLIENT_ID = env.str("BPM_OIDC_CLIENT_ID", default="")
BPM_OIDC_CLIENT_SECRET = env.str("BPM_OIDC_CLIENT_SECRET", default="")
# How the client secret reaches the token endpoint: in the request body (client_secret_post)
# or in an Authorization: Basic header (client_secret_basic, what Okta's apps default to).
BPM_OIDC_TOKEN_AUTH_METHOD = (
    env.str("BPM_OIDC_TOKEN_AUTH_METHOD", default="") or "client_secret_post"
)
if BPM_OIDC_TOKEN_AUTH_METHOD not in ("client_secret_post", "client_secret_basic"):
    raise ImproperlyConfigured(
        "BPM_OIDC_TOKEN_AUTH_METHOD must be client_secret_post (the default) or "
        "client_secret_basic, as the identity provider's client is registered (docs/sso.md)."
    )
BPM_OIDC_SCOPES = env.str("BPM_OIDC_SCOPES", default="") or "openid email profile groups"
BPM_OIDC_GROUPS_CLAIM = (
    env.str("BPM_OIDC_GROUPS_CLAIM", default="") or "groups"
)  # ID token, else userinfo
# The identity provider's groups that make a person a reviewer, an admin; and those mirrored
# as expert groups of the same name ("*": all of them).
BPM_OIDC_REVIEWER_GROUPS = env.list("BPM_OIDC_REVIEWER_GROUPS", default=[])
BPM_OIDC_ADMIN_GROUPS = env.list("BPM_OIDC_ADMIN_GROUPS", default=[])
BPM_OIDC_EXPERT_GROUPS = env.list("BPM_OIDC_EXPERT_GROUPS", default=[])
BPM_OIDC_ONLY = env.bool("BPM_OIDC_ONLY", default=False)  # passwords for superusers alone
BPM_OIDC_RECHECK_SECONDS = env.int("BPM_OIDC_RECHECK_SECONDS", default=900)
BPM_OIDC_NAME = env.str("BPM_OIDC_NAME", default="") or "SSO"  # "Sign in with <name>"
BPM_OIDC_ACCESS_CONTACT = env.str(
    "BPM_OIDC_ACCESS_CONTACT", default=""
)  # whom people without access ask
BPM_OIDC_SIGN_ALGO = env.str("BPM_OIDC_SIGN_ALGO", default="") or "RS256"
BPM_OIDC_TIMEOUT_SECONDS = env.float("BPM_OIDC_TIMEOUT_SECONDS", default=10.0)
if BPM_OIDC_ISSUER and not (
    BPM_OIDC_CLIENT_ID and (BPM_OIDC_REVIEWER_GROUPS or BPM_OIDC_ADMIN_GROUPS)
):
    raise ImproperlyConfigured(
        "BPM_OIDC_ISSUER is set: BPM_OIDC_CLIENT_ID and BPM_OIDC_REVIEWER_GROUPS (or "
        "BPM_OIDC_ADMIN_GROUPS) must be set too (docs/sso.md)."
    )
if BPM_OIDC_ONLY and not BPM_OIDC_ISSUER:
    raise ImproperlyConfigured("BPM_OIDC_ONLY=1 needs single sign-on: set BPM_OIDC_ISSUER.")

# Django reads whole bodies into memory only up to this size (form posts in the console).
DATA_UPLOAD_MAX_MEMORY_SIZE = BPM_MAX_BODY_BYTES

# --- Observability ---------------------------------------------------------------
# GET /metrics (ops/metrics.py) answers a Bearer BPM_METRICS_TOKEN, or these client
# addresses (IPs or CIDRs; X-Forwarded-For only per BPM_NUM_PROXIES).
BPM_METRICS_TOKEN = env.str("BPM_METRICS_TOKEN", default="")
BPM_METRICS_ALLOW = env.list("BPM_METRICS_ALLOW", default=["127.0.0.1", "::1"])
# "json" (one object per line) or "plain"; JSON by default when DEBUG is off.
LOG_FORMAT = env.str("LOG_FORMAT", default="plain" if DEBUG else "json")
if LOG_FORMAT not in ("json", "plain"):
    raise ImproperlyConfigured("LOG_FORMAT must be json or plain.")

# --- Redis: Celery's broker and the cache -----------------------------------------
REDIS_URL = env.str("REDIS_URL", default="")
# With DEBUG off and no REDIS_URL the servers refuse to start unless this says the
# embedded (filesystem) broker is meant: see infra/startup.py.
BPM_EMBEDDED_BROKER = env.bool("BPM_EMBEDDED_BROKER", default=False)

# --- Rate limits ---------------------------------------------------------------
# Counters live in the cache: Redis when REDIS_URL is set (shared by every process),
# else this process's memory (the embedded default: one web process).
CACHES = {
    "default": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            # A hung Redis must not hang requests: limits fail open (infra/ratelimits.py).
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}
# DRF rate strings ("600/min"); "off" disables one. The status path (GET .../status) has no
# request rate: it is the cheap path; its waits are capped by BPM_MAX_WAITS_PER_TOKEN.
BPM_THROTTLE_TOKEN_RATE = env.str(
    "BPM_THROTTLE_TOKEN_RATE", default="1200/min"
)  # per token or login
BPM_THROTTLE_ANON_RATE = env.str(
    "BPM_THROTTLE_ANON_RATE", default="120/min"
)  # per address, no token
# Verified event deliveries, per source (refused ones count per address, as anonymous calls).
BPM_THROTTLE_EVENT_SOURCE_RATE = env.str("BPM_THROTTLE_EVENT_SOURCE_RATE", default="1200/min")
BPM_AUTH_FAILURES_PER_MINUTE = env.int(
    "BPM_AUTH_FAILURES_PER_MINUTE", default=20
)  # bad tokens/address
BPM_NUM_PROXIES = env.int("BPM_NUM_PROXIES", default=0)  # trusted proxies adding X-Forwarded-For
# Password checks (console sign-in, password change): at most this many attempts per address,
# whatever the username, counted before any password is hashed (429 past it); and at most
# BPM_LOGIN_CONCURRENCY hashing at once in each web process (503 past it). A hash costs
# ~0.5-2 s of CPU: a flood must not take the threads and cores the API answers with.
BPM_LOGIN_ATTEMPT_RATE = env.str("BPM_LOGIN_ATTEMPT_RATE", default="10/min")
BPM_LOGIN_CONCURRENCY = max(1, env.int("BPM_LOGIN_CONCURRENCY", default=2))
AXES_FAILURE_LIMIT = env.int("BPM_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = env.float("BPM_LOGIN_LOCKOUT_MINUTES", default=15.0) / 60  # hours
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "admin/login_locked_out.html"
AXES_LOCKOUT_CALLABLE = "console.lockout.locked_out"  # the page, with Retry-After
AXES_CLIENT_IP_CALLABLE = "infra.ratelimits.client_address"
AXES_WHITELIST_CALLABLE = "sso.backends.not_a_password_sign_in"  # no password: not counted

# --- REST API ----------------------------------------------------------------
REST_FRAMEWORK: dict[str, Any] = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["web.api.renderers.FastJSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["web.parsers.SafeJSONParser"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "web.errors.api_exception_handler",
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_THROTTLE_CLASSES": [
        "accounts.throttling.TokenRateThrottle",
        "accounts.throttling.AnonymousRateThrottle",
    ],
    # 0, not None: DRF takes the whole X-Forwarded-For as the address when None, so a
    # client could pick its own rate-limit bucket.
    "NUM_PROXIES": BPM_NUM_PROXIES,
}
if DEBUG:
    REST_FRAMEWORK["DEFAULT_RENDERER_CLASSES"].append(
        "rest_framework.renderers.BrowsableAPIRenderer"
    )

SPECTACULAR_SETTINGS = {
    "TITLE": "Breakpoint Manager API",
    "DESCRIPTION": (
        "Agents post breakpoints and poll for the human decision; reviewers comment and "
        "release. Errors always use the envelope "
        '`{"error": {"code", "message", "details"}}`.'
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": "/api",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Two sets of `action`: a rule's, and a replay's (a rule's or autoApproveAfterN). Named,
    # or the enum hook would name both by a hash.
    "ENUM_NAME_OVERRIDES": {
        "ActionEnum": "policies.models.RuleAction",
        "ReplayActionEnum": "policies.replay.ACTIONS",
        # Three choice sets of fields named "status": a breakpoint's, a grant's, and a batch
        # item's HTTP status (breakpoints.api.serializers); each keeps its own name.
        "StatusEnum": "core.choices.Status",
        "GrantStatusEnum": "grants.models.GrantStatus",
        "DecisionStatusEnum": "breakpoints.api.serializers.DECISION_STATUSES",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "web.api.schema.strip_trailing_slashes",
        "breakpoints.api.schema.input_rules",
    ],
}

# --- Celery ------------------------------------------------------------------

BROKER_DIR = VAR_DIR / "broker"
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_TRANSPORT = "infra.broker:Transport"  # kombu's, surviving a Redis drop
    # Short socket timeouts: publishing from a request must never hang on Redis.
    CELERY_BROKER_TRANSPORT_OPTIONS: dict = {
        "visibility_timeout": 3600,
        "socket_connect_timeout": 2,
        "socket_timeout": 5,
    }
else:
    # Embedded broker: the real Celery worker and beat exchange messages through files.
    # A host named, or kombu warns "No hostname was supplied" at every start (it is unused).
    CELERY_BROKER_URL = "filesystem://localhost//"
    # kombu's, except that no reader sees a message before it is whole (infra/embedded_broker.py)
    CELERY_BROKER_TRANSPORT = "infra.embedded_broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "control_folder": str(BROKER_DIR / "control"),
        # How often an idle worker looks at the folder (kombu's default is 1 s): the
        # worker notices a stop request only between looks, so Ctrl-C ends it sooner.
        "polling_interval": 0.1,
    }
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Pool processes of a worker. Deliveries wait on the network: with one process, one slow
# receiver's attempt would hold every other target's delivery back (however few attempts
# its target may have in flight), so never fewer than 4 by default.
CELERY_WORKER_CONCURRENCY = env.int("WORKER_CONCURRENCY", default=max(4, os.cpu_count() or 1))
CELERY_TASK_IGNORE_RESULT = True
# Two queues (core.tasknames): the evaluation of external events on `triggers`, everything
# else on `celery`. The Procfile's `worker` consumes `celery`, its `triggers` worker
# `triggers`, so costly trigger rules never hold back the sweeps and the deliveries
# (docs/operations.md#queues); make run's one worker, or one without --queues, both.
CELERY_TASK_DEFAULT_QUEUE = tasknames.DEFAULT_QUEUE
CELERY_TASK_QUEUES = [
    Queue(name, Exchange(name), routing_key=name)
    for name in (tasknames.DEFAULT_QUEUE, tasknames.TRIGGERS_QUEUE)
]
CELERY_TASK_ROUTES = {task: {"queue": queue} for task, queue in tasknames.QUEUE_OF.items()}
CELERY_BROKER_CONNECTION_TIMEOUT = 2
# What a committed transaction hands to the workers is published by a thread of the
# process, so no request waits on the broker (infra/publishing.py); on (the unit tests),
# at once by the request instead.
BPM_PUBLISH_INLINE = env.bool("BPM_PUBLISH_INLINE", default=False)
# No task runs for ever (prefork pool): past the soft limit it raises SoftTimeLimitExceeded
# (an outbox row stays pending for its sweep, an event counts a failed attempt), past the
# hard one its process is replaced. Deliveries time out sooner (10 s per HTTP request).
CELERY_TASK_SOFT_TIME_LIMIT = 120
CELERY_TASK_TIME_LIMIT = 180
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None  # wait for a lost broker (not exit after ~47 min)
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
# The one place that defines the periodic tasks. Run exactly one beat process.
_TTL, _OUTBOX = float(BPM_TTL_SWEEP_SECONDS), float(BPM_OUTBOX_SWEEP_SECONDS)
# expectedDecision's aggregate (breakpoints.services.decision_times): a few seconds of
# PostgreSQL at a million breakpoints, so every five minutes.
_DECISION_TIMES = 300.0
CELERY_BEAT_SCHEDULE = {
    name: {"task": task, "schedule": schedule}
    for name, task, schedule in [
        ("expire-due-breakpoints", tasknames.EXPIRE_DUE, _TTL),
        ("nudge-waiting-breakpoints", tasknames.NUDGE_WAITING, _TTL),
        ("expire-due-grants", tasknames.EXPIRE_GRANTS, _TTL),
        ("dispatch-due-webhooks", tasknames.DISPATCH_DUE_DELIVERIES, _OUTBOX),
        ("dispatch-due-events", tasknames.DISPATCH_DUE_EVENTS, _OUTBOX),
        ("purge-finished-breakpoints", tasknames.PURGE_FINISHED, crontab(hour=3, minute=17)),
        ("refresh-decision-times", tasknames.REFRESH_DECISION_TIMES, _DECISION_TIMES),
    ]
}
CELERY_TIMEZONE = TIME_ZONE

LOGGING = logging_settings(
    log_format=LOG_FORMAT,
    timestamps=env.bool(
        "LOG_TIMESTAMPS", default=True
    ),  # devtools/supervisor.py (make run) stamps lines
    level=env.str("LOG_LEVEL", default="INFO"),
    task_level=env.str(
        "LOG_LEVEL_TASKS", default="WARNING"
    ),  # INFO: a line per task run and scheduled
)
