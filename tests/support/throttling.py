"""The throttles' counters in each cache they can live in (the `counters` fixture: register
with `pytest_plugins = ["tests.support.throttling"]`)."""

import uuid

import pytest


@pytest.fixture(params=["local", pytest.param("redis", marks=pytest.mark.redis)])
def counters(request, settings) -> None:
    """The counters' cache: this process's memory; Redis (REDIS_URL) when it is configured
    (the Redis variant is deselected without it: tests/conftest.py)."""
    if request.param == "redis":
        settings.CACHES = {
            "default": {
                "BACKEND": "django.core.cache.backends.redis.RedisCache",
                "LOCATION": settings.REDIS_URL,
                "KEY_PREFIX": f"test-{uuid.uuid4().hex}",  # a bucket no other run shares
            }
        }
