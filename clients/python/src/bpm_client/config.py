"""Where the client finds its server and token: arguments first, then the environment."""

from __future__ import annotations

import os
from typing import Any

import httpx

from . import __version__
from .errors import ConfigurationError
from .steps import Call

DEFAULT_URL = "http://127.0.0.1:8000"
URL_VARIABLE = "BPM_URL"
TOKEN_VARIABLE = "BPM_TOKEN"


def http_options(base_url: str | None, token: str | None, timeout: float) -> dict[str, Any]:
    """Keyword arguments for httpx.Client / httpx.AsyncClient."""
    url = (base_url or os.environ.get(URL_VARIABLE) or DEFAULT_URL).rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ConfigurationError(f"the server URL must start with http:// or https://: {url!r}")
    secret = token or os.environ.get(TOKEN_VARIABLE)
    if not secret:
        raise ConfigurationError(
            f"no API token: set {TOKEN_VARIABLE} (or pass the token explicitly)"
        )
    return {
        "base_url": url,
        "headers": {
            "Authorization": f"Bearer {secret}",
            "Accept": "application/json",
            "User-Agent": f"bpm-client/{__version__}",
        },
        "timeout": httpx.Timeout(timeout),
        "follow_redirects": False,
    }


def request_arguments(call: Call, default: httpx.Timeout) -> dict[str, Any]:
    """httpx's request() arguments for a step's call; a long-poll gets a longer read timeout."""
    timeout = default
    if call.timeout is not None:
        timeout = httpx.Timeout(
            connect=default.connect, read=call.timeout, write=default.write, pool=default.pool
        )
    return {
        "method": call.method,
        "url": call.path,
        "params": tuple(call.params),
        "json": call.json,
        "headers": call.headers,
        "timeout": timeout,
    }
