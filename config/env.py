"""Small typed readers for environment variables."""

import os
from urllib.parse import parse_qs, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), got {raw!r}")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from exc


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from exc


def env_list(name: str, default: str = "") -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


def env_origins(name: str) -> list[str]:
    """Comma-separated web origins (scheme://host[:port], no path), e.g. for CORS."""
    origins = env_list(name)
    for origin in origins:
        parts = urlsplit(origin)
        exact = f"{parts.scheme}://{parts.netloc}"
        if parts.scheme not in ("http", "https") or not parts.netloc or origin != exact:
            raise ImproperlyConfigured(
                f"{name} must list origins like https://tool.example or "
                f"http://localhost:5173 (no path, no trailing slash), got {origin!r}"
            )
    return origins


def email_settings(url: str) -> dict[str, object]:
    """Django's EMAIL_* settings from EMAIL_URL: smtp://user:password@host:port (smtps://
    for implicit TLS, ?starttls=1 for STARTTLS) or console:// (mails printed)."""
    parts = urlsplit(url)
    if parts.scheme == "console":
        return {"EMAIL_BACKEND": "django.core.mail.backends.console.EmailBackend"}
    if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
        raise ImproperlyConfigured(
            f"EMAIL_URL must be smtp://host:port, smtps://host:port or console://, got {url!r}"
        )
    query = parse_qs(parts.query)
    return {
        "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "EMAIL_HOST": parts.hostname,
        "EMAIL_PORT": parts.port or (465 if parts.scheme == "smtps" else 25),
        "EMAIL_HOST_USER": unquote(parts.username or ""),
        "EMAIL_HOST_PASSWORD": unquote(parts.password or ""),
        "EMAIL_USE_SSL": parts.scheme == "smtps",
        "EMAIL_USE_TLS": query.get("starttls", ["0"])[0] in _TRUE,
    }
